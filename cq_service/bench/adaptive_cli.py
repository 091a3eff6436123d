"""``cq bench`` of the papers' adaptive techniques on the engine: operator scheduling, shared
window joins, multi-way joins, filter ordering and NEXMark with k-constraints."""

from __future__ import annotations

from pathlib import Path

import typer

from cq_service.bench.app import bench_app, steps


@bench_app.command("scheduling")
def bench_scheduling(
    scenario: str = typer.Option(
        "example1", help="example1, counterexample, stream-example, bursty[-…]"
    ),
    policy: list[str] = typer.Option(
        None, help="repeatable: fifo, round_robin, greedy, chain, chain_bounded, opt"
    ),
    json_output: bool = typer.Option(False, "--json", help="print JSON"),
    bound: int | None = typer.Option(None, help="chain_bounded's latency bound (adds it)"),
    bounds: str | None = typer.Option(
        None, help="comma-separated bounds: chain_bounded's peak memory vs p99 latency"
    ),
    shares: str | None = typer.Option(
        None,
        help="comma-separated shares of FIFO units in [0, 1], e.g. 0.05,0.1,0.25,0.5: "
        "chain_share's peak memory vs p99 latency (with 0 = chain and 1 = fifo)",
    ),
    plot: Path | None = typer.Option(
        None, help="with --shares: write the memory vs latency curve to this PNG"
    ),
    quantum: int = typer.Option(1, help="round-robin quantum, in units"),
    seed: int = typer.Option(0, help="seed of the bursty scenarios"),
) -> None:
    """Simulate operator scheduling (Chain, docs/scheduling.md) in cost units: memory at each
    instant, peak and average memory, latency and context switches per policy."""
    import json
    from fractions import Fraction

    from cq_service.bench.scheduling import report
    from cq_service.bench.scheduling.scenarios import scenario as build

    names = list(policy or report.DEFAULT_POLICIES)
    if bound is not None and not policy:
        names.append("chain_bounded")
    try:
        chosen = build(scenario, seed)
        runs = report.results(chosen, names, bound=bound, quantum=quantum)
        levels = [int(b) for b in bounds.split(",") if b.strip()] if bounds else None
        trade = report.tradeoff(chosen.workload, levels) if levels else None
        fractions = (
            [Fraction(f.strip()) for f in shares.split(",") if f.strip()] if shares else None
        )
        curve = report.share_tradeoff(chosen.workload, fractions) if fractions else None
    except (ValueError, ZeroDivisionError) as e:
        typer.echo(f"error: {e}", err=True)
        raise typer.Exit(2) from None
    if plot is not None:
        if curve is None:
            typer.echo("error: --plot needs --shares", err=True)
            raise typer.Exit(2)
        report.plot_shares(plot, f"{scenario}: chain_share, memory vs latency", curve)
    if json_output:
        typer.echo(json.dumps(report.as_json(scenario, runs, trade, curve)))
    else:
        typer.echo(report.text(chosen, runs, trade, curve))


@bench_app.command("shared-joins")
def bench_shared_joins(
    quick: bool = typer.Option(False, help="a small input, short preload: the CI check"),
    json_output: bool = typer.Option(False, "--json", help="print JSON"),
    new_tuples: int = typer.Option(12_000, help="measured tuples per run (the paper: 100,000)"),
    rate: float = typer.Option(100.0, help="tuples per paper second per stream"),
    speedup: float = typer.Option(
        20.0,
        help="arrivals this many times faster than the paper's: at 20 the engine is loaded "
        "but keeps up, as the paper's was (docs/scheduling.md)",
    ),
    bursts: str = typer.Option("1,2,3,4,5", help="mean burst sizes of the second experiment"),
    plots: Path | None = typer.Option(None, help="folder for the PNG charts"),
    work: Path = typer.Option(Path("benchmarks/data/shared-joins"), help="pipelines, inputs"),
) -> None:
    """Paper 002's experiments on the engine: seven joins with different windows, shared under
    MQT, SWF and LWO and planned alone; response times per query and the state peak."""
    import json

    from cq_service.bench.shared_joins import DISTRIBUTIONS, engine_runs, report

    if quick:  # a tenth of the rate (a tenth of the preload), 300 tuples: about 90 s in all
        rate, new_tuples, speedup, bursts = rate / 10, 300, speedup / 2, "1,4"
    try:
        sizes = [float(b) for b in bursts.split(",") if b.strip()]
    except ValueError:
        typer.echo(f"error: --bursts wants comma-separated numbers, not {bursts!r}", err=True)
        raise typer.Exit(2) from None
    if any(s < 1 for s in sizes) or rate <= 0 or speedup <= 0 or new_tuples < 1:
        typer.echo("error: mean bursts ≥ 1, and a positive rate, speedup and --new-tuples",
                   err=True)
        raise typer.Exit(2)
    with steps("cq bench shared-joins", silent=json_output) as say:
        say(f"time scale: arrivals {speedup:g}x the paper's real time; {rate:g} tuples/s per "
            "stream")
        by_window = engine_runs.by_window(list(DISTRIBUTIONS), engine_runs.POLICIES, work, rate=rate,
                                          new_tuples=new_tuples, speedup=speedup, say=say)
        by_burst = engine_runs.bursts(sizes, engine_runs.POLICIES, work, rate=rate,
                                      new_tuples=new_tuples, speedup=speedup, say=say)
    verdicts = report.checks(by_window, by_burst)
    if plots is not None:
        from cq_service.bench.shared_joins.plots import burst_chart, model_chart, window_chart

        scale = f"{speedup:g}x real time"
        window_chart({p: {d: r["windows"] for d, r in per.items()} for p, per in by_window.items()},
                     plots / "shared-joins-windows.png", f"response time per window ({scale})")
        burst_chart(by_burst, plots / "shared-joins-bursts.png", f"Small-Large, bursts ({scale})")
        model_chart(DISTRIBUTIONS["uniform"], plots / "shared-joins-model.png")
    if json_output:
        typer.echo(json.dumps({"rate": rate, "speedup": speedup, "new_tuples": new_tuples,
                               "by_window": by_window, "bursts": by_burst, "checks": verdicts}))
    else:
        typer.echo(report.text(by_window, by_burst, verdicts))


