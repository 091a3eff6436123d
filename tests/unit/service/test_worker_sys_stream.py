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
from tests.unit.service.workers import EXAMPLE, run_until_done

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


def test_explain_live_from_the_worker(tmp_path: Path, folder: Path, make_worker) -> None:
    """`cq explain FILE --live --server URL` prints the worker's live explain: the plan, then
    the deployment's entities with their current windows and counts."""
    import subprocess
    import sys

    from tests.unit.service.serving import serving_http

    worker = make_worker(batch_rows=8)
    run_until_done(worker)
    cq = Path(sys.executable).with_name("cq")
    with serving_http(worker) as url:
        r = subprocess.run(
            [cq, "explain", str(folder / NAME / "pipeline.yaml"), "--live", "--server", url],
            capture_output=True, text=True, timeout=60,
        )
        missing = subprocess.run(
            [cq, "explain", str(tmp_path / "p" / NAME / "pipeline.yaml"), "--live", "--server",
             url + "/nothing-here"], capture_output=True, text=True, timeout=60,
        )
    assert r.returncode == 0, r.stderr
    assert "physical plan" in r.stdout
    live = r.stdout.split("live (totals and rates")[1]
    assert "Range 30000 Slide 10000" in live  # domain_load's window, in ms
    requests = next(line for line in live.splitlines() if line.split()[:2] == ["source", "Requests"])
    assert int(requests.split()[2]) > 0
    assert missing.returncode != 0


def test_the_resource_manager_is_an_entity(tmp_path: Path, folder: Path, make_worker) -> None:
    """A deployment with a memory budget: the resource manager's row carries the budget, the
    bytes held and the window and granularity factors it planned."""
    path = folder / NAME / "pipeline.yaml"
    path.write_text(path.read_text().replace(
        "resources: {statistics_interval: 10 seconds}",
        "resources: {statistics_interval: 10 seconds, memory_budget: 64 MiB}",
    ))
    worker = make_worker(batch_rows=8)
    run_until_done(worker)
    rows = [json.loads(x) for x in (folder / NAME / "out" / "monitor.jsonl").read_text().splitlines()]
    managers = [r for r in rows if r["kind"] == "resource manager"]
    assert managers and {r["entity"] for r in managers} == {NAME}
    assert all(r["pipeline"] == NAME and "budget 64.0 MiB" in r["detail"] for r in managers)
    assert max(r["memory"] for r in managers) > 0
