"""Choosing every query's window sizes and granularities so a deployment fits its budget.

The paper's preliminary resource manager (brief-costmodel §4) sets each knob to
min + f·(max − min) with one shared f ∈ [0, 1], f = 1 being every query at its most precise:

1. scan f = 1, (p−1)/p, …, 0 with windows and granularities together, and fix the
   granularities at the first f whose estimate fits the memory (and CPU) bound;
2. bisect on f for the windows alone, from that f up to 1.

Both steps need the estimate to grow with f, which holds for σ, π, ∪, ⋈ and α.

Weights (the project's extension): query i moves with f_i = f^(w_max / w_i), where w_max is
the heaviest weight among the adjustable queries. The heaviest queries follow f itself. A query
of half that weight is at f_i = f², so it gives up precision first and gets it back last. Every
f_i is 0 at f = 0 and 1 at f = 1, so "every range exhausted" is still f = 0.

Knobs on a ladder: granularity is a ladder of rungs, finest first. At f_i it takes the rung
k − ⌊f_i·k⌋ of k + 1 rungs, counted from the finest (so the finest only at f_i = 1).
A window size takes ⌊min + f_i·(max − min)⌋. Both settings only grow with f_i.

Past f = 0 (every range exhausted), the adjustable queries shed load: a share keep_i of the
tuples reaching their windows is kept (`WindowOperator.shed`). The same weighting applies,
keep_i = k^(w_max / w_i), with k the largest value that fits, found by bisection. Shedding a
share p of a window's input is estimated as that query's stream sources arriving at 1 − p of
their rate. The estimate is only a model of the drop, which is random, per query.
Queries without ranges are never adjusted and never shed: they count at their settings.

Admission control (`admit`) asks whether a new query fits with every adjustable query, the new
one included, at its minimum settings; if not, the query is rejected with the estimate that
did not fit.

A window changed at run time still holds what it admitted under its earlier settings until
those tuples leave (adaptive/drain.py): each query's cost at given settings adds the most its
windows will hold above their steady level while that drains (`ManagedQuery.held`, measured
by the worker), so a shrink is not counted as released before it is.

Memory is estimated per query, each query planned alone (`estimate_plan` over its own plan).
Operators that several of a deployment's queries share are counted once per query, which
overestimates; windows a QoS covers are never shared (plan/knobs.py), so the state the
manager adjusts is counted exactly once.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, replace

from cq_service.adaptive.cpu import EngineCosts
from cq_service.adaptive.drain import HeldProfile, unreleased
from cq_service.adaptive.estimate import Observed, estimate_plan
from cq_service.cql import logical as L
from cq_service.plan.physical import PhysicalPlan

__all__ = [
    "Budget",
    "Cost",
    "Decision",
    "ManagedQuery",
    "Rejection",
    "WindowKnob",
    "admit",
    "decide",
    "window_knobs",
]

SCAN_STEPS = 10  # p: the granularity scan's steps
TOLERANCE = 1 / 256  # the bisections stop when f is known this closely


@dataclass(frozen=True)
class Budget:
    """A deployment's limits: `memory` in bytes, of which `reserve` is kept free for bursts
    and adaptation delays; `cpu` in cores (None: no CPU bound)."""

    memory: float
    reserve: float = 0.0
    cpu: float | None = None

    @property
    def target(self) -> float:
        """The memory the manager plans for."""
        return max(0.0, self.memory - self.reserve)


@dataclass(frozen=True)
class Cost:
    memory: float = 0.0  # bytes
    cpu: float = 0.0  # cores (seconds per second)

    def __add__(self, other: Cost) -> Cost:
        return Cost(self.memory + other.memory, self.cpu + other.cpu)

    def fits(self, budget: Budget) -> bool:
        return self.memory <= budget.target and (budget.cpu is None or self.cpu <= budget.cpu)


@dataclass(frozen=True)
class WindowKnob:
    """A Range window of a query: its plan node, FROM item `label`, its size as written and
    the range it may take (None: fixed)."""

    node: int
    label: str
    size: int
    size_range: tuple[int, int] | None = None

    def size_at(self, f: float) -> int:
        if self.size_range is None:
            return self.size
        lo, hi = self.size_range
        return min(hi, max(lo, math.floor(lo + f * (hi - lo) + 1e-9)))


@dataclass
class ManagedQuery:
    """One query as the manager sees it: its own plan, weight, windows and granularity ladder
    (finest first; empty: fixed), and what its cost is estimated from. `scale` multiplies its
    estimated memory: the measured over the estimated memory, where the model is known to
    fall short. `held` (window label -> profile) is what each window holds now and when it
    leaves: its cost adds what a change has not released yet (adaptive/drain.py)."""

    key: str
    plan: PhysicalPlan
    observed: Observed
    weight: float = 1.0
    windows: tuple[WindowKnob, ...] = ()
    ladder: tuple[int, ...] = ()
    unit_seconds: float = 1e-3
    scale: float = 1.0
    costs: EngineCosts | None = None  # the CPU constants (None: loaded at each estimate)
    held: dict[str, HeldProfile] = field(default_factory=dict)
    _cache: dict[tuple, Cost] = field(default_factory=dict, repr=False)

    @property
    def adjustable(self) -> bool:
        return bool(self.ladder) or any(w.size_range for w in self.windows)

    def granularity_at(self, f: float) -> int | None:
        """The rung at f (None: no ladder)."""
        if not self.ladder:
            return None
        k = len(self.ladder) - 1
        return self.ladder[k - math.floor(f * k + 1e-9)]

    def settings(self, f_window: float, f_granularity: float) -> dict[str, tuple[int, int]]:
        """Each window's (size, granularity) at these f (already weighted)."""
        g = self.granularity_at(f_granularity)
        return {
            w.label: (w.size_at(f_window), g if g is not None else 1) for w in self.windows
        }

    def cost(
        self,
        settings: Mapping[str, tuple[int, int]],
        keep: float = 1.0,
        costs: EngineCosts | None = None,
    ) -> Cost:
        """Estimated memory and CPU at `settings` (label -> (size, granularity)), keeping a
        share `keep` of the input (shedding the rest)."""
        key = (tuple(sorted(settings.items())), round(keep, 9), self.scale)
        hit = self._cache.get(key)
        if hit is not None:
            return hit
        by_node = {w.node: settings[w.label] for w in self.windows if w.label in settings}
        obs = self.observed
        if keep < 1.0:
            scale = 1.0 / max(keep, 1e-9)
            obs = replace(obs, source_d={k: d * scale for k, d in obs.source_d.items()})
        est = estimate_plan(
            self.plan, obs, costs=costs or self.costs, unit_seconds=self.unit_seconds,
            windows=by_node,
        )
        # Sources are the worker's, shared by every deployment: not the query's to hold.
        mine = [est[n.id] for n in self.plan.nodes if not isinstance(n.op, L.Source)]
        memory = self.scale * sum(e.bytes for e in mine)
        for w in self.windows:
            profile = self.held.get(w.label)
            if profile is not None and w.label in settings and w.node in est:
                size = settings[w.label][0]
                modelled = self.scale * est[w.node].bytes / max(1, size)
                per_unit = max(modelled, profile.recent)  # a burst shows in `recent` first
                memory += (per_unit - modelled) * size + unreleased(profile, size, per_unit)
        cost = Cost(memory, sum(e.cpu for e in mine))
        self._cache[key] = cost
        return cost


