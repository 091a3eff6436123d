"""The MJoin's side of A-Caching (docs/joins.md, "A-Caching"; engine/cache_policy.py): its
candidate segments, their statistics, running a pipeline segment through its cache, and
keeping every cache consistent as the inputs change. A mixin of `MJoin` (mjoin.py), which
calls `_segment_at`, `_observe_run`, `_invalidate_caches` and `_cache_tick`.

Candidates are the runs of at least two consecutive probes of each pipeline. A used cache on
segment [k, e) of pipeline i replaces those probes when input i's term may read the segment's
inputs from their relations alone: no segment input before i in port order has a delta in the
step (the telescoping sum reads those as R + Δ; the cache holds R's join). Misses are filled
by running the segment's probes, with only the filters that read segment inputs alone, on one
partial row per missing key; the filters that also read earlier inputs run after the lookup.

A batch's rows are looked up together: a missing key is filled once for all its rows, so
every row but the first of each filled key counts as a hit (the segment's work it skips), and
a shadow counts the same way. A cache thus pays even when no entry outlives a batch, if the
batch's keys repeat (skew): the plain MJoin's vectorised probes do the segment's work per row.
"""

from __future__ import annotations

from time import thread_time

import numpy as np
import pyarrow as pa

from cq_service.cql.bind_expr import column_refs, shift_columns
from cq_service.engine.cache_policy import CacheSelector, Choice, Segment, SegmentStats
from cq_service.engine.expressions import compile_expr, compile_predicate
from cq_service.engine.operators.mjoin_cache import SegmentCache

__all__ = ["CachingMixin"]

# Result rows all of a join's caches may hold, unless the resource manager sets another pool.
DEFAULT_POOL_ROWS = 1 << 18
# the counts of a candidate's statistics, halved at each choice
HALVED = (
    "rows_in",
    "work",
    "rows_out",
    "updates",
    "lookups",
    "hits",
    "traversals",
    "batches",
    "fills",
    "keys",
)
# the measured costs, halved as floats (a measure taken while a cache was used stays usable
# after it is dropped)
HALVED_MEASURES = (
    "plain_s",
    "plain_rows",
    "plain_calls",
    "plain_work",
    "cache_s",
    "cache_rows",
    "upkeep_s",
    "profile_s",
)


