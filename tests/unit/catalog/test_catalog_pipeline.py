"""Pipelines whose relations live in the catalog: the spec, and `cq run` end to end."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from cq_service.catalog import Catalog
from cq_service.spec import SpecErrors, load_pipeline_text

CQ = Path(sys.executable).with_name("cq")

PIPELINE = """\
version: 1
name: web
streams:
  Requests:
    schema: {client_id: int, domain: string}
    timestamp: ts
    source: {type: file, path: requests.csv}
relations:
  Domains:
    schema: {domain: string, type: string}
    source: {type: catalog, name: domains, url: "sqlite:///catalog.db"}
queries:
  commerce:
    cql: >
      SELECT Istream(S.client_id, S.domain) FROM Requests S [Now], Domains R
      WHERE S.domain = R.domain AND R.type = 'commerce'
    sink: {type: file, path: out/commerce.jsonl}
  per_type:
    cql: SELECT R.type, COUNT(*) AS n FROM Domains R GROUP BY R.type
    sink: {type: file, path: out/per_type.jsonl}
"""


def _problems(text: str, folder: Path) -> list[str]:
    with pytest.raises(SpecErrors) as caught:
        load_pipeline_text(text, folder / "p.yaml")
    return [f"{e.span.line}:{e.span.col}: {e.message}" for e in caught.value.errors]


def test_the_spec_fills_in_the_catalog_options(tmp_path: Path):
    text = """\
version: 1
name: web
relations:
  A: {schema: {d: string}, source: {type: catalog}}
  B: {schema: {d: string}, source: {type: catalog, name: shared_b, url: "sqlite:///data/c.db"}}
  C: {schema: {d: string}, source: {type: catalog, url: "postgresql+psycopg://u@db/cq"}}
"""
    spec = load_pipeline_text(text, tmp_path / "p.yaml")
    options = {n: dict(r.source.options) for n, r in spec.relations.items()}
    assert options["A"] == {"name": "A", "url": None, "pipeline": "web"}
    assert options["B"] == {
        "name": "shared_b",
        "url": f"sqlite:///{tmp_path / 'data' / 'c.db'}",
        "pipeline": "web",
    }  # a relative SQLite path is relative to the pipeline file
    assert options["C"]["url"] == "postgresql+psycopg://u@db/cq"
    assert spec.relations["A"].source.type == "catalog"


def test_catalog_sources_are_for_relations_only(tmp_path: Path):
    text = """\
version: 1
name: web
streams:
  S: {schema: {d: string}, timestamp: ts, source: {type: catalog}}
"""
    assert _problems(text, tmp_path) == [
        "4:58: stream 'S': source type 'catalog' is for relations only "
        "(a stream cannot be read from the catalog)"
    ]


def test_catalog_keys_are_checked(tmp_path: Path):
    (tmp_path / "r.csv").write_text("ts,d\n")
    wrong_type = """\
version: 1
name: web
relations:
  R: {schema: {d: string}, source: {type: catalog, path: r.csv}}
"""
    assert _problems(wrong_type, tmp_path) == [
        "4:52: key 'path' is not allowed in the source of relation 'R': "
        "a source of type 'catalog' takes only name, url"
    ]
    name_on_file = """\
version: 1
name: web
relations:
  R: {schema: {d: string}, source: {type: file, path: r.csv, name: x}}
"""
    assert _problems(name_on_file, tmp_path) == [
        "4:62: 'name' only applies to catalog sources, but the source of relation 'R' is of "
        "type file"
    ]


def _jsonl(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


@pytest.fixture
def web(tmp_path: Path) -> Path:
    (tmp_path / "p.yaml").write_text(PIPELINE)
    (tmp_path / "requests.csv").write_text(
        "ts,client_id,domain\n1,1,a.com\n3,2,b.com\n6,3,a.com\n8,4,b.com\n9,5,c.com\n"
    )
    with Catalog(f"sqlite:///{tmp_path / 'catalog.db'}") as catalog:
        catalog.upgrade()
        catalog.insert_relation_rows(
            "domains",
            [
                (0, "+", {"domain": "a.com", "type": "commerce"}),
                (2, "+", {"domain": "c.com", "type": "news"}),
                (5, "+", {"domain": "b.com", "type": "commerce"}),
                (7, "-", {"domain": "a.com", "type": "commerce"}),
                (4, "+", {"domain": 1, "type": "commerce"}),  # not a string: dead letter
            ],
        )
        catalog.insert_relation_rows(
            "domains", [(0, "+", {"domain": "c.com", "type": "commerce"})], pipeline="other"
        )
    return tmp_path


COMMERCE = [
    {"_ts": 1, "_op": "+", "client_id": 1, "domain": "a.com"},
    {"_ts": 6, "_op": "+", "client_id": 3, "domain": "a.com"},
    {"_ts": 8, "_op": "+", "client_id": 4, "domain": "b.com"},
]
PER_TYPE = [
    {"_ts": 0, "_op": "+", "type": "commerce", "n": 1},
    {"_ts": 2, "_op": "+", "type": "news", "n": 1},
    {"_ts": 5, "_op": "-", "type": "commerce", "n": 1},
    {"_ts": 5, "_op": "+", "type": "commerce", "n": 2},
    {"_ts": 7, "_op": "-", "type": "commerce", "n": 2},
    {"_ts": 7, "_op": "+", "type": "commerce", "n": 1},
]


def test_cq_run_joins_with_the_stored_relation(web: Path):
    done = subprocess.run(
        [str(CQ), "run", "p.yaml"], cwd=web, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert _jsonl(web / "out" / "commerce.jsonl") == COMMERCE
    assert _jsonl(web / "out" / "per_type.jsonl") == PER_TYPE
    assert "Domains: 0 late, 1 malformed record(s)" in done.stderr
    dead = _jsonl(web / "out" / "web.dead-letter.jsonl")
    assert [(d["source"], d["file"], d["reason"]) for d in dead] == [
        ("Domains", "domains", "column 'domain': 1 is not a string")
    ]


def test_the_runner_registers_the_catalog_source_itself(web: Path):
    script = (
        "from cq_service.compiler import load_and_compile\n"
        "from cq_service.runner import run_pipeline\n"
        "run_pipeline(load_and_compile('p.yaml'))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], cwd=web, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert _jsonl(web / "out" / "commerce.jsonl") == COMMERCE
