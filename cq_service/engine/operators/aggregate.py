"""Grouped and global aggregation, incremental under insertions and deletions.

Each group keeps its row multiplicity and one accumulator per aggregate; MIN and MAX keep the
multiset of values, so they stay right when the extreme value is deleted. At every instant, for
each group the instant touched, the old result row is retracted and the new one inserted (the
sink's consolidation drops pairs that did not change). A global aggregate (no GROUP BY) has one
row from the first instant its input sees, even when no element has arrived.
"""

from __future__ import annotations

from collections import Counter

from cq_service.cql.logical import AggCall, BExpr
from cq_service.engine.batch import Batch
from cq_service.engine.expressions import compile_expr
from cq_service.engine.operators.base import UnaryOperator
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
        if self.fn == "count" and v is _STAR:
            self.count += w
            return
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

    def _add(self, v: object, w: int) -> None:
        self.count += w
        if self.fn in ("sum", "avg"):
            if self.is_float:
                x = float(v) * w  # type: ignore[arg-type]
                t = self.total + x  # type: ignore[operator]
                if abs(self.total) >= abs(x):  # type: ignore[arg-type]
                    self.comp += (self.total - t) + x  # type: ignore[operator]
                else:
                    self.comp += (x - t) + self.total  # type: ignore[operator]
                self.total = t
                if self.count == 0:
                    self.total, self.comp = 0.0, 0.0
            else:
                self.total += v * w  # type: ignore[operator]

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
            return total
        if self.is_float:
            return total / self.count  # type: ignore[operator]
        return total / self.count  # int / int: the exact quotient, correctly rounded


_STAR = object()


class _Group:
    __slots__ = ("accs", "rows")

    def __init__(self, calls: tuple[AggCall, ...]):
        self.rows = 0
        self.accs = [_Acc(c) for c in calls]

    def result(self) -> tuple:
        return tuple(a.value() for a in self.accs)


class Aggregate(UnaryOperator):
    kind = "aggregate"

    def __init__(
        self,
        name: str,
        inputs: list[QueueReader],
        output: Queue,
        keys: tuple[BExpr, ...],
        aggs: tuple[AggCall, ...],
    ):
        super().__init__(name, inputs, output)
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

    def on_batch(self, batch: Batch) -> None:
        n = len(batch)
        out_rows: list[tuple] = []
        out_ts: list[int] = []
        out_w: list[int] = []
        first: int | None = None
        if self.is_global and not self._started:
            cands = ([int(batch.ts[0])] if n else []) + ([int(batch.ticks[0])] if len(batch.ticks) else [])
            if cands:
                first = min(cands)
                self._started = True
                self._groups[()] = _Group(self.calls)
        if n == 0:
            if first is not None:
                out_rows.append(self._row(()))  # type: ignore[arg-type]
                out_ts.append(first)
                out_w.append(1)
            self.emit(Batch.from_rows(out_rows, out_ts, out_w, self.out_types, batch.ticks))
            return
        cols, m = batch.columns, n
        keys = list(zip(*(k(cols, m).to_pylist() for k in self._keys))) if self._keys else [()] * n
        args = [(_STARS(n) if ev is None else ev(cols, m).to_pylist()) for ev in self._args]
        ts = batch.ts.tolist()
        ws = batch.w.tolist()
        i = 0
        if first is not None and first < ts[0]:
            out_rows.append(self._row(()))  # type: ignore[arg-type]
            out_ts.append(first)
            out_w.append(1)
            first = None
        while i < n:
            t = ts[i]
            touched: dict[tuple, tuple | None] = {}
            if first is not None:
                touched[()] = None
                first = None
            while i < n and ts[i] == t:
                key = keys[i]
                if key not in touched:
                    touched[key] = self._row(key)
                g = self._groups.get(key)
                if g is None:
                    g = self._groups[key] = _Group(self.calls)
                w = ws[i]
                g.rows += w
                for acc, col in zip(g.accs, args):
                    acc.update(col[i], w)
                i += 1
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


def _same_types(a: tuple | None, b: tuple | None) -> bool:
    if a is None or b is None:
        return a is b
    return all(type(x) is type(y) for x, y in zip(a, b))


class _STARS(list):
    """COUNT(*)'s argument: a marker per row."""

    def __init__(self, n: int):
        super().__init__([_STAR] * n)
