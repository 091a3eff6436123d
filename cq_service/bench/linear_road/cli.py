"""``cq linear-road …``: generate the Linear Road input and compute its expected output
(docs/linear-road.md), mounted by cq_service.cli."""

from __future__ import annotations

import json
import time
from pathlib import Path

import typer

__all__ = ["linear_road_app"]

linear_road_app = typer.Typer(no_args_is_help=True, help="The Linear Road benchmark.")


@linear_road_app.command("generate")
def generate_command(
    scale: int = typer.Option(1, help="L: the number of expressways"),
    duration: int = typer.Option(10_800, help="seconds of simulated traffic (the benchmark: 3 h)"),
    seed: int = typer.Option(0, help="random seed: the same seed gives the same input"),
    out: Path = typer.Option(Path("linear-road-data"), help="folder for input.parquet/.jsonl"),
    fmt: str = typer.Option("parquet,jsonl", "--format", help="parquet and/or jsonl"),
    entry_rate: float = typer.Option(10.0, help="cars entering per second per expressway (peak)"),
) -> None:
    """Generate position reports and balance queries (deterministic for a seed)."""
    from cq_service.bench.linear_road.generator import GeneratorConfig, write

    start = time.perf_counter()
    try:
        config = GeneratorConfig(scale=scale, duration=duration, seed=seed, entry_rate=entry_rate)
        summary = write(config, out, tuple(f.strip() for f in fmt.split(",") if f.strip()))
    except ValueError as e:
        typer.echo(f"error: {e}", err=True)
        raise typer.Exit(2) from None
    secs = time.perf_counter() - start
    typer.echo(
        f"L={scale}, {duration} s: {summary['position_reports']:,} position reports, "
        f"{summary['balance_queries']:,} balance queries in {secs:.1f} s"
    )
    for kind, path in summary["paths"].items():  # type: ignore[union-attr]
        typer.echo(f"  {kind}: {path}")


@linear_road_app.command("expected")
def expected_command(
    source: Path = typer.Argument(..., help="a generated input.parquet or input.jsonl"),
    out: Path = typer.Option(Path("linear-road-expected"), help="folder for the expected rows"),
) -> None:
    """Compute the expected notifications with the independent validator, as JSONL files."""
    from cq_service.bench.linear_road.validator import read_input, validate

    if not source.exists():
        typer.echo(f"error: {source}: no such file", err=True)
        raise typer.Exit(2)
    expected = validate(read_input(source))
    out.mkdir(parents=True, exist_ok=True)
    for name in ("tolls", "accident_alerts", "balances", "accidents", "segment_stats"):
        rows = getattr(expected, name)
        with (out / f"{name}.jsonl").open("w") as f:
            for row in rows:
                f.write(json.dumps(row, separators=(",", ":")) + "\n")
        typer.echo(f"  {name}: {len(rows):,} rows -> {out / f'{name}.jsonl'}")


@linear_road_app.command("check")
def check_command(
    scale: int = typer.Option(1, help="L: the number of expressways"),
    duration: int = typer.Option(300, help="seconds of simulated traffic"),
    seed: int = typer.Option(0, help="random seed"),
    entry_rate: float = typer.Option(10.0, help="cars entering per second per expressway (peak)"),
    workdir: Path = typer.Option(Path("linear-road-check"), help="folder for input and output"),
) -> None:
    """Generate an input, run pipelines/linear-road with the engine, and compare every output
    row with the validator's; exit 1 on any difference."""
    import pyarrow as pa

    from cq_service.bench.linear_road.check import OUTPUTS, check
    from cq_service.bench.linear_road.generator import GeneratorConfig, generate

    try:
        config = GeneratorConfig(scale=scale, duration=duration, seed=seed, entry_rate=entry_rate)
    except ValueError as e:
        typer.echo(f"error: {e}", err=True)
        raise typer.Exit(2) from None
    rows = pa.concat_tables(generate(config)).to_pylist()
    result = check(rows, workdir)
    typer.echo(
        f"L={scale}, {duration} s, {len(rows):,} input rows: engine ran {result.seconds:.1f} s"
    )
    for name in OUTPUTS:
        diff = len(result.only_engine[name]) + len(result.only_expected[name])
        verdict = "equal" if diff == 0 else f"{diff} rows differ"
        typer.echo(
            f"  {name}: engine {result.engine[name]:,}, validator {result.expected[name]:,}: {verdict}"
        )
        for side, rows_ in (("engine", result.only_engine), ("validator", result.only_expected)):
            for row in rows_[name][:3]:
                typer.echo(f"    only {side}: {json.dumps(row)}")
    if not result.equal:
        raise typer.Exit(1)


def bench_linear_road(
    quick: bool = typer.Option(False, "--quick", help="a short run: 300 s of traffic"),
    as_json: bool = typer.Option(False, "--json", help="print the report as JSON"),
    duration: int = typer.Option(10800, help="seconds of simulated traffic (without --quick)"),
    seed: int = typer.Option(0, help="random seed"),
    workdir: Path = typer.Option(Path("linear-road-bench"), help="folder for input and output"),
    ca_k: str = typer.Option(
        "auto",
        "--ca-k",
        help="k of CA on vid: auto (a window keeps k = ∞), an integer, or 'true' (the input's)",
    ),
) -> None:
    """State per view with and without k-constraints, time per tuple, the validator's verdict
    and the time compression at L = 1 (docs/linear-road.md, "The benchmark"); exit 1 when a
    run's results differ from the validator's."""
    import pyarrow as pa

    from cq_service.bench.linear_road.bench import bench
    from cq_service.bench.linear_road.generator import GeneratorConfig, generate

    seconds = 300 if quick else duration
    rows = pa.concat_tables(generate(GeneratorConfig(duration=seconds, seed=seed))).to_pylist()
    report = bench(rows, workdir, seconds, ca_k if ca_k in ("auto", "true") else int(ca_k))
    report["quick"] = quick
    if as_json:
        typer.echo(json.dumps(report, indent=2))
    else:
        typer.echo(f"Linear Road L=1, {seconds} s, {len(rows):,} rows")
        for view, v in report["views"].items():
            typer.echo(
                f"  {view}: {v['bytes_without']:,} B without, {v['bytes_with']:,} B with "
                f"constraints (ratio {v['ratio']})"
            )
        typer.echo(f"  validated: {report['validated']}")
        typer.echo(f"  time compression at L=1: {report['time_compression_at_L1']}")
    if not all(report["validated"].values()):
        raise typer.Exit(1)
