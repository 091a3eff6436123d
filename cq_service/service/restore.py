"""What the last worker of this name left, for its queries to come back from.

Two records: the catalog's checkpoint (each query's version, frontier and gates; each Kafka
source's replay offsets — checkpoint.py) and the newest usable state snapshot in the worker's
snapshot store (snapshots.py). During the first reconcile the deployer takes from here, as each
query and source comes back:

- a source in the snapshot whose reader can seek is positioned at the snapshot's offsets and
  given its saved state (`snapshot_source`); any other source seeks to the checkpoint's
  replay offsets (`saved_offsets`);
- a query of the same version whose snapshot group reads only such sources is rebuilt from
  the group's saved plan and state (`snapshot_group`) — nothing before the snapshot is read
  again; another query of the same version is rebuilt by replay behind its old gates, as
  long as what it must replay is still there; the others start afresh.

After the first reconcile what did not come back is forgotten (`forget`).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

from cq_service.catalog import Catalog
from cq_service.engine.live import EngineState, GroupState
from cq_service.service.snapshots import SnapshotStore

__all__ = ["SNAPSHOT_FORMAT", "RestorePoint"]

log = logging.getLogger("cq.worker")

SNAPSHOT_FORMAT = 1  # of the payload the checkpointer writes (checkpointer.py)


@dataclass
class _Snapshot:
    seq: int
    queries: dict[str, dict[str, Any]]  # query -> version, frontier at the cut
    positions: dict[str, dict[int, int]]  # source key -> partition -> next offset
    engine: EngineState


class RestorePoint:
    def __init__(self, catalog: Catalog, worker: str, store: SnapshotStore | None):
        saved = catalog.load_checkpoint(worker)
        self._queries: dict[str, dict[str, Any]] = dict(saved.queries or {}) if saved else {}
        self._offsets: dict[str, dict[str, int]] = dict(saved.offsets or {}) if saved else {}
        self.snapshot: _Snapshot | None = None
        self.started_from: int | None = None  # the snapshot's number (kept after `forget`)
        found = store.latest() if store is not None else None
        if found is not None:
            seq, payload = found
            if isinstance(payload, dict) and payload.get("format") == SNAPSHOT_FORMAT:
                self.snapshot = _Snapshot(seq, payload["queries"], payload["positions"],
                                          payload["engine"])
                self.started_from = seq
                log.info("restoring from snapshot %d (%d queries, %d sources)", seq,
                         len(payload["queries"]), len(payload["positions"]))
            else:
                log.warning("snapshot %d is of another format: not used", seq)
        self.restored_sources: dict[str, int] = {}  # source key -> its watermark at the cut

    # -- the catalog's checkpoint ---------------------------------------------------------------

    def saved_query(self, key: str) -> dict[str, Any] | None:
        """The last worker's frontier, gates and version of query `key` (once)."""
        return self._queries.pop(key, None)

    def saved_offsets(self, source: str) -> dict[str, int] | None:
        """Where the last checkpoint says source `source` must be replayed from."""
        return self._offsets.get(source)

    def pending(self) -> tuple[dict[str, dict[str, Any]], dict[str, dict[str, int]]]:
        """What is not back yet (a checkpoint during the first reconcile keeps it)."""
        return self._queries, self._offsets

    # -- the snapshot ---------------------------------------------------------------------------

    def snapshot_source(self, key: str) -> tuple[dict[int, int], dict[str, Any]] | None:
        """(offsets, state) of source `key` at the snapshot, if it is in it."""
        snap = self.snapshot
        if snap is None or key not in snap.positions or key not in snap.engine.sources:
            return None
        return snap.positions[key], snap.engine.sources[key]

    def snapshot_group(self, query: str, version: str) -> GroupState | None:
        """The saved group of query `query`, if the snapshot holds it at this version."""
        snap = self.snapshot
        if snap is None or snap.queries.get(query, {}).get("version") != version:
            return None
        return snap.engine.group_of(query)

    def snapshot_frontier(self, query: str) -> int | None:
        snap = self.snapshot
        data = None if snap is None else snap.queries.get(query)
        return None if data is None else int(data["frontier"])

    def forget(self) -> None:
        """After the first reconcile: what did not come back is not kept any longer."""
        self._queries.clear()
        self._offsets.clear()
        self.snapshot = None
        self.restored_sources.clear()
