"""Deploys that never hurt what runs: a new version whose sink cannot be opened is rejected at
its place in the file with nothing stopped; a pipeline deployed through the API is kept in the
catalog and runs again after a restart; an unreadable file and an unexpected error are
recorded as rejected deployments, shown and counted, and the worker goes on."""

from __future__ import annotations

import shutil
import time
from pathlib import Path

import pytest

from cq_service.errors import Outage, Unreachable
from cq_service.service import deployer as deploying
from cq_service.service import reconciler as reconciling
from cq_service.service import views
from tests.unit.service.conftest import TOKEN
from tests.unit.service.serving import serving
from tests.unit.service.workers import EXAMPLE, run_until_done

AUTH = {"Authorization": f"Bearer {TOKEN}"}
QUERIES = {"commerce_urls", "domain_load", "loyal_clients"}


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    shutil.copytree(EXAMPLE, tmp_path / "p" / "web-proxy", ignore=shutil.ignore_patterns("out"))
    return tmp_path / "p"


def api_text(folder: Path) -> str:
    """The example as a pipeline of its own (its own copy of the data: a source shared with
    web-proxy would be read already), sent as text: its paths are taken from the folder."""
    shutil.copytree(folder / "web-proxy" / "data", folder / "api-data", dirs_exist_ok=True)
    text = (folder / "web-proxy" / "pipeline.yaml").read_text()
    return (text.replace("name: web-proxy", "name: from-api")
            .replace("path: data/", "path: api-data/").replace("path: out/", "path: api-out/"))


def test_a_sink_that_cannot_be_opened_rejects_the_version_and_stops_nothing(
    folder: Path, make_worker
) -> None:
    worker = make_worker()
    run_until_done(worker)
    outputs = {p.name: p.read_text() for p in (folder / "web-proxy" / "out").iterdir()}
    running = dict(worker.queries)
    sinks = dict(worker.engine.sinks)
    (folder / "blocker").write_text("a file, not a folder")
    path = folder / "web-proxy" / "pipeline.yaml"
    text = path.read_text().replace("Range 30 Seconds", "Range 40 Seconds")  # domain_load changes
    bad = "    sink: {type: file, path: ../blocker/extra.jsonl, format: jsonl}"
    text += f"  extra:\n    cql: SELECT * FROM Requests\n{bad}\n"
    path.write_text(text)
    [result] = worker.reconcile()
    assert result.status == "rejected"
    line = text.splitlines().index(bad) + 1
    [error] = result.errors
    assert error.startswith(f"{path}:{line}:") and "cannot open" in error, error
    assert worker.queries == running  # domain_load was not replaced, nothing stopped
    assert worker.engine.sinks == sinks and all(worker.engine.sinks[k] is s for k, s in sinks.items())
    for _ in range(50):
        worker.step()
    worker.checkpoint()
    after = {p.name: p.read_text() for p in (folder / "web-proxy" / "out").iterdir()}
    assert after == outputs  # nothing written again from empty state
    last = worker.catalog.deployments("web-proxy")[-1]
    assert (last.status, last.error) == ("rejected", error)
    assert worker.reconciler.rejections["source_or_sink"] == 1
    assert not (folder / "blocker").is_dir()


def test_an_unreachable_new_source_makes_the_version_wait_with_nothing_stopped(
    folder: Path, make_worker, monkeypatch: pytest.MonkeyPatch
) -> None:
    worker = make_worker()
    run_until_done(worker)
    running = dict(worker.queries)
    sources = dict(worker.sources)
    path = folder / "web-proxy" / "pipeline.yaml"
    text = path.read_text().replace("Range 30 Seconds", "Range 40 Seconds")
    text = text.replace("relations:", "  Clicks:\n    schema: {client_id: int}\n    timestamp: ts\n"
                        "    source: {type: file, path: data/requests.csv, format: csv}\nrelations:")
    text += "  all_clicks:\n    cql: SELECT * FROM Clicks\n    sink: {type: file, path: out/clicks.jsonl}\n"
    path.write_text(text)
    real = deploying.open_source

    def away(stream, *args, **kwargs):
        if stream.name == "Clicks":
            raise Unreachable(Outage("kafka 10.0.0.1:9092", "source Clicks", "refused", 0.0))
        return real(stream, *args, **kwargs)

    monkeypatch.setattr(deploying, "open_source", away)
    [result] = worker.reconcile()
    assert result.status == "waiting", result
    assert worker.queries == running and worker.sources == sources
    clicks = folder / "web-proxy" / "out" / "clicks.jsonl"
    assert clicks.read_text() == ""  # opened by the first phase, closed again: nothing written
    assert worker.catalog.deployments("web-proxy")[-1].status == "applied"  # nothing recorded
    monkeypatch.undo()
    worker.reconciler._retry_at = 0.0  # the backoff is up
    [result] = worker.reconcile()
    assert result.status == "applied" and result.replaced == ["domain_load"]
    assert result.added == ["all_clicks"]


