"""Writing the worker's checkpoints, and what the last worker of this name left to restore.

Every `checkpoint_interval` and after every deployment (`Checkpointer.write`): flush every
sink, then record each query's frontier, gates and version and, per Kafka source partition,
the offset a replay must start from (checkpoint.py), in the catalog under the worker's name;
then commit those offsets to the sources' consumer groups. A restarted worker seeks its
sources there and rebuilds each unchanged query (`saved_query`, `saved_offsets`).
"""

from __future__ import annotations

from typing import Any

from cq_service.engine.operators.base import NEVER
from cq_service.service import failpoints
from cq_service.service.checkpoint import OffsetTracker, combine_cuts, query_cut
from cq_service.service.running import Runtime

__all__ = ["Checkpointer"]


class Checkpointer:
    def __init__(self, rt: Runtime):
        self.rt = rt
        self.written = 0  # checkpoints written by this worker
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

    def write(self) -> None:
        """Make every result so far durable, then record what a restart must replay."""
        rt = self.rt
        for sink in rt.engine.sinks.values():
            sink.writer.flush()
        for s in rt.sources.values():
            s.dead_letter.flush()
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
                s.reader.commit(at, metadata=rt.config.name)
                s.reader.forget_before(at)
        self.written += 1


def _min_frontier(queries: dict[str, dict[str, Any]]) -> int:
    values = [int(d["frontier"]) for d in queries.values()]
    return min(values) if values else int(NEVER)
