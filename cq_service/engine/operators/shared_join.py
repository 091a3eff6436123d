"""The shared window join (paper 002, plan/shared_joins.py): one join of two streams producing,
for each route (a window per input), exactly the relation `A [w_A] ⋈ B [w_B]` as its delta
stream, from one buffer per stream that covers the largest window.

Every element x of a window has an exit instant per route: `ts + T + 1` for `[Range T]`, the
timestamp of the N-th later arrival of its stream for `[Rows N]` (none yet: never). A pair (a, b)
of matching keys is in route i's relation over [max(t_a, t_b), min(exit_a, exit_b)), so it is
inserted at the later arrival and retracted at the earlier exit (nothing when that interval is
empty: a tuple pushed out of a Rows window at its own instant). The operator works per release
(every input complete up to the heartbeat H, the last one H₀):

- **insertions** (LWO: each new tuple probes the other buffer once, over the largest window):
  a new tuple probes the other stream's tuples that came before it (a B tuple also those of A
  at its own instant: each pair is found once, by its later element), and the router marks the
  pair for every route whose windows hold both tuples at that instant;
- **retractions**: for each route, the tuples whose exit falls in (H₀, H] probe the other
  buffer for the partners still in the window then (a pair whose tuples exit together is
  retracted by its A tuple), so no result pair is ever stored;
- **ticks**: every input instant, and each Range side's exits in (H₀, H] (the instants at which
  that route's windows change, which Rstream and global aggregates evaluate at).

The output is a `RoutedBatch`: the pairs (left columns, then right), each with a bit mask of the
routes it belongs to, and each route's own ticks; a `SharedJoinRoute` keeps one route's.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa

from cq_service.cql.logical import BExpr
from cq_service.engine.batch import EMPTY_TICKS, Batch, merge_ticks, unique_sorted
from cq_service.engine.expressions import compile_expr
from cq_service.engine.operators.base import NEVER, MultiInputOperator, UnaryOperator
from cq_service.engine.operators.join import key_columns, take_columns
from cq_service.engine.operators.shared_join_buffer import JoinBuffer
from cq_service.engine.operators.shared_join_costs import UnitCosts
from cq_service.engine.queues import Heartbeat, Queue, QueueReader
from cq_service.plan.shared_joins import SHARED_JOIN_POLICIES, SideWindow

__all__ = ["RoutedBatch", "SharedJoin", "SharedJoinRoute"]

_Store = JoinBuffer  # the name state snapshots taken before the buffer had a module pickled

POLICIES = tuple(p for p in SHARED_JOIN_POLICIES if p != "off")


class RoutedBatch(Batch):
    """A shared join's output: `route[k]` is the bit mask of the routes element k belongs to,
    `route_ticks[i]` route i's instants beyond the batch's own `ticks`; `only`: every element
    is that route's alone (a unit's output under SWF and MQT); `complete` (lo, hi, τ): the
    elements of routes lo..hi−1 up to instant τ are all out (SWF, MQT)."""

    __slots__ = ("complete", "only", "route", "route_ticks")

    def __init__(
        self,
        batch: Batch,
        route: np.ndarray,
        route_ticks: tuple[np.ndarray, ...],
        only: int | None = None,
    ):
        super().__init__(batch.columns, batch.ts, batch.w, batch.ticks)
        self.route = route
        self.route_ticks = route_ticks
        self.only = only
        self.complete: tuple[int, int, int] | None = None

    def for_route(self, i: int) -> Batch:
        """Route i's elements and ticks, as a plain batch."""
        ticks = merge_ticks(self.ticks, self.route_ticks[i])
        if self.only is not None:
            rows = len(self) if self.only == i else 0
        else:
            keep = ((self.route >> np.int64(i)) & 1) > 0
            rows = int(np.count_nonzero(keep))
        if rows == len(self):
            return Batch(self.columns, self.ts, self.w, ticks)
        if rows == 0:
            return Batch(tuple(c.slice(0, 0) for c in self.columns), self.ts[:0], self.w[:0], ticks)
        return self.take(np.flatnonzero(keep)).with_ticks(ticks)


