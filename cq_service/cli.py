"""The `cq` command (DESIGN §6): validate, explain, run, calibrate here; the other commands are
mounted from where they live: nexmark and bench (cq_service.bench.cli; nexmark produce and
topics from cq_service.cli_nexmark), catalog and relation (cq_service.catalog.cli,
docs/catalog.md), serve and deploy (cq_service.service.cli), ui (cq_service.cli_ui), archive,
backfill and spark-submit (cq_service.batch).

Exit status: 0 on success, 2 on invalid input, 1 on failure.
"""

from __future__ import annotations

import sys
import traceback
from pathlib import Path
from typing import Any

import typer

from cq_service.bench.cli import bench_app, nexmark_app
from cq_service.bench.linear_road.cli import linear_road_app
from cq_service.catalog.cli import catalog_app, relation_app
from cq_service.errors import AdjustmentError, CQError

__all__ = ["app", "main"]

app = typer.Typer(
    add_completion=False,
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    help="cq-service: continuous queries in CQL.",
)


@app.command()
def validate(files: list[Path] = typer.Argument(..., help="pipeline files to check")) -> None:
    """Check pipeline files; print FILE:LINE:COL: message for each problem."""
    from cq_service.compiler import load_and_compile

    bad = False
    for f in files:
        try:
            compiled = load_and_compile(f)
        except CQError as e:
            bad = True
            for line in e.lines():
                typer.echo(line, err=False)
            continue
        if compiled.spec.resources.runner == "spark":  # which queries Spark runs, and why not
            from cq_service.batch.streaming_cli import validate_runner

            lines, ok = validate_runner(compiled.spec)
            for line in lines:
                typer.echo(line)
            if not ok:
                bad = True
                continue
        typer.echo(f"{f}: ok")
    raise typer.Exit(2 if bad else 0)


@app.command()
def explain(
    file: Path = typer.Argument(..., help="pipeline file"),
    policy: str | None = typer.Option(
        None, help="scheduling policy (default: the pipeline's resources.scheduler)"
    ),
    costs: bool = typer.Option(
        False,
        "--costs",
        help="run the pipeline over its sources (results discarded) and show each operator's "
        "estimated memory and CPU next to the measured",
    ),
    live: bool = typer.Option(
        False,
        "--live",
        help="with the plan, every entity's statistics now: current windows, filter orders, "
        "rows, selectivity, memory, lag (SysStream's columns). From the worker at --server "
        "running this pipeline; without --server, after running the file (results discarded)",
    ),
    server: str | None = typer.Option(
        None, "--server", help="the worker's API, e.g. http://127.0.0.1:8080 (with --live)"
    ),
    every: float | None = typer.Option(
        None, "--every", help="with --live --server: print again every this many seconds"
    ),
) -> None:
    """Print the physical plan: operators, windows, queues, synopses, sharing."""
    from cq_service.compiler import load_and_compile, run_plan
    from cq_service.plan.explain import explain as render

    if (server is not None or every is not None) and not live:
        typer.echo("error: --server and --every go with --live", err=True)
        raise typer.Exit(2)
    if every is not None and (server is None or every <= 0):
        typer.echo("error: --every wants --server and a positive number of seconds", err=True)
        raise typer.Exit(2)
    try:
        compiled = load_and_compile(file)
        if live and server is not None:
            _explain_live_remote(server, compiled.spec.name, every)
            return
        resources = compiled.spec.resources
        plan = run_plan(compiled)
        typer.echo(render(plan, policy or resources.scheduler, resources.filter_order))
        from cq_service.engine.constraint_plan import explain_constraints

        for line in explain_constraints(compiled.spec, plan.nodes):
            typer.echo(line)
        if live:
            typer.echo("")
            typer.echo(_explain_live_local(compiled))
        if costs:
            from cq_service.explain_costs import measure_costs, render_costs

            typer.echo("")
            typer.echo(render_costs(measure_costs(compiled)))
    except CQError as e:
        for line in e.lines():
            typer.echo(line)
        raise typer.Exit(2) from None


def _explain_live_local(compiled: Any) -> str:
    """Run the pipeline over its sources, results discarded, and tabulate its entities."""
    from dataclasses import replace

    from cq_service.engine.statistics import EntityStatistics
    from cq_service.runner import run_pipeline
    from cq_service.spec.model import SinkSpec
    from cq_service.stats import render_live, render_streamon

    plan = compiled.plan
    blackhole = SinkSpec(type="blackhole")  # results and dead letters counted, not written
    quiet = replace(plan, sinks=[replace(s, sink=blackhole) for s in plan.sinks])
    spec = replace(compiled.spec, dead_letter=blackhole)
    report = run_pipeline(replace(compiled, plan=quiet, spec=spec))
    rows = EntityStatistics(report.executor, compiled.spec.name).now()
    title = f"live, at the end of input ({report.seconds:.3f} s; rates over the whole run; F1.."
    table = render_live(rows, title + " as written):")
    return table + "\n" + render_streamon(report.executor.streamon.statuses())


