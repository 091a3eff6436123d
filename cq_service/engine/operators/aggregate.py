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
_NAN = float("nan")  # the one NaN object results and keys use, so that NaN == NaN


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

    def set_exact(self, count: int, ext: object, vals: np.ndarray, ws: np.ndarray) -> None:
        """After a batch applied with array operations: `count` values whose extreme is
        `ext`, this batch's values and weights added to the multiset."""
        if count <= 0:
            self.apply_segment(-self.count, None, None, vals, ws)
            return
        self.count, self.ext, self.valid = count, ext, True
        if len(vals):
            self.chunks.append((vals, ws))
            self.pending += len(vals)
            if self.pending > 2 * (0 if self.base_v is None else len(self.base_v)) + 4096:
                self._consolidate()

    def value(self) -> object:
        if not self.valid:
            self._consolidate()
        return self.ext

    def size(self) -> int:
        return self.pending + (0 if self.base_v is None else len(self.base_v))

    def __getstate__(self) -> tuple[None, dict[str, object]]:
        """Pickled (a state snapshot) consolidated: the distinct values and their counts, not
        every chunk since the last consolidation — the same multiset and extreme."""
        if self.chunks:
            self._consolidate()
        return None, {slot: getattr(self, slot) for slot in self.__slots__}

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
        # NaN sorts last: the greatest. Only the representative of 0.0 and -0.0 (equal)
        # depends on the order of equal values: the first inserted one, as a Counter keeps.
        stable = self.is_float and bool((v == 0).any())
        order = np.argsort(v, kind="stable" if stable else "quicksort")
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
        ext = None if not len(bv) else (bv[-1] if self.is_max else bv[0]).item()
        self.ext = _NAN if ext is not None and ext != ext else ext


class _Group:
    __slots__ = ("accs", "rows")

    def __init__(self, makers: list[Callable[[], _Acc | _Extreme]]):
        self.rows = 0
        self.accs = [m() for m in makers]

    def result(self) -> tuple:
        return tuple(a.value() for a in self.accs)


class _Segments:
    """A batch cut into (instant, group) segments, numbered in the order of their first
    element (so in instant order): the rows in segment order (`order`; None when the batch is
    already in it), where each segment starts and ends, its instant, its group (`gid`, dense
    ids with their keys in `gkeys`) and its change in row count."""

    def __init__(self, batch: Batch, keys: list[pa.Array]):
        n = len(batch)
        ts = batch.ts
        change = np.empty(n, dtype=bool)
        change[0] = True
        if keys:
            row_gid = _group_ids(keys, n)
            order = np.lexsort((row_gid, ts))
            ts_o, g_o = ts[order], row_gid[order]
            np.not_equal(ts_o[1:], ts_o[:-1], out=change[1:])
            change[1:] |= g_o[1:] != g_o[:-1]
            starts = np.flatnonzero(change)
            first = order[starts]  # lexsort is stable: each segment's earliest row
            if np.any(first[1:] < first[:-1]):
                by_first = np.argsort(first, kind="stable")
                lengths = np.diff(np.append(starts, n))
                rank = np.empty_like(by_first)
                rank[by_first] = np.arange(len(by_first))
                order = order[np.argsort(np.repeat(rank, lengths), kind="stable")]
                starts = _starts_from_lengths(lengths[by_first])
                first = first[by_first]
            self.order: np.ndarray | None = order
            self.gid = row_gid[first]
            _, gfirst = np.unique(self.gid, return_index=True)  # each group's first segment
            idx = pa.array(first[gfirst], type=pa.int64())
            cols = [_canonical_nan(k.take(idx).to_pylist(), k.type) for k in keys]
            self.gkeys: list[tuple] = list(zip(*cols))
        else:
            self.order = None
            np.not_equal(ts[1:], ts[:-1], out=change[1:])
            starts = np.flatnonzero(change)
            self.gid = np.zeros(len(starts), dtype=np.int64)
            self.gkeys = [()]
            first = starts
        self.n = n
        self.w = batch.w if self.order is None else batch.w[self.order]
        self.starts = starts
        self.ends = np.append(starts[1:], n)
        self.ts = ts[first]
        self.drows = np.add.reduceat(self.w, starts)
        self._row_gid: np.ndarray | None = None

    def __len__(self) -> int:
        return len(self.starts)

    def take(self, a: np.ndarray) -> np.ndarray:
        """`a` (one value per row, batch order) in segment order."""
        return a if self.order is None else a[self.order]

    def sums(self, a: np.ndarray) -> np.ndarray:
        """Per segment, the sum of `a` (one value per row, segment order)."""
        return np.add.reduceat(a, self.starts)

    def segment_ids(self) -> np.ndarray:
        """Each row's segment number, in batch order."""
        ids = np.repeat(np.arange(len(self.starts)), self.ends - self.starts)
        if self.order is None:
            return ids
        out = np.empty(self.n, dtype=np.int64)
        out[self.order] = ids
        return out

    def row_gid(self) -> np.ndarray:
        """Each row's group, in segment order."""
        if self._row_gid is None:
            self._row_gid = np.repeat(self.gid, self.ends - self.starts)
        return self._row_gid


