"""One batch of an aggregate's input cut into segments, and each aggregate's deltas per segment.

A batch is cut into segments, one per (instant, group), with dense group codes (dense_ids.py:
direct addressing for narrow int codes, Arrow's hash otherwise) and no sort; segments are
numbered in the order of their first element, which is instant order (`Segments`). For each aggregate, a `Deltas` gives every segment's change: COUNT and int
SUM/AVG that cannot overflow as numpy reductions (`Linear`); MIN and MAX of ints, timestamps
and floats as the change in values and the extremes inserted and deleted (`Extremes`);
COUNT/SUM/AVG(DISTINCT) of ints and timestamps kept in the group table as the values and
weights (`Values`); every other aggregate (DISTINCT otherwise, float sums, int sums that could
overflow, MIN/MAX of strings and booleans) as the segment's (value, Δmultiplicity) pairs
(`Pairs`).
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from cq_service.cql.logical import AggCall
from cq_service.engine.batch import Batch
from cq_service.engine.operators.accumulators import NUMERIC, Acc, Extreme, canonical_nan
from cq_service.engine.operators.dense_ids import dense_ids, first_occurrences, int_codes

__all__ = ["Deltas", "Extremes", "Linear", "Pairs", "Segments", "Values", "group_ids",
           "linear_safe", "starts_from_lengths"]

_I64 = np.iinfo(np.int64)


class Segments:
    """A batch cut into (instant, group) segments, numbered in the order of their first
    element (so in instant order): each row's segment (`sid`, batch order), where each segment
    starts and ends in segment order, its instant, its group (`gid`, dense ids with their keys
    in `gkeys`, read from row `grow` of the batch) and its change in row count.

    Segment ids are dense ids of (instant, group) codes (dense_ids.py), with no sort; the rows
    in segment order (`order`, None when the batch is already in it) are sorted for only on
    first use (`take`), which per-segment sums of batch-order values (`segment_sums`,
    np.add.at) do not need."""

    def __init__(self, batch: Batch, keys: list[pa.Array]):
        n = len(batch)
        ts = batch.ts
        self.keys = keys
        self.n = n
        self._w = batch.w
        self._order: np.ndarray | None = None
        self._ordered = not keys
        if keys:
            row_gid, self.grow = group_ids(keys)  # each group's first row: its key's
            sid, first = _segment_ids(ts, row_gid, self.grow)
            lengths = np.bincount(sid, minlength=len(first))
            starts = starts_from_lengths(lengths)
            self.gid = row_gid[first]
            self._gkeys: list[tuple] | None = None
            self._sid: np.ndarray | None = sid
            self._ordered = _is_sorted(sid)  # already in segment order
        else:
            change = np.empty(n, dtype=bool)
            change[0] = True
            np.not_equal(ts[1:], ts[:-1], out=change[1:])
            starts = np.flatnonzero(change)
            self.gid = np.zeros(len(starts), dtype=np.int64)
            self._gkeys = [()]
            self.grow = np.zeros(1, dtype=np.int64)
            first = starts
            self._sid = None
        self.starts = starts
        self.ends = np.append(starts[1:], n)
        self.ts = ts[first]
        self.drows = self.segment_sums(batch.w)
        self._row_gid: np.ndarray | None = None
        self._seg_w: np.ndarray | None = None

    def __len__(self) -> int:
        return len(self.starts)

    @property
    def groups(self) -> int:
        return len(self.grow)

    @property
    def order(self) -> np.ndarray | None:
        """The rows in segment order (None: the batch is in it); sorted for on first use."""
        if self._ordered:
            return None
        if self._order is None:
            self._order = np.argsort(self._sid, kind="stable")
        return self._order

    @property
    def w(self) -> np.ndarray:
        """The batch's weights in segment order."""
        if self._seg_w is None:
            self._seg_w = self.take(self._w)
        return self._seg_w

    def key_values(self) -> list[pa.Array]:
        """Each key column's value per group (`gid` order)."""
        idx = pa.array(self.grow, type=pa.int64())
        return [k.take(idx) for k in self.keys]

    @property
    def gkeys(self) -> list[tuple]:
        """Each group's key as a Python tuple (NaN as one object), read on first use."""
        if self._gkeys is None:
            cols = [canonical_nan(k.to_pylist(), k.type) for k in self.key_values()]
            self._gkeys = list(zip(*cols))
        return self._gkeys

    def take(self, a: np.ndarray) -> np.ndarray:
        """`a` (one value per row, batch order) in segment order."""
        order = self.order
        return a if order is None else a[order]

    def sums(self, a: np.ndarray) -> np.ndarray:
        """Per segment, the sum of `a` (one value per row, segment order)."""
        return np.add.reduceat(a, self.starts)

    def segment_sums(self, a: np.ndarray) -> np.ndarray:
        """Per segment, the exact sum of int `a` (one value per row, batch order)."""
        if self._sid is None or self._ordered or self._order is not None:
            return self.sums(self.take(a))
        out = np.zeros(len(self.starts), dtype=np.int64)
        np.add.at(out, self._sid, a)  # unbuffered: exact, and fast for int64 in numpy ≥ 2
        return out

    def segment_ids(self) -> np.ndarray:
        """Each row's segment number, in batch order."""
        if self._sid is not None:
            return self._sid
        return np.repeat(np.arange(len(self.starts)), self.ends - self.starts)

    def row_gid(self) -> np.ndarray:
        """Each row's group, in segment order."""
        if self._row_gid is None:
            self._row_gid = np.repeat(self.gid, self.ends - self.starts)
        return self._row_gid


