"""`cq catalog` and `cq relation`: exit codes, messages, and what ends up in the catalog."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from sqlalchemy import inspect
from typer.testing import CliRunner

from cq_service.catalog import Catalog, head_revision
from cq_service.cli import app
from tests.unit.catalog.checks import TABLES, tables


@pytest.fixture
def cq():
    runner = CliRunner()

    def _cq(*args: str):
        return runner.invoke(app, list(args), catch_exceptions=False)

    return _cq


def declare(url: str, pipeline: str, schema: dict[str, str], name: str = "Domains") -> None:
    with Catalog(url) as catalog:
        catalog.upgrade()
        catalog.upsert_source(
            pipeline,
            {"name": name, "is_relation": True, "schema": schema, "source": {"type": "catalog"}},
        )


def stored(url: str, relation: str = "Domains") -> list[tuple]:
    with Catalog(url) as catalog:
        return [(r.ts, r.op, r.row) for r in catalog.relation_rows(relation)]


def test_upgrade_status_downgrade(cq, catalog_url: str):
    up = cq("catalog", "upgrade", "--catalog", catalog_url)
    assert up.exit_code == 0 and f"at revision {head_revision()}" in up.output
    with Catalog(catalog_url) as catalog:
        assert tables(catalog) == TABLES
    assert cq("catalog", "status", "--catalog", catalog_url).exit_code == 0
    down = cq("catalog", "downgrade", "base", "--catalog", catalog_url)
    assert down.exit_code == 0 and "base (no tables)" in down.output
    with Catalog(catalog_url) as catalog:
        assert tables(catalog) == set()
    behind = cq("catalog", "status", "--catalog", catalog_url)
    assert (
        behind.exit_code == 1 and f"at revision none (newest: {head_revision()})" in behind.output
    )


def test_downgrade_of_a_missing_catalog_fails(cq, tmp_path: Path):
    done = cq("catalog", "downgrade", "--catalog", f"sqlite:///{tmp_path / 'none.db'}")
    assert done.exit_code == 1 and "does not exist" in done.output
    assert not (tmp_path / "none.db").exists()


def test_the_default_catalog_is_the_environment_s(cq, catalog_url: str, monkeypatch):
    monkeypatch.setenv("CQ_CATALOG", catalog_url)
    assert cq("catalog", "upgrade").exit_code == 0
    with Catalog(catalog_url) as catalog:
        assert catalog.is_current()


def test_load_csv_checks_and_converts_per_the_declared_schema(cq, catalog_url, tmp_path):
    declare(catalog_url, "web", {"domain": "string", "rank": "int", "ok": "bool"})
    f = tmp_path / "d.csv"
    f.write_text("ts,domain,rank,ok,_op\n1,a.com,2,yes,\n2,b.com,0x10,false,+\n3,a.com,2,t,-\n")
    done = cq("relation", "load", "Domains", str(f), "--catalog", catalog_url)
    assert done.exit_code == 0, done.output
    assert "stored 3 change(s)" in done.output
    assert stored(catalog_url) == [
        (1, "+", {"domain": "a.com", "rank": 2, "ok": True}),
        (2, "+", {"domain": "b.com", "rank": 16, "ok": False}),
        (3, "-", {"domain": "a.com", "rank": 2, "ok": True}),
    ]


def test_load_reports_every_bad_record_and_stores_nothing(cq, catalog_url, tmp_path):
    declare(catalog_url, "web", {"domain": "string", "rank": "int"})
    f = tmp_path / "d.jsonl"
    f.write_text(
        '{"ts": 1, "domain": "a", "rank": 1}\n'
        '{"ts": 2, "domain": "b", "rank": "high"}\n'
        '{"domain": "c", "rank": 3}\n'
        '{"ts": 4, "domain": "d", "rank": 4, "_op": "x"}\n'
        '{"ts": 5, "domian": "e"}\n'
    )
    done = cq("relation", "load", "Domains", str(f), "--catalog", catalog_url)
    assert done.exit_code == 2
    assert done.output.splitlines() == [
        f"error: {f}:2: column 'rank': 'high' is not an int",
        f"{f}:3: timestamp 'ts' is missing",
        f"{f}:4: _op: 'x' is not '+' or '-'",
        f"{f}:5: unknown column(s) 'domian' (the relation has: domain, rank)",
    ]
    assert stored(catalog_url) == []


def test_load_an_undeclared_relation_as_given(cq, catalog_url, tmp_path):
    f = tmp_path / "x.jsonl"
    f.write_text('{"ts": 3, "k": [1, 2], "v": null}\n\n{"ts": 1, "_op": "-", "k": "a"}\n')
    done = cq("relation", "load", "X", str(f), "--catalog", catalog_url, "--pipeline", "web")
    assert done.exit_code == 0, done.output
    assert stored(catalog_url, "X") == [(3, "+", {"k": [1, 2], "v": None}), (1, "-", {"k": "a"})]
    with Catalog(catalog_url) as catalog:  # the rows belong to pipeline web only
        assert catalog.relation_rows("X", pipeline="other") == []
        assert len(catalog.relation_rows("X", pipeline="web")) == 2


@pytest.mark.parametrize(
    ("content", "name", "message"),
    [
        ("ts,a\n1,2,3\n", "d.csv", "d.csv:2: expected 2 fields, found 3"),
        ('{"ts": 1}\n[1]\n', "d.jsonl", "d.jsonl:2: not a JSON object"),
        ('{"ts": 1\n', "d.jsonl", "d.jsonl:1: invalid JSON"),
        ("ts,a\n", "d.txt", "cannot tell the format"),
    ],
)
def test_load_unreadable_files(cq, catalog_url, tmp_path, content, name, message):
    f = tmp_path / name
    f.write_text(content)
    done = cq("relation", "load", "X", str(f), "--catalog", catalog_url)
    assert done.exit_code == 2 and message in done.output


def test_load_a_missing_file(cq, catalog_url, tmp_path):
    done = cq("relation", "load", "X", str(tmp_path / "nope.csv"), "--catalog", catalog_url)
    assert done.exit_code == 2 and "cannot read" in done.output


def test_insert_delete_show(cq, catalog_url: str):
    declare(catalog_url, "web", {"type": "string", "domain": "string"})
    args = ("--catalog", catalog_url)
    assert (
        cq(
            "relation",
            "insert",
            "Domains",
            "--ts",
            "5",
            "--row",
            '{"domain": "b", "type": "x"}',
            *args,
        ).exit_code
        == 0
    )
    assert (
        cq(
            "relation",
            "insert",
            "Domains",
            "--ts",
            "1",
            "--row",
            '{"domain": "a", "type": "y"}',
            *args,
        ).exit_code
        == 0
    )
    deleted = cq(
        "relation", "delete", "Domains", "--ts", "7", "--row", '{"domain": "a", "type": "y"}', *args
    )
    assert deleted.exit_code == 0 and "deleted from at 7" in deleted.output
    shown = cq("relation", "show", "Domains", *args)
    assert shown.exit_code == 0
    lines = shown.output.splitlines()
    assert [json.loads(line) for line in lines] == [
        {"_id": 2, "_ts": 1, "_op": "+", "type": "y", "domain": "a"},
        {"_id": 1, "_ts": 5, "_op": "+", "type": "x", "domain": "b"},
        {"_id": 3, "_ts": 7, "_op": "-", "type": "y", "domain": "a"},
    ]
    assert lines[0].index('"type"') < lines[0].index('"domain"')  # in schema order


@pytest.mark.parametrize(
    ("row", "message"),
    [
        ("{not json", "--row is not JSON"),
        ("[1, 2]", "--row must be a JSON object"),
        ('{"domain": 5}', "--row:1: column 'domain': 5 is not a string"),
        ('{"domian": "a"}', "unknown column(s) 'domian'"),
    ],
)
def test_insert_bad_rows(cq, catalog_url, row, message):
    declare(catalog_url, "web", {"domain": "string"})
    done = cq("relation", "insert", "Domains", "--ts", "1", "--row", row, "--catalog", catalog_url)
    assert done.exit_code == 2 and message in done.output
    assert stored(catalog_url) == []


def test_insert_needs_an_integer_ts(cq, catalog_url):
    done = cq(
        "relation", "insert", "Domains", "--ts", "soon", "--row", "{}", "--catalog", catalog_url
    )
    assert done.exit_code == 2


def test_conflicting_declarations_need_a_pipeline(cq, catalog_url):
    declare(catalog_url, "a", {"domain": "string"})
    declare(catalog_url, "b", {"domain": "int"})
    args = ("relation", "insert", "Domains", "--ts", "1", "--row", '{"domain": "7"}')
    clash = cq(*args, "--catalog", catalog_url)
    assert clash.exit_code == 2 and "different schemas by pipelines a, b" in clash.output
    assert cq(*args, "--catalog", catalog_url, "--pipeline", "b").exit_code == 0
    assert stored(catalog_url) == [(1, "+", {"domain": 7})]  # converted per b's schema


def test_the_embedded_catalog_is_created_on_first_use(cq, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("CQ_CATALOG", raising=False)
    done = cq("relation", "insert", "R", "--ts", "1", "--row", '{"a": 1}')
    assert done.exit_code == 0, done.output
    db = tmp_path / ".cq" / "catalog.db"
    assert db.exists()
    with Catalog(f"sqlite:///{db}") as catalog:
        assert "relation_rows" in inspect(catalog.engine).get_table_names()
        assert [r.row for r in catalog.relation_rows("R")] == [{"a": 1}]


def test_show_on_a_missing_catalog_and_an_unreachable_server(cq, tmp_path):
    missing = cq("relation", "show", "R", "--catalog", f"sqlite:///{tmp_path / 'none.db'}")
    assert missing.exit_code == 1 and "does not exist" in missing.output
    down = cq("relation", "show", "R", "--catalog", "postgresql://u:secret@127.0.0.1:1/db")
    assert down.exit_code == 1
    assert "secret" not in down.output and "***" in down.output
