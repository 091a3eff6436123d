"""``cq catalog …`` (migrations) and ``cq relation …`` (stored relations), mounted by cq_service.cli.

Exit status: 0 on success, 2 on invalid input (a bad row, file or argument), 1 on failure (the
catalog cannot be reached or migrated). `--catalog` defaults to ``$CQ_CATALOG``, else the
embedded ``sqlite:///.cq/catalog.db``; an embedded SQLite catalog is created and migrated on
first use by ``cq relation``, any other catalog must be migrated with ``cq catalog upgrade``.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer

from cq_service.catalog.exceptions import CatalogError, CatalogInputError

if TYPE_CHECKING:  # imported where used: `cq` mounts these commands, and SQLAlchemy is slow
    from cq_service.catalog.loading import Change
    from cq_service.catalog.repository import Catalog

__all__ = ["catalog_app", "relation_app"]

catalog_app = typer.Typer(no_args_is_help=True, help="The SQL catalog: schema migrations.")
relation_app = typer.Typer(no_args_is_help=True, help="Stored relations in the catalog.")

CATALOG = typer.Option(
    None, "--catalog", help="catalog URL (default: $CQ_CATALOG, else sqlite:///.cq/catalog.db)"
)
PIPELINE = typer.Option(
    None, "--pipeline", help="rows for this pipeline only (default: shared by every pipeline)"
)


@contextmanager
def _failures() -> Iterator[None]:
    """Turn catalog errors into messages and exit codes (2: the input, 1: the catalog)."""
    try:
        yield
    except CatalogInputError as e:
        typer.echo(f"error: {e.render()}", err=True)
        raise typer.Exit(2) from None
    except CatalogError as e:
        typer.echo(f"error: {e.render()}", err=True)
        raise typer.Exit(1) from None


def _open(url: str | None, *, create: bool = True) -> Catalog:
    """The catalog at `url`, migrated; a SQLite catalog is migrated here if it is not yet."""
    from cq_service.catalog import database
    from cq_service.catalog.repository import Catalog

    catalog = Catalog(url, create=create)
    revision = catalog.revision()
    if revision == database.head_revision():
        return catalog
    if catalog.engine.dialect.name == "sqlite":
        catalog.upgrade()
        return catalog
    catalog.close()
    shown = database.shown_url(catalog.engine.url)
    raise CatalogError(
        f"the catalog at {shown} is at revision {revision or 'none'}, not "
        f"{database.head_revision()}; run: cq catalog upgrade --catalog {shown}"
    )


# -- cq catalog ---------------------------------------------------------------------------------


@catalog_app.command("upgrade")
def upgrade(
    revision: str = typer.Argument("head", help="target revision (default: the newest)"),
    url: str | None = CATALOG,
) -> None:
    """Create or migrate the catalog's tables up to REVISION."""
    from cq_service.catalog.repository import Catalog

    with _failures():
        catalog = Catalog(url)
        try:
            catalog.upgrade(revision)
            typer.echo(f"{catalog!r}: at revision {catalog.revision()}")
        finally:
            catalog.close()


@catalog_app.command("downgrade")
def downgrade(
    revision: str = typer.Argument("-1", help="target revision: -1 one step (default), base none"),
    url: str | None = CATALOG,
) -> None:
    """Migrate the catalog down to REVISION (``base`` drops every catalog table)."""
    from cq_service.catalog.repository import Catalog

    with _failures():
        catalog = Catalog(url, create=False)
        try:
            catalog.downgrade(revision)
            typer.echo(f"{catalog!r}: at revision {catalog.revision() or 'base (no tables)'}")
        finally:
            catalog.close()


@catalog_app.command("status")
def status(url: str | None = CATALOG) -> None:
    """Print the catalog's revision and the newest one."""
    from cq_service.catalog import database
    from cq_service.catalog.repository import Catalog

    with _failures():
        catalog = Catalog(url, create=False)
        try:
            current, head = catalog.revision(), database.head_revision()
        finally:
            catalog.close()
    typer.echo(f"{catalog!r}: at revision {current or 'none'} (newest: {head})")
    if current != head:
        raise typer.Exit(1)


# -- cq relation --------------------------------------------------------------------------------


def _schema(catalog: Catalog, relation: str, pipeline: str | None) -> Mapping[str, str] | None:
    """The relation's schema as deployed pipelines declare it (None if none does)."""
    schemas = {
        json.dumps(list(d.schema.items())): d
        for d in catalog.relation_declarations(relation, pipeline)
    }
    if len(schemas) > 1:
        owners = ", ".join(sorted(d.pipeline for d in schemas.values()))
        raise CatalogInputError(
            f"relation {relation!r} is declared with different schemas by pipelines {owners}; "
            "choose one with --pipeline"
        )
    return next(iter(schemas.values())).schema if schemas else None


