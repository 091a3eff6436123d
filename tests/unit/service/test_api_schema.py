"""The API's OpenAPI schema (schemas/api.openapi.json, served at GET /openapi.json) is the
one the code publishes, and a real worker's API, fuzzed from it with schemathesis, answers
every request with a status and body the schema allows and never with a 5xx.

After changing the API: ``CQ_WRITE_API_SCHEMA=1 .venv/bin/python -m pytest -q
tests/unit/service/test_api_schema.py -k current`` rewrites the file. The fuzzing tries 15
examples of each operation (derandomized, about 20 s); ``CQ_API_FUZZ_EXAMPLES=N`` tries N, at
random."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest
import requests
import schemathesis
from hypothesis import HealthCheck, settings
from schemathesis.checks import (
    content_type_conformance,
    not_a_server_error,
    response_headers_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from cq_service.service.api import make_app
from cq_service.service.worker import Worker
from tests.unit.service.serving import serving_http
from tests.unit.service.workers import sqlite_worker

ROOT = Path(__file__).resolve().parents[3]
SCHEMA_FILE = ROOT / "schemas" / "api.openapi.json"
EXAMPLE = ROOT / "pipelines" / "examples" / "web-proxy"
TOKEN = "s3cret"
AUTH = {"Authorization": f"Bearer {TOKEN}"}
EXAMPLES = int(os.environ.get("CQ_API_FUZZ_EXAMPLES", "15"))  # per operation; more by hand
CHECKS = [not_a_server_error, status_code_conformance, content_type_conformance,
          response_schema_conformance, response_headers_conformance]

# The results stream and the web view's feed never end while they run: they are left out of
# the fuzzing (the results' 404 and first events are tested in test_api_requests.py and
# test_api.py, the feed's in test_live_graph.py and tests/browser).
SCHEMA = schemathesis.openapi.from_path(SCHEMA_FILE).exclude(
    path=["/queries/{pipeline}/{name}/results", "/pipelines/{name}/events"]
)


def _worker(tmp: Path) -> Worker:
    folder = tmp / "p"
    shutil.copytree(EXAMPLE, folder / "web-proxy", ignore=shutil.ignore_patterns("out"))
    return sqlite_worker(tmp, folder, token=TOKEN, checkpoint_interval=0.5)


def test_the_schema_file_is_current(tmp_path: Path) -> None:
    published = make_app(_worker(tmp_path)).openapi()
    text = json.dumps(published, indent=2, ensure_ascii=False) + "\n"
    if os.environ.get("CQ_WRITE_API_SCHEMA"):
        SCHEMA_FILE.write_text(text)
    assert SCHEMA_FILE.read_text() == text, "rewrite it: see this module's docstring"


@pytest.fixture(scope="module")
def base_url(tmp_path_factory: pytest.TempPathFactory):
    """A worker with the web-proxy example and its API on 127.0.0.1 (uvicorn, a thread)."""
    with serving_http(_worker(tmp_path_factory.mktemp("fuzz"))) as url:
        yield url


def test_the_served_schema_is_the_file(base_url: str) -> None:
    assert requests.get(base_url + "/openapi.json", timeout=10).json() == json.loads(
        SCHEMA_FILE.read_text()
    )


@SCHEMA.parametrize()
@settings(max_examples=EXAMPLES, deadline=None, derandomize=EXAMPLES == 15,
          suppress_health_check=list(HealthCheck))
def test_the_api_conforms_to_its_schema(case: schemathesis.Case, base_url: str) -> None:
    case.call_and_validate(base_url=base_url, headers=AUTH, checks=CHECKS, timeout=30)
