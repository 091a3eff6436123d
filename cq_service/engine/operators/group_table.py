"""Grouped COUNT, SUM and AVG of ints, MIN and MAX of ints and timestamps, and COUNT(DISTINCT)
of ints and timestamps and SUM/AVG(DISTINCT) of ints, kept in columns: the fast state of many
groups.

`GroupTable` holds, for every live group, its row multiplicity and per aggregate its count of
non-NULL values and its int total, in one numpy row per slot (`cells`: a batch's groups are
read and written one row each, not one array each); each MIN/MAX (DISTINCT or
not) and each DISTINCT call also keeps its groups' values with their multiplicities as one
sorted multiset of (slot, value) (`Multiset`, group_multiset.py). For a DISTINCT call the count
is the number of distinct values and the total their sum: a batch changes them where a value's
multiplicity leaves zero or drops to it. One int key is found in a direct table or a numpy hash
table (no Python object per key); other keys in a dict from the key tuple to its slot (group_index.py). A batch
(cut into (instant, group) segments with its per-segment deltas, segments.py) is applied with
array operations only: running counts and totals per segment in group-major order, the old and
new result of each segment compared as arrays, the changed ones emitted as one Arrow batch in
segment order (− old before + new, as the operator's general path emits them). Python work per
batch, with keys other than one int, is one dict look-up per group the batch touches and one
dict update per group that appears or disappears.

It gives exactly the general path's results, and declines a batch (`apply` returns None, the
state untouched) whenever it could not: a delta that is not linear (an int sum that could
overflow int64 in the batch, or a sum of distinct values that could leave ±2**62), a total that
could, rows or counts going negative, a group whose rows reach zero while a count or total does
not, keys that are distinct in Arrow and equal in Python, or a batch a multiset declines (a
multiplicity going negative; for MIN/MAX also values inserted and deleted within the batch
spanning too many segments). Not kept here: float keys, float SUM/AVG (the general path sums
floats with Neumaier compensation in the order of the deltas), MIN/MAX of floats (its NaN and
0.0/-0.0 rules), strings and booleans (also under DISTINCT), SUM/AVG of timestamps. The
operator then moves the groups into its general state (`groups`: DISTINCT values as the
`Counter` of an `Acc`) for good.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from cq_service.cql.logical import AggCall, BExpr
from cq_service.engine.batch import Batch
from cq_service.engine.operators.accumulators import Group, make_accumulator
from cq_service.engine.operators.group_index import DictIndex, IntIndex
from cq_service.engine.operators.group_multiset import Multiset, Plan
from cq_service.engine.operators.segments import (
    Deltas,
    Extremes,
    Linear,
    Segments,
    Values,
    starts_from_lengths,
)
from cq_service.types import DataType, arrow_type

__all__ = ["GroupTable"]

# Key types whose Arrow values are the values the general path emits (floats are not: it
# canonicalises NaN and tells 0.0 from -0.0 by the first one seen).
_KEY_TYPES = frozenset({DataType.INT, DataType.TIMESTAMP, DataType.STRING, DataType.BOOL})
# MIN/MAX and COUNT(DISTINCT) argument types kept in a `Multiset` (group_multiset.py).
_EXTREME_TYPES = frozenset({DataType.INT, DataType.TIMESTAMP})
_EXACT_FLOAT = 2**53  # ints up to this are exact in float64, so t / k is correctly rounded
_DictIndex, _IntIndex = DictIndex, IntIndex  # their names in snapshots taken before group_index


class GroupTable:
    __slots__ = ("cells", "fns", "free", "index", "multisets", "used")

    def __init__(self, keys: tuple[BExpr, ...], calls: tuple[AggCall, ...]):
        self.fns = [c.fn for c in calls]
        one_int = len(keys) == 1 and keys[0].type in (DataType.INT, DataType.TIMESTAMP)
        self.index: IntIndex | DictIndex = IntIndex() if one_int else DictIndex()
        self.free = np.zeros(0, dtype=np.int64)  # slots of groups that went away (a stack)
        self.used = 0  # slots handed out so far
        # per slot: rows, then each call's count, then each call's total (0 unless SUM/AVG)
        self.cells = np.zeros((1024, 1 + 2 * len(calls)), dtype=np.int64)
        # MIN/MAX and DISTINCT: call index -> its values (`count` keeps their number per
        # group: with multiplicity for MIN/MAX, distinct ones for DISTINCT, and `total` the
        # sum of the distinct ones)
        self.multisets = {j: Multiset(c.fn == "max") for j, c in enumerate(calls)
                          if c.fn in ("min", "max") or c.distinct}

    def __setstate__(self, state: tuple) -> None:
        """A state pickled before MIN/MAX were kept here has no multisets; one pickled before
        `cells`, separate `rows`, `count` and `total` arrays, and its free slots in a list."""
        _, slots = state
        slots = dict(slots)
        if "cells" not in slots:
            rows, count, total = slots.pop("rows"), slots.pop("count"), slots.pop("total")
            slots["cells"] = np.ascontiguousarray(np.vstack([rows[None, :], count, total]).T)
        slots["free"] = np.asarray(slots["free"], dtype=np.int64)  # a list before
        for k, v in slots.items():
            setattr(self, k, v)
        if "multisets" not in slots:
            self.multisets = {}

    @property
    def rows(self) -> np.ndarray:
        """Each slot's row multiplicity (a view)."""
        return self.cells[:, 0]

    @property
    def count(self) -> np.ndarray:
        """Per call, each slot's count of values (a view: calls × slots)."""
        return self.cells[:, 1: 1 + len(self.fns)].T

    @property
    def total(self) -> np.ndarray:
        """Per call, each slot's int total (a view: calls × slots)."""
        return self.cells[:, 1 + len(self.fns):].T

    @staticmethod
    def fits(keys: tuple[BExpr, ...], calls: tuple[AggCall, ...]) -> bool:
        """Whether an aggregate with these keys and calls can keep its groups here."""
        return bool(keys) and all(k.type in _KEY_TYPES for k in keys) and all(
            (c.fn == "count" and (not c.distinct or c.arg.type in _EXTREME_TYPES))  # type: ignore[union-attr]
            or (c.fn in ("sum", "avg") and c.arg.type == DataType.INT)  # type: ignore[union-attr]
            or (c.fn in ("min", "max") and c.arg.type in _EXTREME_TYPES)  # type: ignore[union-attr]
            for c in calls
        )

    def _kind(self, j: int) -> type:
        """The deltas call j's batches come in."""
        if j not in self.multisets:
            return Linear
        return Extremes if self.fns[j] in ("min", "max") else Values

    def __len__(self) -> int:
        return len(self.index)

    def apply(
        self,
        seg: Segments,
        deltas: list[Deltas],
        keys: list[pa.Array],
        out_types: list[DataType],
        ticks: np.ndarray,
    ) -> Batch | None:
        """Apply one batch; its output, or None (state untouched) when it cannot be exact."""
        if not all(isinstance(d, self._kind(j)) for j, d in enumerate(deltas)):
            return None
        G = seg.groups
        found = self.index.lookup(seg)
        if found is None:
            return None
        slot, where = found
        known = slot >= 0
        ks = slot[known]
        # group-major order of the segments; `cum`: running sums per group from its start
        single = len(seg) == G  # one segment per group (one instant): already group-major
        if single:
            perm = gp = gstart = glast = np.arange(G)
            lengths = np.ones(G, dtype=np.int64)
        else:
            perm = np.argsort(seg.gid, kind="stable")
            gp = seg.gid[perm]
            lengths = np.bincount(gp, minlength=G)
            gstart = starts_from_lengths(lengths)
            glast = gstart + lengths - 1

        state = np.zeros((G, self.cells.shape[1]), dtype=np.int64)  # each group's cells
        state[known] = self.cells.take(ks, axis=0)
        nf = len(self.fns)

        def cum(x: np.ndarray, x0: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
            """Per segment (group-major) the value after it and the value before it."""
            if single:
                return x0 + x, x0
            xp = x[perm]
            c = np.cumsum(xp)
            after = c + np.repeat(x0 - (c[gstart] - xp[gstart]), lengths)
            return after, after - xp

        rows, rows_before = cum(seg.drows, state[:, 0])
        if (rows < 0).any():
            return None
        zero = rows == 0
        vals: list[tuple] = []  # per call: (count, total or None) after and before each segment
        plans: dict[int, Plan] = {}  # per multiset: its new multiplicities (MIN/MAX: extremes)
        for j, d in enumerate(deltas):
            if isinstance(d, Values):  # DISTINCT: the changes in distinct values and their sum
                got = self.multisets[j].distinct(seg, d, slot, perm, lengths, gstart,
                                                 self.fns[j] != "count")
                if got is None:
                    return None
                plans[j], dc, ds = got
            elif isinstance(d, Extremes):
                dc, ds = d.dcount, None
            else:
                dc, ds = d.counts, d.sums  # type: ignore[attr-defined]
            c, c_before = cum(dc, state[:, 1 + j])
            if (c < 0).any() or (c[zero] != 0).any():
                return None
            if isinstance(d, Extremes):
                plan = self.multisets[j].plan(seg, d, slot, perm, gp, lengths, gstart, c)
                if plan is None:
                    return None
                plans[j] = plan
                vals.append((c, None, c_before, None))
                continue
            t = t_before = None
            if ds is not None:
                t0 = state[:, 1 + nf + j]
                if (np.abs(t0) >= 2**62).any():
                    return None
                t, t_before = cum(ds, t0)
                if (t[zero] != 0).any():
                    return None
            vals.append((c, t, c_before, t_before))
        alive, was = rows > 0, rows_before > 0
        changed = alive != was
        both = alive & was
        results = []  # per call: (after, before, null after, null before)
        for j, (fn, (c, t, cb, tb)) in enumerate(zip(self.fns, vals)):
            if fn == "count":
                results.append((c, cb, None, None))
                changed |= both & (c != cb)
                continue
            null, null_b = c == 0, cb == 0
            if fn in ("min", "max"):
                a, b = plans[j].after, plans[j].before
            elif fn == "sum":
                a, b = t, tb
            else:
                a, b = _quotients(t, c, null), _quotients(tb, cb, null_b)  # type: ignore[arg-type]
            changed |= both & ((null != null_b) | (~null & (a != b)))  # type: ignore[operator]
            results.append((a, b, null, null_b))
        # the output: per changed segment − old (if it had a row) then + new (if it has one)
        batch = _output(seg, None if single else perm, changed & was, changed & alive, keys,
                        results, out_types, ticks)
        self._store(where, slot, None if single else glast, rows, vals, plans)
        return batch

    def _store(self, where: object, slot: np.ndarray, glast: np.ndarray | None,
               rows: np.ndarray, vals: list[tuple], plans: dict[int, Plan]) -> None:
        """Each group's state after its last segment (`glast`; None: each group's only
        segment is its own); groups without rows are forgotten."""
        final = rows if glast is None else rows[glast]
        live = final > 0
        gone = np.flatnonzero(~live & (slot >= 0))
        new = np.flatnonzero(live & (slot < 0))
        if len(gone):
            freed = slot[gone]
            self.cells[freed] = 0
            self.free = np.concatenate([self.free, freed])
        old = slot
        if len(new):
            slot = slot.copy()
            slot[new] = self._allocate(len(new))
        for j, plan in plans.items():
            self.multisets[j].commit(plan, old, slot)
        if len(gone) or len(new):
            self.index.update(where, gone, new, slot[new])
        keep = np.flatnonzero(live)
        at = keep if glast is None else glast[keep]
        nf = len(self.fns)
        cells = np.zeros((len(keep), self.cells.shape[1]), dtype=np.int64)
        cells[:, 0] = rows[at]
        for j, (c, t, _, _) in enumerate(vals):
            cells[:, 1 + j] = c[at]
            if t is not None:
                cells[:, 1 + nf + j] = t[at]
        self.cells[slot[keep]] = cells

    def _allocate(self, n: int) -> np.ndarray:
        reuse = min(n, len(self.free))
        out = np.empty(n, dtype=np.int64)
        if reuse:
            out[:reuse] = self.free[len(self.free) - reuse:]
            self.free = self.free[: len(self.free) - reuse]
        fresh = n - reuse
        out[reuse:] = np.arange(self.used, self.used + fresh)
        self.used += fresh
        if self.used > len(self.cells):
            grown = np.zeros((max(self.used, 2 * len(self.cells)), self.cells.shape[1]),
                             dtype=np.int64)
            grown[: len(self.cells)] = self.cells
            self.cells = grown
        return out

    def groups(self, calls: tuple[AggCall, ...]) -> dict[tuple, Group]:
        """The same groups as the general path's `Group`s (when the table hands over)."""
        makers = [make_accumulator(c) for c in calls]
        out: dict[tuple, Group] = {}
        items = self.index.items()
        slots = np.array([s for _, s in items], dtype=np.int64)
        extremes = {j: ms.extremes(slots, self.count[j, slots])
                    for j, ms in self.multisets.items() if self.fns[j] in ("min", "max")}
        distinct = {j: ms.counters(slots)
                    for j, ms in self.multisets.items() if j not in extremes}
        for i, (key, s) in enumerate(items):
            g = out[key] = Group(makers)
            g.rows = int(self.rows[s])
            for j, acc in enumerate(g.accs):
                if j in extremes:
                    g.accs[j] = extremes[j][i]
                    continue
                if j in distinct:
                    acc.multiset = distinct[j][i]  # type: ignore[union-attr]
                acc.count = int(self.count[j, s])  # type: ignore[union-attr]
                if self.fns[j] != "count":
                    acc.total = int(self.total[j, s])  # type: ignore[union-attr]
        return out


def _quotients(t: np.ndarray, c: np.ndarray, null: np.ndarray) -> np.ndarray:
    """t / c as float64 where c ≠ 0 (0.0 elsewhere), correctly rounded as Python's int / int."""
    safe = np.where(null, 1, c)
    if np.abs(t).max(initial=0) <= _EXACT_FLOAT:
        q = t / safe
    else:  # beyond 2**53 numpy's float division rounds twice: Python's exact quotient instead
        q = np.array([a / b for a, b in zip(t.tolist(), safe.tolist())], dtype=np.float64)
    q[null] = 0.0
    return q


def _output(seg: Segments, perm: np.ndarray | None, minus: np.ndarray, plus: np.ndarray,
            keys: list[pa.Array], results: list[tuple], out_types: list[DataType],
            ticks: np.ndarray) -> Batch:
    """The − rows (values before) where `minus` and + rows (values after) where `plus` (masks
    over the segments in group-major order, `perm` the segment of each; None: segment order),
    in the order of their segments, − before +."""
    S = len(minus)
    if perm is not None:  # the masks in segment order
        minus, plus = _scattered(minus, perm), _scattered(plus, perm)
    mark = np.empty((S, 2), dtype=bool)  # row 2i: segment i's −, 2i + 1: its +
    mark[:, 0] = minus
    mark[:, 1] = plus
    place = np.flatnonzero(mark.ravel())
    after = (place & 1).astype(bool)
    sp = place >> 1  # each output row's segment
    if perm is None:
        pos = sp
    else:  # its place in group-major order
        inv = np.empty(S, dtype=np.int64)
        inv[perm] = np.arange(S)
        pos = inv[sp]
    nk = len(keys)
    rows_idx = pa.array(seg.grow[seg.gid[sp]], type=pa.int64())
    cols: list[pa.Array] = []
    for k, t in zip(keys, out_types[:nk]):
        if isinstance(k, pa.ChunkedArray):
            k = k.combine_chunks()
        col = k.take(rows_idx)
        typ = arrow_type(t)
        cols.append(col if col.type == typ else col.cast(typ))
    for (a, b, null, null_b), t in zip(results, out_types[nk:]):
        v = np.where(after, a[pos], b[pos])
        mask = None
        if null is not None and (null.any() or null_b.any()):
            mask = np.where(after, null[pos], null_b[pos])
        cols.append(pa.array(v, type=arrow_type(t), mask=mask))
    w = after.astype(np.int64) * 2 - 1
    return Batch(tuple(cols), seg.ts[sp], w, ticks)


def _scattered(mask: np.ndarray, perm: np.ndarray) -> np.ndarray:
    out = np.empty(len(mask), dtype=bool)
    out[perm] = mask
    return out
