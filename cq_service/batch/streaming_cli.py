"""`cq run` on a pipeline with ``resources: {runner: spark}``, and `cq spark-submit`: the
pipeline as a Spark Structured Streaming job (`batch.streaming`, docs/spark-runner.md)."""

from __future__ import annotations

import tempfile
import traceback
from pathlib import Path

import typer

from cq_service.errors import CQError

__all__ = ["print_report", "run_on_spark", "spark_submit", "validate_runner"]


def validate_runner(spec) -> tuple[list[str], bool]:
    """`cq validate`'s lines for a runner-spark pipeline, and whether every query is supported."""
    from cq_service.batch.streaming import check, describe

    return describe(spec), not check(spec)


def print_report(report) -> None:
    for name, n in report.late.items():
        bad = report.malformed.get(name, 0)
        if n or bad:
            typer.echo(f"{name}: {n} late, {bad} malformed record(s)", err=True)
    if report.dead_letters:
        typer.echo(f"{report.dead_letters} record(s) written to the dead-letter sink", err=True)
    for q, end in report.ended_at.items():
        typer.echo(f"{q}: {report.results.get(q, 0)} result(s), final up to {end}", err=True)


def run_on_spark(spec, master: str | None = None, checkpoint: Path | None = None):
    """`cq run` on Spark: the input available now, then the final heartbeat at the largest
    timestamp seen (a fresh checkpoint unless one is given)."""
    from cq_service.batch.streaming import StreamingJob, spark_session

    spark = spark_session(master)
    if checkpoint is not None:
        return StreamingJob(spec, spark, checkpoint).run(available_now=True, final=True)
    with tempfile.TemporaryDirectory(prefix="cq-spark-run-") as tmp:
        return StreamingJob(spec, spark, tmp).run(available_now=True, final=True)


def spark_submit(
    file: Path = typer.Argument(..., help="pipeline file with resources: {runner: spark}"),
    checkpoint: Path = typer.Option(..., help="the job's checkpoint folder (Kafka offsets, "
                                    "engine state, clocks); reuse it to resume"),
    master: str | None = typer.Option(None, help="Spark master (default local[2])"),
    available_now: bool = typer.Option(False, "--available-now",
                                       help="process what is available now, then stop "
                                       "(no final heartbeat: results are final up to the "
                                       "streams' heartbeats)"),
    trigger: str = typer.Option("5 seconds", help="micro-batch interval when running on"),
    max_offsets_per_trigger: int | None = typer.Option(
        None, help="Kafka messages per micro-batch at most (default: all available)"),
    partitions: int | None = typer.Option(
        None, help="key buckets of each key-path query (default: Spark's default "
        "parallelism); fixed by a checkpoint's first run"),
) -> None:
    """Run a runner-spark pipeline as a Spark Structured Streaming job until stopped."""
    from cq_service.batch.streaming import StreamingJob, spark_session
    from cq_service.compiler import load_and_compile

    try:
        spec = load_and_compile(file).spec
        job = StreamingJob(spec, spark_session(master), checkpoint, partitions=partitions,
                           max_offsets_per_trigger=max_offsets_per_trigger)
    except CQError as e:
        for line in e.lines():
            typer.echo(line)
        raise typer.Exit(2) from None
    try:
        report = job.run(available_now=available_now, final=False, processing_time=trigger)
    except CQError as e:
        typer.echo(f"error: {e.render()}", err=True)
        raise typer.Exit(1) from None
    except Exception:  # the command's boundary
        typer.echo(f"internal error while running {file}:\n{traceback.format_exc()}", err=True)
        raise typer.Exit(1) from None
    print_report(report)