def _starts_from_lengths(lengths: np.ndarray) -> np.ndarray:
    starts = np.zeros(len(lengths), dtype=np.int64)
    np.cumsum(lengths[:-1], out=starts[1:])
    return starts


def _group_ids(keys: list[pa.Array], n: int) -> np.ndarray:
    """Dense group ids per row, in order of first appearance (NULL is a value, NaN one)."""
    gid: np.ndarray | None = None
    for k in keys:
        if isinstance(k, pa.ChunkedArray):
            k = k.combine_chunks()
        enc = pc.dictionary_encode(k, null_encoding="encode")
        codes = np.asarray(enc.indices.to_numpy(zero_copy_only=False), dtype=np.int64)
        if gid is None:
            gid = codes
        else:
            gid = _dense(gid * len(enc.dictionary) + codes)
    return gid  # type: ignore[return-value]


def _dense(codes: np.ndarray) -> np.ndarray:
    enc = pc.dictionary_encode(pa.array(codes, type=pa.int64()))
    return np.asarray(enc.indices.to_numpy(zero_copy_only=False), dtype=np.int64)


def _canonical_nan(values: list, typ: pa.DataType) -> list:
    """One NaN object for every NaN, so that equal keys and results compare equal."""
    if typ != pa.float64():
        return values
    return [_NAN if v is not None and v != v else v for v in values]


# -- per-aggregate deltas of one batch ----------------------------------------------------------


class _Deltas:
    """Aggregate j's per-segment changes in one batch. `apply(acc, i)` applies segment i to an
    accumulator (the general path); `vector` says whether the vectorised path handles it."""

    vector = False

    def apply(self, acc: object, i: int) -> None:
        raise NotImplementedError


class _Linear(_Deltas):
    """COUNT(*), COUNT(x) and int SUM/AVG that cannot overflow in this batch: Δcount, Δsum."""

    vector = True

    def __init__(self, fn: str, counts: np.ndarray, sums: np.ndarray | None):
        self.fn = fn
        self.counts = counts
        self.sums = sums
        self._c = counts.tolist()
        self._s = sums.tolist() if sums is not None else None

    def apply(self, acc: _Acc, i: int) -> None:  # type: ignore[override]
        acc.apply((self._c[i], self._s[i] if self._s is not None else 0))


class _Pairs(_Deltas):
    """Per segment its (value, Δmultiplicity) pairs, in order of first appearance."""

    def __init__(self, arg: pa.Array, batch: Batch, seg: _Segments):
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
        self.per = per

    def apply(self, acc: _Acc, i: int) -> None:  # type: ignore[override]
        d = self.per[i]
        if d is not None:
            acc.apply(d)


class _Extremes(_Deltas):
    """MIN/MAX of ints, timestamps or floats: per segment the change in non-NULL values, the
    extreme of the values inserted and of those deleted, and the segment's values and weights
    (segment order; NULLs weigh 0)."""

    vector = True

    def __init__(self, call: AggCall, arg: pa.Array, seg: _Segments):
        typ = _NUMERIC[call.arg.type]  # type: ignore[union-attr]
        if isinstance(arg, pa.ChunkedArray):
            arg = arg.combine_chunks()
        if arg.type != typ:
            arg = arg.cast(typ)
        self.is_max = is_max = call.fn == "max"
        self.is_float = is_float = typ == pa.float64()
        self.vals = vals = seg.take(np.asarray(arg.fill_null(0).to_numpy(zero_copy_only=False)))
        w = seg.w
        if arg.null_count:
            valid = seg.take(np.asarray(arg.is_valid().to_numpy(zero_copy_only=False), dtype=bool))
            w = np.where(valid, w, 0)
        self.w = w
        starts = seg.starts
        self.dcount = np.add.reduceat(w, starts)
        self.ins, self.has_ins = _segment_extremes(vals, w > 0, starts, is_max, is_float)
        neg = w < 0
        self.any_del = bool(neg.any())
        if self.any_del:
            self.dele, self.has_del = _segment_extremes(vals, neg, starts, is_max, is_float)
        self._lists: tuple | None = None
        self._s, self._e = starts, seg.ends

    def apply(self, acc: _Extreme, i: int) -> None:  # type: ignore[override]
        if self._lists is None:
            conv = _canonical_nan if self.is_float else (lambda v, t: v)
            self._lists = (
                self.dcount.tolist(),
                conv(np.where(self.has_ins, self.ins, 0).tolist(), pa.float64()),
                self.has_ins.tolist(),
                conv(np.where(self.has_del, self.dele, 0).tolist(), pa.float64())
                if self.any_del else None,
                self.has_del.tolist() if self.any_del else None,
                self._s.tolist(),
                self._e.tolist(),
            )
        dc, ins, has_ins, dele, has_del, s, e = self._lists
        acc.apply_segment(
            dc[i],
            ins[i] if has_ins[i] else None,
            dele[i] if dele is not None and has_del[i] else None,
            self.vals[s[i]:e[i]],
            self.w[s[i]:e[i]],
        )


