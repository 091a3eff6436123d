"""Measuring a running plan: what the cost model starts from, and what it is checked against.

A `PlanMeter` is called after scheduling steps (`Executor.run(after_step=…)`, or the worker's
loop). It measures, from the end of a warm-up (the time the largest window takes to fill):

- the inputs of the model (`observed()`): each stream source's d, smoothed (`RateMeter`), its
  element size and rows per read; stored relations' sizes; each filter's selectivity; each join's σ⋈, the
  share of pairs of current rows whose keys match (`Join.key_matches`); each grouping's
  distinct keys, turned into a key count n by the model's own formula over the estimated
  input;
- what the model predicts (`measured()`): each operator's state, averaged over application
  time, and its CPU per second of application time.

Application time is each operator's own watermark (the last instant it completed), so an
operator's state is weighted by how long, in the stream's time, it held it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from cq_service.adaptive.estimate import Observed, settle_groups
from cq_service.adaptive.rates import RateMeter
from cq_service.cql import logical as L
from cq_service.engine.executor import Executor
from cq_service.engine.operators.base import NEVER, Operator
from cq_service.engine.operators.join import Join
from cq_service.plan.physical import PhysicalPlan

__all__ = ["Measured", "PlanMeter", "mean_distance", "warmup_of"]


@dataclass(frozen=True)
class Measured:
    """One operator after warm-up: mean state (rows, bytes) over application time, CPU in
    seconds per second of application time, rows in and out, and its runs (executor steps)."""

    rows: float
    bytes: float
    cpu: float
    rows_in: int
    rows_out: int
    span: float  # application time measured, in time units
    runs: int = 0


def warmup_of(plan: PhysicalPlan) -> int:
    """Time units until every window of `plan` holds a full window: its largest Range (with
    slide), or 0."""
    longest = 0
    for n in plan.nodes:
        if isinstance(n.op, L.WindowOp) and n.op.window.kind == "range":
            w = n.op.window
            longest = max(longest, (w.size or 0) + (w.slide or 0) + w.granularity)
    return longest


class _Track:
    """One operator's accumulators since the warm-up."""

    __slots__ = (
        "busy",
        "byte_time",
        "last_bytes",
        "last_pairs",
        "last_product",
        "last_rows",
        "last_sides",
        "last_wm",
        "pair_time",
        "product_time",
        "row_time",
        "rows_in",
        "rows_out",
        "runs",
        "side_time",
        "span",
        "start_busy",
        "start_in",
        "start_out",
        "start_runs",
        "started",
    )

    def __init__(self) -> None:
        self.started = False
        self.last_wm = NEVER
        self.last_rows = self.last_bytes = 0
        self.row_time = self.byte_time = self.span = 0.0
        self.start_in = self.start_out = 0
        self.start_busy = self.busy = 0.0
        self.rows_in = self.rows_out = 0
        self.start_runs = self.runs = 0
        # a join's key matches and the product of its sides' sizes (its selectivity's parts)
        self.last_pairs = self.last_product = 0
        self.pair_time = self.product_time = 0.0
        # a join's sides' sizes, time-weighted (its residual's share of pairs)
        self.last_sides = (0, 0)
        self.side_time = [0.0, 0.0]


