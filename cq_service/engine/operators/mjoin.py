"""MJoin: an n-way join of relations, with no intermediate result (plan/mjoins.py).

The join of n delta streams is multilinear: every combination (e_1, …, e_n) of one element per
input contributes w_1·…·w_n at instant max(τ_1, …, τ_n). For the deltas Δ_1 … Δ_n released up
to a common heartbeat, with R_1 … R_n the multisets seen before them, the output is the
telescoping sum over the inputs in port order

    Σ_i  (R_1 + Δ_1) ⋈ … ⋈ (R_{i−1} + Δ_{i−1}) ⋈ Δ_i ⋈ R_{i+1} ⋈ … ⋈ R_n

each combination stamped with the largest instant of its elements; then R_i += Δ_i for every i.
Term i is input i's *pipeline*: Δ_i probes the other inputs one after the other in
`orders[i]`, each probe looking the bound rows' keys (every equality between the next input
and those bound so far) up in that input's synopsis (`JoinSide`, join_synopsis.py: an index on
exactly those key expressions) and, for an input earlier in port order, in its delta too
(a vectorised hash join, stamped with the later instant). Filters (the other conjuncts) run as
soon as every input they read is bound; an empty partial result ends the pipeline. A
combination's weight is the product of its elements', so insertions and deletions (a window's
expiries, a relation's retractions) both come out right, with multiplicities.

Each input keeps one synopsis per distinct set of key expressions it is probed by (usually
one); `state_size` counts those, and nothing else is kept. `set_order` replaces a pipeline's
order; any order that keeps each probe connected gives the same result. With a
`ProbeOrderer` (engine/probe_order.py) the join profiles each pipeline now and then — the
matches per row of every input that could be probed at each position — and takes the orders
the orderer chooses, among those through the indexes it keeps. The orderer is a StreaMon
re-optimizer (engine/streamon.py): the join's `watches()` return it, it is flagged after a
profile and polled once the time slice's pipelines ran, and the orders it chose are adopted then.
"""

from __future__ import annotations

from time import thread_time
from typing import TYPE_CHECKING

import numpy as np
import pyarrow as pa

from cq_service.cql.bind_expr import column_refs, shift_columns
from cq_service.cql.logical import BExpr
from cq_service.engine.batch import Batch, merge_ticks
from cq_service.engine.cache_policy import CacheSelector
from cq_service.engine.expressions import compile_expr, compile_predicate
from cq_service.engine.operators.base import MultiInputOperator
from cq_service.engine.operators.join_synopsis import JoinSide, match_keys
from cq_service.engine.operators.mjoin_caching import CachingMixin
from cq_service.engine.probe_order import PositionProfile, ProbeOrderer
from cq_service.engine.queues import Queue, QueueReader
from cq_service.engine.streamon import Watch

if TYPE_CHECKING:
    from cq_service.plan.mjoins import Edge

__all__ = ["MJoin", "Probe"]

NEVER = np.iinfo(np.int64).min


class Probe:
    """One step of a pipeline: look the bound rows up in input `target`'s synopsis number
    `side`, by the keys `bound_ev` (over the partial result's columns) against `target_ev`
    (over the target's columns); then apply `filters` (over the partial result's columns)."""

    __slots__ = ("bound_ev", "filters", "side", "target", "target_ev")

    def __init__(self, target: int, side: int, bound_ev: list, target_ev: list, filters: list):
        self.target = target
        self.side = side
        self.bound_ev = bound_ev
        self.target_ev = target_ev
        self.filters = filters


