"""Holding each deployment inside its memory budget: the resource manager's loop in the worker.

Every `manage_interval` seconds (an apscheduler job that runs `BudgetKeeper.tick` on the engine
thread) the keeper takes each deployment with a `resources.memory_budget`:

1. It measures its queries: sources' rates (smoothed, re-estimated on drift), selectivities
   and key counts (`adaptive.measure.PlanMeter` over each query group's operators), the
   state its operators hold (`state_size`, bytes), what waits in its queues, and what each
   adjustable window holds now and when it leaves (`adaptive.drain`).
2. It estimates each query's memory at the settings in force (`adaptive.manager`): the
   model's steady level, plus what a change has not released yet (tuples admitted under an
   earlier, larger window keep their interval), plus what is queued. Once a
   query has been steady for its largest window (after it started or last changed), its
   measured memory over its estimate scales its estimates from then on (1 to 4×), so a
   model that falls short of the engine still holds the budget. Before that, when the
   deployment's operators hold more than the estimate and near the budget, the queries not
   yet corrected are scaled by that ratio.
3. It chooses settings (`adaptive.manager.decide`: granularity scan, then bisection on
   windows, weighted) for a point inside a band: it applies them when the estimate at the
   settings in force passes the budget less the reserve, or when it is below
   (1 − grow_margin) of that and the choice is more precise (windows grow back and
   granularities refine after a query leaves or load drops); it aims halfway, at
   (1 − grow_margin/2), so the noise of measured rates does not move windows every round.
4. Every change goes through `adjusting.adjust`, so it is checked against the query's QoS and
   logged in the catalog with its reason. When every range is exhausted the adjustable queries
   shed load (`WindowOperator.shed` on their windows); each fraction is logged as kind `shed`
   — except in a deployment whose sources can all be paused (Kafka): the worker holds those
   back instead (service/pacing.py) and nothing is lost.

`sample` measures each deployment at every turn of the worker's loop (operators' state and
queued bytes): the figure the pacing of sources holds under the budget, its peak and the
samples over the budget.

Admission control (`admit`, called by `Deployer.deploy`) rejects a new query that does not fit
even with every adjustable query at its minimum settings. The rejected query does not start.
It is marked `stopped` in the catalog with the estimate as its error, and logged as kind
`rejected`. The deployment's other queries run. A later change of the file retries it.
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass, field, replace
from types import SimpleNamespace
from typing import Any

from cq_service.adaptive.cpu import EngineCosts
from cq_service.adaptive.drain import HeldProfile, held_profile
from cq_service.adaptive.estimate import Observed
from cq_service.adaptive.manager import (
    Budget,
    Cost,
    Decision,
    ManagedQuery,
    Rejection,
    admit,
    decide,
    window_knobs,
)
from cq_service.adaptive.measure import PlanMeter, mean_distance
from cq_service.cql import logical as L
from cq_service.engine.operators.base import NEVER
from cq_service.engine.operators.range_window import RangeWindow
from cq_service.engine.statistics import entity_row
from cq_service.errors import AdjustmentError
from cq_service.plan.physical import PhysicalPlan
from cq_service.service.adjusting import adjust
from cq_service.service.running import RunningQuery, Runtime
from cq_service.spec.model import PipelineSpec, QosSpec
from cq_service.stats import human_bytes

__all__ = ["BudgetKeeper", "DeploymentState"]

log = logging.getLogger("cq.budgets")

MAX_CORRECTION = 4.0  # the most the measured memory may scale the estimates by
# A window's recent rate: the largest measured over the last eighth of it and the last 32nd
# (a burst shows in the short one first; the long one is steadier).
RECENT_SHARES = (8, 32)


@dataclass
class DeploymentState:
    """What the keeper knows of one deployment, for /metrics and the API."""

    budget: Budget
    estimated: Cost = field(default_factory=Cost)  # at the settings in force
    measured: float = 0.0  # bytes its operators hold (at the last round)
    decision: Decision | None = None
    shedding: dict[str, float] = field(default_factory=dict)  # query -> share dropped
    corrections: dict[str, float] = field(default_factory=dict)  # query -> measured / estimated
    steady_from: dict[str, int] = field(default_factory=dict)  # query -> application time
    ticks: int = 0
    queued: float = 0.0  # bytes waiting in its queues (part of `estimated`, and of `now`)
    unreleased: float = 0.0  # of `estimated`: what changes have not released yet
    # Sampled at every turn of the worker's loop (`BudgetKeeper.sample`):
    now: float = 0.0  # the latest sample: operators' state and queued bytes
    peak: float = 0.0
    samples: int = 0
    over: int = 0  # samples above the budget

    def to_json(self) -> dict[str, Any]:
        d = self.decision
        return {
            "memory_budget": self.budget.memory if math.isfinite(self.budget.memory) else None,
            "reserve": self.budget.reserve,
            "estimated_bytes": self.estimated.memory,
            "estimated_cpu": self.estimated.cpu,
            "measured_bytes": self.measured,
            "queued_bytes": self.queued,
            "unreleased_bytes": self.unreleased,
            "sampled_bytes": self.now,
            "peak_bytes": self.peak,
            "samples": self.samples,
            "samples_over_budget": self.over,
            "corrections": dict(self.corrections),
            "f_granularity": None if d is None else d.f_granularity,
            "f_window": None if d is None else d.f_window,
            "shedding": dict(self.shedding),
        }


class _Operators(SimpleNamespace):
    """What `PlanMeter` reads of an executor: its operators in the plan's node order."""

    operators: list