def test_an_api_deployed_pipeline_is_kept_in_the_catalog_and_runs_after_a_restart(
    folder: Path, make_worker
) -> None:
    worker = make_worker(reconcile_interval=0.2)
    text = api_text(folder)
    with serving(worker) as c:
        r = c.post("/pipelines", json={"yaml": text, "filename": "mine.yaml"}, headers=AUTH)
        assert r.status_code == 200, r.text
        assert r.json()["status"] == "applied"
        again = c.post("/pipelines", json={"yaml": text, "filename": "mine.yaml"}, headers=AUTH)
        assert again.json()["status"] == "unchanged"
        names = {p["name"] for p in c.get("/pipelines").json()["pipelines"]}
        assert names == {"web-proxy", "from-api"}
    assert not [p for p in folder.rglob("*") if p.name.startswith(".")]  # nothing staged
    [stored] = worker.catalog.stored_pipelines()
    assert (stored.pipeline, stored.filename, stored.text, stored.revision) == (
        "from-api", "mine.yaml", text, 1
    )
    assert worker.catalog.deployments("from-api")[-1].revision == "api:1"

    restarted = make_worker()
    results = {r.pipeline: r for r in restarted.reconcile()}
    assert results["from-api"].status == "applied"
    assert sorted(results["from-api"].added) == sorted(QUERIES)
    assert {q.name for q in restarted.queries.values() if q.pipeline == "from-api"} == QUERIES
    assert restarted.reconcile() == []  # applied once, like an unchanged file
    run_until_done(restarted)
    assert (folder / "api-out" / "domain_load.jsonl").read_text()


def test_cq_deploy_of_a_file_outside_the_folder_is_kept_with_its_own_paths(
    tmp_path: Path, folder: Path, make_worker
) -> None:
    """`cq deploy FILE` sends the file's path and text: a file outside the pipelines folder is
    kept in the catalog, its relative paths still taken from its own folder after a restart."""
    elsewhere = tmp_path / "elsewhere"
    shutil.copytree(folder / "web-proxy" / "data", elsewhere / "data")
    text = (folder / "web-proxy" / "pipeline.yaml").read_text().replace("name: web-proxy",
                                                                        "name: outside")
    (elsewhere / "mine.yaml").write_text(text)
    worker = make_worker()
    with serving(worker) as c:
        body = {"yaml": text, "filename": "mine.yaml", "path": str(elsewhere / "mine.yaml")}
        r = c.post("/pipelines", json=body, headers=AUTH)
        assert r.status_code == 200 and r.json()["status"] == "applied", r.text
    [stored] = worker.catalog.stored_pipelines()
    assert (stored.pipeline, stored.filename) == ("outside", str(elsewhere / "mine.yaml"))
    (elsewhere / "mine.yaml").unlink()  # the catalog keeps the text
    restarted = make_worker()
    assert {r.pipeline: r.status for r in restarted.reconcile()}["outside"] == "applied"
    run_until_done(restarted)
    assert (elsewhere / "out" / "domain_load.jsonl").read_text()


