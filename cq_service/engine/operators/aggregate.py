"""Grouped and global aggregation, incremental under insertions and deletions.

Each group keeps its row multiplicity and one accumulator per aggregate. At every instant, for
each group the instant touched, the old result row is retracted and the new one inserted (the
sink's consolidation drops pairs that did not change). A global aggregate (no GROUP BY) has one
row from the first instant its input sees, even when no element has arrived.

A batch is cut into segments, one per (instant, group), with vectorised group codes and one
sort; segments are applied in the order of their first element, which is instant order. COUNT
and int SUM/AVG that cannot overflow get their per-segment deltas from numpy reductions. MIN and
MAX of ints, timestamps and floats keep their values lazily (`_Extreme`): the extreme, plus the
multiset as consolidated arrays and pending chunks; an insertion moves the extreme with one
comparison and only deleting a value that could be the extreme forces a recount. The other
aggregates (DISTINCT, float sums, int sums that could overflow, MIN/MAX of strings and booleans)
get each segment's (value, Δmultiplicity) pairs and keep a `Counter` (`_Acc`).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable

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

# MIN/MAX argument types kept as numpy arrays by `_Extreme`, and their Arrow types.
_NUMERIC = {DataType.INT: pa.int64(), DataType.TIMESTAMP: pa.int64(), DataType.FLOAT: pa.float64()}
_I64 = np.iinfo(np.int64)


class _Acc:
    """One aggregate's state for one group (everything `_Extreme` does not cover)."""

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

    def size(self) -> int:
        return 0 if self.multiset is None else len(self.multiset)


def _before(a: object, b: object, is_max: bool) -> bool:
    """Whether `a` is strictly a better MAX (MIN) than `b`; floats in PostgreSQL order, NaN
    equal to NaN and greater than every other value."""
    if is_max:
        return a > b or (a != a and b == b)  # type: ignore[operator]
    return a < b or (b != b and a == a)  # type: ignore[operator]


class _Extreme:
    """MIN or MAX of int64 or float64 values for one group, kept lazily.

    The multiset of values is `base` (sorted distinct values and their positive
    multiplicities) plus `chunks` of (values, weights) not yet folded in. `ext` is the extreme
    while `valid`; an insertion only compares, a deletion invalidates it only when the deleted
    value could be the extreme, and reading an invalid extreme consolidates. Consolidating when
    the chunks outgrow the base keeps memory proportional to the distinct values. When the
    count of values drops to zero everything is forgotten at once."""

    __slots__ = ("base_v", "base_w", "chunks", "count", "ext", "is_float", "is_max", "pending",
                 "valid")

    def __init__(self, is_max: bool, is_float: bool):
        self.is_max = is_max
        self.is_float = is_float
        self.count = 0  # non-NULL values, with multiplicity
        self.ext: object = None  # the extreme (a Python int or float) while `valid`
        self.valid = True
        self.base_v: np.ndarray | None = None
        self.base_w: np.ndarray | None = None
        self.chunks: list[tuple[np.ndarray, np.ndarray]] = []
        self.pending = 0  # values in `chunks`

    def apply_segment(
        self,
        dcount: int,
        ins: object,
        dele: object,
        vals: np.ndarray,
        ws: np.ndarray,
    ) -> None:
        """One segment: the change in non-NULL values, the extreme of the values inserted and
        of those deleted (None: there are none), and the values with their weights."""
        count = self.count + dcount
        self.count = count
        if count <= 0:
            self.ext, self.valid, self.base_v, self.base_w = None, True, None, None
            self.chunks, self.pending = [], 0
            return
        self.chunks.append((vals, ws))
        self.pending += len(vals)
        if self.valid:
            ext = self.ext
            if ins is not None and (ext is None or _before(ins, ext, self.is_max)):
                ext = self.ext = ins
            if dele is not None and (ext is None or not _before(ext, dele, self.is_max)):
                self.valid = False
        if self.pending > 2 * (0 if self.base_v is None else len(self.base_v)) + 4096:
            self._consolidate()

    def value(self) -> object:
        if not self.valid:
            self._consolidate()
        return self.ext

    def size(self) -> int:
        return self.pending + (0 if self.base_v is None else len(self.base_v))

    def _consolidate(self) -> None:
        vs = [c[0] for c in self.chunks]
        ws = [c[1] for c in self.chunks]
        if self.base_v is not None:
            vs.insert(0, self.base_v)
            ws.insert(0, self.base_w)  # type: ignore[arg-type]
        v = np.concatenate(vs) if len(vs) > 1 else vs[0]
        w = np.concatenate(ws) if len(ws) > 1 else ws[0]
        self.chunks, self.pending, self.valid = [], 0, True
        if len(v) == 0:
            self.base_v = self.base_w = None
            self.ext = None
            return
        order = np.argsort(v, kind="stable")  # NaN last: the greatest
        sv = v[order]
        start = np.empty(len(sv), dtype=bool)
        start[0] = True
        np.not_equal(sv[1:], sv[:-1], out=start[1:])
        if self.is_float:
            start[1:] &= ~(np.isnan(sv[1:]) & np.isnan(sv[:-1]))  # NaN equals NaN
        idx = np.flatnonzero(start)
        counts = np.add.reduceat(w[order], idx)
        keep = counts > 0
        self.base_v = sv[idx][keep]
        self.base_w = counts[keep]
        bv = self.base_v
        self.ext = None if not len(bv) else (bv[-1] if self.is_max else bv[0]).item()


