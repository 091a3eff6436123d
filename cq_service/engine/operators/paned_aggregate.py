"""An aggregate over a sliding `[Range T Slide L]` window, computed in panes.

`Aggregate` over `RangeWindow` stores every element and, at each slide, the window emits the
elements entering and leaving as + and − deltas that the aggregate applies one by one. This
operator does both jobs without keeping elements (Li et al., "No pane, no gain"; Traub et al.,
"Scotty: stream slicing"). Every admitted element has the window's entry and exit instants
(range_window.py); both are non-decreasing in its timestamp, so the elements with the same
(entry, exit) form a contiguous *slice* of the stream — about two per slide. A slice keeps, per
group, a partial aggregate: its rows, and per aggregate its non-NULL count, int sum or extreme.

At an instant τ the slices entering at τ are added to the running per-group state and those
leaving at τ subtracted (COUNT, SUM, AVG are invertible); a MIN/MAX only moves by one comparison
on entry, and is recomputed over the window's live slices (by binary search in each slice's
sorted groups) only for the groups whose leaving partial held the extreme. The work at τ is
proportional to the groups in the slices that enter or leave, not to the window.

The output is what `Aggregate` over `RangeWindow` emits: at each instant, for each group whose
result changed, the old row as − and the new one as +; a global aggregate's row exists from the
first instant its input sees; the ticks are the input's and every entry and exit instant. An
instant is processed once complete (a later element or a heartbeat), so it is never split.

The planner (plan/panes.py `fusable`) uses it only where this is exact: COUNT, int SUM/AVG and
int or timestamp MIN/MAX without DISTINCT, keys that are not floats, a window that is not
adjustable at run time and that nothing else reads.
"""

from __future__ import annotations

from collections import deque

import numpy as np
import pyarrow as pa

from cq_service.cql.logical import AggCall, BExpr
from cq_service.engine.batch import Batch, merge_ticks
from cq_service.engine.expressions import compile_expr
from cq_service.engine.operators.range_window import entry_and_exit
from cq_service.engine.operators.segments import Segments
from cq_service.engine.operators.window_base import WindowOperator
from cq_service.engine.queues import Queue, QueueReader
from cq_service.types import DataType, arrow_type

__all__ = ["PanedAggregate"]

_I64 = np.iinfo(np.int64)
_BIG = 2**62  # int sums are kept as int64 while every partial sum's magnitude stays below this


class _Slice:
    """The elements with one (entry, exit): per group (sorted global ids) their rows, and per
    aggregate the non-NULL count and the sum or extreme (None for COUNT)."""

    __slots__ = ("cnt", "enter", "gids", "leave", "rows", "val")

    def __init__(self, enter: int, leave: int, gids: np.ndarray, rows: np.ndarray,
                 cnt: list[np.ndarray], val: list[np.ndarray | None]):
        self.enter, self.leave = enter, leave
        self.gids, self.rows, self.cnt, self.val = gids, rows, cnt, val

    def nbytes(self) -> int:
        n = self.gids.nbytes + self.rows.nbytes + sum(c.nbytes for c in self.cnt)
        return n + sum(v.nbytes for v in self.val if v is not None)