def _explain_live_remote(server: str, name: str, every: float | None) -> None:
    """Print the worker's live explain of pipeline `name`, once or every `every` seconds."""
    import time
    import urllib.error
    import urllib.parse
    import urllib.request

    url = f"{server.rstrip('/')}/pipelines/{urllib.parse.quote(name)}/explain?live=true"
    while True:
        try:
            with urllib.request.urlopen(url, timeout=30) as response:
                text = response.read().decode()
        except urllib.error.HTTPError as e:
            typer.echo(f"the worker at {server} answered {e.code} for {name}: "
                       f"{e.read().decode(errors='replace')[:300]}", err=True)
            raise typer.Exit(2 if e.code == 404 else 1) from None
        except OSError as e:
            typer.echo(f"cannot reach the worker at {server}: {e}", err=True)
            raise typer.Exit(1) from None
        typer.echo(text)
        if every is None:
            return
        time.sleep(every)
        typer.echo("")


@app.command()
def run(
    file: Path = typer.Argument(..., help="pipeline file"),
    stats: bool = typer.Option(
        False, "--stats", help="print per-operator counts, queue memory and result latency"
    ),
    policy: str | None = typer.Option(
        None, help="scheduling policy (default: the pipeline's resources.scheduler, else chain)"
    ),
    latency_bound: float | None = typer.Option(
        None, help="chain_bounded's bound on waiting time, in milliseconds"
    ),
    share: float | None = typer.Option(
        None, help="chain_share's share of FIFO steps, from 0 (chain) to 1 (fifo)"
    ),
    batch_rows: int = typer.Option(65_536, help="rows per source read and per operator step"),
    filter_order: str | None = typer.Option(
        None,
        "--filter-order",
        help="how selections order their conjuncts: a-greedy, sweep, independent, local-swaps "
        "or static (default: the pipeline's resources.filter_order)",
    ),
    adjustments: Path | None = typer.Option(
        None,
        help="a window-adjustment log (JSON lines, as the worker records it) to replay, "
        "so the run gives the results the deployment gave",
    ),
    master: str | None = typer.Option(
        None, help="Spark master of a runner-spark pipeline (default local[2]; e.g. "
        "spark://HOST:7077)",
    ),
    join: str | None = typer.Option(
        None,
        "--join",
        help="how joins of three or more relations run: auto, mjoin, mjoin-caching or tree "
        "(default: the "
        "pipeline's resources.join; docs/joins.md)",
    ),
    quiet: bool = typer.Option(
        False,
        "--quiet",
        "-q",
        help="no progress display (it is shown only when stderr is a terminal)",
    ),
) -> None:
    """Run a pipeline until every source is exhausted, then flush the sinks. On a terminal,
    a progress display on stderr follows each source and query."""
    from cq_service.compiler import load_and_compile
    from cq_service.engine.adjust import read_log
    from cq_service.engine.scheduler import policy as make_policy
    from cq_service.runner import run_pipeline
    from cq_service.spec.model import FILTER_ORDERS

    try:
        compiled = load_and_compile(file)
    except CQError as e:
        for line in e.lines():
            typer.echo(line)
        raise typer.Exit(2) from None
    try:
        bound = None if latency_bound is None else latency_bound / 1000
        if policy is not None:
            # an unknown name, a missing bound or share, one out of range: exit 2 below
            make_policy(policy, bound, share)
        elif bound is not None or share is not None:
            raise ValueError("--latency-bound and --share go with --policy")
        log = read_log(adjustments) if adjustments is not None else []
        if filter_order is not None and filter_order not in FILTER_ORDERS:
            raise ValueError(
                f"unknown --filter-order {filter_order!r} "
                f"(expected one of: {', '.join(FILTER_ORDERS)})"
            )
        if join is not None:
            compiled.spec = _with_join(compiled.spec, join)
    except (OSError, ValueError, AdjustmentError) as e:
        typer.echo(f"error: {e}", err=True)
        raise typer.Exit(2) from None
    if compiled.spec.resources.runner == "spark":
        _run_on_spark(file, compiled.spec, master)
        return
    if master is not None:
        typer.echo("error: --master is for pipelines with resources: {runner: spark}; this one "
                   "runs on the embedded engine", err=True)
        raise typer.Exit(2)
    progress = None
    if not quiet and sys.stderr.isatty():
        from cq_service.progress import RunProgress

        progress = RunProgress()
    try:
        try:
            report = run_pipeline(
                compiled,
                policy=policy,
                latency_bound=bound,
                share=share,
                batch_rows=batch_rows,
                adjustments=log,
                filter_order=filter_order,
                after_step=progress.update if progress is not None else None,
            )
            if progress is not None:
                progress.update(report.executor, force=True)  # the final counts
        finally:
            if progress is not None:  # stopped before any message below
                progress.close()
    except AdjustmentError as e:
        typer.echo(f"error: {e.render()}", err=True)
        raise typer.Exit(2) from None
    except CQError as e:
        typer.echo(f"error: {e.render()}", err=True)
        raise typer.Exit(1) from None
    except Exception:  # the command's boundary: report, never hide
        typer.echo(f"internal error while running {file}:\n{traceback.format_exc()}", err=True)
        raise typer.Exit(1) from None
    for name, counts in report.sources.items():
        if counts["late"] or counts["malformed"]:
            typer.echo(
                f"{name}: {counts['late']} late, {counts['malformed']} malformed record(s)",
                err=True,
            )
    if report.dead_letter_count:
        typer.echo(
            f"{report.dead_letter_count} record(s) written to the dead-letter sink"
            + (f" {report.dead_letter_path}" if report.dead_letter_path else ""),
            err=True,
        )
    if stats:
        from cq_service.stats import render_stats

        typer.echo(render_stats(report), err=True)


