"""``cq backfill PIPELINE --query NAME [--from T1] [--to T2] (--out DIR | --sink) [--handover]``;
mounted by cq_service.cli (docs/backfill.md).

Prints the path the query takes and why, the bounds, then what was written. `--handover`
records T2 in the catalog so the worker continues the query from there. Exit status: 0 on
success, 2 on invalid input (the pipeline file, an unknown query, bad bounds), 1 on failure.
"""

from __future__ import annotations

import traceback
from pathlib import Path

import typer

from cq_service.errors import CQError

__all__ = ["backfill"]


def backfill(
    pipeline: Path = typer.Argument(..., help="pipeline file"),
    query: str = typer.Option(..., "--query", help="the query to backfill"),
    start: int | None = typer.Option(
        None, "--from", help="T1: first instant of results (default: the archive's start)"
    ),
    end: int | None = typer.Option(
        None, "--to", help="T2: last instant (default: the archive's completeness boundary)"
    ),
    out: Path | None = typer.Option(None, "--out", help="write Parquet into this folder"),
    sink: bool = typer.Option(False, "--sink", help="write to the query's own sink"),
    handover: bool = typer.Option(
        False, "--handover", help="record T2 so the worker takes the query over after it"
    ),
    archive: Path | None = typer.Option(None, "--archive", help="the archive's folder"),
    catalog_url: str | None = typer.Option(
        None, "--catalog", help="catalog URL (default: $CQ_CATALOG, else sqlite:///.cq/catalog.db)"
    ),
    partitions: int | None = typer.Option(None, help="Spark partitions on the key path"),
    master: str | None = typer.Option(None, help="Spark master (default local[cores])"),
    explain: bool = typer.Option(False, "--explain", help="only print the plan"),
    progress: bool = typer.Option(True, help="progress bars"),
) -> None:
    """Compute a query's results over the archived past on Spark, exactly as `cq run` would."""
    from cq_service.batch.backfill import (
        BackfillError,
        plan_backfill,
        run_backfill,
        spark_session,
    )
    from cq_service.catalog.cli import _open
    from cq_service.spec import load_pipeline

    if not explain and (out is None) == (not sink):
        typer.echo("error: give exactly one of --out DIR and --sink", err=True)
        raise typer.Exit(2)
    try:
        spec = load_pipeline(pipeline)
    except CQError as e:
        for line in e.lines():
            typer.echo(line)
        raise typer.Exit(2) from None
    catalog = None
    try:
        if end is None or handover:
            catalog = _open(catalog_url)
        plan = plan_backfill(
            spec, query, start=start, end=end, root=archive,
            boundary=None if catalog is None else (
                lambda s: catalog.archive_boundary(spec.name, s)),
        )
        typer.echo(plan.describe())
        if explain:
            return
        if (sink or handover) and spec.queries[query].sink is None:
            raise BackfillError(f"{query} is a view: it has no sink to write or hand over "
                                "(use --out DIR)")
        report = run_backfill(plan, spark_session(partitions, master), out=out, sink=sink,
                              partitions=partitions, progress=progress)
        read = sum(n for n in report.inputs.values() if n > 0)
        typer.echo(f"{report.elements:,} result elements from {read:,} archived elements in "
                   f"{report.seconds:.1f} s ({report.partitions} partition(s))")
        if handover:
            assert catalog is not None
            catalog.set_handover(spec.name, query, plan.end)
            typer.echo(f"handover recorded: the worker emits {query}'s results after {plan.end}")
    except CQError as e:
        typer.echo(f"error: {e.render()}", err=True)
        raise typer.Exit(2 if isinstance(e, BackfillError) else 1) from None
    except Exception:  # the command's boundary: report, never hide
        typer.echo(f"internal error while backfilling {query}:\n{traceback.format_exc()}",
                   err=True)
        raise typer.Exit(1) from None
    finally:
        if catalog is not None:
            catalog.close()
