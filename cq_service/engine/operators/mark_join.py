"""Mark join: extend each left row with a value computed from a subquery's relation.

Used for EXISTS, IN, `op ANY/ALL` and scalar subqueries (see `cql.logical.MarkJoin`). The left
synopsis keeps the multiset of left rows and their current marks per correlation key; when the
right relation changes at an instant, the marks of the left rows under the changed keys are
recomputed and every change is emitted as a retraction and an insertion at that instant.

An uncorrelated subquery (no keys, no correlation predicate: NEXMark's q5 and q7) takes a
columnar path. There a row's mark is a function of its probe value alone (of nothing at all for
EXISTS and scalar subqueries), so marks are computed once per distinct probe value and spread
with a dictionary encoding, the left rows are kept as Arrow chunks (`_Bag`), and a change of the
right relation re-emits only the rows whose probe value's mark changed — all vectorised.
"""

from __future__ import annotations

from collections import Counter, deque
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from cq_service.cql.logical import BExpr, Call, ColRef
from cq_service.engine.batch import Batch
from cq_service.engine.expressions import compile_expr
from cq_service.engine.fifo import oldest_retracted
from cq_service.engine.operators.base import MultiInputOperator, StateMismatch
from cq_service.engine.operators.join import key_tuples
from cq_service.engine.queues import Queue, QueueReader
from cq_service.types import DataType, arrow_type

__all__ = ["MarkJoin"]

_CMP = {"=": "eq", "<>": "ne", "<": "lt", "<=": "le", ">": "gt", ">=": "ge"}

# The uncorrelated path compares distinct probe values with distinct right values in slices of
# at most this many pairs.
_PAIRS = 1 << 20