class CachingMixin:
    """Candidate segments, caches and shadows of an MJoin (see the module docstring)."""

    CACHING_STRUCTURE = frozenset(
        {
            "cache_selector",
            "cache_pool_rows",
            "_caches",
            "_shadows",
            "_seg_stats",
            "_steps",
            "_seg_plans",
            "cache_choices",
        }
    )

    # provided by MJoin
    _widths: list[int]
    _offsets: list[int]
    _filters: tuple
    orders: list[tuple[int, ...]]
    _pipelines: list[list]

    def _init_caching(self, selector: CacheSelector | None) -> None:
        self.cache_selector = selector
        self.cache_pool_rows = DEFAULT_POOL_ROWS
        self._caches: dict[Segment, SegmentCache] = {}
        self._shadows: dict[Segment, SegmentCache] = {}
        self._seg_stats: dict[Segment, SegmentStats] = {}
        # segment -> (crossing key evaluators, invalidators, inputs, internal filters per
        # probe, filters after the lookup)
        self._seg_plans: dict[Segment, tuple] = {}
        self._steps = 0
        self.cache_choices = 0
        if selector is not None:
            for i in range(len(self._widths)):
                self._candidates_of(i)

    # -- candidates -----------------------------------------------------------------------------

    def _candidates_of(self, i: int) -> None:
        """(Re)make pipeline i's candidates, all profiled, after its order is set."""
        for d in (self._caches, self._shadows, self._seg_stats, self._seg_plans):
            for s in [s for s in d if s.pipeline == i]:
                del d[s]
        m = len(self._widths) - 1
        for k in range(m):
            for e in range(k + 2, m + 1):
                seg = Segment(i, k, e)
                plan = self._segment_plan(seg)
                self._seg_plans[seg] = plan
                self._seg_stats[seg] = SegmentStats(seg, full_key=plan[5], state="profiled")
                self._shadows[seg] = self._new_cache(seg, values=False)

    def _segment_plan(self, seg: Segment) -> tuple:
        order = self.orders[seg.pipeline]
        prefix = set(order[: seg.start + 1])
        inputs = list(order[seg.start + 1 : seg.end + 1])
        key_ev, inv = [], []
        for s in inputs:
            for e in self._links(s, frozenset(prefix)):  # type: ignore[attr-defined]
                p = e.other(s)
                key_ev.append(compile_expr(shift_columns(e.side(p), self._offsets[p])))
                inv.append((s, compile_expr(e.side(s))))
        seg_set = set(inputs)
        bound = set(prefix)
        internal, after = [], []
        for t in inputs:
            before = set(bound)
            bound.add(t)
            here = []
            for f in self._filters:
                leaves = {self._input_of(c) for c in column_refs(f)}  # type: ignore[attr-defined]
                if leaves <= bound and not leaves <= before:
                    if leaves <= seg_set:
                        here.append(compile_predicate(f))
                    else:
                        after.append(compile_predicate(f))
            internal.append(here)
        columns = [
            c
            for s in sorted(inputs)
            for c in range(self._offsets[s], self._offsets[s] + self._widths[s])
        ]
        holders = {s for s, _ in inv}
        back = self._back_paths(inputs, next(iter(holders))) if len(holders) == 1 else {}
        full = bool(inv) and all(j in holders or j in back for j in inputs)
        return key_ev, inv, inputs, internal, after, full, columns, back

    def _back_paths(self, inputs: list[int], h: int) -> dict[int, list[tuple]]:
        """For each segment input j other than `h` (the one input holding every key part):
        the probes from j's rows back to h's along the segment's join graph — (input, its
        synopsis, key evaluators over the previous input's own columns) per step — when every
        step has an index the join keeps; the rows of h reached name the entries an update of
        j could change."""
        seg = set(inputs)
        parent = {h: h}
        frontier = [h]
        while frontier:  # a BFS tree of the segment's inputs, rooted at h
            nxt = []
            for a in frontier:
                for e in self._edges:  # type: ignore[attr-defined]
                    if a in (e.left, e.right) and (b := e.other(a)) in seg and b not in parent:
                        parent[b] = a
                        nxt.append(b)
            frontier = nxt
        out = {}
        for j in inputs:
            if j == h or j not in parent:
                continue
            steps, at, ok = [], j, True
            while at != h:
                t = parent[at]
                links = self._links(t, frozenset({at}))  # type: ignore[attr-defined]
                keys = tuple(e.side(t) for e in links)
                if keys not in self._keysets[t]:  # type: ignore[attr-defined]
                    ok = False
                    break
                side = self._keysets[t].index(keys)  # type: ignore[attr-defined]
                steps.append((t, side, [compile_expr(e.side(at)) for e in links]))
                at = t
            if ok:
                out[j] = steps
        return out

    def _new_cache(self, seg: Segment, values: bool, max_rows: int = 1 << 20) -> SegmentCache:
        key_ev, inv, _, _, _, _, columns, _ = self._seg_plans[seg]
        return SegmentCache(seg, key_ev, inv, columns, values=values, max_rows=max_rows)

    # -- running a pipeline -----------------------------------------------------------------------

    def _segment_at(self, i: int, k: int, deltas: list) -> SegmentCache | None:
        """The used cache starting at probe k of pipeline i, if this term may read it."""
        if not self._caches:
            return None
        for seg, c in self._caches.items():
            if seg.pipeline == i and seg.start == k and self._readable(seg, deltas):
                return c
        return None

    def _readable(self, seg: Segment, deltas: list) -> bool:
        inputs = self._seg_plans[seg][2]
        return not any(t < seg.pipeline and deltas[t] is not None for t in inputs)

    def _through_cache(self, cache: SegmentCache, cols: list, ts: np.ndarray, w: np.ndarray):
        """The partial rows after the cache's segment: looked up, misses filled."""
        seg = cache.segment
        st = self._seg_stats[seg]
        m = len(ts)
        distinct, inv = cache.distinct(cols, m)
        found: list[tuple | None] = [cache.get(k) for k in distinct]
        st.lookups += m
        missing = [x for x, e in enumerate(found) if e is None]
        st.hits += m - len(missing)  # a batch's rows of a key share its one fill
        st.batches += 1
        st.keys += len(distinct)
        st.fills += 1 if missing else 0
        st.traversals += len(missing)  # a fill runs one row per missing key
        entries = [None if e is None else e[1:] for e in found]
        pinned = None
        if missing:
            first = np.zeros(len(distinct), np.int64)
            first[inv[::-1]] = np.arange(m - 1, -1, -1)  # the first row of each key
            keys_missing = [distinct[x] for x in missing]
            pinned = self._fill(cache, keys_missing, first[missing], cols, entries, missing)
        blocks = np.array([e[0] for e in entries], np.int64)  # type: ignore[index]
        lo = np.array([e[1] for e in entries], np.int64)  # type: ignore[index]
        hi = np.array([e[2] for e in entries], np.int64)  # type: ignore[index]
        rb, rlo, rhi = blocks[inv], lo[inv], hi[inv]
        seg_cols, gw, _ = cache.gather(rb, rlo, rhi)
        if pinned is not None:
            cache.unpin(pinned)
        counts = rhi - rlo
        rep = np.repeat(np.arange(m), counts)
        ridx = pa.array(rep)
        new_cols = [None if c is None else c.take(ridx) for c in cols]
        for c, arr in zip(cache.columns, seg_cols, strict=True):
            new_cols[c] = arr
        w = w[rep] * gw
        ts = ts[rep]
        st.rows_in += m
        st.rows_out += len(ts)
        return new_cols, ts, w

    def _fill(self, cache, keys, rows, cols, entries, where) -> int:
        """Run the segment on one partial row per missing key; keep the entries."""
        seg = cache.segment
        internal = self._seg_plans[seg][3]
        idx = pa.array(rows)
        part = [None if c is None else c.take(idx) for c in cols]
        src = np.arange(len(rows), dtype=np.int64)  # carried where the timestamps go
        w = np.ones(len(rows), np.int64)
        none = [None] * len(self._widths)
        work = 0
        for k in range(seg.start, seg.end):
            probe = self._pipelines[seg.pipeline][k]
            work += len(src)
            got = self._probe(
                seg.pipeline, probe, part, src, w, none, None, internal[k - seg.start]
            )  # type: ignore[attr-defined]
            if got is None:
                part, src, w = part, src[:0], w[:0]
                break
            part, src, w = got
            work += len(src)
        order = np.argsort(src, kind="stable")
        oidx = pa.array(order)
        bcols = [part[c].take(oidx) if len(src) else pa.nulls(0) for c in cache.columns]
        b = cache.put_block(bcols, w[order])  # pinned until the caller has gathered
        s = src[order]
        los = np.searchsorted(s, np.arange(len(rows)), side="left")
        his = np.searchsorted(s, np.arange(len(rows)), side="right")
        for x, key, lo, hi in zip(where, keys, los.tolist(), his.tolist(), strict=True):
            cache.put(key, b, lo, hi)
            entries[x] = (b, lo, hi)
        self._seg_stats[seg].work += work
        return b

    def _after_filters(self, seg: Segment) -> list:
        return self._seg_plans[seg][4]

    def _charge_pass(self, seg: Segment, seconds: float, rows: int) -> None:
        """A pass of `rows` rows through the used cache on `seg` took `seconds` of CPU."""
        st = self._seg_stats[seg]
        st.cache_s += seconds
        st.cache_rows += rows

    def _observe_run(self, i: int, seen: list, cols_at: list, deltas: list) -> None:
        """Statistics of pipeline i's run: `seen[k]` = (rows in, rows out, CPU seconds) of
        probe k, None where a cache ran it; `cols_at[k]` = the partial rows before probe k,
        for shadows."""
        for seg, st in self._seg_stats.items():
            if seg.pipeline != i:
                continue
            span = seen[seg.start : seg.end]
            if len(span) < seg.end - seg.start or any(x is None for x in span):
                continue
            work = sum(a + b for a, b, _ in span)
            st.rows_in += span[0][0]
            st.traversals += span[0][0]
            st.rows_out += span[-1][1]
            st.work += work
            st.plain_s += sum(x[2] for x in span)
            st.plain_rows += span[0][0]
            st.plain_calls += len(span)
            st.plain_work += work
            sh = self._shadows.get(seg)
            if sh is not None and cols_at[seg.start] is not None and self._readable(seg, deltas):
                t0 = thread_time()
                cols, m = cols_at[seg.start]
                keys, inv = sh.distinct(cols, m)
                counts = np.bincount(inv, minlength=len(keys))
                st.lookups += m
                st.batches += 1
                st.keys += len(keys)
                new = 0
                for key, c in zip(keys, counts.tolist(), strict=True):
                    if sh.get(key) is not None:
                        st.hits += c
                    else:  # as the cache counts: the key's first row fills, the rest hit
                        st.hits += c - 1
                        new += 1
                        sh.put(key)
                st.fills += 1 if new else 0
                st.profile_s += thread_time() - t0

    # -- consistency ------------------------------------------------------------------------------

    def _invalidate_caches(self, deltas: list) -> None:
        """Drop the entries the step's updates (now in the relations) could change."""
        for store in (self._caches, self._shadows):
            for seg, c in store.items():
                inputs, back = self._seg_plans[seg][2], self._seg_plans[seg][7]
                st = self._seg_stats[seg]
                t0 = thread_time()
                for j in inputs:
                    d = deltas[j]
                    if d is not None and len(d):
                        st.updates += len(d)
                        if j in back:
                            self._invalidate_back(c, back[j], list(d.columns), len(d))
                        else:
                            c.invalidate(j, list(d.columns), len(d))
                st.upkeep_s += thread_time() - t0

    def _invalidate_back(self, c: SegmentCache, steps: list[tuple], cols: list, m: int) -> None:
        """Drop the entries an update of a segment input holding no key part could change:
        its rows joined back, through the relations as they now stand, to the input holding
        the key. A combination the update changes has a changed row whose path back to that
        input holds no deleted row (else take the deleted row nearest it), and the rows on
        that path are in the relations now; rows the join cannot match (NULL keys) change
        nothing."""
        t = -1
        for t, side, evs in steps:
            if not m or not len(c):
                return
            keys = [ev(cols, m) for ev in evs]
            syn = self._sides[t][side]  # type: ignore[attr-defined]
            _, pos = syn.lookup(keys)
            if not len(pos):
                return
            cols, _ = syn.take(np.unique(pos))
            m = len(cols[0])
        c.invalidate(t, cols, m)

    # -- choosing ---------------------------------------------------------------------------------

    def _cache_tick(self) -> None:
        """Every `every` steps: ask the selector, apply its choice, age the statistics."""
        sel = self.cache_selector
        if sel is None:
            return
        self._steps += 1
        if self._steps % sel.every:
            return
        for seg, st in self._seg_stats.items():
            c = self._caches.get(seg)
            st.entries = len(c) if c is not None else len(self._shadows.get(seg) or ())
            st.cached_rows = c.rows if c is not None else 0
        self.apply_choice(sel.choose(list(self._seg_stats.values()), self.cache_pool_rows))
        for st in self._seg_stats.values():
            for f in HALVED:
                setattr(st, f, getattr(st, f) // 2)
            for f in HALVED_MEASURES:
                setattr(st, f, getattr(st, f) / 2)

    def apply_choice(self, choice: Choice) -> None:
        """Use, profile and drop caches as `choice` says (overlapping used ones: the first)."""
        self.cache_choices += 1
        used: list[Segment] = []
        for seg in sorted(choice.used):
            if seg in self._seg_stats and not any(seg.overlaps(u) for u in used):
                used.append(seg)
        for seg in list(self._caches):
            if seg not in used:
                del self._caches[seg]
        for seg in used:
            rows = max(1, choice.used[seg])
            c = self._caches.get(seg)
            if c is None:
                self._caches[seg] = self._new_cache(seg, values=True, max_rows=rows)
            else:
                c.max_rows = rows
        for seg, st in self._seg_stats.items():
            profiled = seg in choice.profiled and seg not in self._caches
            if profiled and seg not in self._shadows:
                self._shadows[seg] = self._new_cache(seg, values=False)
            elif not profiled:
                self._shadows.pop(seg, None)
            st.state = "used" if seg in self._caches else "profiled" if profiled else "unused"

    def cache_state(self) -> tuple[int, int]:
        """Rows and bytes the caches hold (shadows count their keys)."""
        rows = sum(c.rows for c in self._caches.values())
        nbytes = sum(c.nbytes() for c in self._caches.values())
        nbytes += sum(64 * len(s) for s in self._shadows.values())
        return rows, nbytes

    def describe_caches(self) -> str:
        return ", ".join(
            f"{s.pipeline}:{'→'.join(map(str, self.orders[s.pipeline][s.start + 1 : s.end + 1]))}"
            for s in sorted(self._caches)
        )