@app.command()
def calibrate(
    quick: bool = typer.Option(False, "--quick", help="two short pipelines, one run each"),
    out: Path | None = typer.Option(
        None, help="where to write the constants (default: $CQ_COSTS, else ~/.config/cq-service/costs.json)"
    ),
    json_output: bool = typer.Option(False, "--json", help="print JSON: the constants and each fit"),
    seed: int = typer.Option(0, help="seed of the Poisson streams"),
    batch_rows: int | None = typer.Option(
        None, help="rows per source read in every calibration run (default: each run's own, 16 to 1 024)"
    ),
) -> None:
    """Measure the engine's CPU per source read and per row of each kind of operator on this
    machine, for the cost
    model (docs/resources.md): runs calibration pipelines over Poisson streams and fits the
    constants by non-negative least squares."""
    import json

    from cq_service.adaptive import calibrate as calibration
    from cq_service.adaptive.cpu import user_path

    if batch_rows is not None and batch_rows < 1:
        typer.echo("error: --batch-rows must be positive", err=True)
        raise typer.Exit(2)
    try:
        result = calibration.calibrate(
            quick=quick,
            seed=seed,
            batch_rows=batch_rows,
            progress=lambda m: typer.echo(m, err=True),
        )
    except CQError as e:
        typer.echo(f"error: {e.render()}", err=True)
        raise typer.Exit(1) from None
    path = out or user_path()
    try:
        result.save(path)
    except OSError as e:
        typer.echo(f"error: cannot write {path}: {e}", err=True)
        raise typer.Exit(1) from None
    if json_output:
        typer.echo(json.dumps({"path": str(path), **result.to_json()}))
    else:
        typer.echo(result.text())
        typer.echo(f"written to {path}")


def _nexmark_commands() -> None:
    from cq_service.cli_nexmark import produce, topics

    nexmark_app.command("produce")(produce)
    nexmark_app.command("topics")(topics)


_nexmark_commands()
app.add_typer(nexmark_app, name="nexmark")
app.add_typer(bench_app, name="bench")
app.add_typer(linear_road_app, name="linear-road")
app.add_typer(catalog_app, name="catalog")
app.add_typer(relation_app, name="relation")


def _with_join(spec, join: str):
    """`spec` with `resources.join` set to `join` (ValueError for an unknown one)."""
    import dataclasses

    from cq_service.spec.model import JOINS

    if join not in JOINS:
        raise ValueError(f"unknown --join {join!r} (expected one of: {', '.join(JOINS)})")
    return dataclasses.replace(spec, resources=dataclasses.replace(spec.resources, join=join))


def _run_on_spark(file: Path, spec, master: str | None = None) -> None:
    """`cq run` of a runner-spark pipeline (docs/spark-runner.md)."""
    from cq_service.batch.streaming import check
    from cq_service.batch.streaming_cli import print_report, run_on_spark

    problems = check(spec)
    if problems:
        for p in problems:
            typer.echo(p.render())
        raise typer.Exit(2)
    try:
        report = run_on_spark(spec, master)
    except CQError as e:
        typer.echo(f"error: {e.render()}", err=True)
        raise typer.Exit(1) from None
    except Exception:  # the command's boundary: report, never hide
        typer.echo(f"internal error while running {file}:\n{traceback.format_exc()}", err=True)
        raise typer.Exit(1) from None
    print_report(report)


def _service_commands() -> None:
    from cq_service.service.cli import deploy, serve

    app.command("serve")(serve)
    app.command("deploy")(deploy)


_service_commands()


def _ui_command() -> None:
    from cq_service.cli_ui import ui

    app.command("ui")(ui)


_ui_command()


def _archive_command() -> None:
    from cq_service.batch.cli import archive

    app.command("archive")(archive)


_archive_command()


def _backfill_command() -> None:
    from cq_service.batch.backfill_cli import backfill

    app.command("backfill")(backfill)


_backfill_command()


def _spark_submit_command() -> None:
    from cq_service.batch.streaming_cli import spark_submit

    app.command("spark-submit")(spark_submit)


_spark_submit_command()


def main() -> None:
    try:
        app()
    except KeyboardInterrupt:
        sys.exit(1)


if __name__ == "__main__":
    main()