def _is_sorted(a: np.ndarray) -> bool:
    return len(a) < 2 or bool((a[1:] >= a[:-1]).all())


def _segment_ids(ts: np.ndarray, row_gid: np.ndarray,
                 grow: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Each row's (instant, group) segment, dense ids in order of first appearance, and each
    segment's first row (`grow`: each group's)."""
    if len(ts) < 2 or (ts[0] == ts[-1] and bool((ts == ts[0]).all())):
        return row_gid, grow  # one instant: the segments are the groups
    if _is_sorted(ts):
        inst = np.zeros(len(ts), dtype=np.int64)
        np.cumsum(ts[1:] != ts[:-1], out=inst[1:])
    else:
        inst = dense_ids(ts)[0]
    return dense_ids(inst * len(grow) + row_gid)


def starts_from_lengths(lengths: np.ndarray) -> np.ndarray:
    starts = np.zeros(len(lengths), dtype=np.int64)
    np.cumsum(lengths[:-1], out=starts[1:])
    return starts


def group_ids(keys: list[pa.Array]) -> tuple[np.ndarray, np.ndarray]:
    """Dense group ids per row, in order of first appearance (NULL is a value, NaN one), and
    each group's first row."""
    gid = firsts = None
    for k in keys:
        if isinstance(k, pa.ChunkedArray):
            k = k.combine_chunks()
        ints = int_codes(k)
        if ints is None:  # Arrow's hash numbers in order of first appearance too
            enc = pc.dictionary_encode(k, null_encoding="encode")
            codes = np.asarray(enc.indices.to_numpy(zero_copy_only=False), dtype=np.int64)
            key_firsts, distinct = None, len(enc.dictionary)
        else:
            codes, key_firsts = dense_ids(ints)
            distinct = len(key_firsts)
        if gid is None:
            gid, firsts = codes, key_firsts
        else:
            gid, firsts = dense_ids(gid * distinct + codes)
    assert gid is not None
    return gid, first_occurrences(gid) if firsts is None else firsts


class Deltas:
    """Aggregate j's per-segment changes in one batch. `apply(acc, i)` applies segment i to an
    accumulator (the general path); `vector` says whether the vectorised path handles it."""

    vector = False

    def apply(self, acc: object, i: int) -> None:
        raise NotImplementedError