@bench_app.command("joins")
def bench_joins(
    quick: bool = typer.Option(False, help="3-way cases at a quarter of the size: the CI check"),
    json_output: bool = typer.Option(False, "--json", help="print JSON"),
    work: Path = typer.Option(Path("benchmarks/data/joins"), help="pipelines, inputs"),
    repeats: int = typer.Option(3, help="rounds of every setting per case (medians reported)"),
    plots: Path | None = typer.Option(None, help="folder for the PNG charts"),
) -> None:
    """Thesis 003 ch. 5 on the engine: a windowed 3- and 4-way join as a tree, an MJoin and an
    MJoin with A-Caching, uniform and skewed keys: throughput, state peak (docs/joins.md)."""
    import json

    from cq_service.bench.joins import CASES, run_all

    cases = [c for c in CASES if c.endswith("-3")] if quick else list(CASES)
    with steps("cq bench joins", silent=json_output) as say:
        out = run_all(cases, work, scale=0.25 if quick else 1.0, say=say, repeats=repeats)
    if plots is not None:
        from cq_service.bench.joins.plots import charts

        charts(out, plots, "quick" if quick else "full")
    if json_output:
        typer.echo(json.dumps(out))


@bench_app.command("filters")
def bench_filters(
    quick: bool = typer.Option(False, help="fewer tuples and n = 3, 6: the CI check"),
    json_output: bool = typer.Option(False, "--json", help="print JSON"),
    tuples: int = typer.Option(1_000_000, help="tuples per run (ignored with --quick)"),
    plots: Path | None = typer.Option(None, help="folder for the PNG charts"),
    work: Path = typer.Option(Path("benchmarks/data/filters"), help="pipelines, inputs"),
) -> None:
    """Thesis 003's filter-ordering experiments on the engine: cost per tuple against n,
    re-convergence after a change, profiling overhead, and an expensive LIKE written first."""
    import json

    from cq_service.bench.filters import experiments, report

    # re-convergence: the thesis' change at 600,000 tuples, n = 8, in both modes (a shorter
    # period is shorter than A-Greedy's profile window takes to turn over at p = 0.01)
    ns, rc_n, rc_tuples, period, block = range(2, 9), 8, 1_200_000, 600_000, 10_000
    real_tuples, repeat = min(tuples, 500_000), 3
    placements, seeds = experiments.PLACEMENTS, experiments.SEEDS
    if quick:
        ns, tuples, real_tuples, repeat = (3, 6), 100_000, 300_000, 1
        placements, seeds = experiments.QUICK_PLACEMENTS, experiments.QUICK_SEEDS
    if tuples < 1_000:
        typer.echo("error: --tuples is at least 1000", err=True)
        raise typer.Exit(2)
    with steps("cq bench filters", silent=json_output) as say:
        results: dict = {"quick": quick, "tuples": tuples}
        results["by_n"] = experiments.by_n(list(ns), tuples, work, placements=placements, say=say)
        results["reconvergence"] = experiments.reconvergence(rc_n, rc_tuples, period, block, work,
                                                             seeds=seeds, say=say)
        results["overhead"] = experiments.overhead((3, 8), (0.01, 0.05), tuples, work, say=say)
        results["real"] = experiments.real(real_tuples, work, batch_sizes=(1_000, 65_536),
                                           repeat=repeat, say=say)
    verdicts = report.checks(results)
    results["checks"] = verdicts
    if plots is not None:
        from cq_service.bench.filters.plots import cost_chart, reconvergence_chart

        cost_chart(results["by_n"], plots / "filters-cost.png")
        reconvergence_chart(results["reconvergence"], plots / "filters-reconvergence.png")
    if json_output:
        typer.echo(json.dumps(results))
    else:
        typer.echo(report.text(results, verdicts))


@bench_app.command("constraints")
def bench_constraints(
    quick: bool = typer.Option(False, help="40,000 events: the CI check (seconds)"),
    json_output: bool = typer.Option(False, "--json", help="print JSON"),
    events: int = typer.Option(200_000, help="generated NEXMark events (ignored with --quick)"),
    query: list[str] = typer.Option(None, help="repeatable: q3, q8, q4, q6 (default: all)"),
    seed: int = typer.Option(0, help="the generator's seed"),
) -> None:
    """NEXMark with k-constraints (issue 26): q3, q8 (rids Auction.seller -> Person.id) and
    q4, q6 (rids Bid.auction -> ClosedAuction.id) over the same generated input without and
    with the constraint at the input's true k: peak state both ways, ratio, identical output
    (docs/linear-road.md, "NEXMark with constraints")."""
    import json

    from cq_service.bench.nexmark_constraints import QUICK_EVENTS, bench, render

    if events < 50:
        typer.echo("error: --events is at least 50", err=True)
        raise typer.Exit(2)
    try:
        out = bench(query or None, QUICK_EVENTS if quick else events, seed)
    except ValueError as e:
        typer.echo(f"error: {e}", err=True)
        raise typer.Exit(2) from None
    out["quick"] = quick
    typer.echo(json.dumps(out) if json_output else render(out))
    if not out["all_identical"]:
        raise typer.Exit(1)
