"""`[Range T]`, `[Now]` and `[Range T Slide L]`, with granularity Γ(g) and run-time changes.

Every admitted tuple has an entry and an exit instant: for `[Range T]` it enters at its
timestamp t and leaves at t + T + 1; with `Slide L` it enters at the first multiple of L ≥ t and
leaves at the first multiple of L > t + T. Γ(g) rounds that interval inward to multiples of g
and drops it when nothing is left (brief-costmodel §1).

The size and granularity may change at run time (`adjust`): a change applies to tuples with a
timestamp from its `since` on, while tuples already admitted keep the interval they were given.
The tuples of one setting (a phase) have non-decreasing entry and exit instants, so each phase's
pending entries and exits are two FIFO queues, released as the input's time moves past them;
the phases' releases are merged in time order.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass

import numpy as np
import pyarrow as pa

from cq_service.cql.logical import BExpr
from cq_service.engine.batch import Batch, merge_ticks
from cq_service.engine.consolidate import unique_sorted
from cq_service.engine.operators.base import NEVER
from cq_service.engine.operators.window_base import WindowOperator
from cq_service.engine.queues import Queue, QueueReader

__all__ = ["RangeWindow", "WindowSetting", "entry_and_exit"]


@dataclass(frozen=True)
class WindowSetting:
    """The size and granularity given to tuples with a timestamp ≥ `since`."""

    since: int
    size: int
    granularity: int = 1


def entry_and_exit(
    batch: Batch, size: int, slide: int | None, granularity: int
) -> tuple[Batch, np.ndarray, np.ndarray]:
    """The tuples that enter the window, with their entry and exit instants: `[Range size]`
    (`Slide slide`) under Γ(granularity); a tuple whose interval Γ leaves empty is dropped."""
    t = batch.ts
    if slide is None:
        enter, leave = t, t + size + 1
    else:
        enter = -((-t) // slide) * slide
        leave = ((t + size) // slide + 1) * slide
    if granularity > 1:
        enter = -((-enter) // granularity) * granularity
        leave = (leave // granularity) * granularity
    live = enter < leave
    if not live.all():
        batch = batch.filter(live)
        enter, leave = enter[live], leave[live]
    return batch, enter, leave


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

    def bytes_after(self, instants: np.ndarray) -> np.ndarray:
        """For each of `instants`, the bytes of the tuples waiting for a later instant."""
        total = np.zeros(len(instants))
        for batch, at in self._parts:
            if len(batch):
                later = len(at) - np.searchsorted(at, instants, side="right")
                total += later * (batch.nbytes() / len(batch))
        return total

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


class _Phase:
    """The tuples admitted under one setting: their pending entries and exits."""

    def __init__(self, setting: WindowSetting) -> None:
        self.setting = setting
        self.enter = _Timeline()
        self.leave = _Timeline()

    @property
    def rows(self) -> int:
        return self.enter.rows + self.leave.rows

    def add(self, batch: Batch, slide: int | None) -> None:
        setting = self.setting
        batch, enter, leave = entry_and_exit(batch, setting.size, slide, setting.granularity)
        self.enter.add(batch, enter)
        self.leave.add(batch, leave)


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
        granularity: int = 1,
        query: str | None = None,
        names: tuple[str, ...] = (),
    ):
        super().__init__(name, inputs, output, where)
        self.slide = slide
        self.query = query  # the query whose QoS lets it be adjusted (None: fixed)
        self.names = names  # the FROM item's alias and name
        self.seen = NEVER  # the largest timestamp admitted or heartbeat received
        self._phases = [_Phase(WindowSetting(NEVER, size, granularity))]

    @property
    def setting(self) -> WindowSetting:
        """The latest setting (it may start in the future)."""
        return self._phases[-1].setting

    @property
    def size(self) -> int:
        return self.setting.size

    @property
    def granularity(self) -> int:
        return self.setting.granularity

    @property
    def label(self) -> str:
        """How adjustment logs and metrics name the window: its FROM item's alias (or name)."""
        return self.names[0] if self.names else self.name

    def describe(self) -> str:
        s = f"range window [Range {self.size}"
        s += f" Slide {self.slide}]" if self.slide else "]"
        return s + (f" Γ({self.granularity})" if self.granularity > 1 else "")

    def state_size(self) -> tuple[int, int]:
        rows = nbytes = 0
        for p in self._phases:
            rows += p.rows
            nbytes += p.enter.nbytes + p.leave.nbytes
        return rows, nbytes

    def held_after(self, instants: np.ndarray) -> np.ndarray:
        """For each of `instants`, the bytes this window will still hold then of the tuples it
        holds now: those waiting to enter or to leave after it (each tuple keeps the interval
        it was given)."""
        instants = np.asarray(instants, dtype=np.int64)
        total = np.zeros(len(instants))
        for p in self._phases:
            total += p.enter.bytes_after(instants) + p.leave.bytes_after(instants)
        return total

    def recent_rate(self, span: int) -> float:
        """Bytes per time unit admitted over the last `span` time units (up to `seen`), read
        off the exits of the tuples it holds: a tuple of a phase of size T admitted at t
        leaves at t + T + 1 (rounded by a slide or Γ, so this is approximate for those)."""
        if self.seen == NEVER or span <= 0:
            return 0.0
        total = 0.0
        for p in self._phases:
            after = np.array([self.seen - span + p.setting.size + 1], dtype=np.int64)
            total += float(p.leave.bytes_after(after)[0])
        return total / span

    @property
    def longest_stay(self) -> int:
        """The longest a tuple it holds may stay, over its settings (time units)."""
        return max(p.setting.size + (self.slide or 0) + p.setting.granularity
                   for p in self._phases)

    # -- run-time changes -----------------------------------------------------------------------

    def earliest_change(self, granularity: int | None = None) -> int:
        """The first instant a change can apply from: after every tuple already admitted and
        after pending changes; a change to a finer granularity waits for an instant of the
        current (coarser) one, so a granule in progress is finished at its own granularity."""
        at = max(self.seen + 1, self.setting.since)
        g = self.granularity
        if granularity is not None and granularity < g and self.seen != NEVER:
            at = -((-at) // g) * g
        return at

    def adjust(
        self, *, size: int | None = None, granularity: int | None = None, at: int | None = None
    ) -> WindowSetting:
        """Give tuples with a timestamp ≥ `at` (default: `earliest_change`) a new size and/or
        granularity; returns the new setting. Raises ValueError for a value below 0 or 1, or
        an `at` before `earliest_change()`."""
        cur = self.setting
        size = cur.size if size is None else size
        granularity = cur.granularity if granularity is None else granularity
        if size < 0 or granularity < 1:
            raise ValueError(f"window size {size} or granularity {granularity} out of range")
        earliest = self.earliest_change(granularity)
        if at is None:
            at = earliest
        elif at < earliest:
            raise ValueError(
                f"{self.name}: a change from instant {at} is too early; tuples up to {self.seen} "
                f"are admitted and changes are pending to {self.setting.since}"
            )
        if at == cur.since or (self.seen == NEVER and at == earliest):
            # No tuple has been admitted under `cur`, nor can one be before `at`: replace it.
            self._phases[-1].setting = WindowSetting(cur.since, size, granularity)
            return self._phases[-1].setting
        new = WindowSetting(at, size, granularity)
        self._phases.append(_Phase(new))
        return new

    # -- processing -----------------------------------------------------------------------------

    def on_batch(self, batch: Batch) -> None:
        ticks = batch.ticks
        adm = self.admit(batch)
        upto = int(batch.ts[-1]) if len(batch) else None
        if upto is not None:
            self.seen = max(self.seen, upto)
        if not len(adm):
            self._flush(upto, ticks)
            return
        phases = self._phases
        if len(phases) == 1 and self.slide is None and self.granularity == 1:
            # One setting, no rounding: tuples enter at their own timestamp.
            phases[0].leave.add(adm, adm.ts + self.size + 1)
            self._flush(upto, ticks, inserted=adm)
            return
        start = 0
        for k, phase in enumerate(phases):
            nxt = phases[k + 1].setting.since if k + 1 < len(phases) else None
            stop = len(adm) if nxt is None else int(np.searchsorted(adm.ts, nxt, side="left"))
            if stop > start:
                phase.add(adm.slice(start, stop), self.slide)
            start = stop
        self._flush(upto, ticks)

    def on_heartbeat(self, ts: int) -> None:
        self.seen = max(self.seen, ts)
        self._flush(ts, np.empty(0, dtype=np.int64))

    def _flush(self, upto: int | None, ticks: np.ndarray, inserted: Batch | None = None) -> None:
        parts: list[tuple[tuple, np.ndarray]] = []  # (columns, entry or exit instants)
        signs: list[int] = []  # per part: its elements' weight
        if upto is not None:
            for phase in self._phases:
                for b, at in phase.enter.take_until(upto):
                    parts.append((b.columns, at))
                    signs.append(1)
                for b, at in phase.leave.take_until(upto):
                    parts.append((b.columns, at))
                    signs.append(-1)
            self._retire()
        if inserted is None and not parts:
            if len(ticks):
                self.emit(self.empty(ticks))
            return
        w = np.repeat(np.array(signs, dtype=np.int64), [len(at) for _, at in parts])
        if inserted is not None:  # the tuples entering at their own instants come first
            parts.insert(0, (inserted.columns, inserted.ts))
            w = np.concatenate([inserted.w, w])
        if len(parts) == 1:
            out = Batch(parts[0][0], parts[0][1], w)
        else:
            cols = tuple(pa.concat_arrays(list(c)) for c in zip(*(cols for cols, _ in parts)))
            out = Batch(cols, np.concatenate([at for _, at in parts]), w)
        if len(parts) > 1 and not bool((out.ts[1:] >= out.ts[:-1]).all()):
            out = out.take(np.argsort(out.ts, kind="stable"))  # (sorted: the stable order)
        changes = unique_sorted(out.ts)
        self.emit(out.with_ticks(merge_ticks(ticks, changes)))

    def _retire(self) -> None:
        """Drop phases that hold nothing and that no future tuple belongs to."""
        phases = self._phases
        while len(phases) > 1 and phases[0].rows == 0 and phases[1].setting.since <= self.seen:
            phases.pop(0)