@dataclass(frozen=True)
class Decision:
    """What `decide` chose: the shared f of each step, every query's settings (label ->
    (size, granularity)), the share of input kept per query (1: no shedding), the estimates,
    and whether they fit the budget."""

    f_granularity: float
    f_window: float
    settings: dict[str, dict[str, tuple[int, int]]]
    keep: dict[str, float]
    per_query: dict[str, Cost]
    total: Cost
    fits: bool

    @property
    def shedding(self) -> dict[str, float]:
        """Queries that drop input, with the share dropped."""
        return {q: 1.0 - k for q, k in self.keep.items() if k < 1.0}


@dataclass(frozen=True)
class Rejection:
    """A query that does not fit even at its minimum settings."""

    query: str
    needed: Cost  # the deployment's estimate with it, everything at its minimum
    budget: Budget

    @property
    def reason(self) -> str:
        from cq_service.stats import human_bytes

        return (
            f"needs {human_bytes(self.needed.memory)} at the minimum settings of every query "
            f"(its own included), {human_bytes(max(0.0, self.needed.memory - self.budget.target))}"
            f" more than the budget leaves: {human_bytes(self.budget.target)} "
            f"({human_bytes(self.budget.memory)} less a reserve of "
            f"{human_bytes(self.budget.reserve)})"
            + (
                f", CPU {self.needed.cpu:.2f} of {self.budget.cpu:.2f} cores"
                if self.budget.cpu is not None
                else ""
            )
        )