@dataclass
class _Job:
    """One release's work: its new tuples (per input, with their keys and first positions),
    the span of instants it completes (since, upto], the inputs' counts after it, the next
    unit to run, and the pairs found so far (each with its route mask). `releases`: the
    (upto, stamp) of each release merged into it, oldest first (one unless merged)."""

    new: list[Batch | None]
    keys: list[list[pa.Array] | None]
    first: list[int]
    after: list[int]
    since: int
    upto: int
    ticks: np.ndarray
    stamp: float
    unit: int = 0
    parts: list[tuple] = field(default_factory=list)
    whole: bool = False  # all units in one go (LWO; a release without tuples, see on_heartbeat)
    twins: np.ndarray = field(default_factory=lambda: EMPTY_TICKS)  # instants of new tuples that may equal an earlier one
    held_rows: int = 0  # the pairs in `parts`, and their bytes (as `state_size` counts them)
    held_bytes: int = 0
    releases: list[tuple[int, float]] = field(default_factory=list)

    @property
    def tuples(self) -> int:
        """Its new tuples, of both inputs."""
        return sum(len(b) for b in self.new if b is not None)

    def add(self, part: tuple) -> None:
        self.parts.append(part)
        self.held_rows += len(part[2])
        self.held_bytes += _part_bytes(part)


