"""``cq archive PIPELINE``: copy the pipeline's streams to Parquet (docs/archive.md); mounted by
cq_service.cli.

Prints one line per stream (rows, files, the offsets read, dead letters, the completeness
boundary). Exit status: 0 on success (also when nothing was new), 2 on invalid input (the
pipeline file, an unknown stream), 1 on failure (a source, the catalog, Spark or Maven).
"""

from __future__ import annotations

import traceback
from pathlib import Path
from typing import TYPE_CHECKING

import typer

from cq_service.errors import CQError

if TYPE_CHECKING:  # imported where used: `cq` mounts this command, and the archive is slow
    from cq_service.batch.archive import StreamResult

__all__ = ["archive", "describe"]


def archive(
    pipeline: Path = typer.Argument(..., help="pipeline file"),
    to: Path | None = typer.Option(
        None, "--to", help="the archive's folder (default: the file's archive.path, else archive/ beside it)"
    ),
    catalog_url: str | None = typer.Option(
        None, "--catalog", help="catalog URL (default: $CQ_CATALOG, else sqlite:///.cq/catalog.db)"
    ),
    stream: list[str] | None = typer.Option(
        None, "--stream", help="archive only this stream (repeatable; default: every stream)"
    ),
    master: str = typer.Option("local[2]", help="Spark master (local[N] or a cluster URL)"),
) -> None:
    """Copy each stream's source (Kafka topics, files) into Parquet under the archive folder:
    only what is new since the last run; nothing twice."""
    from cq_service.batch.archive import ArchiveError, archive_pipeline
    from cq_service.batch.spark import SparkSetupError, session
    from cq_service.catalog.cli import _open
    from cq_service.catalog.exceptions import CatalogError
    from cq_service.spec import load_pipeline

    try:
        spec = load_pipeline(pipeline)
    except CQError as e:
        for line in e.lines():
            typer.echo(line)
        raise typer.Exit(2) from None
    unknown = [s for s in stream or [] if s not in spec.streams]
    if unknown:
        typer.echo(f"error: {pipeline}: no stream named {', '.join(unknown)}", err=True)
        raise typer.Exit(2)
    try:
        catalog = _open(catalog_url)
    except CatalogError as e:
        typer.echo(f"error: {e.render()}", err=True)
        raise typer.Exit(1) from None
    try:
        spark = None
        if any(spec.streams[s].source.type in ("kafka", "file") for s in stream or spec.streams):
            spark = session(master=master, app_name=f"cq-archive-{spec.name}")
        result = archive_pipeline(
            spec,
            catalog,
            root=to,
            spark=spark,
            streams=stream or None,
            on_stream=lambda r: typer.echo(describe(r)),
        )
    except (ArchiveError, CatalogError, SparkSetupError) as e:
        message = e.render() if isinstance(e, CQError) else str(e)
        typer.echo(f"error: {message}", err=True)
        raise typer.Exit(1) from None
    except Exception:  # the command's boundary: report, never hide
        typer.echo(f"internal error while archiving {pipeline}:\n{traceback.format_exc()}",
                   err=True)
        raise typer.Exit(1) from None
    finally:
        catalog.close()
    typer.echo(f"archive: {result.root}")


def describe(r: StreamResult) -> str:
    """One line about a stream's run, e.g. ``S: 120 rows in 3 files (run 2), offsets 0:40..100,
    1 dead letter, complete up to _ts 7200001``."""
    if r.skipped:
        return f"{r.stream}: skipped ({r.skipped})"
    if r.run is None:
        return f"{r.stream}: nothing new{_boundary(r.boundary)}"
    if r.source == "kafka":
        read = ", ".join(f"{p}:{a}..{b}" for p, (a, b) in sorted(r.offsets.items()))
        where = f"offsets {read}"
    else:
        first, last = r.offsets.get(0, (0, 0))
        where = ("rewritten, " if r.rewritten and (r.run or 0) > 1 else "") + f"records {first}..{last}"
    dead = f", {r.dead_letters} dead letter{'s' if r.dead_letters != 1 else ''}"
    return (
        f"{r.stream}: {r.rows} rows in {r.files} file{'s' if r.files != 1 else ''} "
        f"(run {r.run}), {where}{dead}{_boundary(r.boundary)}"
    )


def _boundary(boundary: int | None) -> str:
    return "" if boundary is None else f", complete up to _ts {boundary}"
