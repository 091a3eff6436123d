"""The web view's data: the running plan as nodes and edges with live statistics (one message
of ``GET /pipelines/{name}/events``), and the built assets served at /ui."""

from __future__ import annotations

from pathlib import Path

import yaml

from cq_service.engine.scheduler.fifo import Fifo
from cq_service.service import views as w
from cq_service.service.live_graph import LiveGraph
from tests.property.harness import write_pipeline
from tests.unit.service.serving import serving_example
from tests.unit.service.workers import run_until_done, sqlite_worker


def test_feed_is_the_plan_with_statistics(tmp_path: Path) -> None:
    with serving_example(tmp_path, "t", reconcile_interval=3600) as (api, worker, _):
        graph = LiveGraph(worker, "web-proxy")
        first = worker.call(lambda: w.live_feed(worker, graph))
        data = worker.call(lambda: w.live_feed(worker, graph))
        explain = api.get("/pipelines/web-proxy/explain").text
        assert first["pipeline"] == "web-proxy"
        nodes = {n["id"]: n for n in data["nodes"]}
        operators = [n for n in data["nodes"] if n["kind"] in ("source", "operator")]
        assert len(operators) == explain.count("\n  #")
        for n in operators:  # each as `cq explain` lists it
            assert f"  {n['label']}  <- " in explain
            assert {"rows_in", "rows_out", "rows_per_s", "memory"} <= n["stats"].keys()
        assert {n["label"] for n in data["nodes"] if n["kind"] == "sink"} == {
            "sink commerce_urls",
            "sink domain_load",
            "sink loyal_clients",
        }
        for e in data["edges"]:  # queues between producers and readers
            assert e["from"] in nodes and e["to"] in nodes
            assert "queue" in (nodes[e["from"]]["kind"], nodes[e["to"]]["kind"])
        source = next(n for n in operators if n["label"] == "#0 stream source Requests")
        assert {"commerce_urls", "domain_load"} <= set(source["queries"])
        assert data["entities"] and {"kind", "entity", "rows_in"} <= data["entities"][0].keys()


def test_feed_of_unknown_pipeline_is_404(tmp_path: Path) -> None:
    with serving_example(tmp_path, "t", reconcile_interval=3600) as (api, _, _):
        r = api.get("/pipelines/nope/events")
        assert r.status_code == 404
        assert r.json()["detail"] == "not found: pipeline nope"


def test_ui_is_served(tmp_path: Path) -> None:
    with serving_example(tmp_path, "t", reconcile_interval=3600) as (api, _, _):
        r = api.get("/ui", follow_redirects=False)
        assert r.status_code == 307 and r.headers["location"] == "/ui/"
        page = api.get("/ui/")
        assert page.status_code == 200 and "<title>cq-service</title>" in page.text
        script = page.text.split('src="./', 1)[1].split('"', 1)[0]
        assert api.get("/ui/" + script).status_code == 200


def test_feed_has_the_schedulers_priorities_and_the_probe_orders(tmp_path: Path) -> None:
    rows = {s: [{"ts": t, "k": t % 3, "v": t % 5} for t in range(40)] for s in "ABC"}
    streams = {s: {"schema": {"k": "int", "v": "int"}} for s in "ABC"}
    query = "SELECT A.v, C.v FROM A [Range 5], B [Range 5], C [Range 5] WHERE A.k = B.k AND B.v = C.k"
    doc = {"streams": streams, "queries": {"q": query}, "resources": {"join": "mjoin"}}
    path = write_pipeline(tmp_path / "p" / "mj", doc, rows)
    text = yaml.safe_load(path.read_text())
    text["name"] = "mj"
    path.write_text(yaml.safe_dump(text, sort_keys=False))
    worker = sqlite_worker(tmp_path, tmp_path / "p")
    run_until_done(worker)
    operators = [n for n in LiveGraph(worker, "mj").snapshot()["nodes"] if n["kind"] == "operator"]
    mjoin = next(n for n in operators if n["label"].split()[1] == "mjoin")
    assert mjoin["stats"]["probe_orders"].count("→") == 6  # three orders of three inputs
    assert all(n["stats"]["probe_orders"] is None for n in operators if n is not mjoin)
    assert all(isinstance(n["stats"]["priority"], float) for n in operators)  # Chain ranks
    worker.scheduling.set("mj", Fifo())
    operators = [n for n in LiveGraph(worker, "mj").snapshot()["nodes"] if n["kind"] == "operator"]
    assert all(n["stats"]["priority"] is None for n in operators)  # FIFO ranks nothing