class SharedJoin(MultiInputOperator):
    """See the module docstring. `policy` orders the work (docs/scheduling.md, "Shared window
    joins"); every policy gives the same results."""

    kind = "shared join"
    # `_costs` is a measurement of this process, as `busy_seconds` is; `clock` times calls
    STRUCTURE = frozenset({"_key_ev", "routes", "policy", "istream_routes", "_costs", "clock"})
    clock: Callable[[], float] = staticmethod(time.perf_counter)

    def __init__(
        self,
        name: str,
        inputs: list[QueueReader],
        output: Queue,
        left_keys: tuple[BExpr, ...],
        right_keys: tuple[BExpr, ...],
        routes: tuple[tuple[SideWindow, SideWindow], ...],
        policy: str = "lwo",
        istream_routes: frozenset[int] = frozenset(),
    ):
        super().__init__(name, inputs, output)
        if policy not in POLICIES:
            raise ValueError(f"unknown shared join policy {policy!r}")
        self._key_ev = ([compile_expr(e) for e in left_keys], [compile_expr(e) for e in right_keys])
        self.routes = routes
        self.policy = policy
        self.istream_routes = istream_routes
        twins = bool(istream_routes)
        self._stores = (JoinBuffer(twins), JoinBuffer(twins))
        self._ready: list[Batch | None] = [None, None]
        self._done = NEVER  # the last heartbeat released
        self._jobs: list[_Job] = []  # releases not yet complete, oldest first (SWF, MQT)
        self._costs = UnitCosts(len(routes))  # seconds per call, fitted (MQT's priorities)

    def describe(self) -> str:
        keys = len(self._key_ev[0])
        how = f"on {keys} key(s)" if keys else "nested loops"
        windows = ", ".join(f"{a} ⋈ {b}" for a, b in self.routes)
        return f"shared window join {how}, {self.policy.upper()}; routes {windows}"

    def state_size(self) -> tuple[int, int]:
        """The buffers, and the results of releases in progress (SWF, MQT)."""
        a, b = self._stores
        rows, nbytes = len(a.ts) + len(b.ts), a.nbytes() + b.nbytes()
        for job in self._jobs:
            rows += job.held_rows
            nbytes += job.held_bytes
        return rows, nbytes

    def restore(self, state: dict) -> None:
        super().restore(state)
        if self.istream_routes:
            for store in self._stores:
                store.count_twins()

    # -- executor-facing: SWF and MQT keep work between runs ------------------------------------

    def runnable(self) -> bool:
        if self._jobs and self.output.rows < self.high_water:
            return True
        return super().runnable()

    def blocked(self) -> bool:
        return not self._jobs and super().blocked()

    def run(self, budget: int) -> int:
        """Read the inputs (a new release pre-empts the queued work at a unit boundary), then
        run queued units until the budget is spent (MQT: one call)."""
        work = super().run(budget)
        if self.policy == "mqt":
            # One call, whatever reading took (as LWO's release runs when it is read): its
            # results go on before the next call, which is what MQT split its work for.
            return work + self._run_unit(*self._next()) if self._jobs else work
        while self._jobs and (work < budget or not work):
            work += self._run_unit(*self._next())
        return work

    def emit_heartbeat(self, ts: int) -> None:
        if self._jobs:  # released, not complete: the job's last unit sends it
            self.watermark = max(self.watermark, ts)
            return
        super().emit_heartbeat(ts)

    def _next(self) -> tuple[_Job, int]:
        """The job whose next units the policy runs, and the end of their range [unit, hi).
        A job never overtakes an older one at a unit (the units of the jobs, oldest first,
        are strictly decreasing: jobs waiting for the same unit merge). SWF serves the
        smallest unit first, one at a time. MQT serves the oldest job, in the calls that
        minimise the completion times of its routes and of the releases waiting behind it
        (shared_join_costs.py): one call, as LWO, unless its later windows' scan costs more
        than the early routes gain by going first."""
        jobs = self._jobs
        if self.policy == "swf":
            job = jobs[-1]  # the newest waits for the smallest unit
            return job, job.unit + 1
        job, n = jobs[0], len(self.routes)
        waiting = float(sum(j.tuples for j in jobs[1:]) * n)
        return job, self._costs.first_call(job.unit, n, float(max(job.tuples, 1)), waiting)

    # -- a release ----------------------------------------------------------------------------

    def _keys(self, port: int, batch: Batch) -> list[pa.Array]:
        return key_columns(self._key_ev[port], batch)

    def on_aligned(self, ready: list[Batch | None]) -> None:
        self._ready = ready  # processed with the heartbeat that released them

    def on_heartbeat(self, upto: int) -> None:
        ready, self._ready = self._ready, [None, None]
        new = [b if b is not None and len(b) else None for b in ready]
        ticks = merge_ticks(
            *(b.ticks for b in ready if b is not None),
            *(unique_sorted(b.ts) for b in new if b is not None),
        )
        stores = self._stores
        first = [s.count for s in stores]
        keys: list[list[pa.Array] | None] = [None, None]
        twins = []
        for port, b in enumerate(new):
            if b is not None:
                keys[port] = self._keys(port, b)
                twin = stores[port].append(b, keys[port])  # type: ignore[arg-type]
                if twin is not None and twin.any():
                    twins.append(unique_sorted(b.ts[twin]))
        job = _Job(new, keys, first, [s.count for s in stores], self._done, upto, ticks,
                   self.stamp, twins=merge_ticks(*twins) if twins else EMPTY_TICKS,
                   releases=[(upto, self.stamp)])
        self._done = upto
        if not self._jobs and self._idle(job):
            return  # nothing arrives or leaves: only the heartbeat goes on
        # A release without tuples probes nothing: with no older release waiting, its
        # retractions for every route go out at once, as LWO's do.
        job.whole = self.policy == "lwo" or (not self._jobs and all(b is None for b in job.new))
        self._jobs.append(job)
        if job.whole or self.policy == "swf":  # SWF: the smallest partial window at once
            self._run_unit(job)
        if self._jobs:
            self._merge_waiting(len(self._jobs) - 1)

    def _idle(self, job: _Job) -> bool:
        """Whether the release has no tuple, no instant and no tuple leaving any window."""
        if any(b is not None for b in job.new) or len(job.ticks):
            return False
        return not any(
            len(store.leaving(r[port], job.since, job.upto, job.first[port], job.after[port]))
            for r in self.routes
            for port, store in enumerate(self._stores)
        )

    def _merge_waiting(self, i: int) -> None:
        """Job i merges into the jobs before it that wait for the same unit: releases waiting
        for one unit, one after the other, become one job (the units then work on all their
        tuples at once): under load a queue's tuples are served together, as the engine
        batches everywhere. The job keeps the older stamp for its work (the executor's age of
        it), and each release's own stamp for its results (`_emit_by_release`)."""
        jobs = self._jobs
        while i > 0 and jobs[i].unit == jobs[i - 1].unit:
            b, a = jobs.pop(i), jobs[i - 1]
            i -= 1
            for port in (0, 1):
                if b.new[port] is not None:
                    x, y = a.new[port], b.new[port]
                    a.new[port] = y if x is None else Batch.concat([x, y])  # type: ignore[list-item]
                    kx, ky = a.keys[port], b.keys[port]
                    a.keys[port] = ky if kx is None else [  # type: ignore[index]
                        pa.concat_arrays([u, v]) for u, v in zip(kx, ky)  # type: ignore[arg-type]
                    ]
            a.after, a.upto = b.after, b.upto
            a.ticks = merge_ticks(a.ticks, b.ticks)
            a.twins = merge_ticks(a.twins, b.twins)
            a.parts.extend(b.parts)
            a.held_rows += b.held_rows
            a.held_bytes += b.held_bytes
            a.releases.extend(b.releases)

    def _run_unit(self, job: _Job, hi: int | None = None) -> int:
        """Run `job`'s units [unit, hi) (default: its next one; LWO: all of them) as one
        call; returns the work done (pairs, at least 1)."""
        start = self.clock()
        self._costs.resume(start)
        stamp, self.stamp = self.stamp, job.stamp
        n = len(self.routes)
        lo = 0 if job.whole else job.unit
        hi = n if job.whole else (lo + 1 if hi is None else hi)
        held = len(job.parts)
        for port, b in enumerate(job.new):
            if b is not None:
                self._insert(job, port, None if job.whole else (lo, hi))
        retractions: list[tuple] = []
        route_ticks = [self._retract(job, i, retractions) for i in range(lo, hi)]
        found = _units_of(job.parts[held:] + retractions, n)
        work = 1 + int(found.sum())
        if job.whole:
            self.emit(self._output(job.parts + retractions, job.ticks, tuple(route_ticks)))
        else:
            ticks = [EMPTY_TICKS] * n
            for i in range(lo, hi):
                ticks[i] = merge_ticks(job.ticks, route_ticks[i - lo])
            if hi == lo + 1:
                out = self._output(_route_rows(job.parts, lo) + retractions, EMPTY_TICKS,
                                   tuple(ticks), lo)
            else:
                mine = _route_rows(job.parts, lo, hi) + retractions
                out = self._output(mine, EMPTY_TICKS, tuple(ticks))
            self._emit_by_release(out, lo, hi, job.releases)
        job.unit = hi
        if hi == n:
            self._finish(job)
        else:
            self._merge_waiting(self._jobs.index(job))
        self.stamp = stamp
        end = self.clock()
        self._costs.observe(lo, hi, end - start, work - 1, job.tuples, found)
        self._costs.pause(end if hi < n else None)
        return work

    def _finish(self, job: _Job) -> None:
        """`job` is complete: drop what no window holds after it and send its heartbeat."""
        assert self._jobs[0] is job
        self._jobs.pop(0)
        for port, store in enumerate(self._stores):
            store.retain([r[port] for r in self.routes], job.upto, job.after[port])
        if not job.whole:  # (a whole release's heartbeat goes on as the release ends)
            self.output.push(Heartbeat(job.upto), job.releases[-1][1])

    def _emit_by_release(
        self, out: RoutedBatch, lo: int, hi: int, releases: list[tuple[int, float]]
    ) -> None:
        """Send a call's output for routes [lo, hi), complete up to the job's last instant:
        cut at each merged release's last instant, each part with that release's stamp and
        its completion. A result's latency then runs from the release that brought its later
        tuple, under every policy (LWO's releases are never merged); with the job's one,
        oldest stamp, a merged release's results counted the time the release before it
        waited as their own."""
        for upto, stamp in releases[:-1]:
            head, out = _split_at(out, upto)
            head.complete = (lo, hi, upto)
            self.stamp = stamp
            self.emit(head)
        out.complete = (lo, hi, releases[-1][0])
        self.stamp = releases[-1][1]
        self.emit(out)

    def _insert(self, job: _Job, port: int, units: tuple[int, int] | None) -> None:
        """The pairs whose later element is one of port's new tuples, each marked with the
        routes that hold both elements at its instant: all of them (`units` None), or those
        whose earlier element lies in the partial windows of units [lo, hi) (inside one of
        those routes' windows on that side and outside every earlier route's)."""
        b, keys, first = job.new[port], job.keys[port], job.first[port]
        assert b is not None and keys is not None
        mine, other = self._stores[port], self._stores[1 - port]
        if units is None or units == (0, len(self.routes)):
            # Every unit: the partial windows' union is the largest window, which the route
            # masks below cut out of a whole lookup as well (as LWO's probe).
            q, j = other.rows.lookup(keys)
        else:
            lo, hi = other.partial_window(b.ts, [r[1 - port] for r in self.routes], *units)
            if not len(lo) or int(lo.min()) >= int(hi.max()):
                return
            q, j = other.rows.lookup_within(keys, lo, hi)
        if not len(q):
            return
        t = b.ts[q]
        t_other = other.ts[j]
        keep = t_other < t if port == 0 else t_other <= t  # (A before B within an instant)
        if not keep.all():
            q, j, t = q[keep], j[keep], t[keep]
        pos, pos_other = q + first, j + other.base
        route = np.zeros(len(q), np.int64)
        for i, windows in enumerate(self.routes):
            inside = (mine.exits(pos, windows[port]) > t) & (
                other.exits(pos_other, windows[1 - port]) > t
            )
            route |= inside.astype(np.int64) << np.int64(i)
        keep = route != 0
        if not keep.any():
            return
        q, j, t, route = q[keep], j[keep], t[keep], route[keep]
        cols = take_columns(b.columns, q)
        other_cols, _ = other.rows.take(j)
        left, right = (cols, other_cols) if port == 0 else (other_cols, cols)
        job.add((left, right, t, np.ones(len(q), np.int64), route))

    def _retract(self, job: _Job, i: int, parts: list) -> np.ndarray:
        """Route i's pairs whose earlier exit falls in the job's span; returns the exits of
        its Range sides in that span (the instants its windows change)."""
        changes = []
        windows = self.routes[i]
        for port in (0, 1):
            mine, other = self._stores[port], self._stores[1 - port]
            win = windows[port]
            pos = mine.leaving(win, job.since, job.upto, job.first[port], job.after[port])
            if not len(pos):
                continue
            exit_at = mine.exits(pos, win)
            if win.kind == "range":
                changes.append(exit_at)
            alive = mine.ts[pos - mine.base] < exit_at  # else never in the window
            if i in self.istream_routes:  # only where an equal insertion may come at the exit
                alive &= np.isin(exit_at, job.twins)
            pos, exit_at = pos[alive], exit_at[alive]
            if not len(pos):
                continue
            cols, _ = mine.rows.take(pos - mine.base)
            k = self._keys(port, Batch(tuple(cols), exit_at, np.ones(len(pos), np.int64)))
            q, j = other.rows.lookup(k)
            if not len(q):
                continue
            e = exit_at[q]
            other_exit = other.exits(j + other.base, windows[1 - port])
            # The partner came before the exit and was still inside; an A tuple takes the pairs
            # whose two elements leave together. (Tuples of later releases come after `e`.)
            ok = (other.ts[j] < e) & ((other_exit >= e) if port == 0 else (other_exit > e))
            if not ok.any():
                continue
            q, j, e = q[ok], j[ok], e[ok]
            mine_cols = take_columns(cols, q)
            other_cols, _ = other.rows.take(j)
            left, right = (mine_cols, other_cols) if port == 0 else (other_cols, mine_cols)
            route = np.full(len(q), np.int64(1) << np.int64(i))
            parts.append((left, right, e, -np.ones(len(q), np.int64), route))
        return unique_sorted(np.sort(np.concatenate(changes))) if changes else EMPTY_TICKS

    def _output(
        self, parts: list, ticks: np.ndarray, route_ticks: tuple, only: int | None = None
    ) -> RoutedBatch:
        """One batch of `parts` in timestamp order; `only`: every element is route only's."""
        if not parts:
            return RoutedBatch(self.empty(ticks), np.empty(0, np.int64), route_ticks, only)
        width = (len(parts[0][0]), len(parts[0][1]))
        cols = [pa.concat_arrays([p[0][k] for p in parts]) for k in range(width[0])] + [
            pa.concat_arrays([p[1][k] for p in parts]) for k in range(width[1])
        ]
        ts = np.concatenate([p[2] for p in parts])
        w = np.concatenate([p[3] for p in parts])
        if only is None:
            route = np.concatenate([p[4] for p in parts])
        else:
            route = np.full(len(ts), np.int64(1) << np.int64(only))
        batch = Batch(tuple(cols), ts, w)
        if len(ts) > 1 and not bool((ts[1:] >= ts[:-1]).all()):
            order = np.argsort(ts, kind="stable")
            batch, route = batch.take(order), route[order]
        return RoutedBatch(batch.with_ticks(ticks), route, route_ticks, only)

    def emit(self, batch: Batch) -> None:
        if isinstance(batch, RoutedBatch) and not len(batch) and not len(batch.ticks):
            if batch.complete is not None or any(len(t) for t in batch.route_ticks):
                self.output.push(batch, self.stamp)  # a route's own instants or completion
            return
        super().emit(batch)


