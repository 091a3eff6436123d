"""Window adjustments in the worker: through the API while it runs, inside the query's QoS,
logged in the catalog, visible in /metrics and the live explain, made again when a query is
restored, and reproduced exactly by `cq run --adjustments` from the log."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from cq_service.compiler import load_and_compile
from cq_service.engine.adjust import Adjustment, write_log
from cq_service.runner import run_pipeline
from cq_service.service import views as w
from cq_service.service.adjusting import logged_adjustment
from cq_service.service.api import make_app
from cq_service.service.metrics import render_metrics
from cq_service.service.worker import Worker
from tests.unit.service.conftest import TOKEN
from tests.unit.service.workers import request_while_stepping, run_until_done

NAME = "clicks"
AUTH = {"Authorization": f"Bearer {TOKEN}"}
PIPELINE = """\
version: 1
name: clicks
time_unit: ms
streams:
  Clicks:
    schema: {user: int, page: string}
    timestamp: ts
    source: {type: file, path: data/clicks.csv, format: csv}
queries:
  per_page:
    cql: SELECT C.page, COUNT(*) AS n FROM Clicks C [Range 2000] GROUP BY C.page
    sink: {type: file, path: out/per_page.jsonl, format: jsonl}
    qos: {window: [500, 4000], granularity: [1, 10, 100]}
  fixed:
    cql: SELECT COUNT(*) AS n FROM Clicks [Range 2000]
    sink: {type: file, path: out/fixed.jsonl, format: jsonl}