class MarkJoin(MultiInputOperator):
    kind = "mark join"
    STRUCTURE = frozenset({"_keys", "_corr", "_cmp"})

    def __init__(
        self,
        name: str,
        inputs: list[QueueReader],
        output: Queue,
        *,
        mode: str,
        left_types: list[DataType],
        right_types: list[DataType],
        probe: BExpr | None,
        op: str | None,
        left_keys: tuple[BExpr, ...],
        right_keys: tuple[BExpr, ...],
        correlation: BExpr | None,
        default: BExpr | None = None,
    ):
        super().__init__(name, inputs, output)
        self.mode = mode
        self._default = None
        if default is not None:
            self._default = compile_expr(default)([], 1).to_pylist()[0]
        self.left_types = list(left_types)
        self.right_types = list(right_types)
        self._keys = ([compile_expr(e) for e in left_keys], [compile_expr(e) for e in right_keys])
        self._corr = compile_expr(correlation) if correlation is not None else None
        self._cmp = None
        if probe is not None and op is not None:
            lw = len(left_types)
            self._cmp = compile_expr(
                Call(_CMP[op], (probe, ColRef(lw, right_types[0])), DataType.BOOL)
            )
        self._left: dict[tuple | None, Counter] = {}
        self._marks: dict[tuple | None, dict[tuple, object]] = {}
        self._right: dict[tuple | None, Counter] = {}
        self.errors = 0
        # The uncorrelated path: the left rows as chunks, the right relation as a Counter whose
        # columnar form (`_RightState`) is rebuilt when it changes.
        self._flat: _Flat | None = None
        if not left_keys and not right_keys and correlation is None and left_types:
            self._flat = _Flat(self, probe, op)

    def describe(self) -> str:
        return f"mark join ({self.mode})"

    def snapshot(self) -> dict[str, Any]:
        """The base state, with the uncorrelated path's bag and right relation instead of the
        `_Flat` object (which holds compiled probes and this operator)."""
        state = super().snapshot()
        flat = state.pop("_flat")
        if flat is not None:
            bag = {k: v for k, v in vars(flat.bag).items() if k != "_probe_of"}
            state["_flat"] = {"bag": bag, "right": flat.right}
        else:
            state["_flat"] = None
        return state

    def restore(self, state: dict[str, Any]) -> None:
        flat = state["_flat"]
        if (flat is None) != (self._flat is None):
            raise StateMismatch(f"{self.name}: saved for the other mark-join path")
        if flat is not None:
            assert self._flat is not None
            vars(self._flat.bag).update(flat["bag"])
            self._flat.right = flat["right"]
            self._flat._state = None  # the right relation's columnar form, rebuilt when read
        super().restore({**state, "_flat": self._flat})

    def state_size(self) -> tuple[int, int]:
        rows = sum(len(c) for c in self._left.values()) + sum(len(c) for c in self._right.values())
        nbytes = rows * 8 * (len(self.left_types) + 2)
        if self._flat is not None:
            rows += self._flat.bag.rows
            nbytes += self._flat.bag.nbytes
        return rows, nbytes

    # -- inputs -------------------------------------------------------------------------------

    def on_run(self, port: int, batch: Batch) -> None:
        if len(batch) == 0:
            self.emit(self.empty(batch.ticks))
            return
        if self._flat is not None:
            out = self._flat.left_run(batch) if port == 0 else self._flat.right_run(batch)
            self.emit(out if out is not None else self.empty(batch.ticks))
        elif port == 0:
            self._left_run(batch)
        else:
            self._right_run(batch)

    def _left_run(self, batch: Batch) -> None:
        keys = key_tuples(self._keys[0], batch) if self._keys[0] else [()] * len(batch)
        rows = batch.rows()
        # Marks for rows not seen before, computed per key in one go.
        missing: dict[tuple | None, dict[tuple, None]] = {}
        for row, key in zip(rows, keys):
            cache = self._marks.get(key)
            if cache is None or row not in cache:
                missing.setdefault(key, {})[row] = None
        for key, kset in missing.items():
            krows = list(kset)
            marks = self._compute(krows, self._right.get(key) if key is not None else None)
            self._marks.setdefault(key, {}).update(zip(krows, marks))
        out_rows, out_ts, out_w = [], [], []
        for row, key, t, w in zip(rows, keys, batch.ts.tolist(), batch.w.tolist()):
            cache = self._marks.setdefault(key, {})
            if row not in cache:  # deleted and inserted again within this run
                group = self._right.get(key) if key is not None else None
                cache[row] = self._compute([row], group)[0]
            out_rows.append((*row, cache[row]))
            out_ts.append(t)
            out_w.append(w)
            group = self._left.setdefault(key, Counter())
            group[row] += w
            if group[row] == 0:
                del group[row]
                del self._marks[key][row]
        self.emit(Batch.from_rows(out_rows, out_ts, out_w, self.out_types, batch.ticks))

    def _right_run(self, batch: Batch) -> None:
        keys = key_tuples(self._keys[1], batch) if self._keys[1] else [()] * len(batch)
        rows = batch.rows()
        ts = batch.ts.tolist()
        ws = batch.w.tolist()
        out_rows, out_ts, out_w = [], [], []
        i = 0
        n = len(rows)
        while i < n:
            t = ts[i]
            touched: set[tuple] = set()
            while i < n and ts[i] == t:
                key = keys[i]
                if key is not None:
                    group = self._right.setdefault(key, Counter())
                    group[rows[i]] += ws[i]
                    if group[rows[i]] == 0:
                        del group[rows[i]]
                    touched.add(key)
                i += 1
            for key in touched:
                left = self._left.get(key)
                if not left:
                    continue
                lrows = list(left)
                new = self._compute(lrows, self._right.get(key))
                cache = self._marks[key]
                for row, mark in zip(lrows, new):
                    old = cache[row]
                    if old != mark or type(old) is not type(mark):
                        cnt = left[row]
                        out_rows.append((*row, old))
                        out_ts.append(t)
                        out_w.append(-cnt)
                        out_rows.append((*row, mark))
                        out_ts.append(t)
                        out_w.append(cnt)
                        cache[row] = mark
        self.emit(Batch.from_rows(out_rows, out_ts, out_w, self.out_types, batch.ticks))

    # -- the mark -----------------------------------------------------------------------------

    def _compute(self, lrows: list[tuple], group: Counter | None) -> list[object]:
        nl = len(lrows)
        if not group:
            return [self._empty_mark()] * nl
        if self.mode == "exists" and self._corr is None:
            return [True] * nl
        rrows = list(group)
        counts = np.fromiter(group.values(), dtype=np.int64, count=len(rrows))
        lb = Batch.from_rows(lrows, [0] * nl, [1] * nl, self.left_types)
        rb = Batch.from_rows(rrows, [0] * len(rrows), [1] * len(rrows), self.right_types)
        return self._reduce(lb.columns, nl, rb.columns, counts, self._corr, self._cmp)

    def _empty_mark(self) -> object:
        """The mark over an empty subquery."""
        return {"exists": False, "any": False, "all": True, "scalar": self._default}[self.mode]

    def _reduce(
        self,
        lcols: tuple[pa.Array, ...],
        nl: int,
        rcols: tuple[pa.Array, ...],
        counts: np.ndarray,
        corr,
        cmp,
    ) -> list[object]:
        """The marks of `nl` left rows against the distinct right rows `rcols` (multiplicities
        `counts`, at least one row): `corr` and `cmp` read the left columns then the right."""
        nr = len(counts)
        li = np.repeat(np.arange(nl), nr)
        ri = np.tile(np.arange(nr), nl)
        pa_li, pa_ri = pa.array(li), pa.array(ri)
        cols = tuple(c.take(pa_li) for c in lcols) + tuple(c.take(pa_ri) for c in rcols)
        m = len(li)
        if corr is not None:
            passing = np.asarray(
                corr(cols, m).fill_null(False).to_numpy(zero_copy_only=False), dtype=bool
            )
        else:
            passing = np.ones(m, dtype=bool)
        if self.mode == "exists":
            hit = np.bincount(li[passing], minlength=nl) > 0
            return [bool(h) for h in hit]
        if self.mode == "scalar":
            mult = np.bincount(li[passing], weights=counts[ri[passing]], minlength=nl)
            values = cols[len(lcols)].to_pylist()
            first = np.full(nl, -1)
            idx = np.flatnonzero(passing)
            first[li[idx[::-1]]] = idx[::-1]
            out: list[object] = []
            for k in range(nl):
                if mult[k] == 0:
                    out.append(self._default)
                elif mult[k] == 1:
                    out.append(values[first[k]])
                else:
                    self.errors += 1
                    out.append(None)
            return out
        res = cmp(cols, m)
        is_null = np.asarray(res.is_null().to_numpy(zero_copy_only=False), dtype=bool)
        val = np.asarray(res.fill_null(False).to_numpy(zero_copy_only=False), dtype=bool)
        any_null = np.bincount(li[passing & is_null], minlength=nl) > 0
        if self.mode == "any":
            any_true = np.bincount(li[passing & val], minlength=nl) > 0
            return [True if t else (None if nu else False) for t, nu in zip(any_true, any_null)]
        any_false = np.bincount(li[passing & ~val & ~is_null], minlength=nl) > 0
        return [False if f else (None if nu else True) for f, nu in zip(any_false, any_null)]