def _split_at(out: RoutedBatch, upto: int) -> tuple[RoutedBatch, RoutedBatch]:
    """(out's elements and ticks at instants ≤ upto, the rest), with the route masks and
    each route's ticks cut alike (out's elements are in timestamp order)."""
    k = int(np.searchsorted(out.ts, upto, side="right"))
    head, tail = Batch.split_at_time(out, upto)
    cuts = [int(np.searchsorted(t, upto, side="right")) for t in out.route_ticks]
    return (
        RoutedBatch(head, out.route[:k], tuple(t[:c] for t, c in zip(out.route_ticks, cuts)),
                    out.only),
        RoutedBatch(tail, out.route[k:], tuple(t[c:] for t, c in zip(out.route_ticks, cuts)),
                    out.only),
    )


def _part_bytes(part: tuple) -> int:
    left, right, ts, _, _ = part
    return sum(c.nbytes for c in (*left, *right)) + 3 * ts.nbytes


def _units_of(parts: list[tuple], n: int) -> np.ndarray:
    """How many of the pairs in `parts` each of the n units found: a pair is found in the
    partial window of the first route that holds it (its route mask's lowest bit)."""
    if not parts:
        return np.zeros(n, np.int64)
    route = np.concatenate([p[4] for p in parts])
    first = np.log2((route & -route).astype(np.float64)).astype(np.int64)
    return np.bincount(first, minlength=n)