def _segment_extremes(
    vals: np.ndarray, mask: np.ndarray, starts: np.ndarray, is_max: bool, is_float: bool
) -> tuple[np.ndarray, np.ndarray]:
    """Per segment, the extreme of the values where `mask` holds, and whether there is one."""
    if is_float:
        # np.maximum propagates NaN (the greatest); np.fmin skips it unless all are NaN.
        fill, ufunc = (-np.inf, np.maximum) if is_max else (np.nan, np.fmin)
    else:
        fill, ufunc = (_I64.min, np.maximum) if is_max else (_I64.max, np.minimum)
    ext = ufunc.reduceat(np.where(mask, vals, fill), starts)
    has = np.logical_or.reduceat(mask, starts)
    return ext, has


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
        self._makers = [_maker(c) for c in aggs]
        self._groups: dict[tuple, _Group] = {}
        self.is_global = not keys
        # Only MIN, MAX and DISTINCT keep values per group; the others' state is the groups.
        self._keeps_values = any(c.keeps_values for c in aggs)
        self._started = False

    def describe(self) -> str:
        what = ", ".join(f"{a.fn}{'(distinct)' if a.distinct else ''}" for a in self.calls)
        return f"aggregate {'global' if self.is_global else f'by {len(self._keys)} key(s)'}: {what}"

    def state_size(self) -> tuple[int, int]:
        n = len(self._groups)
        extra = 0
        if self._keeps_values:
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
                self._groups[()] = _Group(self._makers)
        seg = None
        if n:
            cols = batch.columns
            seg = _Segments(batch, [ev(cols, n) for ev in self._keys])
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

    def _deltas(self, j: int, batch: Batch, seg: _Segments) -> _Deltas:
        call, ev = self.calls[j], self._args[j]
        if ev is None:  # COUNT(*)
            return _Linear("count", seg.drows, None)
        n = len(batch)
        arg = ev(batch.columns, n)
        if _numeric_extreme(call):
            return _Extremes(call, arg, seg)
        if call.distinct or call.fn in ("min", "max") or not _linear_safe(call, arg, n):
            return _Pairs(arg, batch, seg)  # per distinct value: exact for floats and big ints
        w = seg.w
        valid = seg.take(np.asarray(arg.is_valid().to_numpy(zero_copy_only=False), dtype=bool))
        counts = seg.sums(w * valid)
        if call.fn in ("sum", "avg"):
            vals = seg.take(np.asarray(arg.fill_null(0).to_numpy(zero_copy_only=False)))
            return _Linear(call.fn, counts, seg.sums(vals * w))
        return _Linear("count", counts, None)

    def _general(
        self,
        seg: _Segments,
        deltas: list[_Deltas],
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
                g = groups[key] = _Group(makers)
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

    def _vectorised(self, seg: _Segments, deltas: list[_Linear | _Extremes], out: _Out) -> np.ndarray | None:
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
        gstart = _starts_from_lengths(lengths)
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
            if isinstance(d, _Linear):
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
        seg: _Segments,
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
        if any(isinstance(d, _Extremes) for d in deltas):
            rg = seg.row_gid()
            idx = np.flatnonzero(surv[rg])
            if np.any(rg[idx][1:] < rg[idx][:-1]):
                idx = idx[np.argsort(rg[idx], kind="stable")]
            bounds = np.searchsorted(rg[idx], gs)
            ends = np.append(bounds[1:], len(idx))
            chunks = [(idx, bounds.tolist(), ends.tolist())]
        cols = []
        for d, st in zip(deltas, states):
            if isinstance(d, _Linear):
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
                g = groups[key] = _Group(makers)
            g.rows = r
            for acc, d, c in zip(g.accs, deltas, cols):
                if isinstance(d, _Linear):
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


def _extreme_values(d: _Extremes, existing: list, j: int, G: int, perm: np.ndarray,
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
        ul = _canonical_nan(ul, pa.float64())
    xl = xcount.tolist()
    vals = [ul[(r if d.is_max else K - r + 1) - 1] if r and x > 0 else None
            for r, x in zip(run.tolist(), xl)]
    return vals, (xcount, vals), bad


def _maker(call: AggCall) -> Callable[[], _Acc | _Extreme]:
    if _numeric_extreme(call):
        is_max, is_float = call.fn == "max", call.arg.type == DataType.FLOAT  # type: ignore[union-attr]
        return lambda: _Extreme(is_max, is_float)
    return lambda: _Acc(call)


def _numeric_extreme(call: AggCall) -> bool:
    """MIN/MAX (DISTINCT or not: the same value) of a type `_Extreme` keeps in numpy."""
    return call.fn in ("min", "max") and call.arg is not None and call.arg.type in _NUMERIC


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
