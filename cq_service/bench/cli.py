"""``cq nexmark …`` (generate the NEXMark input) and ``cq bench …`` (the benchmarks: NEXMark,
scheduling, shared joins, filter ordering, cost model, backfill, the Spark runner, restart, Kafka), mounted by
cq_service.cli."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import typer

from cq_service.bench.linear_road import cli as linear_road

__all__ = ["bench_app", "nexmark_app"]

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


bench_app = typer.Typer(no_args_is_help=True, help="Benchmarks against other engines.")


_QUIET = [False]


@bench_app.callback()
def bench_setup(
    quiet: bool = typer.Option(False, "--quiet", "-q", help="no status line (shown only when "
                               "stderr is a terminal): `cq bench --quiet kafka …`"),
) -> None:
    """Compile the package's bytecode first: the processes a benchmark times start as an
    installed package would (bench/bytecode.py). On a terminal, a status line shows which
    query and engine the benchmark is on."""
    from cq_service.bench.bytecode import compile_package

    _QUIET[0] = quiet
    compile_package()


def _steps(title: str):
    """A benchmark's step messages: to stderr, and into a status line on a terminal."""
    from cq_service.progress import bench_steps

    return bench_steps(title, quiet=_QUIET[0])


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
    import platform

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
    cpu = next(
        (ln.split(":", 1)[1].strip() for ln in Path("/proc/cpuinfo").read_text().splitlines()
         if ln.startswith("model name")),
        platform.processor(),
    )
    meta = {
        "events": events,
        "repeat": repeat,
        "seed_note": "seed 0, 10,000 events/s of event time",
        "machine": f"{os.cpu_count()} cores ({cpu}), {_memory_gib()} GiB, "
        f"Python {platform.python_version()}" + (f", {machine_note}" if machine_note else ""),
        "date": datetime.date.today().isoformat(),
        "quick": quick,
    }
    folder = out / "quick" if quick else out
    steps = 1 + len(qs) * (len(es) * repeat + 1 + (1 if latency_seconds > 0 else 0))
    with Progress(
        TextColumn("{task.description}"), BarColumn(), TextColumn("{task.completed}/{task.total}"),
        TimeElapsedColumn(), transient=False, disable=_QUIET[0] or not sys.stderr.isatty(),
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


bench_app.command("linear-road")(linear_road.bench_linear_road)


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
    say = (lambda _: None) if json_output else typer.echo
    say(f"time scale: arrivals {speedup:g}x the paper's real time; {rate:g} tuples/s per stream")
    by_window = engine_runs.by_window(list(DISTRIBUTIONS), engine_runs.POLICIES, work,
                                      rate=rate, new_tuples=new_tuples, speedup=speedup, say=say)
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
    say = (lambda _: None) if json_output else typer.echo
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
    if quick:
        ns, tuples, real_tuples, repeat = (3, 6), 100_000, 300_000, 1
    if tuples < 1_000:
        typer.echo("error: --tuples is at least 1000", err=True)
        raise typer.Exit(2)
    say = (lambda _: None) if json_output else typer.echo
    results: dict = {"quick": quick, "tuples": tuples}
    results["by_n"] = experiments.by_n(list(ns), tuples, work, say=say)
    results["reconvergence"] = experiments.reconvergence(rc_n, rc_tuples, period, block, work,
                                                         say=say)
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


@bench_app.command("costmodel")
def bench_costmodel(
    quick: bool = typer.Option(False, "--quick", help="fewer and shorter cases"),
    json_output: bool = typer.Option(False, "--json", help="print JSON: each case's errors"),
    seed: int = typer.Option(0, help="seed of the Poisson streams"),
    out: Path = typer.Option(
        Path("benchmarks/costmodel/results"), help="where the text and JSON results go"
    ),
    only: str | None = typer.Option(
        None,
        "--only",
        help="one experiment: accuracy, shedding, delays or scalability (default: all); "
        "its text and JSON go to NAME.txt and NAME.json",
    ),
    nested_loops: float = typer.Option(
        1 / 3, "--nested-loops", help="scalability: the share of joins that are nested-loop joins"
    ),
    repeat: int | None = typer.Option(
        None, "--repeat", help="accuracy: runs per case, the median CPU counts (default 3; --quick: 1)"
    ),
) -> None:
    """The cost model against the engine (docs/resources.md): estimated vs measured memory and
    CPU of joins and aggregations over Poisson streams, out of sample (fitted on one workload,
    predicting another), window reduction vs load shedding on
    the paper's equi-join (Figs. 9–11), the adaptation delays of window and granularity
    changes (Fig. 7; chart delays.png), and the resource manager's scalability (Fig. 12: the
    worker with hundreds of random queries and the model alone with 5,000; charts
    scalability.png, scalability-model.png)."""
    import json

    from cq_service.bench.costmodel import accuracy, delays, scalability, shedding

    names = ("accuracy", "shedding", "delays", "scalability")
    if only is not None and only not in names:
        typer.echo(f"error: --only {only}: expected one of {', '.join(names)}", err=True)
        raise typer.Exit(2)
    if repeat is not None and repeat < 1:
        typer.echo("error: --repeat must be at least 1", err=True)
        raise typer.Exit(2)
    chosen = names if only is None else (only,)
    out.mkdir(parents=True, exist_ok=True)
    suffix = "-quick" if quick else ""
    data: dict = {}
    parts: list[str] = []
    if "accuracy" in chosen:
        results = accuracy.run(quick=quick, seed=seed, repeat=repeat)
        data["accuracy"] = accuracy.as_json(results)
        parts.append(accuracy.text(results))
    if "shedding" in chosen:
        data["shedding"] = shedding.run(seconds=120 if quick else 600, seed=seed)
        parts.append(shedding.text(data["shedding"]))
    if "delays" in chosen:
        delayed = delays.run(quick=quick, seed=seed)
        data["delays"] = delays.as_json(delayed)
        delays.chart(delayed, out / f"delays{suffix}.png")
        parts.append(delays.text(delayed))
    if "scalability" in chosen:
        scaled = scalability.run(
            quick=quick,
            seed=seed,
            nested_loops=nested_loops,
            progress=lambda line: typer.echo(line, err=True),
        )
        data["scalability"] = scalability.as_json(scaled)
        scalability.chart(scaled["engine"], out / f"scalability{suffix}.png")
        scalability.chart(scaled["model"], out / f"scalability-model{suffix}.png")
        parts.append(scalability.text(scaled))
    stem = only or "costmodel"
    (out / f"{stem}{suffix}.json").write_text(json.dumps(data, indent=2, default=str) + "\n")
    report = "\n\n".join(parts)
    (out / f"{stem}{suffix}.txt").write_text(report + "\n")
    typer.echo(json.dumps(data, default=str) if json_output else report)


@bench_app.command("backfill")
def bench_backfill(
    events: int = typer.Option(1_000_000, help="NEXMark events to generate"),
    repeat: int = typer.Option(3, help="runs per query and engine; the median counts"),
    queries: str = typer.Option("q1,q8,q5,q7", help="comma-separated"),
    partitions: int | None = typer.Option(None, help="Spark partitions (default: cores)"),
    out: Path = typer.Option(Path("benchmarks/results"), help="where backfill.txt goes"),
) -> None:
    """Backfill throughput (events/s) against `cq run` over the same history, both paths."""
    import os

    from cq_service.bench import backfill

    rows = backfill.run(events, repeat, tuple(queries.split(",")), partitions)
    report = backfill.text(rows, events, repeat, partitions or os.cpu_count() or 1)
    out.mkdir(parents=True, exist_ok=True)
    (out / "backfill.txt").write_text(report + "\n")
    typer.echo(report)


@bench_app.command("spark-runner")
def bench_spark_runner(
    events: int = typer.Option(1_000_000, help="NEXMark events produced to Kafka"),
    repeat: int = typer.Option(3, help="runs per query and engine; the median counts"),
    queries: str = typer.Option("q1,q3,q7", help="comma-separated NEXMark queries"),
    batch: int | None = typer.Option(None, help="Kafka messages per micro-batch at most "
                                     "(default: everything available in one)"),
    master: str | None = typer.Option(None, help="Spark master (default local[2])"),
    history: int | None = typer.Option(None, help="also run q3 over this many events in "
                                       "micro-batches of --batch messages: cost per batch"),
    quick: bool = typer.Option(False, "--quick", help="20,000 events, one run, q1 and q7"),
    bootstrap: str = typer.Option(
        "127.0.0.1:19092", envvar="CQ_KAFKA_BOOTSTRAP", help="the Kafka broker"
    ),
    out: Path = typer.Option(Path("benchmarks/results"), help="where spark-runner.* go"),
) -> None:
    """The Spark runner's events/s against `cq run` on the same Kafka topics, and its cost
    per micro-batch as history grows (--history)."""
    import json

    from cq_service.bench import spark_runner

    if quick:
        events, repeat, queries = 20_000, 1, "q1,q7"
    with _steps("cq bench spark-runner") as say:
        rows = spark_runner.run(bootstrap, events, repeat, tuple(queries.split(",")), batch,
                                master, say=say)
    report = spark_runner.text(rows, repeat, batch, master or "local[2]")
    out.mkdir(parents=True, exist_ok=True)
    if not quick:
        (out / "spark-runner.txt").write_text(report + "\n")
    typer.echo(report)
    if history:
        points = spark_runner.history(bootstrap, history, batch or max(history // 20, 1),
                                      master=master, say=lambda m: typer.echo(m, err=True))
        (out / "spark-runner-history.json").write_text(json.dumps(points, indent=1) + "\n")
        spark_runner.plot(points, out / "spark-runner-history.png", history)
        for p in points:
            typer.echo(f"{p['events']:>12,} read  {p['seconds']:7.2f} s  fed {p['fed']:>9,}  "
                       f"state {p['state_bytes'] / 2**20:8.1f} MiB")


@bench_app.command("restart")
def bench_restart(
    histories: str = typer.Option("1000000,10000000", help="stream records before the restart"),
    quick: bool = typer.Option(False, "--quick", help="20,000 and 100,000 records"),
    bootstrap: str = typer.Option(
        "127.0.0.1:19092", envvar="CQ_KAFKA_BOOTSTRAP", help="the Kafka broker"
    ),
    work: Path = typer.Option(Path("benchmarks/data/restart"), help="scratch folders"),
    out: Path = typer.Option(Path("benchmarks/results"), help="where restart.md/.json go"),
    json_out: bool = typer.Option(False, "--json", help="print the results as JSON"),
    replay_max: int | None = typer.Option(
        None, help="measure replay only up to this many records (it takes as long as the history)"
    ),
    merge: bool = typer.Option(
        False, "--merge", help="keep the results file's results at the other histories"
    ),
) -> None:
    """Restart time of a worker after H records, from a state snapshot against replay.

    restart.md/.json are rewritten after every measurement, so a long run that is stopped
    leaves what it measured."""
    import json
    from dataclasses import asdict

    from cq_service.bench.restart import RestartResult, report, run_benchmark

    sizes = [20_000, 100_000] if quick else [int(h) for h in histories.split(",")]
    name = "restart-quick" if quick else "restart"
    out.mkdir(parents=True, exist_ok=True)
    kept: list[RestartResult] = []
    if merge and (out / f"{name}.json").exists():
        kept = [RestartResult(**r) for r in json.loads((out / f"{name}.json").read_text())
                if r["history"] not in sizes]
    measured: list[RestartResult] = []

    def save(result: RestartResult) -> None:
        measured.append(result)
        results = kept + measured
        (out / f"{name}.md").write_text(report(results))
        (out / f"{name}.json").write_text(json.dumps([asdict(r) for r in results], indent=1))

    run_benchmark(bootstrap, sizes, work, replay_max=replay_max, on_result=save)
    results = kept + measured
    typer.echo(json.dumps([asdict(r) for r in results]) if json_out else report(results))


@bench_app.command("kafka")
def bench_kafka(
    quick: bool = typer.Option(False, "--quick", help="50,000 events, one repeat: the CI check"),
    events: int = typer.Option(2_000_000, help="bids to produce (asks: a tenth of that)"),
    seed: int = typer.Option(0, help="random seed of the events"),
    repeat: int = typer.Option(3, help="runs per engine and query; the median counts"),
    queries: str = typer.Option(
        "pass-through,filter,sliding-agg,join,nexmark-q1,nexmark-q5,nexmark-q7",
        help="comma-separated",
    ),
    engines: str = typer.Option(
        "cq,cq-kafka-python,spark,quix",
        help="comma-separated: cq, cq-kafka-python, spark, quix, pyflink",
    ),
    bootstrap: str = typer.Option(
        "127.0.0.1:19092", envvar="CQ_KAFKA_BOOTSTRAP", help="the Kafka broker"
    ),
    work: Path = typer.Option(Path("benchmarks/data/kafka"), help="pipelines, scratch"),
    out: Path = typer.Option(Path("benchmarks/results"), help="where kafka.md/.json go"),
    machine_note: str = typer.Option("", help="said after the machine in the results"),
    latency: bool = typer.Option(
        True, "--latency/--no-latency",
        help="also measure p50/p99 latency with the input produced at half each engine's "
        "sustained rate (one more run per engine and query)",
    ),
    latency_grace: float = typer.Option(
        5.0, help="latency phase: seconds between the engine's first connection to the broker "
        "and the start of production",
    ),
) -> None:
    """Kafka in, Kafka out: pass-through, filter, a sliding aggregate over 10,000 groups, a
    windowed join and NEXMark q1, q5, q7 on cq (both Kafka clients), Spark Structured Streaming,
    Quix Streams and (asked for) PyFlink, throughput and then latency at half rate; fails if
    any engine's output count differs from the expected one."""
    import datetime
    import platform

    from cq_service.bench.kafka_bench import ENGINES, QUERIES, disagreements, run_benchmark
    from cq_service.bench.kafka_report import save

    qs = tuple(q.strip() for q in queries.split(",") if q.strip())
    es = tuple(e.strip() for e in engines.split(",") if e.strip())
    bad = [q for q in qs if q not in QUERIES] + [e for e in es if e not in ENGINES]
    if bad:
        typer.echo(f"error: unknown query or engine {bad}", err=True)
        raise typer.Exit(2)
    if quick:
        events, repeat = 50_000, 1
    cpu = next(
        (ln.split(":", 1)[1].strip() for ln in Path("/proc/cpuinfo").read_text().splitlines()
         if ln.startswith("model name")),
        platform.processor(),
    )
    meta = {
        "events": events, "asks": max(events // 10, 1), "seed": seed, "repeat": repeat,
        "engines": list(es), "quick": quick, "broker": "4", "latency_grace": latency_grace,
        "machine": f"{os.cpu_count()} cores ({cpu}), {_memory_gib()} GiB, "
        f"Python {platform.python_version()}" + (f", {machine_note}" if machine_note else ""),
        "date": datetime.date.today().isoformat(),
        "notes": [
            "Quix Streams runs pass-through, filter and NEXMark q1 only; the sliding aggregate, "
            "the join, q5 and q7 are not expressed for it here.",
            "PyFlink: Flink SQL with flink-sql-connector-kafka 5.0.0-2.2 on PyFlink 2.3.0, "
            "PyFlink's local executor (a mini cluster in its JVM), parallelism 2; its sources "
            "end at the latest offsets as of the job's start." if "pyflink" in es else
            "Not run: PyFlink (`--engines ...,pyflink` runs it, with Flink's Kafka connector).",
            *([] if latency else ["p50/p99 latency at half rate not measured (--no-latency)."]),
        ],
    }
    folder = out / "quick" if quick else out
    try:
        with _steps("cq bench kafka") as say:
            rows = run_benchmark(
                bootstrap=bootstrap, events=events, seed=seed, queries=qs, engines=es,
                repeat=repeat, work=work, say=say, on_row=lambda done: save(done, folder, meta),
                latency=latency, grace=latency_grace,
            )
    except RuntimeError as e:
        typer.echo(f"error: {e}", err=True)
        raise typer.Exit(1) from None
    typer.echo(save(rows, folder, meta))
    problems = disagreements(rows)
    if problems:
        typer.echo("output counts differ:\n" + "\n".join(problems), err=True)
        raise typer.Exit(1)


def _memory_gib() -> int:
    for line in Path("/proc/meminfo").read_text().splitlines():
        if line.startswith("MemTotal:"):
            return round(int(line.split()[1]) / 2**20)
    return 0