class _Group:
    __slots__ = ("accs", "rows")

    def __init__(self, makers: list[Callable[[], _Acc | _Extreme]]):
        self.rows = 0
        self.accs = [m() for m in makers]

    def result(self) -> tuple:
        return tuple(a.value() for a in self.accs)


# Applies segment i of the current batch to one accumulator.
_Applier = Callable[[object, int], None]


class _Segments:
    """A batch cut into (instant, group) segments: the rows in segment order (`order`, None
    when already in order), where each segment starts, its instant and key, and its change in
    row count; segments are numbered in the order of their first element."""

    __slots__ = ("drows", "ends", "keys", "order", "seg_of_row", "starts", "ts", "w")

    def __init__(self, batch: Batch, keys: list[pa.Array]):
        n = len(batch)
        ts = batch.ts
        codes = [_codes(k) for k in keys]
        if codes:
            order = np.lexsort((*reversed(codes), ts))
            ts_o = ts[order]
            change = np.empty(n, dtype=bool)
            change[0] = True
            np.not_equal(ts_o[1:], ts_o[:-1], out=change[1:])
            for c in codes:
                co = c[order]
                change[1:] |= co[1:] != co[:-1]
            starts = np.flatnonzero(change)
            # lexsort is stable: a segment's first row is its earliest; number the segments by
            # it, so they come in instant order and, within an instant, by first appearance.
            first = order[starts]
            by_first = np.argsort(first, kind="stable")
            if np.any(by_first[1:] < by_first[:-1]):
                seg_rank = np.empty_like(by_first)
                seg_rank[by_first] = np.arange(len(by_first))
                seg_o = np.repeat(seg_rank, np.diff(np.append(starts, n)))
                order = order[np.argsort(seg_o, kind="stable")]
                starts = starts_from_lengths(np.diff(np.append(starts, n))[by_first])
                first = first[by_first]
            self.order: np.ndarray | None = order
            self.w = batch.w[order]
            self.ts = ts[first].tolist()
            idx = pa.array(first, type=pa.int64())
            self.keys = list(zip(*(k.take(idx).to_pylist() for k in keys)))
        else:
            self.order = None
            self.w = batch.w
            change = np.empty(n, dtype=bool)
            change[0] = True
            np.not_equal(ts[1:], ts[:-1], out=change[1:])
            starts = np.flatnonzero(change)
            self.ts = ts[starts].tolist()
            self.keys = [()] * len(starts)
        self.starts = starts
        self.ends = np.append(starts[1:], n)
        self.drows = np.add.reduceat(self.w, starts).tolist()
        self.seg_of_row: np.ndarray | None = None

    def __len__(self) -> int:
        return len(self.ts)

    def take(self, a: np.ndarray) -> np.ndarray:
        """`a` (one value per row, batch order) in segment order."""
        return a if self.order is None else a[self.order]

    def segment_ids(self) -> np.ndarray:
        """Each row's segment number, in batch order."""
        if self.seg_of_row is None:
            n = int(self.ends[-1])
            ids = np.repeat(np.arange(len(self.starts)), self.ends - self.starts)
            if self.order is not None:
                out = np.empty(n, dtype=np.int64)
                out[self.order] = ids
                ids = out
            self.seg_of_row = ids
        return self.seg_of_row

    def sums(self, a: np.ndarray) -> list:
        """Per segment, the sum of `a` (segment order)."""
        return np.add.reduceat(a, self.starts).tolist()


