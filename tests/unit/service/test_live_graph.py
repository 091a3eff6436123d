"""The web view's data: the running plan as nodes and edges with live statistics (one message
of ``GET /pipelines/{name}/events``), and the built assets served at /ui."""

from __future__ import annotations

from pathlib import Path

from cq_service.service import views as w
from cq_service.service.live_graph import LiveGraph
from tests.unit.service.serving import serving_example


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
