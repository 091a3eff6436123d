"""SysStream under the worker: a deployment reads the statistics of every deployment's
entities, tagged with their pipeline, and the other queries' results do not change."""

from __future__ import annotations

import json
import shutil
from collections import defaultdict
from pathlib import Path

import pytest

from cq_service.compiler import load_and_compile
from cq_service.runner import run_pipeline
from tests.unit.service.test_worker import EXAMPLE, run_until_done

NAME = "web-proxy"
MONITOR = """  monitor:
    cql: SELECT * FROM SysStream
    sink: {type: file, path: out/monitor.jsonl, format: jsonl}
"""


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    to = tmp_path / "p" / NAME
    shutil.copytree(EXAMPLE, to, ignore=shutil.ignore_patterns("out"))
    path = to / "pipeline.yaml"
    text = path.read_text().replace("queries:\n", "resources: {statistics_interval: 10 seconds}\n"
                                    "queries:\n" + MONITOR, 1)
    path.write_text(text)
    return tmp_path / "p"


def test_worker_publishes_every_entity_and_results_stay_exact(
    tmp_path: Path, folder: Path, make_worker
) -> None:
    worker = make_worker(batch_rows=8)
    run_until_done(worker)
    rows = [json.loads(x) for x in (folder / NAME / "out" / "monitor.jsonl").read_text().splitlines()]
    assert rows, "no statistics published"
    assert all(r["_ts"] % 10_000 == 0 for r in rows)  # ms, every 10 seconds
    by_kind: dict[str, set[str]] = defaultdict(set)
    for r in rows:
        by_kind[r["kind"]].add(r["pipeline"])
    # operators, queues and sinks belong to the deployment; sources are the worker's
    assert by_kind["operator"] == {NAME} and by_kind["sink"] == {NAME}
    assert by_kind["source"] == {""}
    assert "queue" in by_kind
    sinks = {r["entity"] for r in rows if r["kind"] == "sink"}
    assert {f"{NAME}/domain_load", f"{NAME}/monitor"} <= sinks
    requests = [r for r in rows if r["kind"] == "source" and r["entity"].startswith("Requests")]
    assert requests and max(r["rows_in"] for r in requests) > 0
    # the other queries' results are cq run's
    reference = tmp_path / "ref"
    shutil.copytree(EXAMPLE, reference, ignore=shutil.ignore_patterns("out"))
    run_pipeline(load_and_compile(reference / "pipeline.yaml"))
    for ref in sorted((reference / "out").glob("*.jsonl")):
        assert (folder / NAME / "out" / ref.name).read_text() == ref.read_text(), ref.name
