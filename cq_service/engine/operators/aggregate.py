"""Grouped and global aggregation, incremental under insertions and deletions.

Each group keeps its row multiplicity and one accumulator per aggregate; MIN and MAX keep the
multiset of values, so they stay right when the extreme value is deleted. At every instant, for
each group the instant touched, the old result row is retracted and the new one inserted (the
sink's consolidation drops pairs that did not change). A global aggregate (no GROUP BY) has one
row from the first instant its input sees, even when no element has arrived.
"""

from __future__ import annotations

from collections import Counter

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from cq_service.cql.logical import AggCall, BExpr
from cq_service.engine.batch import Batch, merge_ticks
from cq_service.engine.expressions import compile_expr
from cq_service.engine.operators.base import MultiInputOperator
from cq_service.engine.queues import Queue, QueueReader
from cq_service.types import DataType

__all__ = ["Aggregate"]


class _Acc:
    """One aggregate's state for one group."""

    __slots__ = ("comp", "count", "distinct", "ext", "fn", "is_float", "multiset", "total")

    def __init__(self, call: AggCall):
        self.fn = call.fn
        self.distinct = call.distinct
        self.is_float = call.arg is not None and call.arg.type == DataType.FLOAT
        self.count = 0  # rows (COUNT(*)) or non-NULL values
        self.total: int | float = 0.0 if self.is_float else 0
        self.comp = 0.0  # Neumaier compensation for float sums
        self.multiset: Counter | None = (
            Counter() if call.distinct or call.fn in ("min", "max") else None
        )
        self.ext: object = None  # cached MIN/MAX

    def update(self, v: object, w: int) -> None:
        if v is None:
            return
        ms = self.multiset
        if ms is not None:
            before = ms[v]
            after = before + w
            if after:
                ms[v] = after
            else:
                del ms[v]
            if self.fn in ("min", "max"):
                if w > 0 and before == 0:
                    if self.ext is None or (v < self.ext if self.fn == "min" else v > self.ext):
                        self.ext = v
                elif after == 0 and v == self.ext:
                    self.ext = (min(ms) if self.fn == "min" else max(ms)) if ms else None
                return
            if self.distinct:
                # COUNT/SUM/AVG(DISTINCT): only the first copy in and the last copy out count.
                if before == 0 and after > 0:
                    self._add(v, 1)
                elif before > 0 and after == 0:
                    self._add(v, -1)
                return
        self._add(v, w)

    def apply(self, delta: object) -> None:
        """Apply a pre-aggregated delta: (Δcount, Δsum) or [(value, Δmultiplicity), ...]."""
        if isinstance(delta, list):
            for v, w in delta:
                self.update(v, w)
            return
        dc, ds = delta  # type: ignore[misc]
        if self.fn == "count" or (not dc and not ds):
            self.count += dc
            return
        self.count += dc
        if self.is_float:
            x = float(ds)
            t = self.total + x  # type: ignore[operator]
            if abs(self.total) >= abs(x):  # type: ignore[arg-type]
                self.comp += (self.total - t) + x  # type: ignore[operator]
            else:
                self.comp += (x - t) + self.total  # type: ignore[operator]
            self.total = t
            if self.count == 0:
                self.total, self.comp = 0.0, 0.0
        else:
            self.total += ds  # type: ignore[operator]

    def _add(self, v: object, w: int) -> None:
        self.apply((w, 0 if self.fn == "count" else v * w))  # type: ignore[operator]

    def value(self) -> object:
        fn = self.fn
        if fn == "count":
            return self.count
        if fn in ("min", "max"):
            return self.ext
        if self.count == 0:
            return None
        total = self.total + self.comp if self.is_float else self.total
        if fn == "sum":
            if not self.is_float and not -(2**63) <= total < 2**63:  # type: ignore[operator]
                return None  # beyond int64: NULL, like other overflows (docs/semantics.md)
            return total
        if self.is_float:
            return total / self.count  # type: ignore[operator]
        return total / self.count  # int / int: the exact quotient, correctly rounded



class _Group:
    __slots__ = ("accs", "rows")

    def __init__(self, calls: tuple[AggCall, ...]):
        self.rows = 0
        self.accs = [_Acc(c) for c in calls]

    def result(self) -> tuple:
        return tuple(a.value() for a in self.accs)


