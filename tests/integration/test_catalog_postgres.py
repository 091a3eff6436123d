"""The catalog on PostgreSQL: the same migrations and round trips as on SQLite (tests/unit/catalog)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from sqlalchemy import inspect
from sqlalchemy.exc import IntegrityError

from cq_service.catalog import Catalog, CatalogError
from cq_service.catalog.models import Base
from cq_service.io import open_source
from cq_service.spec.model import FieldSpec, SourceSpec, StreamSpec
from cq_service.types import DataType
from tests.unit.catalog.checks import check_migrations_up_down_up, check_round_trip

pytestmark = pytest.mark.integration


@pytest.fixture
def pg_catalog(fresh_database_url: str) -> Iterator[Catalog]:
    catalog = Catalog(fresh_database_url)
    yield catalog
    catalog.close()


def test_up_down_up(pg_catalog: Catalog):
    assert pg_catalog.engine.dialect.name == "postgresql"
    check_migrations_up_down_up(pg_catalog)


def test_round_trip(pg_catalog: Catalog):
    pg_catalog.upgrade()
    check_round_trip(pg_catalog)


def test_the_models_match_the_migrations(pg_catalog: Catalog):
    pg_catalog.upgrade()
    with pg_catalog.engine.connect() as connection:
        context = MigrationContext.configure(connection, opts={"compare_type": True})
        assert compare_metadata(context, Base.metadata) == []


def test_0006_adds_the_share_with_its_check(pg_catalog: Catalog):
    pg_catalog.upgrade("0005")
    pg_catalog.upgrade("0006")
    checks = inspect(pg_catalog.engine).get_check_constraints("pipeline_controls")
    assert {c["name"] for c in checks} == {
        "ck_pipeline_controls_latency_bound_ms",
        "ck_pipeline_controls_share",
    }
    assert pg_catalog.set_pipeline_control("p", scheduler="chain_share", share=1).share == 1.0
    with (
        pytest.raises(IntegrityError, match="ck_pipeline_controls_share"),
        pg_catalog.engine.begin() as c,
    ):
        c.exec_driver_sql("UPDATE pipeline_controls SET share = 1.5 WHERE pipeline = 'p'")
    pg_catalog.downgrade("0005")
    columns = {c["name"] for c in inspect(pg_catalog.engine).get_columns("pipeline_controls")}
    assert "share" not in columns


def test_an_unmigrated_database_says_how_to_migrate(pg_catalog: Catalog):
    with pytest.raises(CatalogError, match=r"not migrated.*cq catalog upgrade"):
        pg_catalog.deployments()


def test_the_relation_source_reads_postgres(pg_catalog: Catalog, fresh_database_url: str):
    pg_catalog.upgrade()
    pg_catalog.insert_relation_rows(
        "Domains",
        [
            (3, "+", {"domain": "b", "rank": 2}),
            (1, "+", {"domain": "a", "rank": "x"}),
            (1, "-", {"domain": "c", "rank": 1}),
        ],
    )
    fields = (FieldSpec("domain", DataType.STRING), FieldSpec("rank", DataType.INT))
    options = {"name": "Domains", "url": fresh_database_url, "pipeline": "web"}
    spec = StreamSpec("Domains", fields, SourceSpec("catalog", options=options), None, True)
    with open_source(spec, "ms") as reader:
        chunks = list(reader)
    assert [t for c in chunks for t in c.ts.tolist()] == [1, 3]
    assert [o for c in chunks for o in c.ops.tolist()] == [-1, 1]
    assert [d.reason for c in chunks for d in c.dead] == ["column 'rank': 'x' is not an int"]
