"""What runs in a worker: its sources, its queries and the state the worker's parts share.

`Runtime` is that shared state: the live engine, the sources and queries on it, the running
version of each pipeline. The worker's parts — deploying
(deployer.py), checkpoints (checkpoint.py), adjustments (adjusting.py), scheduling
(scheduling.py), the resource manager (budgets.py) — read and change it, always on the engine
thread (`Worker.call` hands other threads' work to it).
"""

from __future__ import annotations

import hashlib
import json
import logging
import re
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from cq_service.catalog import Catalog
from cq_service.catalog.spec_json import stream_json
from cq_service.engine.live import LiveEngine
from cq_service.engine.scheduler import ByOwner
from cq_service.errors import Unreachable
from cq_service.io.dead_letter import DeadLetterSink
from cq_service.service.config import ServiceConfig
from cq_service.service.results import ResultTee
from cq_service.spec.model import PipelineSpec, SinkSpec, StreamSpec

__all__ = [
    "RunningQuery",
    "RunningSource",
    "Runtime",
    "declared",
    "file_digest",
    "hash_text",
    "source_key",
    "worker_sink",
]

log = logging.getLogger("cq.worker")


@dataclass
class RunningSource:
    key: str
    stream: StreamSpec
    reader: Any  # the io reader, wrapped in an OffsetTracker when it has partitions
    dead_letter: DeadLetterSink


@dataclass
class RunningQuery:
    key: str  # pipeline/query
    pipeline: str
    name: str
    fingerprint: tuple
    source_keys: dict[str, str]  # source name in the query -> source key
    horizons: dict[str, int | None]  # source key -> horizon
    relations: set[str]  # source keys that are relations
    gates: dict[str, int] = field(default_factory=dict)
    tee: ResultTee | None = None
    handover: int | None = None  # T2 of a backfill it takes over from (docs/backfill.md)

    @property
    def version(self) -> str:
        """A digest of what the query computes and where it writes."""
        text = re.sub(r"span=Span\([^)]*\)", "", repr(self.fingerprint))  # positions don't count
        return hash_text(text)[:16]


@dataclass
class Runtime:
    """The worker's engine and what runs on it (touched on the engine thread only)."""

    config: ServiceConfig
    catalog: Catalog
    scheduling: ByOwner  # deployments take turns; each is scheduled by its own policy
    engine: LiveEngine
    sources: dict[str, RunningSource] = field(default_factory=dict)  # by source key
    queries: dict[str, RunningQuery] = field(default_factory=dict)  # by pipeline/query
    pipelines: dict[str, PipelineSpec] = field(default_factory=dict)  # running versions
    # Sinks of stopped queries whose broker was away: flushed and closed by the next
    # checkpoint that can (checkpointer.py), so their last results are not lost.
    retiring: list[Any] = field(default_factory=list)

    def queries_of(self, pipeline: str) -> list[RunningQuery]:
        return [q for q in self.queries.values() if q.pipeline == pipeline]

    def retire(self, writer: Any) -> None:
        """Deliver and close a stopped query's result writer; if its broker is away, keep it
        until a checkpoint can flush it."""
        try:
            writer.flush()
        except Unreachable as e:
            log.warning("a stopped query's sink waits for its broker: %s", e.outage.describe())
            self.retiring.append(writer)
            return
        writer.close()

    def tune(self, part: Any) -> Any:
        """A reader or writer set up for the worker: a flush of a Kafka producer waits at most
        `flush_timeout` seconds without an acknowledgement (the engine waits for it)."""
        if hasattr(part, "flush_timeout"):
            part.flush_timeout = self.config.flush_timeout
        return part


def source_key(stream: StreamSpec, time_unit: str) -> str:
    """Streams declared alike (in any pipeline) are one source."""
    data = {
        **stream_json(stream),
        "schema": [(f.name, f.type.value) for f in stream.schema],  # in order
        "max_delay": stream.max_delay,
        "late": stream.late,
        "heartbeat": stream.heartbeat,
        "time_unit": time_unit,
    }
    return f"{stream.name}@{hash_text(json.dumps(data, sort_keys=True, default=str))[:10]}"


def worker_sink(sink: SinkSpec) -> SinkSpec:
    """File sinks append under the worker: a restart must not erase delivered results."""
    if sink.type == "file":
        return replace(sink, options={**sink.options, "append": True})
    return sink


def declared(inputs: dict[str, StreamSpec], name: str) -> str:
    """The declared spelling of stream or relation `name` (CQL names are case-insensitive)."""
    if name in inputs:
        return name
    lower = {k.lower(): k for k in inputs}
    return lower[name.lower()]


def hash_text(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def file_digest(path: Path) -> str:
    """The SHA-256 of a file's bytes ("" when it cannot be read)."""
    try:
        return hashlib.sha256(path.read_bytes()).hexdigest()
    except OSError:
        return ""
