"""Grouped and global aggregation, incremental under insertions and deletions.

Each group keeps its row multiplicity and one accumulator per aggregate (accumulators.py). At
every instant, for each group the instant touched, the old result row is retracted and the new
one inserted (the sink's consolidation drops pairs that did not change). A global aggregate (no
GROUP BY) has one row from the first instant its input sees, even when no element has arrived.

A batch is cut into (instant, group) segments with per-aggregate deltas (segments.py). When
every call is COUNT (COUNT(DISTINCT) of ints or timestamps), int SUM/AVG (DISTINCT or not) or
MIN/MAX of ints or timestamps (DISTINCT or not), grouped by keys other than floats, the groups
are kept in columns (`GroupTable`, group_table.py; MIN/MAX and DISTINCT values as sorted
multisets, group_multiset.py) and a batch is applied with array operations only, until a batch
it cannot apply exactly hands the groups over to the general state for good. Any other call
(float SUM/AVG, MIN/MAX of floats, strings or booleans, DISTINCT of those), a global aggregate
or a float key: the general state. There, groups whose segments need no recount of a MIN/MAX
are applied with array operations (`_vectorised`); the rest segment by segment (`_general`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pyarrow as pa

from cq_service.cql.logical import AggCall, BExpr
from cq_service.engine.batch import Batch, merge_ticks
from cq_service.engine.expressions import compile_expr
from cq_service.engine.operators.accumulators import (
    Acc,
    Extreme,
    Group,
    canonical_nan,
    make_accumulator,
    numeric_extreme,
)
from cq_service.engine.operators.base import MultiInputOperator
from cq_service.engine.operators.group_table import GroupTable
from cq_service.engine.operators.segments import (
    Deltas,
    Extremes,
    Linear,
    Pairs,
    Segments,
    Values,
    linear_safe,
    starts_from_lengths,
)
from cq_service.engine.queues import Queue, QueueReader
from cq_service.types import DataType

__all__ = ["Aggregate"]

# The accumulators lived in this module before; snapshots pickled then name them here.
_Acc, _Extreme, _Group = Acc, Extreme, Group


class Aggregate(MultiInputOperator):
    kind = "aggregate"
    STRUCTURE = frozenset({"_keys", "_args", "_makers", "calls", "input_types"})

    def __init__(
        self,
        name: str,
        inputs: list[QueueReader],
        output: Queue,
        keys: tuple[BExpr, ...],
        aggs: tuple[AggCall, ...],
        input_types: list[DataType] | None = None,
    ):
        super().__init__(name, inputs, output)
        self.input_types = input_types or []
        self.calls = aggs
        self._keys = [compile_expr(k) for k in keys]
        self._args = [None if a.arg is None else compile_expr(a.arg) for a in aggs]
        self._makers = [make_accumulator(c) for c in aggs]
        self._groups: dict[tuple, Group] = {}
        # COUNT, int SUM/AVG, int MIN/MAX, DISTINCT of ints by keys other than floats: the groups in columns,
        # until a batch it cannot apply exactly hands them over to `_groups` (group_table.py).
        self._table: GroupTable | None = GroupTable(keys, aggs) if GroupTable.fits(keys, aggs) else None
        self.is_global = not keys
        # Only MIN, MAX and DISTINCT keep values per group; the others' state is the groups.
        self._keeps_values = any(c.keeps_values for c in aggs)
        self._started = False

    def describe(self) -> str:
        what = ", ".join(f"{a.fn}{'(distinct)' if a.distinct else ''}" for a in self.calls)
        return f"aggregate {'global' if self.is_global else f'by {len(self._keys)} key(s)'}: {what}"

    def restore(self, state: dict[str, Any]) -> None:
        if "_table" not in state:  # saved before the group table: its groups are `_groups`
            state = {**state, "_table": None}
        super().restore(state)

    def state_size(self) -> tuple[int, int]:
        n = len(self._groups) + (len(self._table) if self._table is not None else 0)
        extra = 0
        if self._keeps_values:
            extra = sum(a.size() for g in self._groups.values() for a in g.accs)
            if self._table is not None:
                extra += sum(len(m) for m in self._table.multisets.values())
        return n + extra, (n + extra) * 8 * (len(self.out_types) + 2)

    def _row(self, key: tuple) -> tuple | None:
        g = self._groups.get(key)
        if g is None:
            return None
        if g.rows <= 0 and not self.is_global:
            return None
        return key + g.result()

    def on_aligned(self, ready: list[Batch | None]) -> None:
        """Port 0 is the input; port 1, when present, is the query's clock (ticks only)."""
        data = ready[0] if ready[0] is not None else self._empty_input()
        if len(ready) > 1 and ready[1] is not None:
            data = data.with_ticks(merge_ticks(data.ticks, ready[1].ticks))
        if len(data) or len(data.ticks):
            self.on_batch(data)

    def _empty_input(self) -> Batch:
        return Batch.empty(self.input_types)

    def on_batch(self, batch: Batch) -> None:
        out = _Out()
        n = len(batch)
        first: int | None = None
        if self.is_global and not self._started:
            cands = [int(batch.ts[0])] if n else []
            if len(batch.ticks):
                cands.append(int(batch.ticks[0]))
            if cands:
                first = min(cands)
                self._started = True
                self._groups[()] = Group(self._makers)
        seg = None
        if n:
            cols = batch.columns
            keys = [ev(cols, n) for ev in self._keys]
            seg = Segments(batch, keys)
            if self._table is not None:
                deltas = [self._deltas(j, batch, seg) for j in range(len(self.calls))]
                done = self._table.apply(seg, deltas, keys, self.out_types, batch.ticks)
                if done is not None:
                    self.emit(done)
                    return
                self._groups, self._table = self._table.groups(self.calls), None
        if first is not None and (seg is None or first < seg.ts[0]):
            out.add(-1, first, 1, self._row(()))  # type: ignore[arg-type]
            first = None
        if seg is not None:
            deltas = [self._deltas(j, batch, seg) for j in range(len(self.calls))]
            fresh_global = first is not None
            done = None
            if all(d.vector for d in deltas) and not fresh_global:
                done = self._vectorised(seg, deltas, out)  # type: ignore[arg-type]
            self._general(seg, deltas, fresh_global, done, out)
        rows, ts, w = out.in_order()
        self.emit(Batch.from_rows(rows, ts, w, self.out_types, batch.ticks))

    def _deltas(self, j: int, batch: Batch, seg: Segments) -> Deltas:
        call, ev = self.calls[j], self._args[j]
        if ev is None:  # COUNT(*)
            return Linear("count", seg.drows, None)
        n = len(batch)
        arg = ev(batch.columns, n)
        if numeric_extreme(call):
            return Extremes(call, arg, seg)
        if call.distinct and self._table is not None:
            return Values(arg, seg)  # the table's multiset (group_table.py)
        if call.distinct or call.fn in ("min", "max") or not linear_safe(call, arg, n):
            return Pairs(arg, batch, seg)  # per distinct value: exact for floats and big ints
        w = batch.w
        counts = seg.drows
        if arg.null_count:
            counts = seg.segment_sums(w * arg.is_valid().to_numpy(zero_copy_only=False))
        if call.fn in ("sum", "avg"):
            vals = np.asarray((arg.fill_null(0) if arg.null_count else arg).to_numpy(zero_copy_only=False))
            return Linear(call.fn, counts, seg.segment_sums(vals * w))
        return Linear("count", counts, None)

    def _general(
        self,
        seg: Segments,
        deltas: list[Deltas],
        fresh_global: bool,
        done: np.ndarray | None,
        out: _Out,
    ) -> None:
        """Apply the segments the vectorised path did not (`done`) one by one, emitting the
        group's old row as `−` and its new row as `+` when they differ. `fresh_global`: the
        global row is new at the first segment."""
        groups = self._groups
        is_global = self.is_global
        makers = self._makers
        pairs = list(enumerate(deltas))
        gkeys = seg.gkeys
        todo = range(len(seg)) if done is None else np.flatnonzero(~done).tolist()
        if not len(todo):
            return
        ts = seg.ts.tolist()
        gid = seg.gid.tolist()
        drows = seg.drows.tolist()
        for i in todo:
            key = gkeys[gid[i]]
            g = groups.get(key)
            if g is None:
                g = groups[key] = Group(makers)
                old = None
            elif fresh_global:
                old = None
            else:
                old = key + g.result() if g.rows > 0 or is_global else None
            fresh_global = False
            g.rows += drows[i]
            accs = g.accs
            for j, d in pairs:
                d.apply(accs[j], i)
            if g.rows > 0 or is_global:
                new: tuple | None = key + g.result()
            else:
                new = None
                del groups[key]
            out.change(i, ts[i], old, new)

    def _vectorised(self, seg: Segments, deltas: list[Linear | Extremes], out: _Out) -> np.ndarray | None:
        """Apply, with array operations, every group whose segments in this batch keep its
        MIN/MAX exact without a recount: no segment deletes a value that could be the extreme,
        and the group's rows stay positive (or drop to zero at its last segment). Returns which
        segments were done, or None when no group qualifies."""
        groups = self._groups
        is_global = self.is_global
        gkeys = seg.gkeys
        G, S = len(gkeys), len(seg)
        if len(set(gkeys)) != G:
            return None  # keys equal in Python but not in Arrow (0.0 and -0.0): one at a time
        existing = [(gi, g) for gi, key in enumerate(gkeys) if (g := groups.get(key)) is not None]
        ok = np.ones(G, dtype=bool)
        rows0 = np.zeros(G, dtype=np.int64)
        before: list[tuple | None] = [None] * G
        for gi, g in existing:
            rows0[gi] = g.rows
            before[gi] = gkeys[gi] + g.result()  # reading MIN/MAX makes them exact
        # group-major order of the segments
        perm = np.argsort(seg.gid, kind="stable")
        gp = seg.gid[perm]
        lengths = np.bincount(gp, minlength=G)
        gstart = starts_from_lengths(lengths)
        last = np.zeros(S, dtype=bool)
        last[gstart + lengths - 1] = True

        def cum(x: np.ndarray, init: np.ndarray) -> np.ndarray:
            """Per group, `init` plus the running sum of `x` (given per segment)."""
            c = np.cumsum(x[perm])
            return c + np.repeat(init - (c[gstart] - x[perm][gstart]), lengths)

        rows = cum(seg.drows, rows0)
        alive = np.ones(S, dtype=bool) if is_global else rows > 0
        bad = rows < 0 if is_global else (rows < 0) | ((rows == 0) & ~last)
        values: list[list] = []
        states: list[tuple] = []
        for j, d in enumerate(deltas):
            if isinstance(d, Linear):
                c0 = np.zeros(G, dtype=np.int64)
                s0 = np.zeros(G, dtype=np.int64)
                for gi, g in existing:
                    acc = g.accs[j]
                    c0[gi] = acc.count
                    if d.sums is not None:
                        if not -(2**62) <= acc.total < 2**62:
                            ok[gi] = False
                        else:
                            s0[gi] = acc.total
                counts = cum(d.counts, c0)
                sums = cum(d.sums, s0) if d.sums is not None else None
                values.append(_linear_values(d.fn, counts, sums))
                states.append((counts, sums))
            else:
                vals, st, bad_x = _extreme_values(d, existing, j, G, perm, gp, lengths, cum)
                bad |= bad_x & alive
                values.append(vals)
                states.append(st)
        ok &= ~np.logical_or.reduceat(bad, gstart)
        good = ok[gp]
        if not good.any():
            return None
        # rows after each good segment, in group-major order, and what changed
        sel = np.flatnonzero(good)
        seg_of = perm[sel].tolist()
        g_of = gp[sel].tolist()
        is_first = np.zeros(S, dtype=bool)
        is_first[gstart] = True
        first_l = is_first[sel].tolist()
        alive_l = alive[sel].tolist()
        cols = [[v[k] for k in sel.tolist()] for v in values] if values else []
        ts = seg.ts
        ts_l = ts[perm[sel]].tolist()
        prev: tuple | None = None
        for k, (s, gi) in enumerate(zip(seg_of, g_of)):
            old = before[gi] if first_l[k] else prev
            key = gkeys[gi]
            new = key + tuple(c[k] for c in cols) if alive_l[k] else None
            out.change(s, ts_l[k], old, new)
            prev = new
        # the groups' state after the batch
        lastsel = np.flatnonzero(good & last)
        self._store(seg, deltas, lastsel, perm, gp, rows, alive, states)
        done = np.zeros(S, dtype=bool)
        done[perm[sel]] = True
        return done

    def _store(
        self,
        seg: Segments,
        deltas: list,
        lastsel: np.ndarray,
        perm: np.ndarray,
        gp: np.ndarray,
        rows: np.ndarray,
        alive: np.ndarray,
        states: list[tuple],
    ) -> None:
        """Write the vectorised groups' final state: their row counts and accumulators; each
        MIN/MAX gets the group's values of this batch as one chunk."""
        groups = self._groups
        gkeys = seg.gkeys
        g_last = gp[lastsel]
        keep = alive[lastsel]
        for gi in g_last[~keep].tolist():
            groups.pop(gkeys[gi], None)
        if not keep.any():
            return
        ls = lastsel[keep]
        gs = g_last[keep]
        surv = np.zeros(len(gkeys), dtype=bool)
        surv[gs] = True
        chunks: list | None = None
        if any(isinstance(d, Extremes) for d in deltas):
            rg = seg.row_gid()
            idx = np.flatnonzero(surv[rg])
            if np.any(rg[idx][1:] < rg[idx][:-1]):
                idx = idx[np.argsort(rg[idx], kind="stable")]
            bounds = np.searchsorted(rg[idx], gs)
            ends = np.append(bounds[1:], len(idx))
            chunks = [(idx, bounds.tolist(), ends.tolist())]
        cols = []
        for d, st in zip(deltas, states):
            if isinstance(d, Linear):
                counts, sums = st
                cols.append((counts[ls].tolist(), sums[ls].tolist() if sums is not None else None))
            else:
                xcount, xval = st
                idx, b, e = chunks[0]  # type: ignore[index]
                cols.append((xcount[ls].tolist(), [xval[k] for k in ls.tolist()], d.vals[idx], d.w[idx], b, e))
        makers = self._makers
        for k, (gi, r) in enumerate(zip(gs.tolist(), rows[ls].tolist())):
            key = gkeys[gi]
            g = groups.get(key)
            if g is None:
                g = groups[key] = Group(makers)
            g.rows = r
            for acc, d, c in zip(g.accs, deltas, cols):
                if isinstance(d, Linear):
                    acc.count = c[0][k]
                    if c[1] is not None:
                        acc.total = c[1][k]
                else:
                    b, e = c[4][k], c[5][k]
                    acc.set_exact(c[0][k], c[1][k], c[2][b:e], c[3][b:e])


