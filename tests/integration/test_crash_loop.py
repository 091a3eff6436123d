"""The crash loop: `cq serve` killed with SIGKILL again and again while records keep arriving.

A producer writes a stream S and a relation R (its updates interleaved with S in time) to the
real broker for the whole test. The worker runs eight queries — every window kind, Istream,
Dstream and Rstream, aggregates over Range/Rows/Partition/unbounded windows, a join with the
Kafka-fed relation, a stateless filter — each to its own sink topic. It is killed more than 20
times: mostly from outside at random moments, and in some lives by its own failpoints (service/
failpoints.py) in the middle of a checkpoint (after the flush; after its snapshot is in place,
before the catalog write; after the catalog write, before the offset commit), of a snapshot
and of a deployment (the start-up one, and an edit of the file). After every death the test
records each sink topic's end offset and the frontiers the catalog and the newest snapshot hold
for each query.

Then every sink topic must be exactly the uninterrupted run's output (`cq run` over the same
records from files) plus only the duplicates docs/service.md allows: split at the recorded
end offsets, each life's output is a contiguous piece of the reference, and the next life
starts exactly at the first result after the frontier it resumes from — the last checkpoint's,
or its snapshot's when a kill between the two left that one later — so nothing is missing,
nothing is out of order, and nothing is repeated except the results after that frontier which
had already reached the sink.
"""

from __future__ import annotations

import random
import signal
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from kafka import KafkaAdminClient

from tests.integration.restarts import (
    Death,
    Element,
    Feed,
    Lives,
    check_done,
    check_sink,
    end_offsets,
    kafka_pipeline,
    read_topic,
    record_death,
    reference,
)
from tests.integration.worker_process import free_port

KILLS = 22  # lives that end in a death (the last life runs to the end)

QUERIES = {
    "slide": "SELECT k, COUNT(*) AS n, SUM(v) AS total FROM S [Range 200 Slide 100] GROUP BY k",
    "rows": "SELECT k, SUM(v) AS total FROM S [Rows 50] GROUP BY k",
    "partition": "SELECT k, MAX(v) AS top FROM S [Partition By k Rows 3] GROUP BY k",
    "unbounded": "SELECT k, COUNT(*) AS n FROM S GROUP BY k",
    "now": "SELECT Rstream(k, v) FROM S [Now] WHERE v > 90",
    "join": "SELECT Istream(S.k, S.v, R.label) FROM S [Range 100], R WHERE S.k = R.k",
    "expired": "SELECT Dstream(k, v) FROM S [Range 50] WHERE v < 10",
    "filter": "SELECT * FROM S WHERE v > 95",
}

# Lives (by number) that die by a failpoint rather than from outside; "edit" lives change the
# pipeline file (a comment) once ready, so their second deployment is the one that dies.
FAILPOINT_LIVES = {
    2: ("checkpoint.flushed=3", False),
    4: ("deploy.started=1", False),  # the start-up deployment, restoring every query
    6: ("checkpoint.saved=4", False),
    9: ("deploy.stopped=2", True),
    12: ("checkpoint.saved=2", False),
    13: ("snapshot.written=2", False),  # the snapshot is newer than the catalog's checkpoint
    15: ("deploy.started=2", True),
    18: ("checkpoint.flushed=5", False),
    20: ("deploy.stopped=1", False),
    21: ("snapshot.writing=2", False),  # a snapshot half-written: the one before is used
}


# -- the test -----------------------------------------------------------------------------------


@pytest.fixture
def lives(tmp_path: Path, kafka_bootstrap: str) -> Iterator[Lives]:
    (tmp_path / "pipelines").mkdir()
    worker = Lives(tmp_path, f"sqlite:///{tmp_path / 'catalog.db'}", kafka_bootstrap,
                   free_port())
    try:
        yield worker
    finally:
        worker.stop()


def test_crash_loop(tmp_path: Path, kafka_bootstrap: str, kafka_admin: KafkaAdminClient,
                    new_topic: Callable[..., str], lives: Lives) -> None:
    s_topic, r_topic = new_topic(1), new_topic(1)
    sinks = {q: new_topic(1) for q in QUERIES}
    pipeline = lives.folder / "pipelines" / "p.yaml"
    text = kafka_pipeline(s_topic, r_topic, sinks, QUERIES)
    pipeline.write_text(text)
    feed = Feed(kafka_bootstrap, s_topic, r_topic)
    feed.start()
    rnd = random.Random(20)
    deaths: list[Death] = []
    edits = 0
    for life in range(1, KILLS + 1):
        failpoints, edit = FAILPOINT_LIVES.get(life, ("", False))
        lives.start(failpoints)
        if not lives.ready():  # died during the start-up deployment: its failpoint
            assert failpoints.startswith("deploy."), lives.tail()
            assert lives.proc is not None and lives.proc.returncode == -signal.SIGKILL
            by = failpoints
        elif failpoints:
            if edit:
                edits += 1
                pipeline.write_text(text + f"# edit {edits}\n")
            assert lives.died_by_itself(timeout=120), (
                f"life {life}: failpoint {failpoints} did not fire\n{lives.tail()}"
            )
            by = failpoints
        else:
            time.sleep(rnd.uniform(0.3, 2.5))
            lives.kill()
            by = "outside"
        deaths.append(record_death(life, by, lives, kafka_admin, sinks, QUERIES))
    lives.start()
    assert lives.ready()
    time.sleep(2.0)
    feed.finish()
    expected = reference(tmp_path / "reference", feed.s, feed.r, QUERIES)
    for q in QUERIES:
        assert len(expected[q]) > 50, f"{q}: too few results to show anything"
    # Wait until every sink holds a result past the last expected one (or the flush instant).
    deadline = time.monotonic() + 120
    got: dict[str, list[Element]] = {}
    while time.monotonic() < deadline:
        ends = end_offsets(kafka_admin, sinks)
        got = {q: read_topic(kafka_bootstrap, sinks[q], ends[q]) for q in QUERIES}
        if all(check_done(got[q], expected[q]) for q in QUERIES):
            break
        time.sleep(1.0)
    lives.stop()
    by_failpoint = [d for d in deaths if d.by != "outside"]
    assert len(deaths) >= 20 and len(by_failpoint) == len(FAILPOINT_LIVES)
    assert any(d.by.startswith("checkpoint.") for d in by_failpoint)
    assert any(d.by.startswith("deploy.") for d in by_failpoint)
    # Deaths that left the newest snapshot ahead of the catalog's checkpoint (at least the
    # `snapshot.written` one; a kill from outside does too if it lands between the two).
    ahead = [d.life for d in deaths
             if any(d.resumes_after(q) != d.frontiers[q] for q in QUERIES)]
    assert any(d.by.startswith("snapshot.written") and d.life in ahead for d in deaths), ahead
    repeated = {q: check_sink(q, got[q], expected[q], deaths) for q in QUERIES}
    # Lives that came back from a state snapshot rather than by replaying the history.
    assert lives.log_count("restored from the snapshot") >= KILLS // 2
    print(f"deaths {len(deaths)} ({len(by_failpoint)} by failpoints), snapshot ahead after "
          f"lives {ahead}, records {len(feed.s)}, "
          f"results {({q: len(e) for q, e in expected.items()})}, repeated {repeated}")
