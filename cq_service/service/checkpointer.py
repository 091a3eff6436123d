"""Writing the worker's checkpoints, and what the last worker of this name left to restore.

Every `checkpoint_interval` and after every deployment (`Checkpointer.write`): flush every
sink, then record each query's frontier, gates and version and, per Kafka source partition,
the offset a replay must start from (checkpoint.py), in the catalog under the worker's name;
then commit those offsets to the sources' consumer groups. A restarted worker seeks its
sources there and rebuilds each unchanged query (`saved_query`, `saved_offsets`).

A checkpoint only ever records what was acknowledged: when a sink cannot flush (its broker is
away) or the catalog cannot be reached, nothing is recorded and the checkpoint is tried again
after a backoff (`due`); the results stay buffered in their sinks meanwhile. An offset commit
that fails for an unreachable broker is left to the next checkpoint (the catalog's record is
the one a restart reads).
"""

from __future__ import annotations

import logging
import time
from contextlib import suppress
from typing import Any

from cq_service.engine.operators.base import NEVER
from cq_service.errors import Outage, Unreachable
from cq_service.io.reachability import Backoff
from cq_service.service import failpoints
from cq_service.service.checkpoint import OffsetTracker, combine_cuts, query_cut
from cq_service.service.dependencies import Dependencies
from cq_service.service.running import Runtime

__all__ = ["Checkpointer"]

log = logging.getLogger("cq.worker")


class Checkpointer:
    def __init__(self, rt: Runtime, dependencies: Dependencies | None = None):
        self.rt = rt
        self.written = 0  # checkpoints written by this worker
        self.due = 0.0  # monotonic time the next checkpoint is due at
        self.last_written: float | None = None  # time.time() of the last checkpoint written
        self.postponed: Outage | None = None  # why the last attempt recorded nothing
        self._attempts = 0  # failed attempts in a row
        self._backoff = Backoff(rt.config.retry_backoff, rt.config.retry_backoff_max)
        self._dependencies = dependencies
        # What the last worker of this name left: consumed as its queries come back during the
        # first reconcile, then forgotten (`forget_saved`).
        saved = rt.catalog.load_checkpoint(rt.config.name)
        self._queries: dict[str, dict[str, Any]] = dict(saved.queries or {}) if saved else {}
        self._offsets: dict[str, dict[str, int]] = dict(saved.offsets or {}) if saved else {}

    # -- restoring ------------------------------------------------------------------------------

    def saved_query(self, key: str) -> dict[str, Any] | None:
        """The last worker's frontier, gates and version of query `key` (once)."""
        return self._queries.pop(key, None)

    def saved_offsets(self, source: str) -> dict[str, int] | None:
        """Where the last worker's checkpoint says source `source` must be replayed from."""
        return self._offsets.get(source)

    def forget_saved(self) -> None:
        """After the first reconcile: what did not come back is not kept any longer."""
        self._queries.clear()
        self._offsets.clear()

    # -- writing --------------------------------------------------------------------------------

    def write(self) -> bool:
        """Make every result so far durable, then record what a restart must replay; the next
        one is `due` a `checkpoint_interval` later. False (nothing recorded) when a dependency
        cannot be reached: the next attempt is `due` after a backoff."""
        now = time.monotonic()
        try:
            self._write()
        except Unreachable as e:
            self._postpone(e.outage, now)
            return False
        if self.postponed is not None:
            log.info("checkpoint written, after %d postponed attempt(s)", self._attempts)
        self.postponed, self._attempts = None, 0
        self._backoff.reset()
        self.due = now + self.rt.config.checkpoint_interval
        return True

    def _postpone(self, outage: Outage, now: float) -> None:
        if self.postponed is None:
            log.warning("checkpoint postponed (tried again with backoff): %s", outage.describe())
        self.postponed = outage
        self._attempts += 1
        if self._dependencies is not None:
            self._dependencies.retried(outage.dependency)
        self.due = now + self._backoff.next()

    def _write(self) -> None:
        rt = self.rt
        for sink in rt.engine.sinks.values():
            sink.writer.flush()
        for s in rt.sources.values():
            s.dead_letter.flush()
        self._retire()
        failpoints.hit("checkpoint.flushed")
        frontiers = {key: rt.engine.sinks[key].watermark for key in rt.queries}
        queries = {
            key: {
                "frontier": int(frontiers[key]),
                "gates": {k: int(v) for k, v in q.gates.items()},
                "version": q.version,
            }
            for key, q in rt.queries.items()
        }
        offsets: dict[str, dict[str, int]] = {}
        for key, s in rt.sources.items():
            if not isinstance(s.reader, OffsetTracker):
                continue
            cuts = [
                query_cut(
                    frontiers[q.key],
                    q.horizons.get(key),
                    q.gates.get(key, NEVER),
                    key in q.relations,
                )
                for q in rt.queries.values()
                if key in q.source_keys.values()
            ]
            at = s.reader.offsets(combine_cuts(cuts))
            offsets[key] = {str(p): int(o) for p, o in at.items()}
        # During the first reconcile, what the last worker left for queries and sources not
        # back yet is kept, so nothing is lost before they are.
        for key, data in self._queries.items():
            queries.setdefault(key, data)
        for key, data in self._offsets.items():
            offsets.setdefault(key, data)
        rt.catalog.save_checkpoint(rt.config.name, _min_frontier(queries), offsets, queries)
        failpoints.hit("checkpoint.saved")
        for key, s in rt.sources.items():
            if isinstance(s.reader, OffsetTracker) and key in offsets:
                at = {int(p): o for p, o in offsets[key].items()}
                with suppress(Unreachable):  # the group catches up at the next checkpoint
                    s.reader.commit(at, metadata=rt.config.name)
                s.reader.forget_before(at)
        self.written += 1
        self.last_written = time.time()

    def _retire(self) -> None:
        """Deliver and close the sinks of stopped queries that waited for their broker."""
        rt = self.rt
        for writer in list(rt.retiring):
            try:
                writer.flush()
            except Unreachable:
                continue
            writer.close()
            rt.retiring.remove(writer)


def _min_frontier(queries: dict[str, dict[str, Any]]) -> int:
    values = [int(d["frontier"]) for d in queries.values()]
    return min(values) if values else int(NEVER)
