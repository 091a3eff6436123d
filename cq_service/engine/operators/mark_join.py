"""Mark join: extend each left row with a value computed from a subquery's relation.

Used for EXISTS, IN, `op ANY/ALL` and scalar subqueries (see `cql.logical.MarkJoin`). The left
synopsis keeps the multiset of left rows and their current marks per correlation key; when the
right relation changes at an instant, the marks of the left rows under the changed keys are
recomputed and every change is emitted as a retraction and an insertion at that instant.
"""

from __future__ import annotations

from collections import Counter

import numpy as np
import pyarrow as pa

from cq_service.cql.logical import BExpr, Call, ColRef
from cq_service.engine.batch import Batch
from cq_service.engine.expressions import compile_expr
from cq_service.engine.operators.base import MultiInputOperator
from cq_service.engine.operators.join import key_tuples
from cq_service.engine.queues import Queue, QueueReader
from cq_service.types import DataType

__all__ = ["MarkJoin"]

_CMP = {"=": "eq", "<>": "ne", "<": "lt", "<=": "le", ">": "gt", ">=": "ge"}


class MarkJoin(MultiInputOperator):
    kind = "mark join"

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

    def describe(self) -> str:
        return f"mark join ({self.mode})"

    def state_size(self) -> tuple[int, int]:
        rows = sum(len(c) for c in self._left.values()) + sum(len(c) for c in self._right.values())
        return rows, rows * 8 * (len(self.left_types) + 2)

    # -- inputs -------------------------------------------------------------------------------

    def on_run(self, port: int, batch: Batch) -> None:
        if len(batch) == 0:
            self.emit(self.empty(batch.ticks))
            return
        if port == 0:
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
        empty = {"exists": False, "any": False, "all": True, "scalar": self._default}[self.mode]
        if not group:
            return [empty] * nl
        if self.mode == "exists" and self._corr is None:
            return [True] * nl
        rrows = list(group)
        counts = np.fromiter(group.values(), dtype=np.int64, count=len(rrows))
        nr = len(rrows)
        li = np.repeat(np.arange(nl), nr)
        ri = np.tile(np.arange(nr), nl)
        lb = Batch.from_rows(lrows, [0] * nl, [1] * nl, self.left_types)
        rb = Batch.from_rows(rrows, [0] * nr, [1] * nr, self.right_types)
        pa_li, pa_ri = pa.array(li), pa.array(ri)
        cols = tuple(c.take(pa_li) for c in lb.columns) + tuple(c.take(pa_ri) for c in rb.columns)
        m = len(li)
        if self._corr is not None:
            passing = np.asarray(
                self._corr(cols, m).fill_null(False).to_numpy(zero_copy_only=False), dtype=bool
            )
        else:
            passing = np.ones(m, dtype=bool)
        if self.mode == "exists":
            hit = np.bincount(li[passing], minlength=nl) > 0
            return [bool(h) for h in hit]
        if self.mode == "scalar":
            mult = np.bincount(li[passing], weights=counts[ri[passing]], minlength=nl)
            values = cols[len(self.left_types)].to_pylist()
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
        cmp = self._cmp(cols, m)  # type: ignore[misc]
        is_null = np.asarray(cmp.is_null().to_numpy(zero_copy_only=False), dtype=bool)
        val = np.asarray(cmp.fill_null(False).to_numpy(zero_copy_only=False), dtype=bool)
        any_null = np.bincount(li[passing & is_null], minlength=nl) > 0
        if self.mode == "any":
            any_true = np.bincount(li[passing & val], minlength=nl) > 0
            return [True if t else (None if nu else False) for t, nu in zip(any_true, any_null)]
        any_false = np.bincount(li[passing & ~val & ~is_null], minlength=nl) > 0
        return [False if f else (None if nu else True) for f, nu in zip(any_false, any_null)]
