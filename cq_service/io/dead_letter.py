"""The dead-letter sink: where malformed source records and late elements go, with a reason.

Each entry is one JSON object per line:

- a malformed record: ``{"source", "file", "record", "reason", "raw"}``
  (see `DeadRecord`);
- a late element: ``{"source", "reason", "_ts", "row": {…}}`` (see `LateElement`).

The file is opened (and truncated) at the first entry, so there is no file when nothing was
dead-lettered; a file left by an earlier run at the same path is removed when the sink is
created, so the file exists exactly when this run dead-lettered something. The spec may also
be ``stdout``, ``blackhole`` (count only) or ``kafka`` (each entry one message on `topic`,
acknowledged by the broker when the sink is flushed; while the broker is away the entries are
kept, `flush` raises `Unreachable` and `outage` says why, as for Kafka result sinks).
"""

from __future__ import annotations

import json
import os
import sys
from collections import deque
from collections.abc import Iterable
from typing import Any, BinaryIO

from cq_service.errors import Outage
from cq_service.io.base import DeadRecord, LateElement, SinkError, json_safe
from cq_service.io.kafka_client import bootstrap_servers
from cq_service.io.kafka_sink import KafkaWriter
from cq_service.spec.model import SinkSpec

__all__ = ["DeadLetterSink"]

RECENT = 5  # the newest entries kept in memory as samples (the worker's web view shows them)


class DeadLetterSink:
    """Writes `DeadRecord`s and `LateElement`s as JSON lines (file, stdout, blackhole or
    kafka)."""

    def __init__(self, spec: SinkSpec):
        self.spec = spec
        self._count = 0
        self.recent: deque[str] = deque(maxlen=RECENT)  # the newest entries, JSON text
        self._file: BinaryIO | None = None
        self._kafka: KafkaWriter | None = None
        self._closed = False
        if spec.type == "file":
            if not spec.path:
                raise SinkError("the dead-letter sink needs a path", spec.span)
            if spec.format not in (None, "jsonl"):
                raise SinkError(
                    f"the dead-letter sink writes jsonl, not {spec.format!r}", spec.span
                )
            # The worker appends (`append` option): a restart must not erase dead letters.
            if os.path.isfile(spec.path) and not spec.options.get("append"):
                os.remove(spec.path)
        elif spec.type == "kafka":
            opts = spec.options
            if not opts.get("topic") or opts.get("key"):
                raise SinkError("a kafka dead-letter sink takes a topic and no key", spec.span)
            servers = bootstrap_servers(opts.get("bootstrap_servers"))
            self._kafka = KafkaWriter(
                servers, opts.get("producer"), span=spec.span,
                role=f"dead-letter topic {opts['topic']}", client=opts.get("client"),
            )  # fmt: skip
        elif spec.type not in ("stdout", "blackhole"):
            raise SinkError(f"unsupported dead-letter sink {spec.type!r}", spec.span)

    @property
    def count(self) -> int:
        """Entries written so far."""
        return self._count

    @property
    def outage(self) -> Outage | None:
        """Why a kafka dead-letter topic cannot take entries now (None: it can, or not kafka)."""
        return None if self._kafka is None else self._kafka.outage

    @property
    def dependency(self) -> str | None:
        return None if self._kafka is None else self._kafka.dependency

    @property
    def pending(self) -> tuple[int, int]:
        """Entries (and bytes) written but not acknowledged yet (kafka only)."""
        return (0, 0) if self._kafka is None else self._kafka.pending

    @property
    def flush_timeout(self) -> float | None:
        return None if self._kafka is None else self._kafka.flush_timeout

    @flush_timeout.setter
    def flush_timeout(self, seconds: float) -> None:
        if self._kafka is not None:
            self._kafka.flush_timeout = seconds

    @property
    def path(self) -> str | None:
        """The file written to (file sinks only)."""
        return self.spec.path if self.spec.type == "file" else None

    def write(self, items: Iterable[DeadRecord | LateElement]) -> int:
        """Write entries; returns how many were written."""
        if self._closed:
            raise SinkError("write to a closed dead-letter sink")
        lines = [_line(item) for item in items]
        if not lines:
            return 0
        if self.spec.type == "file":
            self._open().write("".join(lines).encode("utf-8"))
        elif self.spec.type == "stdout":
            sys.stdout.write("".join(lines))
        elif self._kafka is not None:
            for line in lines:
                self._kafka.send(self.spec.options["topic"], line[:-1].encode("utf-8"))
        self._count += len(lines)
        self.recent.extend(line[:-1] for line in lines[-RECENT:])
        return len(lines)

    def flush(self) -> None:
        """Push entries out (kafka: wait until the broker acknowledged them; SinkError if not)."""
        if self._file is not None:
            self._file.flush()
        elif self.spec.type == "stdout":
            sys.stdout.flush()
        elif self._kafka is not None:
            self._kafka.flush()

    def close(self) -> None:
        """Flush and close (idempotent)."""
        if self._closed:
            return
        self._closed = True
        try:
            self.flush()
        finally:
            if self._file is not None:
                self._file.close()
            if self._kafka is not None:
                self._kafka.close()

    def __enter__(self) -> DeadLetterSink:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _open(self) -> BinaryIO:
        if self._file is None:
            path = self.spec.path
            assert path is not None
            try:
                parent = os.path.dirname(path)
                if parent:
                    os.makedirs(parent, exist_ok=True)
                mode = "ab" if self.spec.options.get("append") else "wb"
                self._file = open(path, mode)  # noqa: SIM115 - closed by close()
            except OSError as e:
                raise SinkError(
                    f"cannot open dead-letter file {path}: {e.strerror}", self.spec.span
                ) from None
        return self._file


def _line(item: DeadRecord | LateElement | Any) -> str:
    if not isinstance(item, DeadRecord | LateElement):
        raise TypeError(f"not a dead-letter entry: {item!r}")
    obj = json_safe(item.to_json())
    return json.dumps(obj, ensure_ascii=False, allow_nan=False, default=str) + "\n"