def weighted(f: float, weight: float, heaviest: float) -> float:
    """Query i's f_i = f^(w_max / w_i): the heaviest queries follow f, lighter ones give up
    precision first."""
    if f >= 1.0:
        return 1.0
    if f <= 0.0:
        return 0.0
    return f ** (heaviest / max(weight, 1e-9))


def decide(
    queries: Iterable[ManagedQuery],
    budget: Budget,
    *,
    costs: EngineCosts | None = None,
    steps: int = SCAN_STEPS,
    tolerance: float = TOLERANCE,
) -> Decision:
    """Settings for `queries` that fit `budget`, as precise as the paper's strategy finds."""
    qs = list(queries)
    costs = costs or EngineCosts.load()  # once, not at every estimate
    adjustable = [q for q in qs if q.adjustable]
    heaviest = max((q.weight for q in adjustable), default=1.0)

    def at(fw: float, fg: float, keep: float = 1.0) -> tuple[dict, dict, dict, Cost]:
        settings, kept, per = {}, {}, {}
        total = Cost()
        for q in qs:
            if q.adjustable:
                s = q.settings(weighted(fw, q.weight, heaviest), weighted(fg, q.weight, heaviest))
                k = weighted(keep, q.weight, heaviest)
            else:
                s, k = q.settings(1.0, 1.0), 1.0
            c = q.cost(s, k, costs)
            settings[q.key], kept[q.key], per[q.key] = s, k, c
            total = total + c
        return settings, kept, per, total

    # Step 1: the granularities, scanning f down from 1.
    fg = None
    for i in range(steps, -1, -1):
        f = i / steps
        if at(f, f)[3].fits(budget):
            fg = f
            break
    if fg is not None:
        # Step 2: the windows, bisecting f in [fg, 1] with the granularities fixed.
        lo, hi = fg, 1.0
        if at(hi, fg)[3].fits(budget):
            lo = hi
        while hi - lo > tolerance:
            mid = (lo + hi) / 2
            if at(mid, fg)[3].fits(budget):
                lo = mid
            else:
                hi = mid
        settings, kept, per, total = at(lo, fg)
        return Decision(fg, lo, settings, kept, per, total, True)
    # Every range exhausted: shed, bisecting the share kept.
    lo, hi = 0.0, 1.0
    while hi - lo > tolerance:
        mid = (lo + hi) / 2
        if at(0.0, 0.0, mid)[3].fits(budget):
            lo = mid
        else:
            hi = mid
    settings, kept, per, total = at(0.0, 0.0, lo)
    return Decision(0.0, 0.0, settings, kept, per, total, total.fits(budget))


def admit(
    running: Iterable[ManagedQuery],
    new: Iterable[ManagedQuery],
    budget: Budget,
    *,
    costs: EngineCosts | None = None,
) -> tuple[list[ManagedQuery], list[Rejection]]:
    """Which of `new` fit beside `running`, taken in order, every adjustable query at its
    minimum settings (f = 0) and the others as they are. Returns (admitted, rejected)."""

    costs = costs or EngineCosts.load()

    def least(q: ManagedQuery) -> Cost:
        f = 0.0 if q.adjustable else 1.0
        return q.cost(q.settings(f, f), 1.0, costs)

    total = Cost()
    for q in running:
        total = total + least(q)
    admitted, rejected = [], []
    for q in new:
        with_it = total + least(q)
        if with_it.fits(budget):
            admitted.append(q)
            total = with_it
        else:
            rejected.append(Rejection(q.key, with_it, budget))
    return admitted, rejected


def window_knobs(
    plan: PhysicalPlan,
    query: str,
    ranges: Callable[[tuple[str, ...]], tuple[int, int] | None],
) -> tuple[WindowKnob, ...]:
    """The Range windows `query` owns in `plan` (those its QoS covers, plan/knobs.py), each
    with the size range `ranges(names)` gives for its FROM item's names."""
    out = []
    for node in plan.nodes:
        op = node.op
        if isinstance(op, L.WindowOp) and op.owner == query and op.window.kind == "range":
            label = op.names[0] if op.names else f"node {node.id}"
            out.append(WindowKnob(node.id, label, int(op.window.size or 0), ranges(op.names)))
    return tuple(out)