def _store(
    url: str | None, relation: str, pipeline: str | None, records: list, **check: Any
) -> int:
    from cq_service.catalog.loading import check_records

    catalog = _open(url)
    try:
        changes: list[Change] = check_records(
            records, _schema(catalog, relation, pipeline), **check
        )
        return catalog.insert_relation_rows(relation, changes, pipeline)
    finally:
        catalog.close()


@relation_app.command("load")
def load(
    name: str = typer.Argument(..., help="the catalog relation"),
    file: Path = typer.Argument(..., help="csv (with a header) or jsonl file of changes"),
    url: str | None = CATALOG,
    pipeline: str | None = PIPELINE,
    fmt: str | None = typer.Option(None, "--format", help="csv or jsonl (default: by extension)"),
    ts_field: str = typer.Option("ts", help="the field holding each change's timestamp"),
    time_unit: str = typer.Option("ms", help="unit of ISO timestamps converted to integers"),
) -> None:
    """Append a file of changes (a ts field, optional _op + or -, the columns) to a relation.

    Values are checked against the relation's schema when a deployed pipeline declares it;
    nothing is stored if any record is wrong."""
    from cq_service.catalog.loading import read_records

    with _failures():
        records = read_records(file, fmt)
        count = _store(
            url, name, pipeline, records, where=str(file), ts_field=ts_field, time_unit=time_unit
        )
    typer.echo(f"{name}: stored {count} change(s) from {file}")


def _one_change(
    name: str, ts: int, row: str, op: str, url: str | None, pipeline: str | None
) -> None:
    with _failures():
        try:
            values = json.loads(row)
        except ValueError as e:
            raise CatalogInputError(f"--row is not JSON: {e}") from None
        if not isinstance(values, dict):
            raise CatalogInputError('--row must be a JSON object, e.g. \'{"domain": "a.com"}\'')
        record = {**values, "\0ts": ts, "_op": op}
        _store(url, name, pipeline, [(1, record)], where="--row", ts_field="\0ts")
    verb = "inserted into" if op == "+" else "deleted from"
    typer.echo(f"{name}: {verb} at {ts}: {json.dumps(values)}")


@relation_app.command("insert")
def insert(
    name: str = typer.Argument(..., help="the catalog relation"),
    ts: int = typer.Option(..., "--ts", help="the time of the change"),
    row: str = typer.Option(..., "--row", help="the row as a JSON object"),
    url: str | None = CATALOG,
    pipeline: str | None = PIPELINE,
) -> None:
    """Insert one row into a relation at time TS."""
    _one_change(name, ts, row, "+", url, pipeline)


@relation_app.command("delete")
def delete(
    name: str = typer.Argument(..., help="the catalog relation"),
    ts: int = typer.Option(..., "--ts", help="the time of the change"),
    row: str = typer.Option(..., "--row", help="the row as a JSON object"),
    url: str | None = CATALOG,
    pipeline: str | None = PIPELINE,
) -> None:
    """Delete one row from a relation at time TS."""
    _one_change(name, ts, row, "-", url, pipeline)


@relation_app.command("show")
def show(
    name: str = typer.Argument(..., help="the catalog relation"),
    url: str | None = CATALOG,
    pipeline: str | None = typer.Option(
        None, "--pipeline", help="what this pipeline sees (default: every row)"
    ),
) -> None:
    """Print a relation's changes in time order, one JSON object a line: _id, _ts, _op, row."""
    with _failures():
        catalog = _open(url, create=False)
        try:
            schema = _schema(catalog, name, pipeline)
            after = None
            while rows := catalog.relation_rows_by_time(name, after=after, pipeline=pipeline):
                for r in rows:
                    typer.echo(
                        json.dumps(
                            {"_id": r.id, "_ts": r.ts, "_op": r.op, **_ordered(r.row, schema)}
                        )
                    )
                after = (rows[-1].ts, rows[-1].id)
        finally:
            catalog.close()


def _ordered(row: Mapping[str, Any], schema: Mapping[str, str] | None) -> dict[str, Any]:
    """The row's columns in schema order (then any others), whatever order the database kept."""
    first = [c for c in schema or () if c in row]
    return {c: row[c] for c in [*first, *sorted(c for c in row if c not in first)]}
