"""Writing the worker's checkpoints and state snapshots.

Every `checkpoint_interval` and after every deployment (`Checkpointer.write`): flush every
sink, then record each query's frontier, gates and version and, per Kafka source partition,
the offset a replay must start from (checkpoint.py), in the catalog under the worker's name;
then commit those offsets to the sources' consumer groups.

Every `snapshot_interval`, a checkpoint also writes a state snapshot first: the engine is
quiesced, the state of every source and operator taken (engine/live.py), the sinks flushed —
so every result computed before the cut is acknowledged — and the state, each query's version
and frontier and each Kafka source's offsets at the cut written to the snapshot store
(snapshots.py). A restarted worker loads the newest usable snapshot and reads only from its
offsets on (restore.py); the checkpoint's frontiers say which of the results it computes again
were delivered already.

A checkpoint only ever records what was acknowledged: when a sink cannot flush (its broker is
away) or the catalog cannot be reached, nothing is recorded and the checkpoint is tried again
after a backoff (`due`); the results stay buffered in their sinks meanwhile. An offset commit
that fails for an unreachable broker is left to the next checkpoint (the catalog's record is
the one a restart reads).
"""

from __future__ import annotations

import logging
import pickle
import time
from contextlib import suppress
from typing import Any

from cq_service.engine.operators.base import NEVER
from cq_service.errors import Outage, Unreachable
from cq_service.io.reachability import Backoff
from cq_service.service import failpoints
from cq_service.service.checkpoint import OffsetTracker, combine_cuts, query_cut
from cq_service.service.dependencies import Dependencies
from cq_service.service.restore import SNAPSHOT_FORMAT, RestorePoint
from cq_service.service.running import Runtime
from cq_service.service.snapshots import SnapshotStore

__all__ = ["Checkpointer"]

log = logging.getLogger("cq.worker")


class Checkpointer:
    def __init__(
        self,
        rt: Runtime,
        restore: RestorePoint,
        store: SnapshotStore | None,
        dependencies: Dependencies | None = None,
    ):
        self.rt = rt
        self.restore = restore
        self.store = store  # None: no snapshots (snapshot_interval 0)
        self.snapshot_due = time.monotonic() + rt.config.snapshot_interval
        self.last_snapshot: int | None = None  # number of the last snapshot written
        self.snapshot_failures = 0
        self.snapshot_seconds: float | None = None  # how long the last one took
        self.written = 0  # checkpoints written by this worker
        self.due = 0.0  # monotonic time the next checkpoint is due at
        self.last_written: float | None = None  # time.time() of the last checkpoint written
        self.postponed: Outage | None = None  # why the last attempt recorded nothing
        self._attempts = 0  # failed attempts in a row
        self._backoff = Backoff(rt.config.retry_backoff, rt.config.retry_backoff_max)
        self._dependencies = dependencies

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
        snapshot = None
        began = time.monotonic()
        if self.store is not None and began >= self.snapshot_due:
            snapshot = self._take_snapshot()  # quiesces: what it computes is flushed below
        for sink in rt.engine.sinks.values():
            sink.writer.flush()
        for s in rt.sources.values():
            s.dead_letter.flush()
        self._retire()
        failpoints.hit("checkpoint.flushed")
        if snapshot is not None:
            self._write_snapshot(snapshot)
            self.snapshot_seconds = time.monotonic() - began
            log.info("snapshot %s written in %.3f s", self.last_snapshot, self.snapshot_seconds)
            failpoints.hit("snapshot.written")
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
        pending_queries, pending_offsets = self.restore.pending()
        for key, data in pending_queries.items():
            queries.setdefault(key, data)
        for key, data in pending_offsets.items():
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

    def _take_snapshot(self) -> dict[str, Any]:
        """The engine's state at a cut, with what a restart needs to go on from it."""
        rt = self.rt
        engine = rt.engine.snapshot()
        positions = {
            key: {int(p): int(o) for p, o in s.reader.positions().items()}
            for key, s in rt.sources.items()
            if hasattr(s.reader, "positions")
        }
        queries = {
            key: {"version": q.version, "frontier": int(rt.engine.sinks[key].watermark)}
            for key, q in rt.queries.items()
        }
        return {"format": SNAPSHOT_FORMAT, "worker": rt.config.name, "created": time.time(),
                "queries": queries, "positions": positions, "engine": engine}

    def _write_snapshot(self, payload: dict[str, Any]) -> None:
        """Write a taken snapshot (its results are flushed); a store that fails is logged
        and counted, and the checkpoint goes on without it."""
        assert self.store is not None
        try:
            self.last_snapshot = self.store.write(payload)
        except (OSError, pickle.PicklingError, TypeError, AttributeError) as e:  # disk, pickle
            self.snapshot_failures += 1
            log.error("state snapshot not written: %s", e)
        self.snapshot_due = time.monotonic() + self.rt.config.snapshot_interval

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
