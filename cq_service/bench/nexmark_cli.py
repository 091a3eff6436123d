"""``cq nexmark generate`` (the NEXMark input) and ``cq bench nexmark`` (q0–q8 on cq, Spark
and Flink over it)."""

from __future__ import annotations

import sys
from pathlib import Path

import typer

from cq_service.bench.app import bench_app, is_quiet, machine

__all__ = ["nexmark_app"]

nexmark_app = typer.Typer(no_args_is_help=True, help="The NEXMark auction benchmark.")


@nexmark_app.command("generate")
def nexmark_generate(
    out: Path = typer.Option(Path("nexmark-data"), help="folder for person, auction, bid files"),
    events: int = typer.Option(1_000_000, help="number of events (1 : 3 : 46)"),
    seed: int = typer.Option(0, help="random seed: the same seed gives the same events"),
    rate: float = typer.Option(10_000.0, help="events per second of event time"),
    fmt: str = typer.Option("parquet", "--format", help="parquet, csv or jsonl"),
) -> None:
    """Generate NEXMark persons, auctions and bids (deterministic for a seed)."""
    import time

    from cq_service.io.nexmark import write

    start = time.perf_counter()
    try:
        paths = write(out, events, fmt=fmt, seed=seed, rate=rate)
    except ValueError as e:
        typer.echo(f"error: {e}", err=True)
        raise typer.Exit(2) from None
    secs = time.perf_counter() - start
    typer.echo(f"{events:,} events in {secs:.2f} s ({events / max(secs, 1e-9):,.0f}/s):")
    for kind, path in paths.items():
        typer.echo(f"  {kind}: {path}")


@bench_app.command("nexmark")
def bench_nexmark(
    quick: bool = typer.Option(False, help="a small input, one repeat: the CI check"),
    events: int = typer.Option(5_000_000, help="events to generate (ignored with --quick)"),
    repeat: int = typer.Option(3, help="runs per engine and query; the median counts"),
    queries: str = typer.Option(",".join(f"q{i}" for i in range(9)), help="comma-separated"),
    engines: str = typer.Option("cq,spark,flink", help="comma-separated: cq, spark, flink"),
    work: Path = typer.Option(Path("benchmarks/data/nexmark"), help="generated data, scratch"),
    out: Path = typer.Option(Path("benchmarks/results"), help="table, JSON and charts"),
    latency_seconds: float = typer.Option(5.0, help="length of the real-time replay; 0: skip"),
    latency_only: bool = typer.Option(
        False, help="re-measure only our latency for the run saved in --out (same paces)"
    ),
    machine_note: str = typer.Option(
        "", help="said after the machine in the results, e.g. 'shared with other work'"
    ),
) -> None:
    """NEXMark q0-q8 on cq, Spark Structured Streaming and PyFlink over the same generated
    input: throughput, latency, memory, and a check that the results agree."""
    import datetime

    from rich.console import Console
    from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

    from cq_service.bench.nexmark import measure_latency, run_benchmark, save
    from cq_service.bench.nexmark_model import ENGINES, QUERIES, disagreements, load

    if latency_only:
        rows, meta = load(out)
        work.mkdir(parents=True, exist_ok=True)
        for row in rows:
            typer.echo(f"{row.query}: latency on cq")
            measure_latency(row, meta["events"], latency_seconds, work)
        meta["latency_note"] = f"latency re-measured on {datetime.date.today().isoformat()}"
        save(rows, out, meta)
        typer.echo((out / "nexmark.md").read_text())
        return
    qs = tuple(q.strip() for q in queries.split(",") if q.strip())
    es = tuple(e.strip() for e in engines.split(",") if e.strip())
    bad = [q for q in qs if q not in QUERIES] + [e for e in es if e not in ENGINES]
    if bad or "cq" not in es:
        typer.echo(f"error: unknown query or engine {bad}, or cq missing", err=True)
        raise typer.Exit(2)
    if quick:
        events, repeat, latency_seconds = 200_000, 1, min(latency_seconds, 2.0)
    meta = {
        "events": events,
        "repeat": repeat,
        "seed_note": "seed 0, 10,000 events/s of event time",
        "machine": machine(machine_note),
        "date": datetime.date.today().isoformat(),
        "quick": quick,
    }
    folder = out / "quick" if quick else out
    steps = 1 + len(qs) * (len(es) * repeat + 1 + (1 if latency_seconds > 0 else 0))
    with Progress(
        TextColumn("{task.description}"), BarColumn(), TextColumn("{task.completed}/{task.total}"),
        TimeElapsedColumn(), transient=False, disable=is_quiet() or not sys.stderr.isatty(),
        console=Console(stderr=True),
    ) as bar:
        task = bar.add_task("NEXMark", total=steps)
        first = [True]

        def progress(description: str) -> None:
            if not first[0]:
                bar.advance(task)
            first[0] = False
            bar.update(task, description=description)

        try:
            rows = run_benchmark(
                events=events, queries=qs, engines=es, repeat=repeat,
                latency_seconds=latency_seconds, work=work, progress=progress,
                # The results so far, saved after every query: a long run stopped early keeps them.
                on_row=lambda done: save(done, folder, meta),
            )
        except RuntimeError as e:
            typer.echo(f"error: {e}", err=True)
            raise typer.Exit(1) from None
        bar.update(task, completed=steps, description="done")
    save(rows, folder, meta)
    typer.echo((folder / "nexmark.md").read_text())
    problems = disagreements(rows)
    if problems:
        typer.echo("results disagree:\n" + "\n".join(problems), err=True)
        raise typer.Exit(1)
