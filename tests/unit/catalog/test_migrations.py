"""The Alembic migrations on SQLite: up, down, up; and the models describe what they create."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from sqlalchemy import inspect
from sqlalchemy.exc import IntegrityError

from cq_service.catalog import ArchiveState, Catalog, CatalogError
from cq_service.catalog.database import MIGRATIONS, default_url, normalize_url
from cq_service.catalog.models import Base
from tests.unit.catalog.checks import TABLES, check_migrations_up_down_up, tables

ROOT = Path(__file__).resolve().parents[3]


def test_up_down_up(make_catalog):
    check_migrations_up_down_up(make_catalog(migrate=False))


def test_the_models_match_the_newest_migration(catalog: Catalog):
    with catalog.engine.connect() as connection:
        context = MigrationContext.configure(connection, opts={"compare_type": True})
        assert compare_metadata(context, Base.metadata) == []


def test_indexes_and_constraints_exist(catalog: Catalog):
    found = inspect(catalog.engine)
    indexes = {i["name"] for i in found.get_indexes("relation_rows")}
    assert {"ix_relation_rows_relation_ts_id", "ix_relation_rows_relation_id"} <= indexes
    uniques = {tuple(u["column_names"]) for u in found.get_unique_constraints("queries")}
    assert ("pipeline", "name") in uniques
    # The CHECK on op holds even past the repository.
    with pytest.raises(IntegrityError, match="ck_relation_rows_op"), catalog.engine.begin() as c:
        c.exec_driver_sql(
            "INSERT INTO relation_rows (relation, ts, op, row) VALUES ('R', 1, '*', '{}')"
        )


def test_a_step_down_and_an_unknown_revision(catalog: Catalog):
    catalog.downgrade("-1")
    assert catalog.revision() == "0005"
    catalog.downgrade("-1")
    assert catalog.revision() == "0004"
    catalog.downgrade("-1")
    assert catalog.revision() == "0003"
    catalog.downgrade("-1")
    assert catalog.revision() == "0002"
    catalog.downgrade("-1")
    assert catalog.revision() == "0001"
    catalog.downgrade("-1")
    assert catalog.revision() is None
    with pytest.raises(CatalogError, match=r"cannot upgrade .* to 'nope'"):
        catalog.upgrade("nope")


def test_0002_adds_pipeline_controls_and_keeps_the_data(make_catalog):
    catalog = make_catalog(migrate=False)
    catalog.upgrade("0001")
    assert "pipeline_controls" not in tables(catalog)
    catalog.upsert_query("p", "q", "SELECT * FROM S", None, 2.0, "h", "running")
    catalog.upgrade("0002")
    assert tables(catalog) == TABLES - {"archive_progress", "query_handovers", "stored_pipelines"}
    assert catalog.query("p", "q").weight == 2.0
    with catalog.engine.begin() as c:  # the repository writes 0006's share column too
        c.exec_driver_sql(
            "INSERT INTO pipeline_controls (pipeline, scheduler, latency_bound_ms, updated_at)"
            " VALUES ('p', 'chain_bounded', 50, '2025-01-01')"
        )
    catalog.downgrade("0001")
    assert tables(catalog) == TABLES - {"pipeline_controls", "archive_progress", "query_handovers", "stored_pipelines"}
    assert catalog.query("p", "q").weight == 2.0  # only the new table went
    catalog.upgrade()
    assert catalog.pipeline_control("p") is None


def test_0003_adds_archive_progress_and_keeps_the_data(make_catalog):
    catalog = make_catalog(migrate=False)
    catalog.upgrade("0002")
    catalog.upsert_query("p", "q", "SELECT * FROM S", None, 2.0, "h", "running")
    catalog.upgrade("0003")
    assert tables(catalog) == TABLES - {"query_handovers", "stored_pipelines"}
    catalog.save_archive_state(ArchiveState("p", "S", "kafka", 1, {0: 5}, {0: 9}))
    catalog.downgrade("0002")
    assert tables(catalog) == TABLES - {"archive_progress", "query_handovers", "stored_pipelines"}
    assert catalog.query("p", "q").weight == 2.0
    catalog.upgrade()
    assert catalog.archive_state("p", "S") is None


def test_0006_adds_the_share_and_keeps_the_controls(make_catalog):
    catalog = make_catalog(migrate=False)
    catalog.upgrade("0005")
    with catalog.engine.begin() as c:
        c.exec_driver_sql(
            "INSERT INTO pipeline_controls (pipeline, scheduler, latency_bound_ms, updated_at)"
            " VALUES ('p', 'chain_bounded', 50, '2025-01-01')"
        )
    catalog.upgrade("0006")
    kept = catalog.pipeline_control("p")
    assert (kept.scheduler, kept.latency_bound_ms, kept.share) == ("chain_bounded", 50.0, None)
    catalog.set_pipeline_control("q", scheduler="chain_share", share=0.25)
    checks = {c["name"] for c in inspect(catalog.engine).get_check_constraints("pipeline_controls")}
    assert checks == {"ck_pipeline_controls_latency_bound_ms", "ck_pipeline_controls_share"}
    catalog.downgrade("0005")
    columns = {c["name"] for c in inspect(catalog.engine).get_columns("pipeline_controls")}
    assert "share" not in columns
    checks = {c["name"] for c in inspect(catalog.engine).get_check_constraints("pipeline_controls")}
    assert checks == {"ck_pipeline_controls_latency_bound_ms"}
    with catalog.engine.connect() as c:
        rows = c.exec_driver_sql("SELECT pipeline, scheduler FROM pipeline_controls").all()
    assert sorted(rows) == [("p", "chain_bounded"), ("q", "chain_share")]


@pytest.mark.parametrize("share", [-0.5, 1.5])
def test_the_share_check_holds_past_the_repository(catalog: Catalog, share):
    with (
        pytest.raises(IntegrityError, match="ck_pipeline_controls_share"),
        catalog.engine.begin() as c,
    ):
        c.exec_driver_sql(
            "INSERT INTO pipeline_controls (pipeline, scheduler, share, updated_at)"
            f" VALUES ('p', 'chain_share', {share}, '2025-01-01')"
        )


def test_the_bound_check_holds_past_the_repository(catalog: Catalog):
    with (
        pytest.raises(IntegrityError, match="ck_pipeline_controls_latency_bound_ms"),
        catalog.engine.begin() as c,
    ):
        c.exec_driver_sql(
            "INSERT INTO pipeline_controls (pipeline, scheduler, latency_bound_ms, updated_at)"
            " VALUES ('p', 'chain_bounded', 0, '2025-01-01')"
        )


def test_the_migrations_folder_is_found_from_the_package():
    assert MIGRATIONS == ROOT / "cq_service" / "catalog" / "migrations"
    assert (MIGRATIONS / "versions").is_dir()


def test_the_alembic_command_line_works_with_the_ini(tmp_path: Path):
    url = f"sqlite:///{tmp_path / 'c.db'}"
    alembic = Path(sys.executable).with_name("alembic")
    done = subprocess.run(
        [
            str(alembic),
            "-c",
            str(MIGRATIONS / "alembic.ini"),
            "-x",
            f"url={url}",
            "upgrade",
            "head",
        ],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    with Catalog(url) as catalog:
        assert catalog.is_current()


def test_urls():
    assert default_url({}) == "sqlite:///.cq/catalog.db"
    assert default_url({"CQ_CATALOG": "postgresql://h/db"}) == "postgresql://h/db"
    assert normalize_url("data/c.db").database == "data/c.db"
    assert normalize_url("postgresql://u@h/db").drivername == "postgresql+psycopg"
    with pytest.raises(CatalogError, match="unsupported catalog database 'mysql'"):
        normalize_url("mysql://u@h/db")