class _Out:
    """Output elements with the segment they belong to, put in segment order at the end."""

    __slots__ = ("keys", "rows", "sorted", "ts", "w")

    def __init__(self):
        self.keys: list[int] = []
        self.rows: list[tuple] = []
        self.ts: list[int] = []
        self.w: list[int] = []
        self.sorted = True

    def add(self, key: int, t: int, w: int, row: tuple) -> None:
        if self.keys and key < self.keys[-1]:
            self.sorted = False
        self.keys.append(key)
        self.rows.append(row)
        self.ts.append(t)
        self.w.append(w)

    def change(self, i: int, t: int, old: tuple | None, new: tuple | None) -> None:
        """Segment i took a group from `old` to `new` (None: no row)."""
        if old == new and _same_types(old, new):
            return
        if old is not None:
            self.add(2 * i, t, -1, old)
        if new is not None:
            self.add(2 * i + 1, t, 1, new)

    def in_order(self) -> tuple[list[tuple], list[int], list[int]]:
        if self.sorted:
            return self.rows, self.ts, self.w
        p = sorted(range(len(self.keys)), key=self.keys.__getitem__)
        return [self.rows[i] for i in p], [self.ts[i] for i in p], [self.w[i] for i in p]


def _linear_values(fn: str, counts: np.ndarray, sums: np.ndarray | None) -> list:
    """COUNT, SUM or AVG per segment (group-major order) from running counts and sums."""
    c = counts.tolist()
    if fn == "count" or sums is None:
        return c
    s = sums.tolist()
    if fn == "sum":
        return [t if k else None for t, k in zip(s, c)]
    return [t / k if k else None for t, k in zip(s, c)]  # int / int: exact quotient, rounded


