"""The HTTP API over a running worker (file pipelines, SQLite catalog)."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from cq_service.service.metrics import parse_metrics
from tests.unit.service.serving import serving_example

TOKEN = "s3cret"


@pytest.fixture
def client(tmp_path: Path):
    with serving_example(tmp_path, TOKEN, reconcile_interval=0.2) as served:
        yield served


AUTH = {"Authorization": f"Bearer {TOKEN}"}


def test_health_and_pipelines(client) -> None:
    c, _, _ = client
    assert c.get("/healthz").json() == {"status": "ok"}
    assert c.get("/readyz").status_code == 200
    [p] = c.get("/pipelines").json()["pipelines"]
    assert p["name"] == "web-proxy"
    assert set(p["queries"]) == {"commerce_urls", "domain_load", "loyal_clients"}
    assert p["last_deployment"]["status"] == "applied"
    assert "Range" in c.get("/pipelines/web-proxy/explain").text
    assert c.get("/pipelines/nope").status_code == 404


def test_control_needs_the_token_and_is_stored(client) -> None:
    c, worker, _ = client
    url = "/queries/web-proxy/domain_load/control"
    assert c.patch(url, json={"weight": 3}).status_code == 401
    assert c.patch(url, json={"weight": 3}, headers={"Authorization": "Bearer wrong"}).status_code == 401
    assert c.patch(url, json={"colour": 1}, headers=AUTH).status_code == 422
    got = c.patch(url, json={"weight": 3, "memory_budget": 1 << 20}, headers=AUTH).json()
    assert got["weight"] == 3 and got["memory_budget"] == 1 << 20
    assert worker.catalog.query("web-proxy", "domain_load").weight == 3
    got = c.patch(url, json={"active": False}, headers=AUTH).json()
    assert got["active"] is False and got["running"] is False
    got = c.patch(url, json={"active": True}, headers=AUTH).json()
    assert got["running"] is True


def test_deploy_rejects_an_invalid_pipeline(client) -> None:
    c, worker, folder = client
    text = (folder / "web-proxy" / "pipeline.yaml").read_text().replace("GROUP BY R.domain", "GROUP BY R.nope")
    edited = folder / "web-proxy" / ".edited.yaml"
    edited.write_text(text)
    r = c.post("/pipelines", json={"path": str(edited)}, headers=AUTH)
    assert r.status_code == 422
    assert any("nope" in e for e in r.json()["errors"])
    assert len(worker.queries) == 3  # the running version keeps running
    assert c.post("/pipelines", json={"yaml": text}).status_code == 401


def test_metrics(client) -> None:
    c, worker, _ = client
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        text = c.get("/metrics").text
        if 'cq_results_total{query="web-proxy/domain_load"}' in text and worker.checkpoints:
            break
        time.sleep(0.1)
    lines = parse_metrics(text)
    requests = [v for k, v in lines.items() if k.startswith('cq_source_elements_total{source="Requests@')]
    assert requests and requests[0] > 0
    assert lines['cq_results_total{query="web-proxy/domain_load"}'] > 0
    assert 'cq_deployments_total{status="applied"}' in lines
    assert any(k.startswith("cq_synopsis_bytes{") for k in lines)