def _route_rows(parts: list[tuple], lo: int, hi: int | None = None) -> list[tuple]:
    """The rows of `parts` that belong to a route in [lo, hi) (default: route lo), with
    their route masks cut to those routes."""
    out = []
    span = np.int64((1 << (lo + 1 if hi is None else hi)) - (1 << lo))
    for left, right, ts, w, route in parts:
        mine = route & span
        keep = mine != 0
        if keep.all():
            out.append((left, right, ts, w, mine))
        elif keep.any():
            idx = pa.array(np.flatnonzero(keep))
            out.append(([c.take(idx) for c in left], [c.take(idx) for c in right],
                         ts[keep], w[keep], mine[keep]))
    return out


class SharedJoinRoute(UnaryOperator):
    """One route of a shared join: its elements and instants, as the relation its windows'
    join would produce."""

    kind = "shared join route"
    STRUCTURE = frozenset({"index", "windows"})

    def __init__(
        self,
        name: str,
        inputs: list[QueueReader],
        output: Queue,
        index: int,
        windows: tuple[SideWindow, SideWindow],
    ):
        super().__init__(name, inputs, output)
        self.index = index
        self.windows = windows

    def describe(self) -> str:
        return f"route {self.windows[0]} ⋈ {self.windows[1]}"

    def on_batch(self, batch: Batch) -> None:
        assert isinstance(batch, RoutedBatch)
        self.emit(batch.for_route(self.index))
        done = batch.complete
        if done is not None and done[0] <= self.index < done[1]:
            self.emit_heartbeat(done[2])

