"""`cq bench spark-runner` in small: the Spark runner and `cq run` over the same NEXMark topics
on the real broker (the bench itself fails when their results differ), and the per-batch
history of q3: every input element fed once, in batches no larger than asked. No timing is
checked."""

from __future__ import annotations

from cq_service.bench import spark_runner
from cq_service.bench.spark_runner import QUERIES

EVENTS = 6_000


def test_the_runner_agrees_with_cq_run_on_both_paths(kafka_bootstrap, tmp_path):
    rows = spark_runner.run(kafka_bootstrap, EVENTS, repeat=1, queries=("q1", "q7"),
                            batch=2_000, work=tmp_path, say=lambda _: None)
    assert [(r.query, r.path) for r in rows] == [("q1", "key"), ("q7", "single")]
    for r in rows:
        assert r.results > 0 and r.batches >= 3, r
        assert len(r.run_seconds) == len(r.runner_seconds) == 1
    text = spark_runner.text(rows, 1, 2_000, "local[2]")
    assert "q1     key" in text and "q7     single" in text
    assert set(QUERIES) >= {"q1", "q7"}


def test_the_history_feeds_each_element_once(kafka_bootstrap, tmp_path):
    points = spark_runner.history(kafka_bootstrap, 50_000, 1_000, work=tmp_path,
                                  say=lambda _: None)
    read = points[-1]["events"]
    assert read == 50_000 // 50 * 4  # persons and auctions: 4 in 50 NEXMark events
    assert sum(p["fed"] for p in points) <= read  # the last batch's pending: at the end
    assert all(p["fed"] <= 1_000 for p in points)
    assert len(points) >= read // 1_000
    assert points[-1]["state_bytes"] > points[0]["state_bytes"]
    spark_runner.plot(points, tmp_path / "h.png", 50_000)
    assert (tmp_path / "h.png").stat().st_size > 1_000