class BudgetKeeper:
    def __init__(self, rt: Runtime):
        self.rt = rt
        self.states: dict[str, DeploymentState] = {}
        self._meters: dict[tuple[int, tuple[int, ...]], tuple[PlanMeter, list]] = {}

    # -- the loop -------------------------------------------------------------------------------

    def tick(self, only: str | None = None) -> None:
        """One round over every deployment with a budget (`only`: that one), on the engine
        thread."""
        for name, spec in list(self.rt.pipelines.items()):
            if only is not None and name != only:
                continue
            budget = self.budget_of(spec)
            if budget is None:
                self.states.pop(name, None)
                continue
            try:
                self._hold(name, spec, budget)
            except Exception:  # the worker goes on; the next tick tries again
                log.exception("%s: the resource manager failed", name)

    def sample(self) -> None:
        """Measure every deployment with a budget now: its operators' state and what waits
        in its queues (each turn of the worker's loop)."""
        for name, spec in self.rt.pipelines.items():
            budget = self.budget_of(spec)
            if budget is None:
                continue
            state = self.states.setdefault(name, DeploymentState(budget))
            state.now = float(self.held_now(name))
            state.samples += 1
            state.peak = max(state.peak, state.now)
            if state.now > state.budget.memory:
                state.over += 1

    def entity_rows(self, clock: int) -> list[tuple]:
        """SysStream's rows of the resource manager: one per deployment with a budget (its
        bytes now, what it was planned at and how often the budget was exceeded)."""
        rows = []
        for name, st in self.states.items():
            b = st.budget.memory
            d = st.decision
            detail = (
                f"resource manager: budget {_bytes(b)} (reserve {_bytes(st.budget.reserve)}), "
                f"estimated {_bytes(st.estimated.memory)}, peak {_bytes(st.peak)}, "
                f"{st.over} of {st.samples} samples over"
            )
            window = None if d is None else (
                f"windows x{d.f_window:.3g}, granularity x{d.f_granularity:.3g}"
            )
            rows.append(entity_row(name, "resource manager", name, detail,
                                   memory=int(st.now), window=window))
        return rows

    def held_now(self, pipeline: str) -> int:
        """Bytes `pipeline`'s operators hold plus the bytes queued for them."""
        engine = self.rt.engine
        held = sum(op.state_size()[1] for op in engine.operators_of(pipeline))
        return held + engine.queued_of(pipeline)

    def pausable_only(self, pipeline: str) -> bool:
        """Whether every source `pipeline` reads can be paused (its input then waits in a
        lossless buffer, such as a Kafka topic, instead of being shed)."""
        keys = {k for q in self.rt.queries.values() if q.pipeline == pipeline
                for k in q.source_keys.values()}
        return bool(keys) and all(
            k in self.rt.sources and hasattr(self.rt.sources[k].reader, "pause") for k in keys
        )

    def budget_of(self, spec: PipelineSpec) -> Budget | None:
        r = spec.resources
        if r.memory_budget is None:
            return None
        memory = float(r.memory_budget)
        return Budget(memory, memory * self.rt.config.memory_reserve)

    def _hold(self, pipeline: str, spec: PipelineSpec, budget: Budget) -> None:
        state = self.states.setdefault(pipeline, DeploymentState(budget))
        state.budget = budget
        state.ticks += 1
        queries = self.managed(pipeline, spec)
        state.queued = float(self.rt.engine.queued_of(pipeline))
        state.measured = float(
            sum(op.state_size()[1] for op in self.rt.engine.operators_of(pipeline))
        )
        live = {q.key for q in queries}
        for kept in (state.steady_from, state.corrections, state.shedding):
            for key in [k for k in kept if k not in live]:
                del kept[key]
        if not queries:
            return
        now = self._now(pipeline)
        current = {q.key: self._settings_now(pipeline, q) for q in queries}
        keep = {q.key: 1.0 - state.shedding.get(q.key, 0.0) for q in queries}
        for q in queries:
            self._correct(pipeline, q, current[q.key], keep[q.key], state, now)
        queued = Cost(state.queued)
        state.estimated = sum((q.cost(current[q.key], keep[q.key]) for q in queries), queued)
        steady = [replace(q, held={}, _cache={}) for q in queries]
        state.unreleased = state.estimated.memory - sum(
            (q.cost(current[q.key], keep[q.key]).memory for q in steady), state.queued
        )
        modelled = state.estimated.memory - state.queued
        held = state.measured / modelled if modelled > 0 else 1.0
        if held > 1.0 and state.measured > budget.target * (1 - self.rt.config.grow_margin):
            # The operators hold more than the model says, near the budget: scale the queries
            # not yet corrected by that ratio now rather than wait for them to be steady
            # (a window shrunk but not yet drained also counts, which errs on the safe side).
            for q in queries:
                if q.key not in state.corrections:
                    q.scale = min(MAX_CORRECTION, held)
            state.estimated = sum(
                (q.cost(current[q.key], keep[q.key]) for q in queries), queued
            )
        # Plan inside a band: shrink when the settings in force pass the target, grow back
        # when they use less than (1 − margin) of it, and aim halfway, so that the noise of
        # measured rates does not move windows at every round.
        # What is queued counts in the estimate at the settings in force (it is memory until
        # the engine has read it), not in the choice: it is transient, and the worker's pacing
        # of the sources keeps it inside the room the budget leaves.
        margin = self.rt.config.grow_margin
        aim = Budget(budget.target * (1 - margin / 2), 0.0, budget.cpu)
        decision = decide(queries, aim)
        if not decision.fits:
            # What the windows hold now leaves at the instants it was given, whatever is
            # chosen: no setting and no shedding releases it sooner. Take the settings that
            # release it soonest (every range at its minimum) and shed only what the steady
            # state needs.
            steady = decide([replace(q, held={}, _cache={}) for q in queries], aim)
            decision = replace(steady, settings=decision.settings, f_granularity=0.0,
                               f_window=0.0, fits=False)
        if decision.shedding and self.pausable_only(pipeline):
            # Its input waits in the sources (paused by the worker's pacing): nothing is shed.
            decision = replace(decision, keep={k: 1.0 for k in decision.keep})
        state.decision = decision
        fits_now = state.estimated.fits(budget)
        # Grow only when the estimate and the latest per-turn sample both leave room.
        room = max(state.estimated.memory, state.now) < budget.target * (1 - margin)
        finer = any(
            _more_precise(decision.settings[q.key], current[q.key])
            or decision.keep[q.key] > keep[q.key]
            for q in queries
        )
        if fits_now and not (room and finer):
            return
        used = human_bytes(state.estimated.memory)
        # as the next round will estimate it: at the new settings, what the windows hold now
        # and what is queued included (the same terms as `used`)
        after = sum(
            (q.cost(decision.settings[q.key], decision.keep[q.key]) for q in queries), queued
        ).memory
        why = (
            f"budget: {used} estimated at the settings in force, "
            f"{human_bytes(budget.target)} allowed"
            if not fits_now
            else f"budget: room to grow ({used} of {human_bytes(budget.target)})"
        ) + f"; {human_bytes(after)} estimated at the new settings"
        for key in self._apply(pipeline, queries, current, keep, decision, why):
            sizes = [s for s, _ in current[key].values()]
            sizes += [s for s, _ in decision.settings[key].values()]
            state.steady_from[key] = now + max(sizes, default=0)
        state.shedding = dict(decision.shedding)

    def _correct(
        self,
        pipeline: str,
        q: ManagedQuery,
        settings: dict[str, tuple[int, int]],
        keep: float,
        state: DeploymentState,
        now: int,
    ) -> None:
        """Scale `q`'s estimates by its measured over estimated memory, measured once its
        state is steady (its largest window after its start or last change): the bytes its
        operators hold over the model's steady level (what windows hold above it until a change
        drains, adaptive/drain.py, is left in: the correction errs high)."""
        if q.key not in state.steady_from:
            state.steady_from[q.key] = now + max((s for s, _ in settings.values()), default=0)
        if now >= state.steady_from[q.key]:
            q.scale = 1.0
            steady = replace(q, held={}, _cache={}).cost(settings, keep).memory
            if steady > 0:
                ratio = self._held(pipeline, q) / steady
                state.corrections[q.key] = min(MAX_CORRECTION, max(1.0, ratio))
        q.scale = state.corrections.get(q.key, 1.0)

    def _held(self, pipeline: str, q: ManagedQuery) -> float:
        """Bytes the operators of `q`'s plan hold now (shared ones counted in full)."""
        _, ops = self.rt.engine.plan_of(q.key)
        return float(
            sum(
                ops[n.id].state_size()[1]
                for n in q.plan.nodes
                if n.id in ops and not isinstance(n.op, L.Source)
            )
        )

    def _apply(
        self,
        pipeline: str,
        queries: list[ManagedQuery],
        current: dict[str, dict[str, tuple[int, int]]],
        keep: dict[str, float],
        decision: Decision,
        reason: str,
    ) -> list[str]:
        """Make `decision`'s changes; the queries changed."""
        changed = []
        for q in queries:
            name = q.key.split("/", 1)[1]
            want, now = decision.settings[q.key], current[q.key]
            made = False
            try:
                for label, (size, _) in want.items():
                    if size != now[label][0]:
                        adjust(self.rt, pipeline, name, f"window:{label}", size, reason)
                        made = True
                rung = {g for _, g in want.values()}  # one ladder: every window alike
                if q.ladder and len(rung) == 1 and rung != {g for _, g in now.values()}:
                    adjust(self.rt, pipeline, name, "granularity", rung.pop(), reason)
                    made = True
            except AdjustmentError as e:  # e.g. a window that cannot change yet
                log.warning("%s: %s", q.key, e)
            share = 1.0 - decision.keep[q.key]
            if abs(share - (1.0 - keep[q.key])) > 1e-9:
                self._shed(pipeline, name, share, reason)
                made = True
            if made:
                changed.append(q.key)
        return changed

    def _shed(self, pipeline: str, query: str, share: float, reason: str) -> None:
        windows = self.rt.engine.windows(pipeline, query)
        for i, w in enumerate(windows):
            w.shed(min(share, 0.999), seed=i)
        self.rt.catalog.log_adjustment(
            pipeline,
            "shed",
            {"fraction": share, "windows": [w.label for w in windows], "reason": reason},
            query=query,
        )
        log.info("%s/%s: shedding %.1f%% of its windows' input (%s)", pipeline, query,
                 100 * share, reason)

    # -- admission ------------------------------------------------------------------------------

    def admit(
        self, spec: PipelineSpec, new: list[RunningQuery], bound: list[Any]
    ) -> list[Rejection]:
        """Those of `new` (with their bound queries) that do not fit the deployment's budget
        even at every adjustable query's minimum settings."""
        budget = self.budget_of(spec)
        if budget is None or not new:
            return []
        from cq_service.plan.planner import plan_queries

        running = self.managed(spec.name, spec)
        state = self.states.get(spec.name)
        for q in running:
            q.scale = state.corrections.get(q.key, 1.0) if state else 1.0
        candidates = []
        for q, bq in zip(new, bound, strict=True):
            plan = plan_queries([(bq, spec.queries[q.name].sink)])
            candidates.append(self._managed_query(spec, q, plan, self._observed_for(plan, q)))
        _, rejected = admit(running, candidates, budget)
        return rejected

    # -- the deployment's queries, as the manager sees them --------------------------------------

    def managed(self, pipeline: str, spec: PipelineSpec) -> list[ManagedQuery]:
        """The deployment's running queries, measured now, with their weights as the catalog
        keeps them (the file's, or one set through the API)."""
        weights = {r.name: r.weight for r in self.rt.catalog.queries(pipeline)}
        mine_all = [q for q in self.rt.queries.values() if q.pipeline == pipeline]
        # A group's plan reads the sources of all its queries: their keys, by source name.
        keys = {n: k for q in mine_all for n, k in q.source_keys.items()}
        costs = EngineCosts.load()
        out = []
        for q in mine_all:
            plan, ops = self.rt.engine.plan_of(q.key)
            mine = _plan_of_query(plan, q.key)
            obs = self._measure(plan, ops, keys)
            managed = self._managed_query(spec, q, mine, obs, weights.get(q.name))
            managed.costs = costs
            managed.held = self._held_profiles(pipeline, q.name)
            out.append(managed)
        return out

    def _managed_query(
        self,
        spec: PipelineSpec,
        q: RunningQuery,
        plan: PhysicalPlan,
        observed: Observed,
        weight: float | None = None,
    ) -> ManagedQuery:
        qspec = spec.queries[q.name]
        return ManagedQuery(
            q.key,
            plan,
            observed,
            qspec.weight if weight is None else weight,
            window_knobs(plan, q.name, lambda names: _range(qspec.qos, names)),
            tuple(qspec.qos.granularity),
            spec.time_unit_ns / 1e9,
        )

    def _measure(self, plan: PhysicalPlan, ops: dict[int, Any], keys: dict[str, str]) -> Observed:
        """The group's meter, sampled now (made again when the group's operators change)."""
        live = tuple(sorted(ops))
        key = (id(plan), live)
        entry = self._meters.get(key)
        if entry is None:
            for k in [k for k in self._meters if k[0] == id(plan)]:
                del self._meters[k]
            sub = PhysicalPlan([n for n in plan.nodes if n.id in ops], [], plan.source_columns)
            operators = [
                self.rt.engine.sources[keys[n.op.name]]
                if isinstance(n.op, L.Source)
                else ops[n.id]
                for n in sub.nodes
            ]
            entry = (PlanMeter(sub, 1.0, warmup=0), operators)
            self._meters[key] = entry
        meter, operators = entry
        meter(_Operators(operators=operators))
        return meter.observed(smoothed=True)

    def _observed_for(self, plan: PhysicalPlan, q: RunningQuery) -> Observed:
        """A query not running yet: its sources' rates and rows per read as read so far
        (others unknown)."""
        source_d, row_bytes, read_rows = {}, {}, {}
        for n in plan.nodes:
            if isinstance(n.op, L.Source) and n.op.name in q.source_keys:
                src = self.rt.engine.sources.get(q.source_keys[n.op.name])
                d = None if src is None else mean_distance(src)
                if d is None:
                    continue
                source_d[n.op.name] = d
                row_bytes[n.op.name] = src.output.total_bytes / max(1, src.output.total_rows)
                if src.run_cost.runs:
                    read_rows[n.op.name] = src.rows_out / src.run_cost.runs
        return Observed(source_d, row_bytes, read_rows=read_rows)

    def _held_profiles(self, pipeline: str, query: str) -> dict[str, HeldProfile]:
        """What each adjustable window of `query` holds now and when it leaves."""
        return {
            w.label: held_profile(w.held_after, w.seen, w.longest_stay, recent=max(
                w.recent_rate(max(1, w.size // share)) for share in RECENT_SHARES
            ))
            for w in self.rt.engine.windows(pipeline, query)
            if w.seen != NEVER
        }

    def _settings_now(self, pipeline: str, q: ManagedQuery) -> dict[str, tuple[int, int]]:
        name = q.key.split("/", 1)[1]
        by_label = {w.label: w for w in self.rt.engine.windows(pipeline, name)}
        return {
            w.label: (by_label[w.label].size, by_label[w.label].granularity)
            if w.label in by_label
            else (w.size, 1)
            for w in q.windows
        }

    def _now(self, pipeline: str) -> int:
        marks = [
            op.watermark
            for op in self.rt.engine.operators_of(pipeline)
            if isinstance(op, RangeWindow) and op.watermark != NEVER
        ]
        return max(marks, default=0)


def _plan_of_query(plan: PhysicalPlan, key: str) -> PhysicalPlan:
    """The nodes of a group's plan that `key` uses (closed under inputs)."""
    nodes = [n for n in plan.nodes if key in n.queries]
    return PhysicalPlan(nodes, [s for s in plan.sinks if s.query == key], plan.source_columns)


def _range(qos: QosSpec, names: tuple[str, ...]) -> tuple[int, int] | None:
    r = qos.window_range(names)
    return None if r is None else (r.low, r.high)


def _more_precise(want: dict[str, tuple[int, int]], now: dict[str, tuple[int, int]]) -> bool:
    return any(s > now[k][0] or g < now[k][1] for k, (s, g) in want.items() if k in now)


def _bytes(n: float) -> str:
    return "unbounded" if not math.isfinite(n) else f"{n / 2**20:.1f} MiB"