class Aggregate(MultiInputOperator):
    kind = "aggregate"

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
        self._groups: dict[tuple, _Group] = {}
        self.is_global = not keys
        self._started = False

    def describe(self) -> str:
        what = ", ".join(f"{a.fn}{'(distinct)' if a.distinct else ''}" for a in self.calls)
        return f"aggregate {'global' if self.is_global else f'by {len(self._keys)} key(s)'}: {what}"

    def state_size(self) -> tuple[int, int]:
        n = len(self._groups)
        extra = sum(
            len(a.multiset) for g in self._groups.values() for a in g.accs if a.multiset is not None
        )
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
        out_rows: list[tuple] = []
        out_ts: list[int] = []
        out_w: list[int] = []
        n = len(batch)
        first: int | None = None
        if self.is_global and not self._started:
            cands = [int(batch.ts[0])] if n else []
            if len(batch.ticks):
                cands.append(int(batch.ticks[0]))
            if cands:
                first = min(cands)
                self._started = True
                self._groups[()] = _Group(self.calls)
        changes = self._changes(batch) if n else []
        if first is not None and (not changes or first < changes[0][0]):
            out_rows.append(self._row(()))  # type: ignore[arg-type]
            out_ts.append(first)
            out_w.append(1)
            first = None
        k = 0
        while k < len(changes):
            t = changes[k][0]
            touched: dict[tuple, tuple | None] = {}
            if first is not None:
                touched[()] = None
                first = None
            while k < len(changes) and changes[k][0] == t:
                _, key, drows, deltas = changes[k]
                if key not in touched:
                    touched[key] = self._row(key)
                g = self._groups.get(key)
                if g is None:
                    g = self._groups[key] = _Group(self.calls)
                g.rows += drows
                for acc, d in zip(g.accs, deltas):
                    if d is not None:
                        acc.apply(d)
                k += 1
            for key, old in touched.items():
                new = self._row(key)
                if not self.is_global and self._groups[key].rows <= 0:
                    del self._groups[key]
                if old == new and _same_types(old, new):
                    continue
                if old is not None:
                    out_rows.append(old)
                    out_ts.append(t)
                    out_w.append(-1)
                if new is not None:
                    out_rows.append(new)
                    out_ts.append(t)
                    out_w.append(1)
        self.emit(Batch.from_rows(out_rows, out_ts, out_w, self.out_types, batch.ticks))

    def _changes(self, batch: Batch) -> list[tuple[int, tuple, int, list]]:
        """The batch's net effect per (instant, group), computed with vectorised group-bys:
        (τ, key, change in row count, per aggregate: its delta or None), in τ order.

        A delta is (Δcount, Δsum) for COUNT/SUM/AVG and a list of (value, Δmultiplicity) for
        MIN/MAX and DISTINCT aggregates."""
        n = len(batch)
        cols = batch.columns
        knames = [f"k{i}" for i in range(len(self._keys))]
        base = {"__ts": batch.ts, **{kn: ev(cols, n) for kn, ev in zip(knames, self._keys)}}
        w = batch.w
        table = {**base, "__w": w}
        specs: list[tuple[str, str]] = [("__w", "sum")]
        multiset: list[int] = []
        for j, (call, ev) in enumerate(zip(self.calls, self._args)):
            if ev is None:
                continue
            arg = ev(cols, n)
            if call.distinct or call.fn in ("min", "max") or not _linear_safe(call, arg, n):
                multiset.append(j)  # per distinct value: exact for floats and big ints
                continue
            valid = np.asarray(arg.is_valid().to_numpy(zero_copy_only=False), dtype=bool)
            table[f"c{j}"] = w * valid
            specs.append((f"c{j}", "sum"))
            if call.fn in ("sum", "avg"):
                vals = arg.fill_null(0).to_numpy(zero_copy_only=False)
                table[f"s{j}"] = vals * w
                specs.append((f"s{j}", "sum"))
        g = pa.table(table).group_by(["__ts", *knames], use_threads=False).aggregate(specs)
        gts = g.column("__ts").to_pylist()
        gkeys = list(zip(*(g.column(kn).to_pylist() for kn in knames))) if knames else [()] * len(gts)
        drows = g.column("__w_sum").to_pylist()
        linear = {
            j: (
                g.column(f"c{j}_sum").to_pylist(),
                g.column(f"s{j}_sum").to_pylist() if call.fn in ("sum", "avg") else None,
            )
            for j, call in enumerate(self.calls)
            if self._args[j] is not None and j not in multiset
        }
        per: dict[tuple, list] = {}
        order: list[tuple] = []
        for idx, (t, key) in enumerate(zip(gts, gkeys)):
            deltas: list = [None] * len(self.calls)
            for j in range(len(self.calls)):
                if self._args[j] is None:  # COUNT(*)
                    deltas[j] = (drows[idx], 0)
                elif j in linear:
                    counts, sums = linear[j]
                    deltas[j] = (counts[idx], sums[idx] if sums is not None else 0)
            per[(t, key)] = [drows[idx], deltas]
            order.append((t, key))
        for j in multiset:
            arg = self._args[j](cols, n)  # type: ignore[misc]
            mt = pa.table({**base, "__v": arg, "__w": w})
            mg = mt.group_by(["__ts", *knames, "__v"], use_threads=False).aggregate([("__w", "sum")])
            mts = mg.column("__ts").to_pylist()
            mkeys = list(zip(*(mg.column(kn).to_pylist() for kn in knames))) if knames else [()] * len(mts)
            for t, key, v, dw in zip(mts, mkeys, mg.column("__v").to_pylist(), mg.column("__w_sum").to_pylist()):
                if v is None or dw == 0:
                    continue
                entry = per.get((t, key))
                if entry is None:
                    entry = per[(t, key)] = [0, [None] * len(self.calls)]
                    order.append((t, key))
                if entry[1][j] is None:
                    entry[1][j] = []
                entry[1][j].append((v, dw))
        order.sort(key=lambda tk: tk[0])
        return [(t, key, per[(t, key)][0], per[(t, key)][1]) for t, key in order]


def _linear_safe(call: AggCall, arg: pa.Array, n: int) -> bool:
    """Whether a vectorised sum of this batch's values is exact: counts always are; int sums
    are while no partial sum can overflow int64; float sums are not (rounding), so floats are
    summed per distinct value with compensation instead."""
    if call.fn == "count":
        return True
    if arg.type != pa.int64():
        return False
    if n == 0 or arg.null_count == n:
        return True
    lo, hi = pc.min_max(arg).values()
    bound = max(abs(lo.as_py()), abs(hi.as_py()))
    return bound * n < 2**62


def _same_types(a: tuple | None, b: tuple | None) -> bool:
    if a is None or b is None:
        return a is b
    return all(type(x) is type(y) for x, y in zip(a, b))
