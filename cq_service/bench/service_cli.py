"""``cq bench`` of the service's paths around the engine: backfill, the Spark runner, restart
from a snapshot, and Kafka in and out against other engines."""

from __future__ import annotations

from pathlib import Path

import typer

from cq_service.bench.app import bench_app, machine, steps


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
    with steps("cq bench spark-runner") as say:
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
    meta = {
        "events": events, "asks": max(events // 10, 1), "seed": seed, "repeat": repeat,
        "engines": list(es), "quick": quick, "broker": "4", "latency_grace": latency_grace,
        "machine": machine(machine_note),
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
        with steps("cq bench kafka") as say:
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
