"""`cq nexmark produce` (NEXMark events to Kafka at a steady rate, with bursts) and
`cq nexmark topics` (create the Kafka topics a pipeline file reads and writes), mounted on
`cq nexmark` by cq_service.cli."""

from __future__ import annotations

import signal
from pathlib import Path
from typing import Any

import typer

__all__ = ["produce", "topics"]


def _bootstrap_option() -> Any:
    return typer.Option(
        None,
        "--bootstrap",
        envvar="CQ_KAFKA_BOOTSTRAP",
        help="the Kafka brokers (default: $CQ_KAFKA_BOOTSTRAP, else 127.0.0.1:9092)",
    )


def produce(
    rate: float = typer.Option(
        1_000.0, "--rate", help="events per second (1 : 3 : 46 persons, auctions, bids)"
    ),
    bursts: str = typer.Option(
        "60:5:4",
        "--bursts",
        help="EVERY:LENGTH:FACTOR: every EVERY seconds a burst of LENGTH seconds at FACTOR times "
        "the rate (the first after EVERY seconds); off: a steady rate",
    ),
    limit: int | None = typer.Option(None, "--limit", help="stop after this many events"),
    seconds: float | None = typer.Option(None, "--seconds", help="stop after this many seconds"),
    seed: int = typer.Option(0, help="random seed: the same seed gives the same events"),
    prefix: str = typer.Option(
        "nexmark-", "--topic-prefix", help="topics PREFIXperson, PREFIXauction, PREFIXbid"
    ),
    partitions: int = typer.Option(1, help="partitions of the topics this creates"),
    bootstrap: str | None = _bootstrap_option(),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="no line every 10 seconds"),
) -> None:
    """Write NEXMark persons, auctions and bids to Kafka at --rate events per second, with
    occasional bursts, until Ctrl-C, --limit or --seconds. Creates the topics if absent."""
    from cq_service.bench.nexmark_produce import Schedule, parse_bursts
    from cq_service.bench.nexmark_produce import produce as run
    from cq_service.errors import CQError
    from cq_service.io.kafka_client import bootstrap_servers
    from cq_service.io.kafka_sink import KafkaWriter
    from cq_service.io.nexmark import KINDS

    try:
        schedule = Schedule(rate, *parse_bursts(bursts))
        if (limit is not None and limit < 0) or (seconds is not None and seconds < 0):
            raise ValueError("--limit and --seconds cannot be negative")
        if partitions < 1:
            raise ValueError("--partitions must be at least 1")
    except ValueError as e:
        typer.echo(f"error: {e}", err=True)
        raise typer.Exit(2) from None
    servers = bootstrap_servers(bootstrap)
    names = {kind: f"{prefix}{kind}" for kind in KINDS}
    _create(",".join(servers), list(names.values()), partitions)
    say = (lambda _: None) if quiet else (lambda m: typer.echo(m, err=True))
    burst_text = (
        f", bursts of {schedule.length:g} s at {schedule.factor:g}x every {schedule.every:g} s"
        if schedule.every
        else ""
    )
    say(
        f"producing to {', '.join(names.values())} at {','.join(servers)}: {rate:g} events/s"
        f"{burst_text}; Ctrl-C stops"
    )
    last = [0.0]

    def report(done) -> None:
        if done.seconds - last[0] >= 10:
            last[0] = done.seconds
            say(done.text() + (" (burst)" if done.bursting else ""))

    # SIGTERM (the demo's trap) stops as Ctrl-C does: what was sent is flushed first
    previous = signal.signal(signal.SIGTERM, signal.default_int_handler)
    writer = KafkaWriter(servers, role="cq nexmark produce")
    try:
        done = run(
            writer, schedule, topics=names, seed=seed, limit=limit, seconds=seconds, report=report
        )
    except KeyboardInterrupt:
        typer.echo("stopped", err=True)
        raise typer.Exit(0) from None
    except CQError as e:
        typer.echo(f"error: {e.render()}", err=True)
        raise typer.Exit(1) from None
    finally:
        writer.close()
        signal.signal(signal.SIGTERM, previous)
    typer.echo(f"produced {done.text()}")


def topics(
    file: Path = typer.Argument(..., help="pipeline file"),
    partitions: int = typer.Option(1, help="partitions of each topic created"),
    bootstrap: str | None = _bootstrap_option(),
) -> None:
    """Create every Kafka topic the pipeline file reads (sources) or writes (sinks) that does
    not exist yet, on --bootstrap (the file's own `bootstrap_servers` are not used)."""
    from cq_service.errors import CQError
    from cq_service.io.kafka_client import bootstrap_servers
    from cq_service.spec import load_pipeline

    try:
        spec = load_pipeline(file)
    except CQError as e:
        for line in e.lines():
            typer.echo(line)
        raise typer.Exit(2) from None
    names = [
        s.source.options["topic"]
        for s in {**spec.streams, **spec.relations}.values()
        if s.source is not None and s.source.type == "kafka"
    ]
    names += [
        q.sink.options["topic"]
        for q in spec.queries.values()
        if q.sink is not None and q.sink.type == "kafka"
    ]
    created = _create(",".join(bootstrap_servers(bootstrap)), sorted(set(names)), partitions)
    typer.echo(f"created: {', '.join(created) or 'none'} (of {len(set(names))} topics)")


def _create(bootstrap: str, names: list[str], partitions: int) -> list[str]:
    """Create the topics of `names` that are absent; the ones created."""
    from cq_service.bench.kafka_topics import create_topic, topics_present

    if not names:
        return []
    try:
        present = topics_present(bootstrap)
        missing = [n for n in names if n not in present]
        for name in missing:
            create_topic(bootstrap, name, partitions)
    except Exception as e:  # the command's boundary: the broker's own words
        typer.echo(f"error: cannot create topics at {bootstrap}: {e}", err=True)
        raise typer.Exit(1) from None
    return missing