"""


def write_pipeline(folder: Path) -> Path:
    """The pipeline and 600 clicks, 37 ms apart, over 5 pages."""
    d = folder / NAME
    (d / "data").mkdir(parents=True)
    rows = ["ts,user,page"] + [f"{k * 37},{k % 11},p{k % 5}" for k in range(600)]
    (d / "data" / "clicks.csv").write_text("\n".join(rows) + "\n")
    path = d / "pipeline.yaml"
    path.write_text(PIPELINE)
    return path


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    write_pipeline(tmp_path / "p")
    return tmp_path / "p"


def logged(worker: Worker) -> list[Adjustment]:
    return [
        logged_adjustment(r)
        for r in worker.catalog.adjustments(NAME) if r.kind in ("window", "granularity")
    ]


def replayed_outputs(tmp_path: Path, records: list[Adjustment]) -> dict[str, str]:
    """What `cq run` gives on the same files replaying `records`."""
    path = write_pipeline(tmp_path / "replay")
    run_pipeline(load_and_compile(path), adjustments=records)
    return {p.name: p.read_text() for p in sorted((path.parent / "out").glob("*.jsonl"))}


def test_api_changes_mid_run_are_logged_and_cq_run_replays_them_exactly(
    tmp_path: Path, folder: Path, make_worker
) -> None:
    worker = make_worker(batch_rows=16)
    client = TestClient(make_app(worker))
    worker.reconcile()
    for _ in range(5):
        worker.step()
    url = f"/queries/{NAME}/per_page/adjust"
    got = request_while_stepping(
        worker, lambda: client.post(url, json={"knob": "window", "value": 800}, headers=AUTH)
    )
    assert got.status_code == 200, got.text
    [made] = got.json()["adjustments"]
    assert (made["window"], made["knob"], made["old"], made["new"]) == ("C", "window", 2000, 800)
    assert not all(s.exhausted for s in worker.engine.executor.sources)  # changed mid-run
    assert made["since"] > 0
    for _ in range(5):
        worker.step()
    got = request_while_stepping(
        worker,
        lambda: client.post(url, json={"knob": "granularity", "value": 100}, headers=AUTH),
    )
    assert got.status_code == 200, got.text
    run_until_done(worker)
    records = logged(worker)
    assert [(a.knob, a.new) for a in records] == [("window", 800), ("granularity", 100)]
    outputs = {p.name: p.read_text() for p in sorted((folder / NAME / "out").glob("*.jsonl"))}
    assert outputs == replayed_outputs(tmp_path, records)
    unadjusted = replayed_outputs(tmp_path / "none", [])
    assert outputs["fixed.jsonl"] == unadjusted["fixed.jsonl"]  # the other query is untouched
    assert outputs["per_page.jsonl"] != unadjusted["per_page.jsonl"]

    # The log through the API, the settings in /metrics and the live explain.
    log = request_while_stepping(
        worker, lambda: client.get(f"/queries/{NAME}/per_page/adjustments")
    ).json()
    assert [(r["kind"], r["detail"]["new"], r["detail"]["reason"]) for r in log] == [
        ("window", 800, "api"), ("granularity", 100, "api")
    ]
    # the pipeline's whole log (the web view's timeline), the newest `limit`, its deployments
    def get(path: str, **params: int) -> object:
        return request_while_stepping(worker, lambda: client.get(path, params=params))

    whole = get(f"/pipelines/{NAME}/adjustments").json()
    assert [(r["query"], r["kind"]) for r in whole] == [
        ("per_page", "window"), ("per_page", "granularity")
    ]
    newest = get(f"/pipelines/{NAME}/adjustments", limit=1).json()
    assert [r["kind"] for r in newest] == ["granularity"]
    assert get(f"/pipelines/{NAME}/adjustments", limit=0).status_code == 422
    assert get("/pipelines/nope/adjustments").status_code == 404
    deployed = get(f"/pipelines/{NAME}/deployments").json()
    assert [d["status"] for d in deployed] == ["applied"] and deployed[0]["error"] is None
    assert get("/pipelines/nope/deployments").status_code == 404
    text = render_metrics(w.metrics_snapshot(worker)).decode()
    labels = 'pipeline="clicks",query="per_page",window="C"'
    assert re.search(rf"cq_window_size\{{{labels}\}} 800\.0", text)
    assert re.search(rf"cq_window_granularity\{{{labels}\}} 100\.0", text)
    assert "per_page C: [Range 800] Γ(100)" in w.explain_pipeline(worker, NAME)


@pytest.mark.parametrize(
    ("body", "status", "reason"),
    [
        ({"knob": "window", "value": 100}, 422, r"outside its qos range \[500, 4000\]"),
        ({"knob": "granularity", "value": 50}, 422, "not a rung"),
        ({"knob": "window:X", "value": 800}, 422, "has no adjustable window on X"),
        ({"knob": "size", "value": 800}, 422, "unknown knob"),
        ({"knob": "window", "value": "800"}, 422, "integer"),
    ],
)
def test_changes_outside_the_qos_are_refused(make_worker, body, status, reason) -> None:
    worker = make_worker()
    worker.reconcile()
    client = TestClient(make_app(worker))
    got = request_while_stepping(
        worker, lambda: client.post(f"/queries/{NAME}/per_page/adjust", json=body, headers=AUTH)
    )
    assert got.status_code == status, got.text
    assert re.search(reason, got.json()["detail"]), got.json()
    assert logged(worker) == []


def test_a_query_without_qos_or_a_missing_query_cannot_be_adjusted(make_worker) -> None:
    worker = make_worker()
    worker.reconcile()
    client = TestClient(make_app(worker))
    body = {"knob": "window", "value": 800}
    got = request_while_stepping(
        worker, lambda: client.post(f"/queries/{NAME}/fixed/adjust", json=body, headers=AUTH)
    )
    assert got.status_code == 422
    assert got.json()["detail"] == "query 'fixed' has no adjustable windows"
    got = request_while_stepping(
        worker, lambda: client.post(f"/queries/{NAME}/nope/adjust", json=body, headers=AUTH)
    )
    assert got.status_code == 404
    got = client.post(f"/queries/{NAME}/per_page/adjust", json=body)
    assert got.status_code == 401


def test_a_restored_query_makes_its_logged_changes_again(
    tmp_path: Path, folder: Path, make_worker
) -> None:
    first = make_worker(batch_rows=16)
    first.reconcile()
    for _ in range(5):
        first.step()
    [made] = first.adjust(NAME, "per_page", "window", 700)
    first.checkpoint()
    first._shutdown()
    second = make_worker(batch_rows=16)  # same catalog and folder: restores from the checkpoint
    second.reconcile()
    [win] = second.engine.windows(NAME, "per_page")
    assert (win.size, win.setting.since) == (700, made.since)
    run_until_done(second)
    outputs = {p.name: p.read_text() for p in sorted((folder / NAME / "out").glob("*.jsonl"))}
    assert outputs["per_page.jsonl"] == replayed_outputs(tmp_path, [made])["per_page.jsonl"]


def test_cq_run_reads_an_adjustment_log(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from cq_service.cli import app

    path = write_pipeline(tmp_path / "p")
    log = tmp_path / "log.jsonl"
    write_log(log, [Adjustment("per_page", "C", "window", 2000, 600, 5000)])
    result = CliRunner().invoke(app, ["run", str(path), "--adjustments", str(log)])
    assert result.exit_code == 0, result.output
    want = replayed_outputs(tmp_path / "r", [Adjustment("per_page", "C", "window", 2000, 600, 5000)])
    assert (path.parent / "out" / "per_page.jsonl").read_text() == want["per_page.jsonl"]
    log.write_text('{"query": "per_page", "window": "C"}\n')
    result = CliRunner().invoke(app, ["run", str(path), "--adjustments", str(log)])
    assert result.exit_code == 2 and "log.jsonl:1:1: bad adjustment: 'knob'" in result.output
    write_log(log, [Adjustment("per_page", "Z", "window", 2000, 600, 5000)])
    result = CliRunner().invoke(app, ["run", str(path), "--adjustments", str(log)])
    assert result.exit_code == 2 and "no adjustable window 'Z'" in result.output
