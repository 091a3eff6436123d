"""At-least-once delivery without state snapshots: what a restarted worker must replay.

The worker keeps no copy of operator state. A checkpoint records, per query, its frontier F —
every result with timestamp ≤ F has been acknowledged by the sink — and, per source partition,
the offset from which replaying rebuilds every window that can still contribute to a result
after F. A restarted worker seeks there, recomputes, and drops results with timestamp ≤ F.

How far back a query needs its input is its horizon (`horizons`): a `[Range T Slide L]` window
needs elements from F − T − L on; an `Istream` of filters and projections over a stream needs
nothing before F; a `[Rows N]`, partitioned or unbounded window, or a relation, needs the whole
history (None), so its source is replayed from where the worker first started reading it.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import numpy as np

from cq_service.cql import logical as L
from cq_service.engine.operators.base import NEVER

__all__ = ["OffsetTracker", "ResumeFilter", "combine_cuts", "horizons", "query_cut"]


def horizons(op: L.LogicalOp) -> dict[str, int | None]:
    """Source name -> how many time units before a result's instant its elements can matter
    (None: from the beginning)."""
    out: dict[str, int | None] = {}
    _visit(op, 0, out)
    return out


def _merge(out: dict[str, int | None], name: str, h: int | None) -> None:
    if name in out:
        old = out[name]
        out[name] = None if old is None or h is None else max(old, h)
    else:
        out[name] = h


def _visit(op: L.LogicalOp, need: int | None, out: dict[str, int | None]) -> None:
    if isinstance(op, L.Source):
        _merge(out, op.name, None if op.is_relation else need)
        return
    if isinstance(op, L.RelToStream) and op.op == "istream" and need is not None:
        inner = _stateless_over_unbounded(op.input)
        if inner is not None:  # Istream(filters of S [Unbounded]) is S filtered: no state
            _visit(inner, need, out)
            return
    if isinstance(op, L.WindowOp):
        w = op.window
        if w.kind == "range" and need is not None:
            _visit(op.input, need + int(w.size or 0) + int(w.slide or 0) + 1, out)
        else:
            _visit(op.input, None, out)
        return
    extra = 1 if isinstance(op, L.RelToStream) else 0  # Istream/Dstream compare with τ − 1
    for child in L.children(op):
        _visit(child, None if need is None else need + extra, out)


def _stateless_over_unbounded(op: L.LogicalOp) -> L.LogicalOp | None:
    """The stream under filters and projections over an unbounded window, else None."""
    if isinstance(op, L.Filter | L.Project):
        return _stateless_over_unbounded(op.input)
    if isinstance(op, L.WindowOp) and op.window.kind == "unbounded" and op.window.where is None:
        return op.input if op.input.is_stream else None
    return None


def query_cut(frontier: int, horizon: int | None, start_after: int, is_relation: bool) -> int | None:
    """The earliest timestamp of a source a query can still need, given its frontier, its
    horizon on that source and its gate (None: the whole history)."""
    if is_relation:
        return None
    low = None if start_after == NEVER else start_after + 1
    if horizon is None or frontier == NEVER:
        return low
    cut = frontier + 1 - horizon
    return cut if low is None else max(cut, low)


def combine_cuts(cuts: Iterable[int | None]) -> int | None:
    """The earliest of several cuts (None — everything — wins)."""
    low: int | None = np.iinfo(np.int64).max
    for c in cuts:
        if c is None:
            return None
        low = min(low, c)  # type: ignore[type-var]
    return low


class OffsetTracker:
    """Wraps a partitioned live reader and remembers the (partition, offset, timestamp) of
    every element it read, so `offsets(cut)` can say where a replay must start to see every
    element with timestamp ≥ cut. Memory is bounded by the horizon: what lies before the last
    committed offsets is forgotten."""

    def __init__(self, reader: Any):
        self.reader = reader
        self.start: dict[int, int] | None = None  # where this worker began reading
        # p -> (offsets, ts) pieces as read; joined only when a checkpoint asks (`_joined`)
        self._parts: dict[int, list[tuple[np.ndarray, np.ndarray]]] = {}

    def __getattr__(self, name: str) -> Any:
        return getattr(self.reader, name)

    def read(self) -> Any:
        if self.start is None:
            self.start = dict(self.reader.positions())
        chunk = self.reader.read()
        if chunk is None or chunk.partition is None or len(chunk) == 0:
            return chunk
        parts = np.asarray(chunk.partition)
        offsets = np.asarray(chunk.record, dtype=np.int64)
        ts = np.asarray(chunk.ts, dtype=np.int64)
        for p in np.unique(parts).tolist():
            m = parts == p
            self._parts.setdefault(p, []).append((offsets[m], ts[m]))
        return chunk

    def _joined(self, p: int) -> tuple[np.ndarray, np.ndarray]:
        pieces = self._parts[p]
        if len(pieces) > 1:
            pieces[:] = [(np.concatenate([o for o, _ in pieces]), np.concatenate([t for _, t in pieces]))]
        return pieces[0]

    def offsets(self, cut: int | None) -> dict[int, int]:
        """Per partition, the offset to replay from so every element with timestamp ≥ `cut`
        is read again (None: from where this worker started)."""
        if self.start is None:
            return {}
        if cut is None:
            return dict(self.start)
        result = dict(self.reader.positions())
        for p in self._parts:
            offsets, ts = self._joined(p)
            needed = offsets[ts >= cut]
            if len(needed):
                first = int(needed.min())
                result[p] = min(result.get(p, first), first)
        for p, o in self.start.items():
            result.setdefault(p, o)
        return result

    def forget_before(self, offsets: dict[int, int]) -> None:
        """Drop what lies before committed `offsets`: no replay will start earlier."""
        for p, o in offsets.items():
            if p in self._parts:
                got_offsets, got_ts = self._joined(p)
                keep = got_offsets >= o
                self._parts[p] = [(got_offsets[keep], got_ts[keep])]
        self.start = {**(self.start or {}), **offsets}


class ResumeFilter:
    """A result writer that drops elements at or before `frontier` (delivered before a
    restart) and passes the rest to `writer`."""

    def __init__(self, writer: Any, frontier: int):
        self.writer = writer
        self.frontier = frontier
        self.dropped = 0

    def __getattr__(self, name: str) -> Any:
        return getattr(self.writer, name)

    def write(self, ts: np.ndarray, ops: np.ndarray, columns) -> None:
        if self.frontier == NEVER or len(ts) == 0 or ts[0] > self.frontier:
            self.writer.write(ts, ops, columns)
            return
        keep = np.asarray(ts) > self.frontier
        self.dropped += int((~keep).sum())
        if keep.any():
            idx = np.flatnonzero(keep)
            self.writer.write(ts[idx], ops[idx], [c.take(idx) for c in columns])
