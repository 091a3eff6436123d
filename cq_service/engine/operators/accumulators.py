"""Per-group aggregate state: what one group keeps for each aggregate, and its value.

`Acc` keeps COUNT, SUM and AVG (a count and a total, float sums with Neumaier compensation) and,
for DISTINCT and MIN/MAX of strings and booleans, the multiset of values as a `Counter`.
`Extreme` keeps MIN and MAX of ints, timestamps and floats lazily: the extreme, plus the
multiset as consolidated arrays and pending chunks; an insertion moves the extreme with one
comparison and only deleting a value that could be the extreme forces a recount. A `Group`
holds a group's row multiplicity and one accumulator per aggregate.

These objects are an aggregate's state, so they are pickled in state snapshots
(docs/service.md, "State snapshots").
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable

import numpy as np
import pyarrow as pa

from cq_service.cql.logical import AggCall
from cq_service.types import DataType

__all__ = ["NAN", "NUMERIC", "Acc", "Extreme", "Group", "canonical_nan", "make_accumulator",
           "numeric_extreme"]

# MIN/MAX argument types kept as numpy arrays by `Extreme`, and their Arrow types.
NUMERIC = {DataType.INT: pa.int64(), DataType.TIMESTAMP: pa.int64(), DataType.FLOAT: pa.float64()}
NAN = float("nan")  # the one NaN object results and keys use, so that NaN == NaN


class Acc:
    """One aggregate's state for one group (everything `Extreme` does not cover)."""

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


class Extreme:
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
        self.ext = NAN if ext is not None and ext != ext else ext


class Group:
    __slots__ = ("accs", "rows")

    def __init__(self, makers: list[Callable[[], Acc | Extreme]]):
        self.rows = 0
        self.accs = [m() for m in makers]

    def result(self) -> tuple:
        return tuple(a.value() for a in self.accs)


def make_accumulator(call: AggCall) -> Callable[[], Acc | Extreme]:
    if numeric_extreme(call):
        is_max, is_float = call.fn == "max", call.arg.type == DataType.FLOAT  # type: ignore[union-attr]
        return lambda: Extreme(is_max, is_float)
    return lambda: Acc(call)


def numeric_extreme(call: AggCall) -> bool:
    """MIN/MAX (DISTINCT or not: the same value) of a type `Extreme` keeps in numpy."""
    return call.fn in ("min", "max") and call.arg is not None and call.arg.type in NUMERIC


def canonical_nan(values: list, typ: pa.DataType) -> list:
    """One NaN object for every NaN, so that equal keys and results compare equal."""
    if typ != pa.float64():
        return values
    return [NAN if v is not None and v != v else v for v in values]