class PanedAggregate(WindowOperator):
    kind = "paned aggregate"
    STRUCTURE = frozenset({"_keyev", "_args", "calls", "input_types", "size", "slide",
                           "granularity"})

    def __init__(
        self,
        name: str,
        inputs: list[QueueReader],
        output: Queue,
        size: int,
        slide: int | None,
        where: BExpr | None,
        granularity: int,
        keys: tuple[BExpr, ...],
        aggs: tuple[AggCall, ...],
        input_types: list[DataType] | None = None,
    ):
        super().__init__(name, inputs, output, where)
        self.size, self.slide, self.granularity = size, slide, granularity
        self.calls = aggs
        self.input_types = input_types or []
        self._keyev = [compile_expr(k) for k in keys]
        self._args = [None if a.arg is None else compile_expr(a.arg) for a in aggs]
        self.is_global = not keys
        self.done = _I64.min  # every instant up to this one is processed
        self._started = False  # (global) the row exists
        self._pending: deque[_Slice] = deque()  # not entered yet, in entry order
        self._live: deque[_Slice] = deque()  # in the window, in exit order
        self._ticks = np.empty(0, np.int64)  # input ticks not yet passed on
        # groups: key <-> dense id (ids are reused once no slice holds the group)
        self._ids: dict[tuple, int] = {}
        self._keys: list[tuple | None] = []
        self._kcols = [np.empty(0, dtype=object) for _ in keys]  # key values per group
        self._free: list[int] = []
        self._n = 0  # ids handed out
        # one int or timestamp key: its values sorted, with their ids, instead of `_ids`
        self._int_key = len(keys) == 1 and keys[0].type in (DataType.INT, DataType.TIMESTAMP)
        self._ks = np.empty(0, np.int64)
        self._kg = np.empty(0, np.int64)
        self._null_gid = -1
        self._refs = np.zeros(0, np.int64)  # slices holding each group
        self._rows = np.zeros(0, np.int64)  # the window's rows per group
        self._cnt = [np.zeros(0, np.int64) for _ in aggs]
        self._val: list[np.ndarray | None] = [
            None if a.fn == "count" else np.zeros(0, np.int64) for a in aggs
        ]
        self._big = False  # sums are Python ints (object arrays)
        self._abs_total = 0.0  # the sum of |value| ever added: a bound on any sum's magnitude
        if self.is_global:
            self._group_ids([()])

    def describe(self) -> str:
        what = ", ".join(a.fn for a in self.calls)
        by = "global" if self.is_global else f"by {len(self._keyev)} key(s)"
        w = f"[Range {self.size}" + (f" Slide {self.slide}]" if self.slide else "]")
        g = f" Γ({self.granularity})" if self.granularity > 1 else ""
        return f"paned aggregate {by} over {w}{g}: {what}"

    def state_size(self) -> tuple[int, int]:
        slices = list(self._pending) + list(self._live)
        rows = self._n - len(self._free) + sum(len(s.gids) for s in slices)
        arrays = [self._refs, self._rows, *self._cnt, *(v for v in self._val if v is not None)]
        nbytes = sum(a.nbytes for a in arrays) + sum(s.nbytes() for s in slices)
        keys = self._ks.nbytes + self._kg.nbytes + sum(8 * len(c) for c in self._kcols)
        return rows, nbytes + keys + 64 * len(self._ids)

    # -- groups ---------------------------------------------------------------------------------

    def _group_ids(self, keys: list[tuple]) -> np.ndarray:
        ids = self._ids
        out = np.empty(len(keys), np.int64)
        for i, k in enumerate(keys):
            g = ids.get(k)
            if g is None:
                if self._free:
                    g = self._free.pop()
                    self._keys[g] = k
                else:
                    g = self._n
                    self._n += 1
                    self._keys.append(k)
                    self._grow(g + 1)
                ids[k] = g
                for c, col in enumerate(self._kcols):
                    col[g] = k[c]
            out[i] = g
        return out

    def _int_ids(self, kv: pa.Array) -> np.ndarray:
        """The ids of one int key's distinct values (NULL is a value), new ones added."""
        if isinstance(kv, pa.ChunkedArray):
            kv = kv.combine_chunks()
        valid = np.asarray(kv.is_valid().to_numpy(zero_copy_only=False), dtype=bool)
        vals = np.asarray(kv.fill_null(0).to_numpy(zero_copy_only=False), dtype=np.int64)
        out = np.empty(len(vals), np.int64)
        if not valid.all():
            if self._null_gid < 0:
                self._null_gid = int(self._new_ids(1)[0])
                self._kcols[0][self._null_gid] = None
            out[~valid] = self._null_gid
        v = vals[valid]
        ks = self._ks
        if len(ks):
            pos = np.minimum(np.searchsorted(ks, v), len(ks) - 1)
            hit = ks[pos] == v
            res = np.where(hit, self._kg[pos], -1)
        else:
            hit = np.zeros(len(v), dtype=bool)
            res = np.full(len(v), -1, np.int64)
        miss = ~hit
        if miss.any():
            fresh = v[miss]  # distinct: one per group of the batch
            ids = self._new_ids(len(fresh))
            self._kcols[0][ids] = fresh.astype(object)
            res[miss] = ids
            allk = np.concatenate((ks, fresh))
            order = np.argsort(allk, kind="stable")
            self._ks, self._kg = allk[order], np.concatenate((self._kg, ids))[order]
        out[valid] = res
        return out

    def _new_ids(self, n: int) -> np.ndarray:
        take = min(n, len(self._free))
        reused = [self._free.pop() for _ in range(take)]
        start = self._n
        self._n += n - take
        self._grow(self._n)
        return np.concatenate((np.asarray(reused, np.int64), np.arange(start, self._n, dtype=np.int64)))

    def _grow(self, n: int) -> None:
        cap = len(self._rows)
        if n <= cap:
            return
        new = max(n, 2 * cap, 64)

        def ext(a: np.ndarray) -> np.ndarray:
            b = np.zeros(new, dtype=a.dtype)
            if a.dtype == object:
                b[:] = 0
            b[:cap] = a
            return b

        self._refs, self._rows = ext(self._refs), ext(self._rows)
        self._kcols = [ext(c) for c in self._kcols]
        self._cnt = [ext(c) for c in self._cnt]
        self._val = [None if v is None else ext(v) for v in self._val]

    def _release(self, gids: np.ndarray) -> None:
        """Forget the groups no slice holds any more (their rows are 0)."""
        if self.is_global:
            gids = gids[gids != 0]
        if self._int_key:
            keep = ~np.isin(self._kg, gids)
            self._ks, self._kg = self._ks[keep], self._kg[keep]
            if self._null_gid >= 0 and bool(np.isin(self._null_gid, gids)):
                self._null_gid = -1
            self._free.extend(gids.tolist())
        else:
            for g in gids.tolist():
                key = self._keys[g]
                del self._ids[key]  # type: ignore[arg-type]
                self._keys[g] = None
                self._free.append(g)
        self._rows[gids] = 0
        for j, c in enumerate(self._cnt):
            c[gids] = 0
            v = self._val[j]
            if v is not None:
                v[gids] = 0

    # -- input ----------------------------------------------------------------------------------

    def on_batch(self, batch: Batch) -> None:
        if len(batch.ticks):
            self._ticks = merge_ticks(self._ticks, batch.ticks)
        adm = self.admit(batch)
        if len(adm):
            self._add(adm)
        last = int(batch.ts[-1]) if len(batch) else None
        if len(batch.ticks):
            t = int(batch.ticks[-1])
            last = t if last is None else max(last, t)
        if last is not None:
            self._advance(last - 1)  # instant `last` may continue in the next batch

    def on_heartbeat(self, ts: int) -> None:
        self._advance(ts)

    def _add(self, batch: Batch) -> None:
        batch, enter, leave = entry_and_exit(batch, self.size, self.slide, self.granularity)
        n = len(batch)
        if not n:
            return
        # slice number per element: both instants are non-decreasing, so slices are runs
        brk = np.zeros(n, dtype=bool)
        brk[1:] = (enter[1:] != enter[:-1]) | (leave[1:] != leave[:-1])
        sid = np.cumsum(brk)
        cols = batch.columns
        keys = [ev(cols, n) for ev in self._keyev]
        seg = Segments(Batch(cols, sid, batch.w), keys)
        if self._int_key:
            gid = self._int_ids(seg.key_values()[0])[seg.gid]
        else:
            gid = self._group_ids(seg.gkeys)[seg.gid]
        parts_cnt: list[np.ndarray] = []
        parts_val: list[np.ndarray | None] = []
        for call, ev in zip(self.calls, self._args):
            if ev is None:
                parts_cnt.append(seg.drows)
                parts_val.append(None)
                continue
            arg = ev(cols, n)
            if isinstance(arg, pa.ChunkedArray):
                arg = arg.combine_chunks()
            valid = seg.take(np.asarray(arg.is_valid().to_numpy(zero_copy_only=False), dtype=bool))
            w = seg.w * valid
            parts_cnt.append(seg.sums(w))
            if call.fn == "count":
                parts_val.append(None)
                continue
            vals = seg.take(np.asarray(arg.cast(pa.int64()).fill_null(0)
                                       .to_numpy(zero_copy_only=False), dtype=np.int64))
            if call.fn in ("sum", "avg"):
                # a bound on every partial sum's magnitude (floats: rounded up generously)
                mag = float(np.abs(vals.astype(np.float64)) @ np.abs(w).astype(np.float64))
                self._abs_total += mag * (1 + 1e-6) + 1
                if not self._big and self._abs_total >= _BIG:
                    self._to_big()
                if self._big:
                    parts_val.append(np.add.reduceat((vals.astype(object) * w), seg.starts))
                else:
                    parts_val.append(seg.sums(vals * w))
            else:
                ok = w > 0
                fill, uf = (_I64.min, np.maximum) if call.fn == "max" else (_I64.max, np.minimum)
                parts_val.append(uf.reduceat(np.where(ok, vals, fill), seg.starts))
        # one slice per run of segments with the same slice number
        s_of = seg.ts
        bounds = np.flatnonzero(np.diff(s_of)) + 1
        starts = np.concatenate(([0], bounds))
        ends = np.append(bounds, len(s_of))
        first_row = seg.order[seg.starts] if seg.order is not None else seg.starts
        for a, b in zip(starts.tolist(), ends.tolist()):
            r = int(first_row[a])
            g_ids = gid[a:b]
            o = np.argsort(g_ids, kind="stable")
            sl = _Slice(int(enter[r]), int(leave[r]), g_ids[o], seg.drows[a:b][o],
                        [c[a:b][o] for c in parts_cnt],
                        [None if v is None else v[a:b][o] for v in parts_val])
            self._push(sl)

    def _to_big(self) -> None:
        self._big = True
        for j, v in enumerate(self._val):
            if v is not None and self.calls[j].fn in ("sum", "avg"):
                self._val[j] = v.astype(object)
        for s in list(self._pending) + list(self._live):
            for j, v in enumerate(s.val):
                if v is not None and self.calls[j].fn in ("sum", "avg"):
                    s.val[j] = v.astype(object)

    def _push(self, sl: _Slice) -> None:
        """Queue a slice, merged into the last pending one when it has the same instants."""
        last = self._pending[-1] if self._pending else None
        if last is None or (last.enter, last.leave) != (sl.enter, sl.leave):
            self._refs[sl.gids] += 1
            self._pending.append(sl)
            return
        new = ~np.isin(sl.gids, last.gids, assume_unique=True)
        self._refs[sl.gids[new]] += 1
        gids = np.concatenate((last.gids, sl.gids))
        u, inv = np.unique(gids, return_inverse=True)
        k = len(u)

        def comb(a: np.ndarray, b: np.ndarray, fn: str = "sum") -> np.ndarray:
            both = np.concatenate((a, b))
            if fn == "min":
                out = np.full(k, _I64.max, dtype=np.int64)
                np.minimum.at(out, inv, both)
            elif fn == "max":
                out = np.full(k, _I64.min, dtype=np.int64)
                np.maximum.at(out, inv, both)
            else:
                out = np.zeros(k, dtype=both.dtype)
                np.add.at(out, inv, both)
            return out

        last.gids = u
        last.rows = comb(last.rows, sl.rows)
        last.cnt = [comb(a, b) for a, b in zip(last.cnt, sl.cnt)]
        last.val = [None if a is None else comb(a, b, c.fn if c.fn in ("min", "max") else "sum")
                    for a, b, c in zip(last.val, sl.val, self.calls)]  # type: ignore[arg-type]

    # -- output ---------------------------------------------------------------------------------

    def _advance(self, upto: int) -> None:
        """Process every instant up to `upto` (all its input is in)."""
        if upto <= self.done:
            return
        parts: list[_Part] = []
        k = int(np.searchsorted(self._ticks, upto, side="right"))
        ticks, self._ticks = self._ticks[:k], self._ticks[k:]
        events: list[int] = []
        while True:
            cands = []
            if self._pending and self._pending[0].enter <= upto:
                cands.append(self._pending[0].enter)
            if self._live and self._live[0].leave <= upto:
                cands.append(self._live[0].leave)
            if not cands:
                break
            tau = min(cands)
            events.append(tau)
            if self.is_global and not self._started and len(ticks) and ticks[0] < tau:
                self._start(int(ticks[0]), parts)
            self._instant(tau, parts)
        out_ticks = merge_ticks(ticks, np.asarray(events, dtype=np.int64))
        if self.is_global and not self._started and len(out_ticks):
            self._start(int(out_ticks[0]), parts)
        self.done = upto
        if parts:
            self.emit(self._batch(parts, out_ticks))
        elif len(out_ticks):
            self.emit(self.empty(out_ticks))

    def _start(self, at: int, parts: list[_Part]) -> None:
        """The global row appears at `at` (nothing has changed it yet)."""
        self._started = True
        g = np.zeros(1, np.int64)
        state = (self._rows[g], [c[g] for c in self._cnt],
                 [None if v is None else v[g] for v in self._val])
        parts.append(_Part(at, 1, g, self._columns(*state)))

    def _instant(self, tau: int, parts: list[_Part]) -> None:
        enter: list[_Slice] = []
        leave: list[_Slice] = []
        while self._pending and self._pending[0].enter == tau:
            enter.append(self._pending.popleft())
        while self._live and self._live[0].leave == tau:
            leave.append(self._live.popleft())
        touched = np.unique(np.concatenate([s.gids for s in enter + leave]))
        fresh = self.is_global and not self._started
        self._started = self._started or self.is_global
        before_rows = self._rows[touched]
        before_cnt = [c[touched] for c in self._cnt]
        before_val = [None if v is None else v[touched] for v in self._val]
        # apply: rows and counts add up; sums add up; extremes move on entry
        recount: list[np.ndarray | None] = [None] * len(self.calls)
        for s in leave:
            self._rows[s.gids] -= s.rows
            for j, call in enumerate(self.calls):
                self._cnt[j][s.gids] -= s.cnt[j]
                v = self._val[j]
                if v is None:
                    continue
                if call.fn in ("sum", "avg"):
                    v[s.gids] -= s.val[j]
                else:  # the extreme may have left with this slice
                    held = (s.cnt[j] > 0) & (s.val[j] == v[s.gids])  # type: ignore[index]
                    r = s.gids[held]
                    recount[j] = r if recount[j] is None else np.union1d(recount[j], r)
        for s in enter:
            self._rows[s.gids] += s.rows
            for j, call in enumerate(self.calls):
                c = self._cnt[j]
                had = c[s.gids] > 0
                c[s.gids] += s.cnt[j]
                v = self._val[j]
                if v is None:
                    continue
                if call.fn in ("sum", "avg"):
                    v[s.gids] += s.val[j]
                else:
                    has = s.cnt[j] > 0
                    cur = v[s.gids]
                    better = np.maximum if call.fn == "max" else np.minimum
                    v[s.gids] = np.where(has, np.where(had, better(cur, s.val[j]), s.val[j]), cur)
            self._live.append(s)
        for j, r in enumerate(recount):
            if r is not None and len(r):
                self._recount(j, r)
        # what changed: a group's row before and after (−old, +new where they differ)
        after_rows = self._rows[touched]
        after = self._columns(after_rows, [c[touched] for c in self._cnt],
                              [None if v is None else v[touched] for v in self._val])
        before = self._columns(before_rows, before_cnt, before_val)
        if self.is_global:
            ex_old = np.full(len(touched), not fresh)
            ex_new = np.ones(len(touched), dtype=bool)
        else:
            ex_old, ex_new = before_rows > 0, after_rows > 0
        same = ex_old & ex_new
        for (vo, ok_o), (vn, ok_n) in zip(before, after):
            same &= (ok_o == ok_n) & (~ok_o | np.asarray(vo == vn, dtype=bool))
        out_old, out_new = ex_old & ~same, ex_new & ~same
        if out_old.any():
            parts.append(_Part(tau, -1, touched[out_old], [(v[out_old], ok[out_old]) for v, ok in before]))
        if out_new.any():
            parts.append(_Part(tau, 1, touched[out_new], [(v[out_new], ok[out_new]) for v, ok in after]))
        # groups no slice holds any more
        for s in leave:
            self._refs[s.gids] -= 1
        if leave:
            gone = np.unique(np.concatenate([s.gids[self._refs[s.gids] == 0] for s in leave]))
            if len(gone):
                self._release(gone)

    def _recount(self, j: int, gids: np.ndarray) -> None:
        """MIN/MAX j of `gids` over the window's live slices."""
        is_max = self.calls[j].fn == "max"
        best = np.full(len(gids), _I64.min if is_max else _I64.max, dtype=np.int64)
        for s in self._live:
            if not len(s.gids):
                continue
            pos = np.searchsorted(s.gids, gids)
            pos_c = np.minimum(pos, len(s.gids) - 1)
            hit = (s.gids[pos_c] == gids) & (pos < len(s.gids))
            hit &= s.cnt[j][pos_c] > 0
            vals = s.val[j][pos_c]  # type: ignore[index]
            if is_max:
                best = np.where(hit, np.maximum(best, vals), best)
            else:
                best = np.where(hit, np.minimum(best, vals), best)
        self._val[j][gids] = best  # type: ignore[index]

    def _columns(self, rows: np.ndarray, cnt: list[np.ndarray],
                 val: list[np.ndarray | None]) -> list[tuple[np.ndarray, np.ndarray]]:
        """Each aggregate's result for groups in the given state: (values, non-NULL)."""
        out = []
        for j, call in enumerate(self.calls):
            c = cnt[j]
            if call.fn == "count":
                out.append((c, np.ones(len(c), dtype=bool)))
                continue
            v = val[j]
            ok = c > 0
            if call.fn == "sum":
                if v.dtype == object:  # type: ignore[union-attr]
                    ok &= np.asarray((v >= -(2**63)) & (v < 2**63), dtype=bool)  # type: ignore[operator]
                out.append((v, ok))  # type: ignore[arg-type]
            elif call.fn == "avg":
                if v.dtype != object and (not len(v) or int(np.abs(v).max()) < 2**53):  # type: ignore[union-attr]
                    q = v.astype(np.float64) / np.maximum(c, 1)  # type: ignore[union-attr]
                else:  # int / int: the exact quotient, correctly rounded
                    q = np.array([x / k if k else 0.0 for x, k in zip(v.tolist(), c.tolist())],  # type: ignore[union-attr]
                                 dtype=np.float64)
                out.append((q, ok))
            else:
                out.append((v, ok))  # type: ignore[arg-type]
        return out

    def _batch(self, parts: list[_Part], ticks: np.ndarray) -> Batch:
        """The output rows of `parts` (in instant order) as one batch."""
        gids = np.concatenate([p.gids for p in parts])
        ts = np.concatenate([np.full(len(p.gids), p.ts, np.int64) for p in parts])
        w = np.concatenate([np.full(len(p.gids), p.w, np.int64) for p in parts])
        types = self.out_types
        cols: list[pa.Array] = []
        for c, kc in enumerate(self._kcols):
            cols.append(pa.array(kc[gids], type=arrow_type(types[c])))
        nk = len(self._kcols)
        for j in range(len(self.calls)):
            v = np.concatenate([p.cols[j][0] for p in parts])
            ok = np.concatenate([p.cols[j][1] for p in parts])
            if v.dtype == object:
                v = np.where(ok, v, 0)
            cols.append(pa.array(v, mask=~ok, type=arrow_type(types[nk + j])))
        return Batch(tuple(cols), ts, w, ticks)


class _Part:
    """Output rows of one instant and sign: the groups and each aggregate's (values, valid)."""

    __slots__ = ("cols", "gids", "ts", "w")

    def __init__(self, ts: int, w: int, gids: np.ndarray, cols: list) -> None:
        self.ts, self.w, self.gids, self.cols = ts, w, gids, cols