def test_a_file_staged_by_an_earlier_version_moves_into_the_catalog(
    folder: Path, make_worker
) -> None:
    staged = folder / ".deployed-mine-0123456789ab.yaml"
    staged.write_text(api_text(folder))
    worker = make_worker()
    results = {r.pipeline: r.status for r in worker.reconcile()}
    assert results == {"web-proxy": "applied", "from-api": "applied"}
    assert not staged.exists()
    [stored] = worker.catalog.stored_pipelines()
    assert (stored.pipeline, stored.filename) == ("from-api", "mine.yaml")


def test_unreadable_files_are_rejected_shown_and_counted(folder: Path, make_worker) -> None:
    (folder / "folder.yaml").mkdir()  # read_bytes: IsADirectoryError
    latin = folder / "latin.yaml"
    latin.write_bytes("name: caf\u00e9\n".encode("latin-1"))
    worker = make_worker()
    results = {r.pipeline: r for r in worker.reconcile()}
    assert results["web-proxy"].status == "applied"
    [error] = results["folder"].errors
    assert results["folder"].status == "rejected"
    assert error.startswith(f"{folder / 'folder.yaml'}: cannot read pipeline file: "), error
    [error] = results["latin"].errors
    assert error.startswith(f"{latin}: pipeline file is not UTF-8 text"), error
    assert worker.reconcile() == []  # recorded once, until the file changes
    assert worker.reconciler.rejections["unreadable"] == 2
    assert [d.status for d in worker.catalog.deployments("latin")] == ["rejected"]
    shown = {p["name"]: p for p in views.describe(worker)["pipelines"]}
    assert shown["latin"]["rejected"]["errors"] == [error]
    assert shown["latin"]["last_deployment"]["status"] == "rejected"
    assert views.metrics_snapshot(worker)["rejections"]["unreadable"] == 2
    latin.write_text("name: caf\u00e9\n")  # readable now: rejected for what it says
    [result] = worker.reconcile()
    assert result.status == "rejected" and "UTF-8" not in "".join(result.errors)
    assert worker.reconciler.rejections == {"unreadable": 2, "invalid": 1}


def test_an_unexpected_error_is_recorded_and_the_worker_goes_on(
    folder: Path, make_worker, monkeypatch: pytest.MonkeyPatch
) -> None:
    worker = make_worker(reconcile_interval=0.1)
    real = reconciling.compile_pipeline

    def broken(spec):  # a bug in the compiler, for one pipeline only
        if spec.name == "second":
            raise RuntimeError("boom")
        return real(spec)

    monkeypatch.setattr(reconciling, "compile_pipeline", broken)
    with serving(worker) as c:
        text = (folder / "web-proxy" / "pipeline.yaml").read_text()
        second = text.replace("name: web-proxy", "name: second").replace("path: out/", "path: out2/")
        (folder / "web-proxy" / "second.yaml").write_text(second)
        metric = 'cq_deploy_rejected_total{reason="internal"} 1.0'
        wait_for(lambda: metric in c.get("/metrics").text)
        shown = {p["name"]: p for p in c.get("/pipelines").json()["pipelines"]}
        [error] = shown["second"]["rejected"]["errors"]
        assert "internal error: RuntimeError: boom" in error
        assert shown["second"]["last_deployment"]["status"] == "rejected"

        # An error escaping reconcile itself: logged, counted, and the loop goes on.
        def fails(seen):
            raise RuntimeError("the catalog returned nonsense")

        monkeypatch.setattr(worker.reconciler, "_deploy_stored", fails)
        (folder / "web-proxy" / "third.yaml").write_text(second.replace("name: second", "name: third"))
        wait_for(lambda: worker.reconciler.rejections["internal"] >= 3)
        assert c.get("/pipelines").json()["reconcile_error"] == (
            "internal error: RuntimeError: the catalog returned nonsense"
        )
        monkeypatch.undo()
        (folder / "web-proxy" / "second.yaml").write_text(second + "# fixed\n")
        wait_for(lambda: "second/domain_load" in " ".join(worker.queries))
        assert c.get("/healthz").status_code == 200
        assert c.get("/pipelines").json()["reconcile_error"] is None
    assert worker._engine_thread is not None and not worker._engine_thread.is_alive()


def wait_for(condition, seconds: float = 20) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if condition():
            return
        time.sleep(0.05)
    raise AssertionError("not reached in time")