def starts_from_lengths(lengths: np.ndarray) -> np.ndarray:
    starts = np.zeros(len(lengths), dtype=np.int64)
    np.cumsum(lengths[:-1], out=starts[1:])
    return starts


def _codes(key: pa.Array) -> np.ndarray:
    """Integer codes equal exactly where the key values are the same group (NULL is one)."""
    if isinstance(key, pa.ChunkedArray):
        key = key.combine_chunks()
    enc = pc.dictionary_encode(key, null_encoding="encode")
    return np.asarray(enc.indices.to_numpy(zero_copy_only=False), dtype=np.int64)


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
        self._makers = [_maker(c) for c in aggs]
        self._groups: dict[tuple, _Group] = {}
        self.is_global = not keys
        self._started = False

    def describe(self) -> str:
        what = ", ".join(f"{a.fn}{'(distinct)' if a.distinct else ''}" for a in self.calls)
        return f"aggregate {'global' if self.is_global else f'by {len(self._keys)} key(s)'}: {what}"

    def state_size(self) -> tuple[int, int]:
        n = len(self._groups)
        extra = sum(a.size() for g in self._groups.values() for a in g.accs)
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
                self._groups[()] = _Group(self._makers)
        if n:
            cols = batch.columns
            seg = _Segments(batch, [ev(cols, n) for ev in self._keys])
            appliers = [self._applier(j, batch, seg) for j in range(len(self.calls))]
        else:
            seg, appliers = None, []
        if first is not None and (seg is None or first < seg.ts[0]):
            out_rows.append(self._row(()))  # type: ignore[arg-type]
            out_ts.append(first)
            out_w.append(1)
            first = None
        if seg is not None:
            self._apply(seg, appliers, first is not None, out_rows, out_ts, out_w)
        self.emit(Batch.from_rows(out_rows, out_ts, out_w, self.out_types, batch.ticks))

    def _apply(
        self,
        seg: _Segments,
        appliers: list[_Applier],
        fresh_global: bool,
        out_rows: list[tuple],
        out_ts: list[int],
        out_w: list[int],
    ) -> None:
        """Apply each segment in turn, emitting its group's old row as `−` and new row as `+`
        when they differ. `fresh_global`: the global row is new at the first segment."""
        groups = self._groups
        is_global = self.is_global
        makers = self._makers
        pairs = list(enumerate(appliers))
        for i, (t, key, drows) in enumerate(zip(seg.ts, seg.keys, seg.drows)):
            g = groups.get(key)
            if g is None:
                g = groups[key] = _Group(makers)
                old = None
            elif fresh_global:
                old = None
            else:
                old = key + g.result() if g.rows > 0 or is_global else None
            fresh_global = False
            g.rows += drows
            accs = g.accs
            for j, ap in pairs:
                ap(accs[j], i)
            if g.rows > 0 or is_global:
                new: tuple | None = key + g.result()
            else:
                new = None
                del groups[key]
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

    def _applier(self, j: int, batch: Batch, seg: _Segments) -> _Applier:
        """How segment i of this batch changes aggregate j's accumulator."""
        call, ev = self.calls[j], self._args[j]
        if ev is None:  # COUNT(*)
            drows = seg.drows
            return lambda acc, i: acc.apply((drows[i], 0))  # type: ignore[attr-defined]
        n = len(batch)
        arg = ev(batch.columns, n)
        if _numeric_extreme(call):
            return _extreme_applier(call, arg, batch, seg)
        if call.distinct or call.fn in ("min", "max") or not _linear_safe(call, arg, n):
            return _pairs_applier(arg, batch, seg)  # per distinct value: exact for floats and big ints
        w = seg.w
        valid = seg.take(np.asarray(arg.is_valid().to_numpy(zero_copy_only=False), dtype=bool))
        counts = seg.sums(w * valid)
        if call.fn in ("sum", "avg"):
            vals = seg.take(np.asarray(arg.fill_null(0).to_numpy(zero_copy_only=False)))
            sums = seg.sums(vals * w)
            return lambda acc, i: acc.apply((counts[i], sums[i]))  # type: ignore[attr-defined]
        return lambda acc, i: acc.apply((counts[i], 0))  # type: ignore[attr-defined]


