"""A shared window join's buffer of one input (engine/operators/shared_join.py): the tuples
some route's window still holds, in arrival order, with their keys indexed, their timestamps by
position, and for each route window the instant a tuple leaves it and the partial windows the
policies scan."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from cq_service.engine.batch import Batch
from cq_service.engine.operators.base import NEVER
from cq_service.engine.operators.join_synopsis import JoinSide
from cq_service.engine.retract import row_hash
from cq_service.plan.shared_joins import SideWindow

__all__ = ["NEVER_EXITS", "JoinBuffer"]

NEVER_EXITS = np.iinfo(np.int64).max


class JoinBuffer:
    """One input's retained tuples in arrival order, with their keys indexed (`JoinSide`) and
    their timestamps by position (a tuple's position counts every tuple of its input).

    With `twins` on, it also counts the retained tuples by the hash of their values, so that
    `append` can say which new tuples may equal an earlier one (the shared join's
    `istream_routes`): `hash_keys` holds the distinct hashes in ascending order, `hash_counts`
    how many retained tuples have each (at least one), all kept with array operations."""

    def __init__(self, twins: bool = False) -> None:
        self.rows = JoinSide()
        self.ts = np.empty(0, np.int64)
        self.base = 0  # the position of the first retained tuple
        self.twins = twins
        self.hashes = np.empty(0, np.uint64)  # per retained tuple (with `twins`)
        self.hash_keys = np.empty(0, np.uint64)  # distinct hashes, ascending (with `twins`)
        self.hash_counts = np.empty(0, np.int64)  # retained tuples per hash (with `twins`)

    def __setstate__(self, state: dict) -> None:
        # A snapshot from before `twins` existed: such a store counts no hashes (`count_twins`).
        self.__dict__.update({"twins": False, "hashes": np.empty(0, np.uint64)})
        self.__dict__.update(state)
        self.__dict__.pop("by_hash", None)  # counted in a dict before: recount from `hashes`
        if "hash_keys" not in state:
            self._recount()

    def count_twins(self) -> None:
        """Start counting the retained tuples by hash (a store restored without the counts)."""
        if self.twins:
            return
        self.twins = True
        if len(self.ts):
            self.hashes = row_hash(list(self.rows.live_arrays()[0]))
        self._recount()

    def _recount(self) -> None:
        """The counts, from `hashes`."""
        self.hash_keys, self.hash_counts = np.unique(self.hashes, return_counts=True)
        self.hash_counts = self.hash_counts.astype(np.int64, copy=False)

    @property
    def count(self) -> int:
        """Tuples seen so far."""
        return self.base + len(self.ts)

    def nbytes(self) -> int:
        return self.rows.nbytes() + self.ts.nbytes

    def append(self, batch: Batch, keys: list[pa.Array]) -> np.ndarray | None:
        """Add the batch's tuples; with `twins`, returns which of them may equal (in every
        value) a tuple added before it, retained or earlier in the batch."""
        self.rows.append_rows(list(batch.columns), keys)
        self.ts = np.concatenate([self.ts, batch.ts])
        if not self.twins:
            return None
        h = row_hash(list(batch.columns))
        self.hashes = np.concatenate([self.hashes, h])
        # The batch's distinct hashes, how many tuples have each, and the first that does.
        order = np.argsort(h)
        sorted_h = h[order]
        starts = np.flatnonzero(np.r_[True, sorted_h[1:] != sorted_h[:-1]][: len(h)])
        distinct, first = sorted_h[starts], np.minimum.reduceat(order, starts)
        n = np.diff(np.r_[starts, len(h)])
        # A tuple is a twin if its hash is retained already or it is not its hash's first.
        at = np.searchsorted(self.hash_keys, distinct)
        known = at < len(self.hash_keys)
        known[known] = self.hash_keys[at[known]] == distinct[known]
        twin = np.ones(len(h), bool)
        twin[first] = known
        self.hash_counts[at[known]] += n[known]
        new = ~known
        if new.any():
            self.hash_keys = np.insert(self.hash_keys, at[new], distinct[new])
            self.hash_counts = np.insert(self.hash_counts, at[new], n[new])
        for c in batch.columns:  # NaN payloads hash apart yet may group together: assume twins
            if pa.types.is_floating(c.type):
                twin |= np.asarray(pc.is_nan(c).fill_null(False))
        return twin

    def exits(self, pos: np.ndarray, win: SideWindow) -> np.ndarray:
        """The instant each tuple at `pos` leaves `win` (NEVER_EXITS: not known yet)."""
        if win.kind == "range":
            return self.ts[pos - self.base] + (win.size + 1)
        later = pos + win.size
        out = np.full(len(pos), NEVER_EXITS, np.int64)
        known = later < self.count
        out[known] = self.ts[later[known] - self.base]
        return out

    def rate(self) -> float:
        """Tuples per time unit over the retained ones (1 with fewer than two)."""
        if len(self.ts) < 2:
            return 1.0
        return len(self.ts) / float(self.ts[-1] - self.ts[0] + 1)

    def leaving(
        self, win: SideWindow, since: int, upto: int, count_before: int, count_after: int
    ) -> np.ndarray:
        """Positions of the tuples that leave `win` at an instant in (since, upto]; the input
        counted `count_before` tuples at `since` and `count_after` at `upto`."""
        if win.kind == "range":
            lo = 0 if since == NEVER else int(
                np.searchsorted(self.ts, since - win.size - 1, side="right")
            )
            hi = int(np.searchsorted(self.ts, upto - win.size - 1, side="right"))
        else:  # the tuples pushed out by the arrivals in the span
            lo = max(count_before - win.size - self.base, 0)
            hi = max(count_after - win.size - self.base, 0)
        return np.arange(lo, max(lo, hi), dtype=np.int64) + self.base

    def partial_window(
        self, t: np.ndarray, windows: list[SideWindow], unit: int, upto: int | None = None
    ) -> tuple[np.ndarray, np.ndarray]:
        """For outer tuples at instants `t`, the retained positions (from `base`) [lo, hi) of
        the partial windows of units [unit, upto) (default: unit's alone): inside one of
        those units' windows at t, outside every earlier unit's. Their union is one range:
        a position before every earlier window's start lies in the first unit's partial
        window whose window holds it."""

        def start(w: SideWindow) -> np.ndarray:
            if w.kind == "range":
                return np.searchsorted(self.ts, t - w.size, side="left")
            return np.maximum(np.searchsorted(self.ts, t, side="right") - w.size, 0)

        lo = start(windows[unit])
        for w in windows[unit + 1 : unit + 1 if upto is None else upto]:
            lo = np.minimum(lo, start(w))
        hi = np.full(len(t), len(self.ts), np.int64)
        for w in windows[:unit]:
            hi = np.minimum(hi, start(w))
        return lo.astype(np.int64), hi

    def retain(self, windows: list[SideWindow], upto: int, count: int) -> None:
        """Drop the tuples no window holds after instant `upto` (the input counted `count`
        tuples then)."""
        keep = count
        for w in windows:
            if w.kind == "range":
                first = int(np.searchsorted(self.ts, upto - w.size, side="left")) + self.base
            else:
                first = count - w.size
            keep = min(keep, max(first, self.base))
        k = keep - self.base
        if k > 0:
            self.rows.drop_oldest(k)
            self.ts = self.ts[k:]
            self.base = keep
            if self.twins:
                distinct, n = np.unique(self.hashes[:k], return_counts=True)
                at = np.searchsorted(self.hash_keys, distinct)  # each one is counted
                self.hash_counts[at] -= n
                gone = at[self.hash_counts[at] == 0]
                if len(gone):
                    self.hash_keys = np.delete(self.hash_keys, gone)
                    self.hash_counts = np.delete(self.hash_counts, gone)
                self.hashes = self.hashes[k:]