class PlanMeter:
    """Measures `plan` as run by an executor whose first operators are the plan's nodes (in
    order, as `engine.build` makes them)."""

    def __init__(self, plan: PhysicalPlan, unit_seconds: float, warmup: int | None = None):
        self.plan = plan
        self.unit_seconds = unit_seconds
        self.warmup = warmup_of(plan) if warmup is None else warmup
        self.start = NEVER  # the first instant any source reached
        self.rates: dict[str, RateMeter] = {}
        self._tracks = {n.id: _Track() for n in plan.nodes}
        self._ops: list[Operator] = []

    def __call__(self, executor: Executor) -> None:
        if not self._ops:
            self._ops = executor.operators[: len(self.plan.nodes)]
        for node, op in zip(self.plan.nodes, self._ops, strict=True):
            if isinstance(node.op, L.Source) and self.start == NEVER and op.watermark != NEVER:
                self.start = op.watermark
            self._sample(self._tracks[node.id], op)
            if isinstance(node.op, L.Source) and not node.op.is_relation:
                meter = self.rates.setdefault(node.op.name, RateMeter())
                if op.watermark != NEVER:
                    meter.observe(op.watermark, op.rows_out)

    def _sample(self, t: _Track, op: Operator) -> None:
        wm = op.watermark
        if wm == NEVER or self.start == NEVER or wm < self.start + self.warmup:
            return
        rows, nbytes = op.state_size()
        advanced = not t.started or wm > t.last_wm
        if isinstance(op, Join) and advanced:
            sides = op.sides()
            pairs, product = op.key_matches(), math.prod(sides)
        else:
            sides, pairs, product = t.last_sides, t.last_pairs, t.last_product
        if not t.started:
            t.started = True
            t.last_wm, t.start_in, t.start_out, t.start_busy = wm, op.rows_in, op.rows_out, op.busy_seconds
            t.start_runs = op.run_cost.runs
        elif advanced:
            dt = wm - t.last_wm
            t.row_time += (t.last_rows + rows) / 2 * dt
            t.byte_time += (t.last_bytes + nbytes) / 2 * dt
            t.pair_time += (t.last_pairs + pairs) / 2 * dt
            t.product_time += (t.last_product + product) / 2 * dt
            for i in (0, 1):
                t.side_time[i] += (t.last_sides[i] + sides[i]) / 2 * dt
            t.span += dt
            t.last_wm = wm
        t.last_rows, t.last_bytes = rows, nbytes
        t.last_pairs, t.last_product, t.last_sides = pairs, product, tuple(sides)
        t.rows_in, t.rows_out = op.rows_in - t.start_in, op.rows_out - t.start_out
        t.busy = op.busy_seconds - t.start_busy
        t.runs = op.run_cost.runs - t.start_runs

    def finish(self, executor: Executor) -> None:
        """Take the last sample (after the run ends)."""
        self(executor)

    # -- results --------------------------------------------------------------------------------

    def measured(self) -> dict[int, Measured]:
        out = {}
        for nid, t in self._tracks.items():
            span = t.span
            out[nid] = Measured(
                rows=t.row_time / span if span else float(t.last_rows),
                bytes=t.byte_time / span if span else float(t.last_bytes),
                cpu=t.busy / (span * self.unit_seconds) if span else 0.0,
                rows_in=t.rows_in,
                rows_out=t.rows_out,
                span=span,
                runs=t.runs,
            )
        return out

    def observed(self, *, smoothed: bool = False) -> Observed:
        """The model's inputs as measured: sources' d (the mean over what they read, or the
        smoothed value for a live resource manager), selectivities, and the key counts that
        make the model reproduce each grouping's distinct keys."""
        measured = self.measured()
        source_d, row_bytes, relation_rows, delay, read_rows = {}, {}, {}, {}, {}
        selectivity: dict[int, float] = {}
        for node, op in zip(self.plan.nodes, self._ops, strict=False):
            m = measured[node.id]
            if isinstance(node.op, L.Source):
                if op.rows_out:
                    row_bytes[node.op.name] = op.output.total_bytes / max(1, op.output.total_rows)
                if node.op.is_relation:
                    relation_rows[node.op.name] = float(op.rows_out)
                else:
                    meter = self.rates.get(node.op.name)
                    d = meter.d if (meter and smoothed) else mean_distance(op)
                    if d is not None and math.isfinite(d):
                        source_d[node.op.name] = d
                    delay[node.op.name] = op.reorder.max_delay  # type: ignore[attr-defined]
                    if op.run_cost.runs:
                        read_rows[node.op.name] = op.rows_out / op.run_cost.runs
            elif isinstance(node.op, L.Filter) and m.rows_in:
                selectivity[node.id] = m.rows_out / m.rows_in
            elif isinstance(node.op, L.Join) and node.op.residual is not None:
                sel = self._residual_join_selectivity(node.id, node.inputs)
                if sel is not None:
                    selectivity[node.id] = sel
            elif isinstance(node.op, L.Join) and self._tracks[node.id].product_time > 0:
                t = self._tracks[node.id]
                selectivity[node.id] = t.pair_time / t.product_time
        obs = Observed(source_d, row_bytes, relation_rows, selectivity, {}, delay, read_rows=read_rows)
        present = {
            node.id: measured[node.id].rows
            for node in self.plan.nodes
            if measured[node.id].span
            and (isinstance(node.op, L.Distinct) or (isinstance(node.op, L.Aggregate) and node.op.keys))
        }
        return settle_groups(self.plan, obs, present, unit_seconds=self.unit_seconds)


    def _residual_join_selectivity(self, node: int, inputs: list[int]) -> float | None:
        """σ⋈ of a join with a residual predicate, which `key_matches` does not apply: its
        results over the pairs its arrivals met. Each row arriving on one side meets the other
        side's rows, and each result is a `+` then a `−`, as is each arrival, so

            σ ≈ rows out / (rows into left · mean |right| + rows into right · mean |left|)."""
        t = self._tracks[node]
        if not t.span:
            return None
        left, right = (self._tracks[i].rows_out for i in inputs)
        mean_l, mean_r = (x / t.span for x in t.side_time)
        met = left * mean_r + right * mean_l
        return min(1.0, t.rows_out / met) if met > 0 else None


def mean_distance(op: Operator) -> float | None:
    """A source's mean time between elements over all it has read."""
    first, last, n = op.first_seen, op.max_seen, op.rows_out  # type: ignore[attr-defined]
    if first == NEVER or n < 2:
        return None
    return max(last - first, 1) / (n - 1)