def _maker(call: AggCall) -> Callable[[], _Acc | _Extreme]:
    if _numeric_extreme(call):
        is_max, is_float = call.fn == "max", call.arg.type == DataType.FLOAT  # type: ignore[union-attr]
        return lambda: _Extreme(is_max, is_float)
    return lambda: _Acc(call)


def _numeric_extreme(call: AggCall) -> bool:
    """MIN/MAX (DISTINCT or not: the same value) of a type `_Extreme` keeps in numpy."""
    return call.fn in ("min", "max") and call.arg is not None and call.arg.type in _NUMERIC


def _extreme_applier(call: AggCall, arg: pa.Array, batch: Batch, seg: _Segments) -> _Applier:
    """Per segment: the change in non-NULL values, the extreme inserted and deleted, and the
    segment's slice of values and weights (NULLs weigh 0)."""
    typ = _NUMERIC[call.arg.type]  # type: ignore[union-attr]
    if isinstance(arg, pa.ChunkedArray):
        arg = arg.combine_chunks()
    if arg.type != typ:
        arg = arg.cast(typ)
    is_max = call.fn == "max"
    is_float = typ == pa.float64()
    vals = seg.take(np.asarray(arg.fill_null(0).to_numpy(zero_copy_only=False)))
    w = seg.w
    if arg.null_count:
        valid = seg.take(np.asarray(arg.is_valid().to_numpy(zero_copy_only=False), dtype=bool))
        w = np.where(valid, w, 0)
    starts = seg.starts
    dcount = np.add.reduceat(w, starts).tolist()
    ins, has_ins = _segment_extremes(vals, w > 0, starts, is_max, is_float)
    if (w < 0).any():
        dele, has_del = _segment_extremes(vals, w < 0, starts, is_max, is_float)
    else:
        dele, has_del = None, None
    s_l, e_l = starts.tolist(), seg.ends.tolist()

    def apply(acc: _Extreme, i: int) -> None:  # type: ignore[misc]
        acc.apply_segment(
            dcount[i],
            ins[i] if has_ins[i] else None,
            dele[i] if has_del is not None and has_del[i] else None,  # type: ignore[index]
            vals[s_l[i]:e_l[i]],
            w[s_l[i]:e_l[i]],
        )

    return apply  # type: ignore[return-value]


def _segment_extremes(
    vals: np.ndarray, mask: np.ndarray, starts: np.ndarray, is_max: bool, is_float: bool
) -> tuple[list, list]:
    """Per segment, the extreme of the values where `mask` holds, and whether there is one."""
    if is_float:
        # np.maximum propagates NaN (the greatest); np.fmin skips it unless all are NaN.
        fill, ufunc = (-np.inf, np.maximum) if is_max else (np.nan, np.fmin)
    else:
        fill, ufunc = (_I64.min, np.maximum) if is_max else (_I64.max, np.minimum)
    ext = ufunc.reduceat(np.where(mask, vals, fill), starts)
    has = np.logical_or.reduceat(mask, starts)
    return ext.tolist(), has.tolist()


def _pairs_applier(arg: pa.Array, batch: Batch, seg: _Segments) -> _Applier:
    """Per segment, its (value, Δmultiplicity) pairs in order of first appearance, NULLs and
    cancelled values left out."""
    t = pa.table({"__s": seg.segment_ids(), "__v": arg, "__w": batch.w})
    g = t.group_by(["__s", "__v"], use_threads=False).aggregate([("__w", "sum")])
    per: list[list | None] = [None] * len(seg)
    for s, v, dw in zip(
        g.column("__s").to_pylist(), g.column("__v").to_pylist(), g.column("__w_sum").to_pylist()
    ):
        if v is None or dw == 0:
            continue
        lst = per[s]
        if lst is None:
            per[s] = [(v, dw)]
        else:
            lst.append((v, dw))

    def apply(acc: _Acc, i: int) -> None:  # type: ignore[misc]
        d = per[i]
        if d is not None:
            acc.apply(d)

    return apply  # type: ignore[return-value]


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