class Linear(Deltas):
    """COUNT(*), COUNT(x) and int SUM/AVG that cannot overflow in this batch: Δcount, Δsum."""

    vector = True

    def __init__(self, fn: str, counts: np.ndarray, sums: np.ndarray | None):
        self.fn = fn
        self.counts = counts
        self.sums = sums
        self._c: list[int] | None = None  # as lists, for the general path: made on first use
        self._s: list[int] | None = None

    def apply(self, acc: Acc, i: int) -> None:  # type: ignore[override]
        if self._c is None:
            self._c = self.counts.tolist()
            self._s = self.sums.tolist() if self.sums is not None else None
        acc.apply((self._c[i], self._s[i] if self._s is not None else 0))


class Pairs(Deltas):
    """Per segment its (value, Δmultiplicity) pairs, in order of first appearance."""

    def __init__(self, arg: pa.Array, batch: Batch, seg: Segments):
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

    def apply(self, acc: Acc, i: int) -> None:  # type: ignore[override]
        d = self.per[i]
        if d is not None:
            acc.apply(d)


class Extremes(Deltas):
    """MIN/MAX of ints, timestamps or floats: per segment the change in non-NULL values, the
    extreme of the values inserted and of those deleted, and the segment's values and weights
    (segment order; NULLs weigh 0)."""

    vector = True

    def __init__(self, call: AggCall, arg: pa.Array, seg: Segments):
        typ = NUMERIC[call.arg.type]  # type: ignore[union-attr]
        self.is_max = is_max = call.fn == "max"
        self.is_float = is_float = typ == pa.float64()
        self.vals, self.w = vals, w = _segment_values(arg, typ, seg)
        starts = seg.starts
        self.dcount = np.add.reduceat(w, starts)
        self.ins, self.has_ins = _segment_extremes(vals, w > 0, starts, is_max, is_float)
        neg = w < 0
        self.any_del = bool(neg.any())
        if self.any_del:
            self.dele, self.has_del = _segment_extremes(vals, neg, starts, is_max, is_float)
        self._lists: tuple | None = None
        self._s, self._e = starts, seg.ends

    def apply(self, acc: Extreme, i: int) -> None:  # type: ignore[override]
        if self._lists is None:
            conv = canonical_nan if self.is_float else (lambda v, t: v)
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


class Values(Deltas):
    """COUNT, SUM or AVG(DISTINCT) of ints or timestamps, for the group table's multisets
    (group_multiset.py): the segments' values and weights (segment order; NULLs weigh 0)."""

    def __init__(self, arg: pa.Array, seg: Segments):
        self.vals, self.w = _segment_values(arg, pa.int64(), seg)
        self._s, self._e = seg.starts, seg.ends

    def apply(self, acc: Acc, i: int) -> None:  # type: ignore[override]
        """Segment i's (value, Δmultiplicity) pairs, as `Pairs` gives them."""
        s, e = int(self._s[i]), int(self._e[i])
        per: dict[int, int] = {}
        for v, w in zip(self.vals[s:e].tolist(), self.w[s:e].tolist()):
            per[v] = per.get(v, 0) + w
        pairs = [(v, w) for v, w in per.items() if w]
        if pairs:
            acc.apply(pairs)


def _segment_values(arg: pa.Array, typ: pa.DataType, seg: Segments) -> tuple[np.ndarray, np.ndarray]:
    """The values of `arg` as `typ` and their weights, in segment order; NULLs weigh 0."""
    if isinstance(arg, pa.ChunkedArray):
        arg = arg.combine_chunks()
    if arg.type != typ:
        arg = arg.cast(typ)
    vals = seg.take(np.asarray(arg.fill_null(0).to_numpy(zero_copy_only=False)))
    w = seg.w
    if arg.null_count:
        valid = seg.take(np.asarray(arg.is_valid().to_numpy(zero_copy_only=False), dtype=bool))
        w = np.where(valid, w, 0)
    return vals, w


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


def linear_safe(call: AggCall, arg: pa.Array, n: int) -> bool:
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
