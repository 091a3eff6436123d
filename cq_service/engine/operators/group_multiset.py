"""MIN, MAX and DISTINCT for `GroupTable`: every group's values as one multiset in columns.

`Multiset` keeps, for one MIN/MAX or DISTINCT call, the (slot, value, multiplicity) of every
live group's distinct non-NULL values in three numpy arrays sorted by (slot, value): a group's
values are one run, its MIN the first of the run and its MAX the last, so reading an extreme
never rescans. A batch is applied in two steps, so that `GroupTable.apply` can still decline it
with the state untouched: `plan` (MIN/MAX) or `distinct` computes the results' changes and the
new multiplicities, `commit` merges them into the arrays (one `np.insert` and one mask). Both
start from the batch's changes per (group, value, segment), each value found in the state (one
searchsorted of combined keys, or a binary search per value where those overflow), and the
multiplicity after each change.

For COUNT/SUM/AVG(DISTINCT) a change that takes a multiplicity from zero adds the value to the
group's distinct ones, one that takes it to zero removes it: per segment the change in their
number and sum, which the table accumulates as it does COUNT and SUM.

For MIN/MAX, within a batch a group's touched values are present over intervals of its segments
(from the segment that makes a multiplicity positive to the one that makes it zero). The
extreme after a segment is the best of: the group's best untouched value (the first or last of
its run not touched by the batch: found from the run's ends in O(touched)), the values present
over all its segments, the running best of the values present to the end (a segmented
accumulate from where each starts), the same backwards for values present from the start, and,
for values inserted and deleted within the batch, their intervals expanded segment by segment.
Values are compared by their ranks among the batch's candidates, so one accumulate handles all
groups.

Work per batch is proportional to the batch (and a binary search per touched value), plus the
copy of the arrays in `commit`. Floats are not taken: the general path's NaN and ±0.0 rules.
"""

from __future__ import annotations

from collections import Counter

import numpy as np

from cq_service.engine.operators.accumulators import Extreme
from cq_service.engine.operators.segments import Extremes, Segments, Values

__all__ = ["Multiset", "Plan"]

# Middle intervals (inserted and deleted within one batch) are expanded segment by segment;
# beyond this many expanded entries per batch row the batch is declined (the general path).
_EXPAND_PER_ROW = 4


class Plan:
    """One batch's effect on a `Multiset`: for MIN/MAX per segment (group-major order) the
    extreme after it and before it (valid where the count of values is positive; None for
    DISTINCT), and the changed entries."""

    __slots__ = ("after", "before", "cnt", "g", "hit", "pos", "v")

    def __init__(self, after: np.ndarray | None, before: np.ndarray | None, g: np.ndarray, v: np.ndarray,
                 cnt: np.ndarray, hit: np.ndarray, pos: np.ndarray):
        self.after, self.before = after, before
        self.g, self.v, self.cnt, self.hit, self.pos = g, v, cnt, hit, pos


def _order(g: np.ndarray, v: np.ndarray, k: np.ndarray, groups: int, ranks: int) -> np.ndarray:
    """The order sorting by (g, v, k): one argsort of a combined key when it fits in int64
    (g < groups, k < ranks), else a lexsort."""
    if not len(g):
        return np.empty(0, dtype=np.int64)
    lo, hi = int(v.min()), int(v.max())
    if groups * (hi - lo + 1) * ranks < 2**63:
        key = (g * (hi - lo + 1) + (v - lo)) * ranks + k
        return np.argsort(key)
    return np.lexsort((k, v, g))


class _Changes:
    """A batch's non-zero changes to a `Multiset`, summed per (group, value, segment rank) and
    sorted so: per entry the multiplicity after it (`c_after`); per run of one (group, value)
    (starting at `ru`) the multiplicity before the batch (`c0`) and where the value is or
    would go in the state (`pos`, `hit`: it is there); each batch group's run of the state
    [`lo`, `hi`)."""

    __slots__ = ("c0", "c_after", "g", "hi", "hit", "k", "lo", "pos", "ru", "v", "w")

    def __init__(self, g: np.ndarray, v: np.ndarray, k: np.ndarray, w: np.ndarray,
                 c_after: np.ndarray, ru: np.ndarray, c0: np.ndarray, pos: np.ndarray,
                 hit: np.ndarray, lo: np.ndarray, hi: np.ndarray):
        self.g, self.v, self.k, self.w, self.c_after = g, v, k, w, c_after
        self.ru, self.c0, self.pos, self.hit, self.lo, self.hi = ru, c0, pos, hit, lo, hi

    def last_of_run(self) -> np.ndarray:
        m = len(self.g)
        return np.append(self.ru[1:] - 1, m - 1).astype(np.int64) if m else self.ru

    def plan(self, after: np.ndarray | None, before: np.ndarray | None) -> Plan:
        """The plan that commits these changes (each run's multiplicity after the batch)."""
        cnt = self.c_after[self.last_of_run()]
        return Plan(after, before, self.g[self.ru], self.v[self.ru], cnt, self.hit, self.pos)