class _RightState:
    """The right relation at one moment, columnar: its distinct rows and their multiplicities,
    and (for EXISTS and scalar subqueries) the one mark every left row gets."""

    __slots__ = ("cols", "const", "counts")

    def __init__(self, group: Counter, types: list[DataType]):
        rows = list(group)
        self.counts = np.fromiter(group.values(), dtype=np.int64, count=len(rows))
        self.cols = Batch.from_rows(rows, [0] * len(rows), [1] * len(rows), types).columns
        self.const: pa.Array | None = None


class _Flat:
    """The uncorrelated path (see the module docstring)."""

    def __init__(self, join: MarkJoin, probe: BExpr | None, op: str | None):
        self.join = join
        self.mode = join.mode
        self.probe = None
        self.cmp = None
        if self.mode in ("any", "all") and probe is not None and op is not None:
            self.probe = compile_expr(probe)
            rt = join.right_types[0]
            self.cmp = compile_expr(
                Call(_CMP[op], (ColRef(0, probe.type), ColRef(1, rt)), DataType.BOOL)
            )
        self.bag = _Bag(self._probe_of if self.probe is not None else None)
        self.right: Counter = Counter()
        self._state: _RightState | None = None

    def _probe_of(self, cols: list[pa.Array], n: int) -> pa.Array:
        assert self.probe is not None
        p = self.probe(cols, n)
        return p.combine_chunks() if isinstance(p, pa.ChunkedArray) else p

    @property
    def mark_type(self) -> pa.DataType:
        return arrow_type(self.join.out_types[-1])

    def state(self) -> _RightState:
        if self._state is None:
            self._state = _RightState(self.right, self.join.right_types)
        return self._state

    # -- marks --------------------------------------------------------------------------------

    def const_mark(self, st: _RightState) -> pa.Array:
        """EXISTS and scalar: the mark of every left row (one value)."""
        if st.const is None:
            if len(st.counts) == 0:
                v = self.join._empty_mark()
            else:
                v = self.join._reduce((), 1, st.cols, st.counts, None, None)[0]
            st.const = pa.array([v], type=self.mark_type)
        return st.const

    def value_marks(self, values: pa.Array, st: _RightState) -> pa.Array:
        """ANY and ALL: the mark of each of `values` (distinct probe values)."""
        nd, nr = len(values), len(st.counts)
        if nr == 0:
            return pa.array([self.join._empty_mark()] * nd, type=self.mark_type)
        step = max(1, _PAIRS // nr)
        out: list[object] = []
        for a in range(0, nd, step):
            part = values.slice(a, step)
            out += self.join._reduce((part,), len(part), st.cols[:1], st.counts, None, self.cmp)
        return pa.array(out, type=self.mark_type)

    def marks(self, probe: pa.Array | None, n: int, st: _RightState) -> tuple[pa.Array, pa.Array]:
        """(the marks of n left rows with these probe values, the index of each row's value
        in the first array)."""
        if probe is None:
            return self.const_mark(st), pa.array(np.zeros(n, np.int64))
        enc = pc.dictionary_encode(probe, null_encoding="encode")
        return self.value_marks(enc.dictionary, st), enc.indices

    # -- inputs -------------------------------------------------------------------------------

    def left_run(self, batch: Batch) -> Batch:
        n = len(batch)
        cols = list(batch.columns)
        probe = self._probe_of(cols, n) if self.probe is not None else None
        distinct, index = self.marks(probe, n, self.state())
        self.bag.add(cols, probe, batch.w)
        return Batch((*batch.columns, distinct.take(index)), batch.ts, batch.w, batch.ticks)

    def right_run(self, batch: Batch) -> Batch | None:
        rows = batch.rows()
        ws = batch.w.tolist()
        ts = batch.ts
        starts = np.flatnonzero(np.r_[True, ts[1:] != ts[:-1]]).tolist()
        parts: list[Batch] = []
        for a, b in zip(starts, [*starts[1:], len(rows)]):
            before = self.state()
            if self._apply(rows[a:b], ws[a:b]):
                self._state = None
                out = self._changes(before, self.state(), int(ts[a]))
                if out is not None:
                    parts.append(out)
        if not parts:
            return None
        out = parts[0] if len(parts) == 1 else Batch.concat(parts)
        return out.with_ticks(batch.ticks)

    def _apply(self, rows: list[tuple], ws: list[int]) -> bool:
        """Apply one instant's right elements; whether the marks may have changed."""
        group = self.right
        was: dict[tuple, int] = {}
        total_before = len(group)
        for row, w in zip(rows, ws):
            if row not in was:
                was[row] = group.get(row, 0)
            c = group.get(row, 0) + w
            if c:
                group[row] = c
            else:
                del group[row]
        if self.mode == "exists":
            return (total_before == 0) != (len(group) == 0)
        if self.mode == "scalar":
            return any(group.get(r, 0) != c for r, c in was.items())
        return any((group.get(r, 0) == 0) != (c == 0) for r, c in was.items())  # a set changed

    def _changes(self, before: _RightState, after: _RightState, t: int) -> Batch | None:
        """The left rows whose mark differs between the two states: retracted with the old
        mark, inserted with the new one, at instant t."""
        cols, probe, w = self.bag.live()
        n = len(w)
        if n == 0:
            return None
        if probe is None:
            old, new = self.const_mark(before), self.const_mark(after)
            if _same(old, new)[0]:
                return None
            zeros = pa.array(np.zeros(n, np.int64))
            old_m, new_m = old.take(zeros), new.take(zeros)
        else:
            enc = pc.dictionary_encode(probe, null_encoding="encode")
            old = self.value_marks(enc.dictionary, before)
            new = self.value_marks(enc.dictionary, after)
            differs = ~_same(old, new)
            if not differs.any():
                return None
            index = np.asarray(enc.indices)
            sel = np.flatnonzero(differs[index])
            pidx = pa.array(sel)
            cols = [c.take(pidx) for c in cols]
            w = w[sel]
            vi = pa.array(index[sel])
            old_m, new_m = old.take(vi), new.take(vi)
        ts = np.full(len(w), t, np.int64)
        return Batch.concat(
            [Batch((*cols, old_m), ts, -w), Batch((*cols, new_m), ts, w.copy())]
        )


def _same(a: pa.Array, b: pa.Array) -> np.ndarray:
    """Element-wise: equal values, or both NULL."""
    if a.type == pa.null():
        return np.ones(len(a), dtype=bool)
    eq = np.asarray(pc.equal(a, b).fill_null(False).to_numpy(zero_copy_only=False), dtype=bool)
    both_null = np.asarray(a.is_null()) & np.asarray(b.is_null())
    return eq | both_null


class _Bag:
    """The left rows of the uncorrelated path: chunks of columns with weights (and the probe
    values, when marks depend on them), in arrival order.

    Insertions are appended. Retractions of the oldest rows in order (what a window emits)
    drop them from the front; any other retraction is appended as a row of negative weight
    until they are a good part of the bag, which is then consolidated (as it is when read)."""

    def __init__(self, probe_of):
        self._probe_of = probe_of
        self._chunks: deque[tuple[list[pa.Array], pa.Array | None, np.ndarray]] = deque()
        self.rows = 0
        self.nbytes = 0
        self._loose = 0  # retractions appended as rows of negative weight
        self._nonunit = 0  # rows whose weight is not 1

    def add(self, cols: list[pa.Array], probe: pa.Array | None, w: np.ndarray) -> None:
        if len(w) == 0:
            return
        minus = w < 0
        if not minus.any():
            self._append(cols, probe, w)
            return
        if self._expire_oldest(cols, probe, w):
            return
        self._append(cols, probe, w)
        self._loose += int(minus.sum())
        if self._loose * 4 >= self.rows:
            self._consolidate()

    def live(self) -> tuple[list[pa.Array], pa.Array | None, np.ndarray]:
        """Every row with its net weight (consolidated: no negative weights), as one chunk."""
        if self._loose:
            self._consolidate()
        elif len(self._chunks) > 1:
            cols, probe, w = _concat(list(self._chunks))
            self._chunks = deque([(cols, probe, w)])
        if not self._chunks:
            return [], None, np.empty(0, np.int64)
        return self._chunks[0]

    def _append(self, cols: list[pa.Array], probe: pa.Array | None, w: np.ndarray) -> None:
        self._chunks.append((cols, probe, w))
        self.rows += len(w)
        self.nbytes += _nbytes(cols, probe, w)
        self._nonunit += int((w != 1).sum())

    def _expire_oldest(self, cols: list[pa.Array], probe: pa.Array | None, w: np.ndarray) -> bool:
        """Insertions, and retractions of the oldest rows in order: drop those from the front.
        Returns False (nothing done) in any other case."""
        if self._loose or self._nonunit:
            return False
        found = oldest_retracted(cols, w, self.rows, self._head)
        if found is None:
            return False
        new, pi, k = found
        kept = probe.take(pi) if probe is not None else None
        self._append(new, kept, np.ones(len(pi), np.int64))
        self._drop_front(k)  # may reach into the rows just appended
        return True

    def _head(self, k: int) -> list[pa.Array]:
        """The columns of the first k rows (1 ≤ k ≤ rows)."""
        parts: list[list[pa.Array]] = []
        for cols, _, w in self._chunks:
            if k <= 0:
                break
            m = min(k, len(w))
            parts.append([c.slice(0, m) for c in cols])
            k -= m
        return [pa.concat_arrays(list(p)) for p in zip(*parts)]

    def _drop_front(self, k: int) -> None:
        """Drop the first k rows."""
        while k > 0 and self._chunks:
            cols, probe, w = self._chunks[0]
            n = len(w)
            if n <= k:
                self._chunks.popleft()
                self.rows -= n
                self.nbytes -= _nbytes(cols, probe, w)
                k -= n
            else:
                rest = (
                    [c.slice(k) for c in cols],
                    probe.slice(k) if probe is not None else None,
                    w[k:],
                )
                self.rows -= k
                self.nbytes -= _nbytes(cols, probe, w) - _nbytes(*rest)
                self._chunks[0] = rest
                k = 0

    def _consolidate(self) -> None:
        """Net weight per distinct row; rows whose weight is zero leave the bag."""
        cols, _, w = _concat(list(self._chunks))
        names = [f"c{i}" for i in range(len(cols))]
        table = pa.table({**dict(zip(names, cols)), "__w": w})
        g = table.group_by(names, use_threads=False).aggregate([("__w", "sum")])
        net = g.column("__w_sum").to_numpy()
        keep = pa.array(np.flatnonzero(net != 0))
        new = [g.column(n).take(keep).combine_chunks() for n in names]
        nw = net[net != 0].astype(np.int64)
        self._chunks.clear()
        self.rows = self.nbytes = self._loose = self._nonunit = 0
        if len(nw):
            probe = self._probe_of(new, len(nw)) if self._probe_of is not None else None
            self._append(new, probe, nw)


def _concat(chunks: list[tuple[list[pa.Array], pa.Array | None, np.ndarray]]):
    if len(chunks) == 1:
        return chunks[0]
    cols = [pa.concat_arrays(list(p)) for p in zip(*(c for c, _, _ in chunks))]
    probe = None
    if chunks[0][1] is not None:
        probe = pa.concat_arrays([p for _, p, _ in chunks])  # type: ignore[misc]
    return cols, probe, np.concatenate([w for _, _, w in chunks])


def _nbytes(cols: list[pa.Array], probe: pa.Array | None, w: np.ndarray) -> int:
    return sum(c.nbytes for c in cols) + (probe.nbytes if probe is not None else 0) + w.nbytes
