"""Every bad request to the worker's API is a 4xx with a JSON body naming the problem: a body
that is not JSON or not an object, ill-typed fields, bad control values, unknown names, wrong
methods, oversized bodies, bad credentials, pipeline paths outside the folder, YAML bombs."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from cq_service.service import views
from cq_service.service.api import make_app
from cq_service.service.api_guard import MAX_BODY_BYTES
from tests.unit.service.serving import serving_example
from tests.unit.service.workers import sqlite_worker
from tests.unit.spec.yaml_bombs import laughs

TOKEN = "s3cret"
AUTH = {"Authorization": f"Bearer {TOKEN}"}
QUERY = "/queries/web-proxy/domain_load"


@pytest.fixture
def client(tmp_path: Path):
    with serving_example(tmp_path, TOKEN, reconcile_interval=3600) as served:
        yield served


def refused(response, status: int, *words: str) -> dict:
    """`response` is `status` with a JSON {"detail": ...} that names the problem."""
    assert response.status_code == status, response.text
    assert response.headers["content-type"] == "application/json"
    body = response.json()
    assert isinstance(body["detail"], str)
    for word in words:
        assert word in body["detail"], body
    assert "Traceback" not in response.text
    return body


@pytest.mark.parametrize("method,url", [
    ("PATCH", QUERY + "/control"), ("PUT", "/pipelines/web-proxy/control"),
    ("POST", QUERY + "/adjust"), ("POST", "/pipelines"),
])
def test_a_body_that_is_not_json_or_not_an_object_is_400(client, method: str, url: str) -> None:
    c, _, _ = client
    headers = {**AUTH, "Content-Type": "application/json"}
    refused(c.request(method, url, content=b'{"weight": ', headers=headers), 400, "not valid JSON")
    for body in (b"[1, 2]", b'"weight"', b"3", b"null"):
        refused(c.request(method, url, content=body, headers=headers), 400, "JSON object")


@pytest.mark.parametrize("body,field", [
    ({"weight": "3"}, "weight"), ({"weight": True}, "weight"), ({"active": 1}, "active"),
    ({"active": "yes"}, "active"), ({"memory_budget": 1.5}, "memory_budget"),
    ({"memory_budget": -1}, "memory_budget"), ({"memory_budget": 2**63}, "memory_budget"),
    ({"qos": {"window": [1]}}, "qos.window"), ({"qos": {"window": ["a", 2]}}, "qos.window.0"),
    ({"qos": [1, 2]}, "qos"), ({"weight": 0}, "weight"), ({"colour": 1}, "colour"),
])
def test_ill_typed_query_control_is_422_naming_the_field(client, body: dict, field: str) -> None:
    c, worker, _ = client
    got = refused(c.patch(QUERY + "/control", json=body, headers=AUTH), 422, field)
    assert field in [e["field"] for e in got["errors"]]
    assert worker.catalog.query("web-proxy", "domain_load").weight == 1.0  # nothing changed


def test_bad_control_values_are_422(client) -> None:
    c, _, _ = client
    refused(c.patch(QUERY + "/control", json={"qos": {"window": [600, 60]}}, headers=AUTH),
            422, "min <= max")
    refused(c.put("/pipelines/web-proxy/control", json={"scheduler": "nope"}, headers=AUTH),
            422, "unknown scheduler 'nope'")
    refused(c.put("/pipelines/web-proxy/control", json={"latency_bound_ms": -5}, headers=AUTH),
            422, "latency_bound_ms")
    refused(c.put("/pipelines/web-proxy/control", json={"latency_bound_ms": "5"}, headers=AUTH),
            422, "latency_bound_ms")
    refused(c.post(QUERY + "/adjust", json={"knob": "window", "value": "60"}, headers=AUTH),
            422, "value")
    refused(c.post(QUERY + "/adjust", json={"knob": 3, "value": 60}, headers=AUTH), 422, "knob")
    refused(c.post(QUERY + "/adjust", json={"knob": "colour", "value": 60}, headers=AUTH), 422)


def test_unknown_names_are_404(client) -> None:
    c, _, _ = client
    refused(c.get("/pipelines/nope"), 404, "nope")
    refused(c.get("/pipelines/nope/explain"), 404, "nope")
    refused(c.get("/pipelines/nope/control"), 404, "nope")
    refused(c.patch("/pipelines/nope/control", json={}, headers=AUTH), 404, "nope")
    refused(c.get("/queries/web-proxy/nope"), 404, "web-proxy/nope")
    refused(c.get("/queries/web-proxy/nope/adjustments"), 404, "web-proxy/nope")
    refused(c.get("/queries/web-proxy/nope/results"), 404, "web-proxy/nope")
    refused(c.patch("/queries/web-proxy/nope/control", json={"weight": 2}, headers=AUTH), 404)
    refused(c.post("/queries/nope/q/adjust", json={"knob": "window", "value": 5}, headers=AUTH),
            404, "nope/q")
    refused(c.get("/no/such/endpoint"), 404, "Not Found")


def test_a_wrong_method_is_405(client) -> None:
    c, _, _ = client
    refused(c.delete("/pipelines", headers=AUTH), 405, "Method Not Allowed")
    refused(c.post("/healthz"), 405)
    refused(c.get(QUERY + "/adjust"), 405)


def test_an_oversized_body_is_413_declared_or_streamed(client) -> None:
    c, _, folder = client
    big = b'{"yaml": "' + b"x" * MAX_BODY_BYTES + b'"}'
    declared = c.post("/pipelines", content=big,
                      headers={**AUTH, "Content-Type": "application/json"})
    refused(declared, 413, f"{MAX_BODY_BYTES:,} bytes")

    def chunks():  # no Content-Length: counted as it arrives
        yield b'{"yaml": "'
        for _ in range(MAX_BODY_BYTES // 65536 + 1):
            yield b"x" * 65536
        yield b'"}'

    streamed = c.post("/pipelines", content=chunks(),
                      headers={**AUTH, "Content-Type": "application/json"})
    refused(streamed, 413)
    assert not list(folder.glob(".deployed-*"))
    just = {"yaml": "x" * (MAX_BODY_BYTES - 100)}  # under the bound: read, then judged
    assert c.post("/pipelines", json=just, headers=AUTH).status_code == 422


def test_an_unexpected_error_is_a_logged_500_without_traceback(client, monkeypatch, caplog) -> None:
    c, _, _ = client

    def broken(worker):
        raise RuntimeError("secret internals")

    monkeypatch.setattr(views, "describe", broken)
    with caplog.at_level(logging.ERROR, logger="cq_service.service.api_guard"):
        body = refused(c.get("/pipelines"), 500, "internal error")
    assert "secret internals" not in str(body)
    [logged] = [r for r in caplog.records if r.exc_info]
    assert str(logged.exc_info[1]) == "secret internals"
    assert logged.getMessage() == "GET /pipelines failed"


@pytest.mark.parametrize("authorization,why", [
    (None, "required"), ("", "required"), ("s3cret", "Bearer TOKEN"),
    ("Basic s3cret", "Bearer TOKEN"), ("Bearer", "Bearer TOKEN"), ("Bearer  ", "Bearer TOKEN"),
    ("Bearer wrong", "not valid"), ("Bearer s3cret2", "not valid"), ("Bearer s3cre", "not valid"),
    ("Bearers3cret", "Bearer TOKEN"),
])
def test_a_missing_or_wrong_token_is_401_with_www_authenticate(
    client, authorization: str | None, why: str
) -> None:
    c, worker, _ = client
    headers = {} if authorization is None else {"Authorization": authorization}
    r = c.patch(QUERY + "/control", json={"weight": 3}, headers=headers)
    refused(r, 401, why)
    assert r.headers["WWW-Authenticate"].startswith('Bearer realm="cq-service"')
    assert worker.catalog.query("web-proxy", "domain_load").weight == 1.0


def test_a_non_ascii_token_is_401(client) -> None:
    c, _, _ = client
    for token in ("s\xe9cret".encode("latin-1"), "sécret".encode()):
        r = c.patch(QUERY + "/control", json={"weight": 3},
                    headers={"Authorization": b"Bearer " + token})
        refused(r, 401, "ASCII")
        assert 'error="invalid_token"' in r.headers["WWW-Authenticate"]


def test_the_scheme_name_is_case_insensitive(client) -> None:
    c, _, _ = client
    for scheme in ("bearer", "BEARER", "BeArEr"):
        r = c.patch(QUERY + "/control", json={"weight": 2},
                    headers={"Authorization": f"{scheme} {TOKEN}"})
        assert r.status_code == 200, r.text


def test_without_a_token_configured_changes_are_403(tmp_path: Path) -> None:
    (tmp_path / "p").mkdir()
    worker = sqlite_worker(tmp_path, tmp_path / "p", token=None)
    c = TestClient(make_app(worker))
    refused(c.post("/pipelines", json={"yaml": "x"}, headers=AUTH), 403, "no token")


def test_deploy_never_reads_a_file_outside_the_pipelines_folder(client, tmp_path: Path) -> None:
    c, worker, folder = client
    secret = tmp_path / "secret.txt"  # not *.yaml: the folder's reconciler leaves it alone
    secret.write_text("version: 1\nname: secret\n")
    (folder / "link.txt").symlink_to(secret)
    for path in ("/etc/passwd", str(secret), "../secret.txt", "web-proxy/../../secret.txt",
                 "link.txt"):
        body = refused(c.post("/pipelines", json={"path": path}, headers=AUTH), 403,
                       "outside the pipelines folder")
        assert "root:" not in str(body)
    assert "secret" not in worker.pipelines
    assert worker.catalog.deployments("secret") == []


def test_deploy_of_a_path_that_is_not_a_file_in_the_folder_is_400(client) -> None:
    c, _, _ = client
    refused(c.post("/pipelines", json={"path": "missing.yaml"}, headers=AUTH), 400, "not a file")
    refused(c.post("/pipelines", json={"path": "web-proxy"}, headers=AUTH), 400, "not a file")
    refused(c.post("/pipelines", json={"path": "x" * 300}, headers=AUTH), 400, "not a file")
    refused(c.post("/pipelines", json={"path": "a\x00b"}, headers=AUTH), 422, "path")


def test_deploy_takes_a_path_inside_the_folder_relative_or_absolute(client) -> None:
    c, _, folder = client
    for path in ("web-proxy/pipeline.yaml", str(folder / "web-proxy" / "pipeline.yaml")):
        r = c.post("/pipelines", json={"path": path}, headers=AUTH)
        assert r.status_code == 200, r.text
        assert r.json()["status"] == "unchanged" or r.json()["kept"]


def test_deploy_with_a_path_outside_and_its_text_uses_the_text(client, tmp_path: Path) -> None:
    c, _, folder = client  # what `cq deploy` sends from another machine
    text = (folder / "web-proxy" / "pipeline.yaml").read_text()
    text = text.replace("path: data/", "path: web-proxy/data/")  # taken from the folder
    r = c.post("/pipelines", json={"yaml": text, "filename": "pipeline.yaml",
                                   "path": "/elsewhere/pipeline.yaml"}, headers=AUTH)
    assert r.status_code == 200, r.text
    assert r.json()["pipeline"] == "web-proxy"


def test_deploy_refuses_bad_bodies(client) -> None:
    c, _, _ = client
    refused(c.post("/pipelines", json={}, headers=AUTH), 422, '{"yaml": TEXT} or {"path": FILE}')
    refused(c.post("/pipelines", json={"yaml": 3}, headers=AUTH), 422, "yaml")
    refused(c.post("/pipelines", json={"yaml": "a: 1", "filename": "../x.yaml"}, headers=AUTH),
            422, "filename")
    refused(c.post("/pipelines", content=b'{"yaml": "\\ud800"}',
                   headers={**AUTH, "Content-Type": "application/json"}), 422, "surrogate")


def test_a_billion_laughs_pipeline_is_400_and_not_deployed(client) -> None:
    c, worker, folder = client
    body = refused(c.post("/pipelines", json={"yaml": laughs(), "filename": "lol.yaml"},
                          headers=AUTH), 400, "lol.yaml:7:5:", "more than 10,000 values")
    assert "66,430" in body["detail"]
    assert not list(folder.glob(".deployed-*"))
    assert worker.catalog.deployments("lol") == []
    (folder / "lol.yaml.txt").write_text(laughs())  # a file in the folder, named by path
    refused(c.post("/pipelines", json={"path": "lol.yaml.txt"}, headers=AUTH), 400,
            "more than 10,000 values")


def test_the_token_is_checked_before_the_body_fields(client) -> None:
    c, _, _ = client
    for body in ({"weight": "heavy"}, [1], {"colour": 1}):
        refused(c.patch(QUERY + "/control", json=body), 401, "required")
    refused(c.post("/pipelines", json={"path": "/etc/passwd"}), 401, "required")


def test_a_body_sent_as_another_content_type_is_400(client) -> None:
    c, worker, _ = client
    r = c.patch(QUERY + "/control", content=b'{"weight": 2}',
                headers={**AUTH, "Content-Type": "text/plain"})
    refused(r, 400, "JSON object")
    assert worker.catalog.query("web-proxy", "domain_load").weight == 1.0


def test_a_billion_laughs_file_in_the_folder_is_rejected_with_its_position(client) -> None:
    _, worker, folder = client
    path = folder / "lol.yaml"
    path.write_text(laughs())
    result = worker.call(lambda: worker.deploy_file(path))
    assert result.status == "rejected"
    assert result.errors == [
        f"{path}:7:5: this value stands for more than 10,000 values once its aliases are "
        "expanded (66,430); a pipeline file may hold at most 10,000"
    ]
    assert "web-proxy" in worker.pipelines  # the rest runs on
