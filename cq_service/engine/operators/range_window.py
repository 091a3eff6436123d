"""`[Range T]`, `[Now]` and `[Range T Slide L]`.

Every admitted tuple has an entry and an exit instant: for `[Range T]` it enters at its
timestamp t and leaves at t + T + 1; with `Slide L` it enters at the first multiple of L ≥ t and
leaves at the first multiple of L > t + T. Both are non-decreasing in t, so pending entries and
exits are two FIFO queues, released as the input's time moves past them.
"""

from __future__ import annotations

from collections import deque

import numpy as np

from cq_service.cql.logical import BExpr
from cq_service.engine.batch import Batch, merge_ticks
from cq_service.engine.consolidate import unique_sorted
from cq_service.engine.operators.window_base import WindowOperator
from cq_service.engine.queues import Queue, QueueReader

__all__ = ["RangeWindow"]


class _Timeline:
    """Tuples waiting for an instant, in non-decreasing instant order."""

    def __init__(self) -> None:
        self._parts: deque[tuple[Batch, np.ndarray]] = deque()
        self.rows = 0
        self.nbytes = 0

    def add(self, batch: Batch, at: np.ndarray) -> None:
        if len(batch):
            self._parts.append((batch, at))
            self.rows += len(batch)
            self.nbytes += batch.nbytes()

    def take_until(self, upto: int) -> list[tuple[Batch, np.ndarray]]:
        out = []
        while self._parts:
            batch, at = self._parts[0]
            k = int(np.searchsorted(at, upto, side="right"))
            if k == 0:
                break
            self.rows -= len(batch)
            self.nbytes -= batch.nbytes()
            if k == len(batch):
                self._parts.popleft()
                out.append((batch, at))
            else:
                head, tail = batch.slice(0, k), batch.slice(k, len(batch))
                self._parts[0] = (tail, at[k:])
                self.rows += len(tail)
                self.nbytes += tail.nbytes()
                out.append((head, at[:k]))
        return out


class RangeWindow(WindowOperator):
    kind = "range window"

    def __init__(
        self,
        name: str,
        inputs: list[QueueReader],
        output: Queue,
        size: int,
        slide: int | None,
        where: BExpr | None,
    ):
        super().__init__(name, inputs, output, where)
        self.size = size
        self.slide = slide
        self._enter = _Timeline()  # only used with a slide
        self._leave = _Timeline()

    def describe(self) -> str:
        s = f"range window [Range {self.size}"
        return s + (f" Slide {self.slide}]" if self.slide else "]")

    def state_size(self) -> tuple[int, int]:
        return self._enter.rows + self._leave.rows, self._enter.nbytes + self._leave.nbytes

    def on_batch(self, batch: Batch) -> None:
        ticks = batch.ticks
        adm = self.admit(batch)
        upto = int(batch.ts[-1]) if len(batch) else None
        if len(adm):
            t = adm.ts
            if self.slide is None:
                self._leave.add(adm, t + self.size + 1)
                self._flush(upto, ticks, inserted=adm)
                return
            L = self.slide
            enter = -((-t) // L) * L
            leave = ((t + self.size) // L + 1) * L
            live = enter < leave
            if not live.all():
                adm = adm.filter(live)
                enter, leave = enter[live], leave[live]
            self._enter.add(adm, enter)
            self._leave.add(adm, leave)
        self._flush(upto, ticks)

    def on_heartbeat(self, ts: int) -> None:
        self._flush(ts, np.empty(0, dtype=np.int64))

    def _flush(self, upto: int | None, ticks: np.ndarray, inserted: Batch | None = None) -> None:
        parts: list[Batch] = []
        if inserted is not None:
            parts.append(inserted)
        if upto is not None:
            for b, at in self._enter.take_until(upto):
                parts.append(Batch(b.columns, at, np.ones(len(b), np.int64)))
            for b, at in self._leave.take_until(upto):
                parts.append(Batch(b.columns, at, -np.ones(len(b), np.int64)))
        if not parts:
            if len(ticks):
                self.emit(self.empty(ticks))
            return
        out = Batch.concat([Batch(p.columns, p.ts, p.w) for p in parts])
        if len(parts) > 1 and not bool((out.ts[1:] >= out.ts[:-1]).all()):
            out = out.take(np.argsort(out.ts, kind="stable"))  # (sorted: the stable order)
        changes = unique_sorted(out.ts)
        self.emit(out.with_ticks(merge_ticks(ticks, changes)))