class Multiset:
    __slots__ = ("cnt", "is_max", "slot", "val")

    def __init__(self, is_max: bool):
        self.is_max = is_max
        self.slot = np.empty(0, dtype=np.int64)
        self.val = np.empty(0, dtype=np.int64)
        self.cnt = np.empty(0, dtype=np.int64)

    def __len__(self) -> int:
        return len(self.slot)

    def _changes(self, seg: Segments, d: Extremes | Values, slot: np.ndarray,
                 perm: np.ndarray, lengths: np.ndarray, gstart: np.ndarray) -> _Changes | None:
        """The batch's non-zero changes per (group, value, segment rank), each value found in
        the state; None when a multiplicity would go negative."""
        S = len(perm)
        sval, scnt = self.val, self.cnt
        lo = np.searchsorted(self.slot, slot, "left")  # slot -1: an empty run at 0
        hi = np.searchsorted(self.slot, slot, "right")
        # each segment's rank within its group
        rank_gm = np.arange(S, dtype=np.int64) - np.repeat(gstart, lengths)
        rank = np.empty(S, dtype=np.int64)
        rank[perm] = rank_gm
        # the batch's non-zero changes, summed per (group, value, segment)
        nz = np.flatnonzero(d.w)
        seg_of_row = np.repeat(np.arange(S, dtype=np.int64), seg.ends - seg.starts)[nz]
        g, v, w = seg.row_gid()[nz], d.vals[nz].astype(np.int64), d.w[nz]
        k = rank[seg_of_row]
        o = _order(g, v, k, len(lengths), int(lengths.max(initial=1)))
        g, v, k, w = g[o], v[o], k[o], w[o]
        m = len(g)
        if m:
            first = np.ones(m, dtype=bool)
            first[1:] = (g[1:] != g[:-1]) | (v[1:] != v[:-1]) | (k[1:] != k[:-1])
            at = np.flatnonzero(first)
            w = np.add.reduceat(w, at)
            g, v, k = g[at], v[at], k[at]
            keep = w != 0
            g, v, k, w = g[keep], v[keep], k[keep], w[keep]
            m = len(g)
        # runs of one (group, value); each found in the state by binary search
        rs = np.ones(m, dtype=bool)
        if m:
            rs[1:] = (g[1:] != g[:-1]) | (v[1:] != v[:-1])
        ru = np.flatnonzero(rs)
        ug, uv = g[ru], v[ru]
        pos = self._search(slot[ug], uv, lo[ug], hi[ug])
        hit = pos < hi[ug]
        hit[hit] = sval[pos[hit]] == uv[hit]
        c0 = np.zeros(len(ru), dtype=np.int64)
        c0[hit] = scnt[pos[hit]]
        # multiplicity after each entry
        run_id = np.cumsum(rs) - 1
        cs = np.cumsum(w)
        base = np.repeat(cs[ru] - w[ru], np.diff(np.append(ru, m)))
        c_after = c0[run_id] + cs - base
        if (c_after < 0).any():
            return None
        return _Changes(g, v, k, w, c_after, ru, c0, pos, hit, lo, hi)

    def _search(self, slots: np.ndarray, vals: np.ndarray, lo: np.ndarray,
                hi: np.ndarray) -> np.ndarray:
        """Where each (slot, value) is or would go in the state (its slot's run: [lo, hi)):
        one searchsorted of combined keys when they fit in int64, else a binary search per
        value, all at once."""
        sval = self.val
        if len(sval) and len(vals):
            vlo = min(int(sval.min()), int(vals.min()))
            span = max(int(sval.max()), int(vals.max())) - vlo + 1
            if (max(int(self.slot[-1]), int(slots.max())) + 1) * span < 2**63:
                pos = lo.copy()  # a new group (slot -1): its empty run
                known = slots >= 0
                state = self.slot * span + (sval - vlo)
                pos[known] = np.searchsorted(state, slots[known] * span + (vals[known] - vlo))
                return pos
        a, b = lo.copy(), hi.copy()
        while True:
            act = np.flatnonzero(a < b)
            if not len(act):
                break
            mid = (a[act] + b[act]) >> 1
            less = sval[mid] < vals[act]
            a[act[less]] = mid[less] + 1
            b[act[~less]] = mid[~less]
        return a

    def distinct(self, seg: Segments, d: Values, slot: np.ndarray, perm: np.ndarray,
                 lengths: np.ndarray, gstart: np.ndarray,
                 sums: bool) -> tuple[Plan, np.ndarray, np.ndarray | None] | None:
        """COUNT/SUM/AVG(DISTINCT): the batch's changes, and per segment (segment order) the
        change in distinct values and (`sums`) in their sum; None when a multiplicity would go
        negative or a running sum could leave ±2**62."""
        ch = self._changes(seg, d, slot, perm, lengths, gstart)
        if ch is None:
            return None
        S = len(perm)
        # a value enters when its multiplicity becomes positive, leaves when it drops to zero
        step = (ch.c_after > 0).astype(np.int64) - (ch.c_after - ch.w > 0)
        on = np.flatnonzero(step)
        at = perm[gstart[ch.g[on]] + ch.k[on]]
        dcount = np.zeros(S, dtype=np.int64)
        np.add.at(dcount, at, step[on])
        dsum = None
        if sums:
            v = ch.v[on]
            if len(on) and max(-int(v.min()), int(v.max())) * len(on) >= 2**62:
                return None
            dsum = np.zeros(S, dtype=np.int64)
            np.add.at(dsum, at, step[on] * v)
        return ch.plan(None, None), dcount, dsum

    def plan(self, seg: Segments, d: Extremes, slot: np.ndarray, perm: np.ndarray,
             gp: np.ndarray, lengths: np.ndarray, gstart: np.ndarray,
             count: np.ndarray) -> Plan | None:
        """The batch's extremes, or None when a multiplicity would go negative, the count of
        values and the multiset disagree, or too many intervals would need expanding.
        `slot`: each batch group's slot (-1: new); `count`: values after each segment."""
        ch = self._changes(seg, d, slot, perm, lengths, gstart)
        if ch is None:
            return None
        G, S = len(lengths), len(perm)
        sval, N = self.val, len(self.val)
        g, v, k, c_after, ru, c0, pos, hit, lo, hi = (
            ch.g, ch.v, ch.k, ch.c_after, ch.ru, ch.c0, ch.pos, ch.hit, ch.lo, ch.hi)
        ug, uv, m = g[ru], v[ru], len(g)
        last_of_run = ch.last_of_run()
        # presence intervals [ia, ib) in segment ranks
        nxt = np.empty(m, dtype=np.int64)
        if m:
            nxt[:-1] = k[1:]
            nxt[last_of_run] = lengths[g[last_of_run]]
        pres = c_after > 0
        init = (c0 > 0) & (k[ru] > 0)
        ig = np.concatenate([g[pres], ug[init]])
        iv = np.concatenate([v[pres], uv[init]])
        ia = np.concatenate([k[pres], np.zeros(int(init.sum()), dtype=np.int64)])
        ib = np.concatenate([nxt[pres], k[ru][init]])
        # the best untouched value of each group: past the touched entries at its run's end
        hp, hg = pos[hit], ug[hit]
        ar = np.arange(len(hp))
        if self.is_max:  # touched entries i from the run's end: at hi-1-i
            j = np.searchsorted(hg, hg, "right") - 1 - ar
            lead = np.bincount(hg[hp == hi[hg] - 1 - j], minlength=G)
            upos = hi - 1 - lead
            has_u = upos >= lo
        else:
            j = ar - np.searchsorted(hg, hg, "left")
            lead = np.bincount(hg[hp == lo[hg] + j], minlength=G)
            upos = lo + lead
            has_u = upos < hi
        ug_u = np.flatnonzero(has_u)
        uvals = sval[upos[ug_u]] if N else np.empty(0, dtype=np.int64)
        # ranks of the candidates: preference 1..K (higher is better), 0 for none
        cand, inv = np.unique(np.concatenate([uvals, iv]), return_inverse=True)
        K = len(cand)
        pref = inv + 1 if self.is_max else K - inv
        pu, pi = pref[: len(uvals)], pref[len(uvals):]
        L = lengths[ig]
        full = (ia == 0) & (ib == L)
        pre = (ia == 0) & (ib < L)
        suf = (ia > 0) & (ib == L)
        mid_ = (ia > 0) & (ib < L)
        best_g = np.zeros(G, dtype=np.int64)
        best_g[ug_u] = pu
        np.maximum.at(best_g, ig[full], pi[full])
        best = best_g[gp]
        span = K + 2
        if suf.any():
            x = np.zeros(S, dtype=np.int64)
            np.maximum.at(x, gstart[ig[suf]] + ia[suf], pi[suf])
            off = gp * span
            best = np.maximum(best, np.maximum.accumulate(off + x) - off)
        if pre.any():
            x = np.zeros(S, dtype=np.int64)
            np.maximum.at(x, gstart[ig[pre]] + ib[pre] - 1, pi[pre])
            off = ((G - 1 - gp) * span)[::-1]
            best = np.maximum(best, (np.maximum.accumulate(off + x[::-1]) - off)[::-1])
        if mid_.any():
            reps = ib[mid_] - ia[mid_]
            total = int(reps.sum())
            if total > _EXPAND_PER_ROW * seg.n + 4096:
                return None
            starts = gstart[ig[mid_]] + ia[mid_]
            csr = np.cumsum(reps) - reps
            p = np.repeat(starts - csr, reps) + np.arange(total)
            x = np.zeros(S, dtype=np.int64)
            np.maximum.at(x, p, np.repeat(pi[mid_], reps))
            best = np.maximum(best, x)
        if ((best > 0) != (count > 0)).any():
            return None
        idx = best - 1 if self.is_max else K - best
        after = np.where(best > 0, cand[np.clip(idx, 0, max(K - 1, 0))] if K else 0, 0)
        # before each segment: the extreme after the previous one, or the group's old one
        before = np.empty(S, dtype=np.int64)
        before[1:] = after[:-1]
        nonempty = hi > lo
        old = np.zeros(G, dtype=np.int64)
        ends = hi - 1 if self.is_max else lo
        old[nonempty] = sval[ends[nonempty]]
        before[gstart] = old
        return ch.plan(after.astype(np.int64), before)

    def commit(self, p: Plan, old: np.ndarray, slot: np.ndarray) -> None:
        """Merge the planned multiplicities. `old`, `slot`: each batch group's slot before
        and after the batch (-1 before: a new group; a group gone has every multiplicity at
        zero, and its slot may already be a new group's)."""
        drop = p.hit & (p.cnt == 0)
        upd = p.hit & (p.cnt > 0)
        self.cnt[p.pos[upd]] = p.cnt[upd]
        ins = np.flatnonzero(~p.hit & (p.cnt > 0))
        if not drop.any() and not len(ins):
            return
        keep = np.ones(len(self.slot), dtype=bool)
        keep[p.pos[drop]] = False
        ig = p.g[ins]
        islot, iv, ic = slot[ig], p.v[ins], p.cnt[ins]
        # an existing group's values go where the search put them; a new group's at the
        # start of its slot's (old, dropped) run
        at = np.where(old[ig] >= 0, p.pos[ins], np.searchsorted(self.slot, islot, "left"))
        o = np.lexsort((iv, islot))
        islot, iv, ic, at = islot[o], iv[o], ic[o], at[o]
        dropped = np.zeros(len(keep) + 1, dtype=np.int64)
        np.cumsum(~keep, out=dropped[1:])
        at = at - dropped[at]
        self.slot = np.insert(self.slot[keep], at, islot)
        self.val = np.insert(self.val[keep], at, iv)
        self.cnt = np.insert(self.cnt[keep], at, ic)

    def extremes(self, slots: np.ndarray, counts: np.ndarray) -> list[Extreme]:
        """The general path's `Extreme` of each slot (the hand-over), consolidated."""
        lo = np.searchsorted(self.slot, slots, "left").tolist()
        hi = np.searchsorted(self.slot, slots, "right").tolist()
        out = []
        for a, b, c in zip(lo, hi, counts.tolist()):
            e = Extreme(self.is_max, False)
            e.count = c
            if b > a:
                e.base_v, e.base_w = self.val[a:b].copy(), self.cnt[a:b].copy()
                e.ext = int(self.val[b - 1 if self.is_max else a])
            out.append(e)
        return out

    def counters(self, slots: np.ndarray) -> list[Counter]:
        """Each slot's values and multiplicities as the general path's DISTINCT `Acc` keeps
        them (the hand-over)."""
        lo = np.searchsorted(self.slot, slots, "left").tolist()
        hi = np.searchsorted(self.slot, slots, "right").tolist()
        vals, cnts = self.val.tolist(), self.cnt.tolist()
        return [Counter(dict(zip(vals[a:b], cnts[a:b]))) for a, b in zip(lo, hi)]
