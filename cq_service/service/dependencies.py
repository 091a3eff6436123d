"""What the worker depends on — Kafka brokers, the catalog database — and whether each answers.

The engine thread gathers, every `INTERVAL_S`, the outage every part reports (`gather`): each
running source and sink (their readers' and writers' `outage`), the dead-letter sinks, the
sinks of removed queries still waiting to deliver, the deployments waiting for a dependency,
and the catalog. `Dependencies.observe` keeps the current set and counts outages (an outage
begins when a dependency that answered stops answering, and ends when every part that reported
it is fine again). The HTTP API reads it from its own thread: `/readyz` lists the reasons,
`/metrics` shows `cq_dependency_up`, `cq_dependency_outages_total` and
`cq_dependency_retries_total` (retries are counted by whoever retries: checkpoints,
deployments, catalog pings).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from cq_service.errors import Outage
from cq_service.service.running import Runtime

__all__ = ["INTERVAL_S", "Dependencies", "DependencyState", "gather"]

log = logging.getLogger("cq.worker")

INTERVAL_S = 0.1  # how often the engine thread gathers the outages


@dataclass(frozen=True)
class DependencyState:
    """One dependency as `/metrics` shows it."""

    up: bool
    outages: int  # outages begun since the worker started
    retries: int  # failed operations retried because of it


class Dependencies:
    """The dependencies seen so far, their outages now, and counters (thread-safe)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._known: set[str] = set()
        self._now: list[Outage] = []
        self._outages: dict[str, int] = {}
        self._retries: dict[str, int] = {}

    def observe(self, known: Iterable[str], outages: Iterable[Outage]) -> None:
        """The dependencies in use now (`known`) and the outages reported now."""
        outages = sorted(set(outages), key=lambda o: (o.dependency, o.role, o.since))
        down = {o.dependency for o in outages}
        with self._lock:
            was_down = {o.dependency for o in self._now}
            self._known |= set(known) | down
            for name in sorted(down - was_down):
                self._outages[name] = self._outages.get(name, 0) + 1
            began = [o for o in outages if o.dependency not in was_down]
            ended = {
                name: min(o.since for o in self._now if o.dependency == name)
                for name in was_down - down
            }
            self._now = outages
        for o in began:
            log.warning("unreachable: %s", o.describe())
        for name, since in sorted(ended.items()):
            log.info("%s answers again (after %.1f s)", name, time.time() - since)

    def retried(self, dependency: str) -> None:
        """Count one retry of an operation that failed because `dependency` was away."""
        with self._lock:
            self._retries[dependency] = self._retries.get(dependency, 0) + 1

    def reasons(self) -> list[str]:
        """One line per outage now (``kafka …: sink topic out: connection refused since …``)."""
        with self._lock:
            return [o.describe() for o in self._now]

    def outages(self) -> list[Outage]:
        with self._lock:
            return list(self._now)

    def states(self) -> dict[str, DependencyState]:
        """Every dependency seen so far: whether it answers now, and its counters."""
        with self._lock:
            down = {o.dependency for o in self._now}
            return {
                name: DependencyState(
                    name not in down, self._outages.get(name, 0), self._retries.get(name, 0)
                )
                for name in sorted(self._known)
            }


def gather(rt: Runtime, extra: Iterable[Outage] = ()) -> tuple[set[str], list[Outage]]:
    """The dependencies the worker's running parts use, and the outages they report now
    (plus `extra`: e.g. deployments waiting for a dependency)."""
    known: set[str] = set()
    outages: list[Outage] = list(extra)
    for part in _parts(rt):
        dependency = getattr(part, "dependency", None)
        if dependency:
            known.add(dependency)
        outage = getattr(part, "outage", None)
        if isinstance(outage, Outage):
            outages.append(outage)
    return known, outages


def _parts(rt: Runtime) -> Iterator[Any]:
    """Every reader and writer that talks to a dependency, and the catalog."""
    yield rt.catalog
    for s in rt.sources.values():
        yield s.reader
        yield s.dead_letter
    for sink in rt.engine.sinks.values():
        yield sink.writer
    yield from rt.retiring