def _extreme_values(d: Extremes, existing: list, j: int, G: int, perm: np.ndarray,
                    gp: np.ndarray, lengths: np.ndarray, cum: Callable) -> tuple[list, tuple, np.ndarray]:
    """A MIN/MAX per segment (group-major order) as running extremes, computed on ranks;
    the running count of values; and where a deletion may have removed the extreme."""
    x0 = np.zeros(G, dtype=np.int64)
    e0_groups, e0_vals = [], []
    for gi, g in existing:
        acc = g.accs[j]
        x0[gi] = acc.count
        if acc.ext is not None:
            e0_groups.append(gi)
            e0_vals.append(acc.ext)
    xcount = cum(d.dcount, x0)
    has_ins = d.has_ins[perm]
    parts = [d.ins[perm][has_ins], np.asarray(e0_vals, dtype=d.vals.dtype)]
    if d.any_del:
        has_del = d.has_del[perm]
        parts.append(d.dele[perm][has_del])
    u, inv = np.unique(np.concatenate(parts), return_inverse=True)  # NaN last, one rank
    K = len(u)
    # preference: higher is better, 0 is no value
    pref = inv + 1 if d.is_max else K - inv
    n1, n2 = int(has_ins.sum()), len(e0_vals)
    S = len(perm)
    ins_pref = np.zeros(S, dtype=np.int64)
    ins_pref[has_ins] = pref[:n1]
    init = np.zeros(G, dtype=np.int64)
    init[np.asarray(e0_groups, dtype=np.int64)] = pref[n1:n1 + n2]
    span = K + 2
    run = np.maximum.accumulate(gp * span + ins_pref) - gp * span
    run = np.maximum(run, init[gp])
    bad = np.zeros(S, dtype=bool)
    if d.any_del:
        del_pref = np.zeros(S, dtype=np.int64)
        del_pref[has_del] = pref[n1 + n2:]
        bad = has_del & (del_pref >= run)
    ul = u.tolist()
    if d.is_float:
        ul = canonical_nan(ul, pa.float64())
    xl = xcount.tolist()
    vals = [ul[(r if d.is_max else K - r + 1) - 1] if r and x > 0 else None
            for r, x in zip(run.tolist(), xl)]
    return vals, (xcount, vals), bad


def _same_types(a: tuple | None, b: tuple | None) -> bool:
    if a is None or b is None:
        return a is b
    return all(type(x) is type(y) for x, y in zip(a, b))
