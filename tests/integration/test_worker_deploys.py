"""A deployment that cannot open a sink or a source, on the real broker: it is rejected at the
place in the file, and the running queries go on as if it had never been tried — their
results on the sink topics are exactly the reference's, with no gap and no repeat."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

import pytest

from cq_service.catalog import Catalog
from cq_service.service.config import ServiceConfig
from cq_service.service.worker import Worker
from tests.integration.kafka_workload import (
    PARTITIONS,
    QUERIES,
    Results,
    flush_records,
    pipeline_yaml,
    produce,
    records,
    reference,
)

N = 600


def step_until(worker: Worker, done: Callable[[], bool], seconds: float = 90) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        for _ in range(20):
            worker.step()
        if done():
            return
    raise AssertionError("the worker did not get there in time")


def consumed(worker: Worker, n: int) -> Callable[[], bool]:
    """Whether the worker's sources have read `n` records."""
    return lambda: sum(op.rows_in for op in worker.engine.executor.sources) >= n


@pytest.mark.parametrize("broken", ["sink", "source"])
def test_a_rejected_deployment_leaves_the_running_queries_untouched(
    tmp_path: Path, kafka_bootstrap: str, new_topic: Callable[..., str],
    monkeypatch: pytest.MonkeyPatch, broken: str,
) -> None:
    monkeypatch.setenv("CQ_KAFKA_BOOTSTRAP", kafka_bootstrap)
    topic = new_topic(PARTITIONS)
    sinks = {name: new_topic(1) for name in QUERIES}
    folder = tmp_path / "pipelines"
    folder.mkdir()
    path = folder / "p.yaml"
    path.write_text(pipeline_yaml(topic, sinks, QUERIES))
    catalog = Catalog(f"sqlite:///{tmp_path / 'catalog.db'}")
    catalog.upgrade()
    config = ServiceConfig(pipelines=str(folder), catalog=catalog.url, port=0,
                           checkpoint_interval=0.2, reconcile_interval=3600)
    worker = Worker(config, catalog)
    data = records(N)
    expected = reference(tmp_path, data + flush_records(), QUERIES)
    [first] = worker.reconcile()
    assert first.status == "applied"
    produce(kafka_bootstrap, topic, data[: N // 2])
    step_until(worker, consumed(worker, N // 2))
    running = dict(worker.queries)
    writers = dict(worker.engine.sinks)

    # The new version changes the windowed aggregate and adds a query whose sink (or the
    # source of a new stream, a topic that does not exist) cannot be opened.
    (tmp_path / "blocker").write_text("a file, not a folder")
    changed = {**QUERIES, "counts": QUERIES["counts"].replace("Range 100", "Range 200")}
    text = pipeline_yaml(topic, sinks, changed)
    if broken == "sink":
        bad = f"{tmp_path / 'blocker' / 'extra.jsonl'}"
        text += f'  extra:\n    cql: "SELECT * FROM S"\n    sink: {{type: file, path: {bad}}}\n'
        line = text.splitlines().index(f"    sink: {{type: file, path: {bad}}}") + 1
    else:
        lines = text.splitlines()
        at = lines.index("queries:")
        t_lines = [
            "  T:", "    schema: {k: int, v: int, ts: int}", "    timestamp: ts",
            f"    source: {{type: kafka, topic: {topic}-missing}}",
        ]
        lines[at:at] = t_lines
        lines += ["  extra:", '    cql: "SELECT * FROM T"',
                  f"    sink: {{type: kafka, topic: {new_topic(1)}}}"]
        text = "\n".join(lines) + "\n"
        line = text.splitlines().index(t_lines[-1]) + 1
    path.write_text(text)
    [result] = worker.reconcile()
    assert result.status == "rejected", result
    [error] = result.errors
    assert error.startswith(f"{path}:{line}:"), error
    assert worker.queries == running
    assert all(worker.engine.sinks[k] is w for k, w in writers.items())
    assert set(worker.engine.sinks) == set(writers)
    last = catalog.deployments("kafka-e2e")[-1]
    assert last.status == "rejected" and last.error == error
    assert {q.name: q.status for q in catalog.queries("kafka-e2e")} == {
        q: "running" for q in QUERIES
    }

    produce(kafka_bootstrap, topic, data[N // 2 :] + flush_records())
    results = {q: Results(kafka_bootstrap, t) for q, t in sinks.items()}
    step_until(worker, lambda: all(
        set(results[q].before_flush()) >= set(expected[q]) for q in QUERIES
    ))
    worker.checkpoint()
    for q in QUERIES:
        got = results[q].before_flush()
        assert got == expected[q], q  # exactly: no gap, no repeat, the state went on
        assert sum(expected[q].values()) > 30, q