class MJoin(CachingMixin, MultiInputOperator):
    """The join of its inputs (each `widths[i]` columns, output in input order) on `edges`
    and `filters` (over the concatenated columns), input i's updates probing in `orders[i]`."""

    kind = "mjoin"
    STRUCTURE = (
        frozenset(
            {
                "_edges",
                "_filters",
                "_offsets",
                "_widths",
                "_keysets",
                "_side_ev",
                "_pipelines",
                "_first_filters",
                "orders",
                "_probe_orderer",
                "_probe_watch",
                "_runs",
                "_probe_ev",
                "reorders",
            }
        )
        | CachingMixin.CACHING_STRUCTURE
    )

    def __init__(
        self,
        name: str,
        inputs: list[QueueReader],
        output: Queue,
        widths: list[int],
        edges: tuple[Edge, ...],
        filters: tuple[BExpr, ...],
        orders: tuple[tuple[int, ...], ...],
        probe_orderer: ProbeOrderer | None = None,
        cache_selector: CacheSelector | None = None,
    ):
        super().__init__(name, inputs, output)
        n = len(widths)
        if n < 2 or len(inputs) != n or len(orders) != n:
            raise ValueError("an mjoin needs one width and one order per input, at least 2")
        self._widths = list(widths)
        self._offsets = [sum(widths[:k]) for k in range(n)]
        self._edges = edges
        self._filters = filters
        # The key expression sets each input is probed by (over its own columns) and their
        # evaluators; one synopsis per (input, key set) — the state.
        self._keysets: list[list[tuple[BExpr, ...]]] = [[] for _ in range(n)]
        self._side_ev: list[list[list]] = [[] for _ in range(n)]
        self.orders: list[tuple[int, ...]] = []
        # (target, inputs bound) -> the target's synopsis probed then, and the key evaluators
        # over the bound inputs' columns: compiled once, for pipelines and profiles alike
        self._probe_ev: dict[tuple[int, frozenset[int]], tuple[int, list]] = {}
        self._pipelines: list[list[Probe]] = []
        self._first_filters: list[list] = []
        for i in range(n):
            self._pipelines.append([])
            self._first_filters.append([])
            self.orders.append(())
            self.set_order(i, orders[i])
        self._sides: list[list[JoinSide]] = [
            [JoinSide() for _ in self._keysets[j]] for j in range(n)
        ]
        self.probe_orderer = probe_orderer
        self._runs = [0] * n  # runs of each pipeline (it is profiled every `every`-th)
        self.reorders = 0  # orders adopted from the orderer
        self._init_caching(cache_selector)

    # -- pipelines ------------------------------------------------------------------------------

    def set_order(self, i: int, order: tuple[int, ...]) -> None:
        """Make `order` (i first, then every other input once, each joined by an equality to
        one before it) input i's pipeline. A new key set gets a synopsis built from another of
        the input's synopses."""
        n = len(self._widths)
        if order[0] != i or sorted(order) != list(range(n)):
            raise ValueError(f"{self.name}: {order} is not an order of the inputs from {i}")
        bound = {i}
        placed = set(self._filter_leaves(bound))
        first = [compile_predicate(self._filters[k]) for k in sorted(placed)]
        probes = []
        for t in order[1:]:
            links = self._links(t, bound)
            if not links:
                raise ValueError(f"{self.name}: input {t} is joined to none before it in {order}")
            self._keyset(t, tuple(e.side(t) for e in links))  # a synopsis on them, if new
            side, bound_ev = self._probe_keys(t, frozenset(bound))
            bound.add(t)
            now = set(self._filter_leaves(bound)) - placed
            placed |= now
            filters = [compile_predicate(self._filters[k]) for k in sorted(now)]
            probes.append(Probe(t, side, bound_ev, self._side_ev[t][side], filters))
        self._first_filters[i] = first
        self._pipelines[i] = probes
        self.orders[i] = tuple(order)
        if getattr(self, "cache_selector", None) is not None:
            self._candidates_of(i)  # segments are positions of the order: new candidates

    def _links(self, t: int, bound: set[int] | frozenset[int]) -> list[Edge]:
        """The equalities joining input t to those `bound`, in a fixed order."""
        links = [e for e in self._edges if t in (e.left, e.right) and e.other(t) in bound]
        links.sort(key=lambda e: (e.other(t), repr(e.side(t))))
        return links

    def candidates(self, bound: frozenset[int]) -> list[int]:
        """The inputs that may be probed after those `bound`: joined to them by an equality,
        through an index this join already keeps (so a new order adds no state)."""
        out = []
        for t in range(len(self._widths)):
            if t in bound:
                continue
            links = self._links(t, bound)
            if links and tuple(e.side(t) for e in links) in self._keysets[t]:
                out.append(t)
        return out

    def _filter_leaves(self, bound: set[int]) -> list[int]:
        """The filters whose columns are all in `bound` inputs."""
        out = []
        for k, f in enumerate(self._filters):
            if all(self._input_of(c) in bound for c in column_refs(f)):
                out.append(k)
        return out

    def _input_of(self, col: int) -> int:
        return int(np.searchsorted(self._offsets, col, side="right")) - 1

    def _keyset(self, t: int, keys: tuple[BExpr, ...]) -> int:
        """The index of input t's synopsis on `keys`, added when new."""
        sets = self._keysets[t]
        if keys in sets:
            return sets.index(keys)
        sets.append(keys)
        self._side_ev[t].append([compile_expr(k) for k in keys])
        sides = getattr(self, "_sides", None)
        if sides is not None:  # a new index on rows already held: build it from a synopsis
            fresh = JoinSide()
            if len(sides[t][0]):
                cols, _, w = sides[t][0].live_arrays()
                live = np.flatnonzero(w != 0)
                cols = [c.take(pa.array(live)) for c in cols]
                fresh.add(cols, [ev(cols, len(live)) for ev in self._side_ev[t][-1]], w[live])
            sides[t].append(fresh)
        return len(sets) - 1

    def restore(self, state: dict) -> None:
        """Load a snapshot; caches start again (empty, every candidate profiled), as entries
        filled from the relations held before would not be those loaded."""
        super().restore(state)
        if self.cache_selector is not None:
            for i in range(len(self._widths)):
                self._candidates_of(i)

    # -- reporting ------------------------------------------------------------------------------

    def describe(self) -> str:
        caches = self.describe_caches() if self.cache_selector is not None else ""
        tail = f"; caches {caches or 'none'}" if self.cache_selector is not None else ""
        return f"mjoin of {len(self._widths)} inputs ({self.describe_orders()}{tail})"

    def describe_orders(self) -> str:
        return "; ".join("→".join(str(k) for k in o) for o in self.orders)

    def state_size(self) -> tuple[int, int]:
        sides = [s for per in self._sides for s in per]
        rows, nbytes = self.cache_state()
        return sum(len(s) for s in sides) + rows, sum(s.nbytes() for s in sides) + nbytes

    # -- processing -----------------------------------------------------------------------------

    # Deltas are joined in time slices of about this many elements (as Join does): the probes
    # of one delta into another hold combinations that cancel (an element and its expiry), and
    # with n inputs they grow with the slice to the power of up to n. Smaller than Join's: on a
    # 3-way join of Range windows over 20,000 rows per input read in one batch, 2,048 took
    # 0.9 s, 16,384 took 25 s (the tree 5 s).
    SLICE_ROWS = 2048

    def on_aligned(self, ready: list[Batch | None]) -> None:
        ticks = merge_ticks(*(b.ticks for b in ready if b is not None))
        deltas = [b if b is not None and len(b) else None for b in ready]
        total = sum(len(d) for d in deltas if d is not None)
        if total <= self.SLICE_ROWS or sum(d is not None for d in deltas) < 2:
            self._step(deltas, ticks)
            return
        merged = np.sort(np.concatenate([d.ts for d in deltas if d is not None]), kind="stable")
        cuts = np.unique(merged[self.SLICE_ROWS - 1 :: self.SLICE_ROWS])
        for t in cuts.tolist():
            heads = []
            for k, d in enumerate(deltas):
                if d is None:
                    heads.append(None)
                    continue
                head, tail = d.split_at_time(t)
                heads.append(head if len(head) else None)
                deltas[k] = tail if len(tail) else None
            c = int(np.searchsorted(ticks, t, side="right"))
            self._step(heads, ticks[:c])
            ticks = ticks[c:]
        self._step(deltas, ticks)

    def _step(self, deltas: list[Batch | None], ticks: np.ndarray) -> None:
        n = len(self._widths)
        # each input's delta keys, per key set, computed once (probes and synopses share them)
        dkeys: list[list[list[pa.Array] | None]] = [
            [None] * len(self._keysets[j]) for j in range(n)
        ]

        def keys_of(j: int, side: int) -> list[pa.Array]:
            got = dkeys[j][side]
            if got is None:
                d = deltas[j]
                assert d is not None
                got = [ev(d.columns, len(d)) for ev in self._side_ev[j][side]]
                dkeys[j][side] = got
            return got

        parts = []
        for i in range(n):
            d = deltas[i]
            if d is not None:
                profile = self._profiling(i)
                out = self._pipeline(i, d, deltas, keys_of, profile)
                if out is not None and len(out):
                    parts.append(out)
                if profile:
                    self._observe_profile(i, profile)
        watch = self._probe_watch
        if watch is not None and watch.flagged:  # the orders chosen from this slice's profiles
            watch.poll()
        for j in range(n):
            d = deltas[j]
            if d is not None:
                for side, syn in enumerate(self._sides[j]):
                    syn.add(list(d.columns), keys_of(j, side), d.w)
        if self.cache_selector is not None:
            self._invalidate_caches(deltas)
            self._cache_tick()
        if not parts:
            self.emit(self.empty(ticks))
            return
        out = parts[0] if len(parts) == 1 else Batch.concat(parts)
        if len(out) > 1 and not bool((out.ts[1:] >= out.ts[:-1]).all()):
            out = out.take(np.argsort(out.ts, kind="stable"))
        self.emit(out.with_ticks(ticks))

    def _pipeline(
        self,
        i: int,
        d: Batch,
        deltas: list[Batch | None],
        keys_of,
        profile: list[PositionProfile] | None = None,
    ) -> Batch | None:
        """Term i of the sum: Δ_i probing the others in input i's order; with `profile`, the
        matches of a sample of the rows at each position in every candidate are added to it."""
        width = sum(self._widths)
        cols: list[pa.Array | None] = [None] * width
        off = self._offsets[i]
        cols[off : off + self._widths[i]] = list(d.columns)
        ts, w = d.ts, d.w
        cols, ts, w = _filtered(self._first_filters[i], cols, ts, w)
        caching = self.cache_selector is not None
        probes = self._pipelines[i]
        seen: list = [None] * len(probes)  # (rows in, rows out, CPU seconds) of each probe run
        cols_at: list = [None] * len(probes)
        k = 0
        while k < len(probes):
            if not len(ts):
                return None
            cache = self._segment_at(i, k, deltas) if caching else None
            if cache is not None:
                t0, m = thread_time(), len(ts)
                cols, ts, w = self._through_cache(cache, cols, ts, w)
                cols, ts, w = _filtered(self._after_filters(cache.segment), cols, ts, w)
                self._charge_pass(cache.segment, thread_time() - t0, m)
                k = cache.segment.end
                continue
            probe = probes[k]
            if profile is not None:
                bound = frozenset({i, *self.orders[i][1 : k + 1]})
                profile.append(self._profile_at(bound, cols, len(ts)))
            m = len(ts)
            if caching:
                cols_at[k] = (cols, m)
            t0 = thread_time() if caching else 0.0
            got = self._probe(i, probe, cols, ts, w, deltas, keys_of, probe.filters)
            spent = thread_time() - t0 if caching else 0.0
            seen[k] = (m, 0 if got is None else len(got[1]), spent)
            if got is None:
                ts = ts[:0]
                break
            cols, ts, w = got
            k += 1
        if caching:
            self._observe_run(i, seen, cols_at, deltas)
        if not len(ts):
            return None
        return Batch(tuple(cols), ts.astype(np.int64), w.astype(np.int64))  # type: ignore[arg-type]

    def _probe(self, i, probe: Probe, cols: list, ts, w, deltas, keys_of, filters: list):
        """One probe of pipeline i: the partial rows joined with input `probe.target` (its
        synopsis, and its delta when it is before i) and `filters` applied; None if none."""
        t = probe.target
        bound_keys = [ev(cols, len(ts)) for ev in probe.bound_ev]
        pieces = []
        q, pos = self._sides[t][probe.side].lookup(bound_keys)
        if len(q):
            tcols, tw = self._sides[t][probe.side].take(pos)
            pieces.append((q, tcols, tw, ts[q]))
        dt = deltas[t]
        if t < i and dt is not None:  # input t's delta is already part of its relation
            q, j = match_keys(bound_keys, keys_of(t, probe.side))
            if len(q):
                jidx = pa.array(j)
                tcols = [c.take(jidx) for c in dt.columns]
                pieces.append((q, tcols, dt.w[j], np.maximum(ts[q], dt.ts[j])))
        if not pieces:
            return None
        q = np.concatenate([p[0] for p in pieces])
        qidx = pa.array(q)
        new_cols = [None if c is None else c.take(qidx) for c in cols]
        toff = self._offsets[t]
        for k in range(self._widths[t]):
            chunks = [p[1][k] for p in pieces]
            new_cols[toff + k] = chunks[0] if len(chunks) == 1 else pa.concat_arrays(chunks)
        w = w[q] * np.concatenate([p[2] for p in pieces])
        ts = np.concatenate([p[3] for p in pieces])
        cols, ts, w = _filtered(filters, new_cols, ts, w)
        if not len(ts):
            return None
        return cols, ts, w

    # -- adaptive probe orders (engine/probe_order.py) -------------------------------------------

    def _profiling(self, i: int) -> list[PositionProfile] | None:
        """An empty profile to fill when this run of pipeline i is profiled, else None."""
        orderer = self.probe_orderer
        if orderer is None:
            return None
        runs = self._runs[i]
        self._runs[i] = runs + 1
        return [] if runs % orderer.every == 0 else None

    def _profile_at(self, bound: frozenset[int], cols: list, m: int) -> PositionProfile:
        """Matches of up to `rows` of the `m` partial rows (evenly spaced) in each input that
        may be probed after `bound`, through the index it would be probed by."""
        assert self.probe_orderer is not None
        k = min(m, self.probe_orderer.rows)
        at = np.unique(np.linspace(0, m - 1, k).astype(np.int64))
        idx = pa.array(at)
        sample = [None if c is None else c.take(idx) for c in cols]
        matches = {}
        for c in self.candidates(bound):
            side, bound_ev = self._probe_keys(c, bound)
            q, _ = self._sides[c][side].lookup([ev(sample, len(at)) for ev in bound_ev])
            matches[c] = len(q)
        return PositionProfile(bound, len(at), matches)

    def _probe_keys(self, t: int, bound: frozenset[int]) -> tuple[int, list]:
        """Input t's synopsis probed after `bound`, and the key evaluators over the bound
        inputs' columns (compiled once per pair)."""
        got = self._probe_ev.get((t, bound))
        if got is None:
            links = self._links(t, bound)
            side = self._keysets[t].index(tuple(e.side(t) for e in links))
            ev = [
                compile_expr(shift_columns(e.side(e.other(t)), self._offsets[e.other(t)]))
                for e in links
            ]
            got = self._probe_ev[(t, bound)] = (side, ev)
        return got

    @property
    def probe_orderer(self) -> ProbeOrderer | None:
        """The orderer of the pipelines' probes (set it before an executor registers the
        join's watches)."""
        return self._probe_orderer

    @probe_orderer.setter
    def probe_orderer(self, orderer: ProbeOrderer | None) -> None:
        self._probe_orderer = orderer
        self._probe_watch = (
            None if orderer is None else Watch(orderer, self.name, self._adopt_orders)
        )

    def watches(self) -> list[Watch]:
        return [] if self._probe_watch is None else [self._probe_watch]

    def _observe_profile(self, i: int, profile: list[PositionProfile]) -> None:
        """Give the orderer pipeline i's profile; flag its watch when it asks to re-optimize."""
        orderer = self._probe_orderer
        assert orderer is not None and self._probe_watch is not None
        orderer.observe(i, self.orders[i], profile, self.candidates)
        if orderer.significant():
            self._probe_watch.flag()

    def _adopt_orders(self) -> None:
        """Adopt the orders the orderer chose (StreaMon's `on_change`)."""
        assert self._probe_orderer is not None
        for i, new in self._probe_orderer.take_orders().items():
            self._adopt(i, new)

    def _adopt(self, i: int, new: tuple[int, ...]) -> None:
        """Adopt `new` for pipeline i if it differs and runs through indexes the join keeps."""
        if tuple(new) == self.orders[i]:
            return
        if new[0] != i or sorted(new) != list(range(len(self._widths))):
            return  # not an order of this pipeline
        bound = {i}
        for t in new[1:]:
            if t not in self.candidates(frozenset(bound)):
                return  # not through the indexes kept: would add state
            bound.add(t)
        self.set_order(i, tuple(new))
        self.reorders += 1


def _filtered(filters: list, cols: list, ts: np.ndarray, w: np.ndarray):
    """The rows that pass every filter (a mask per filter, TRUE only)."""
    for f in filters:
        if not len(ts):
            break
        keep = f(cols, len(ts))
        if keep.all():
            continue
        idx = np.flatnonzero(keep)
        pidx = pa.array(idx)
        cols = [None if c is None else c.take(pidx) for c in cols]
        ts, w = ts[idx], w[idx]
    return cols, ts, w
