"""The worker on file pipelines and an SQLite catalog: results equal `cq run`'s, a changed
query alone restarts, an invalid file is rejected while the running version keeps running."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from cq_service.compiler import load_and_compile
from cq_service.runner import run_pipeline
from tests.unit.service.workers import EXAMPLE, run_until_done, sqlite_worker


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    shutil.copytree(EXAMPLE, tmp_path / "p" / "web-proxy", ignore=shutil.ignore_patterns("out"))
    return tmp_path / "p"


def test_results_equal_cq_run(tmp_path: Path, folder: Path) -> None:
    worker = sqlite_worker(tmp_path, folder)
    run_until_done(worker)
    reference = tmp_path / "ref"
    shutil.copytree(EXAMPLE, reference, ignore=shutil.ignore_patterns("out"))
    run_pipeline(load_and_compile(reference / "pipeline.yaml"))
    outs = sorted((reference / "out").glob("*.jsonl"))
    assert len(outs) == 3
    for ref in outs:
        got = folder / "web-proxy" / "out" / ref.name
        assert got.read_text() == ref.read_text(), ref.name
    statuses = {q.name: q.status for q in worker.catalog.queries("web-proxy")}
    assert statuses == {n: "running" for n in ("commerce_urls", "domain_load", "loyal_clients")}


def test_only_the_changed_query_restarts(tmp_path: Path, folder: Path) -> None:
    worker = sqlite_worker(tmp_path, folder)
    run_until_done(worker)
    kept_sink = worker.engine.sinks["web-proxy/domain_load"]
    path = folder / "web-proxy" / "pipeline.yaml"
    text = path.read_text()
    assert "HAVING COUNT(*) = 2" in text
    path.write_text(text.replace("HAVING COUNT(*) = 2", "HAVING COUNT(*) = 3"))
    [result] = worker.reconcile()
    assert result.status == "applied"
    assert result.replaced == ["loyal_clients"]
    assert sorted(result.kept) == ["commerce_urls", "domain_load"]
    assert worker.engine.sinks["web-proxy/domain_load"] is kept_sink  # state untouched


def test_invalid_file_is_rejected_and_the_running_version_stays(tmp_path: Path, folder: Path) -> None:
    worker = sqlite_worker(tmp_path, folder)
    run_until_done(worker)
    before = set(worker.queries)
    path = folder / "web-proxy" / "pipeline.yaml"
    path.write_text(path.read_text().replace("COUNT(*) AS requests", "COUNT(*) AS requests, nope"))
    [result] = worker.reconcile()
    assert result.status == "rejected"
    assert set(worker.queries) == before
    [error] = result.errors
    assert error.startswith(str(path)) and "nope" in error
    last = worker.catalog.deployments("web-proxy")[-1]
    assert last.status == "rejected" and "nope" in (last.error or "")


def test_removed_file_stops_its_queries(tmp_path: Path, folder: Path) -> None:
    worker = sqlite_worker(tmp_path, folder)
    run_until_done(worker)
    (folder / "web-proxy" / "pipeline.yaml").unlink()
    [result] = worker.reconcile()
    assert result.status == "removed"
    assert not worker.queries and not worker.sources
    assert {q.status for q in worker.catalog.queries("web-proxy")} == {"stopped"}


def test_sources_pause_over_the_queue_budget_and_nothing_is_lost(tmp_path: Path, folder: Path) -> None:
    worker = sqlite_worker(tmp_path, folder, queue_budget=1, batch_rows=16)
    worker.reconcile()
    paused = []
    executor = worker.engine.executor
    for _ in range(10_000):
        read = worker._poll_sources()
        paused.append(worker.paused)
        assert not (worker.paused and read)  # a paused worker reads nothing
        executor.drain(max_steps=1)  # drain slowly, so the queues fill
        executor.follow_clocks()
        if all(s.exhausted for s in executor.sources) and not any(o.runnable() for o in executor.operators):
            break
    worker.checkpoint()
    worker._poll_sources()  # the queues have drained: the sources resume
    assert True in paused and worker.paused is False
    reference = tmp_path / "ref"
    shutil.copytree(EXAMPLE, reference, ignore=shutil.ignore_patterns("out"))
    run_pipeline(load_and_compile(reference / "pipeline.yaml"))
    for ref in sorted((reference / "out").glob("*.jsonl")):
        assert (folder / "web-proxy" / "out" / ref.name).read_text() == ref.read_text()


def test_qos_ranges_from_the_file_reach_the_catalog(tmp_path: Path, folder: Path) -> None:
    path = folder / "web-proxy" / "pipeline.yaml"
    text = path.read_text()
    anchor = "  domain_load:\n"
    assert anchor in text
    path.write_text(text.replace(
        anchor,
        anchor + "    qos: {window: {R: [10 s, 1 min]}, granularity: [1 s, 5 s, 10 s]}\n",
    ))
    worker = sqlite_worker(tmp_path, folder)
    worker.reconcile()
    assert worker.catalog.query("web-proxy", "domain_load").qos == {
        "window:R": [10_000, 60_000], "granularity": [1_000, 10_000]
    }
    assert worker.catalog.query("web-proxy", "commerce_urls").qos == {}  # never adjusted
