"""`cq explain --costs`: each operator's estimated memory and CPU next to what it measured.

The pipeline runs once over its sources (results are discarded, not written to its sinks)
with a `PlanMeter`; the cost model then estimates every operator from the measured source
rates, selectivities and key counts alone, so the two columns compare the model's formulas
with the engine, not the measurements with themselves.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from cq_service.adaptive.cpu import DEFAULT_PATH, EngineCosts, user_path
from cq_service.adaptive.estimate import Observed, OperatorEstimate, estimate_plan
from cq_service.adaptive.join_choice import explain_choices
from cq_service.adaptive.measure import Measured, PlanMeter, warmup_of
from cq_service.compiler import CompiledPipeline
from cq_service.plan.explain import describe
from cq_service.runner import run_pipeline
from cq_service.spec.model import SinkSpec
from cq_service.stats import human_bytes

__all__ = ["CostReport", "measure_costs", "render_costs"]


@dataclass
class CostReport:
    compiled: CompiledPipeline
    observed: Observed
    estimates: dict[int, OperatorEstimate]
    measured: dict[int, Measured]
    costs: EngineCosts
    warmup: int


def measure_costs(compiled: CompiledPipeline, batch_rows: int = 1_024) -> CostReport:
    """Run `compiled` over its sources, discarding results, and estimate it."""
    unit = compiled.spec.time_unit_ns / 1e9
    plan = compiled.plan
    quiet = replace(
        plan, sinks=[replace(s, sink=SinkSpec(type="blackhole")) for s in plan.sinks]
    )
    meter = None
    for warmup in (None, 0):  # an input shorter than the warm-up is measured from its start
        meter = PlanMeter(quiet, unit_seconds=unit, warmup=warmup)
        report = run_pipeline(
            replace(compiled, plan=quiet), batch_rows=batch_rows, after_step=meter, panes=False
        )
        meter.finish(report.executor)
        if any(m.span for m in meter.measured().values()):
            break
    observed = meter.observed()
    costs = EngineCosts.load()
    est = estimate_plan(plan, observed, costs=costs, unit_seconds=unit)
    return CostReport(compiled, observed, est, meter.measured(), costs, meter.warmup)


def _constants_origin(costs: EngineCosts) -> str:
    """Where `EngineCosts.load` found the CPU constants, and the machine they were measured on."""
    if user_path().exists():
        return f"{user_path()}, measured on {costs.machine or 'an unnamed machine'}"
    if DEFAULT_PATH.exists():
        return f"shipped defaults, measured on {costs.machine}"
    return "placeholder 1 µs per row, not calibrated (run cq calibrate)"


def _error(est: float, meas: float) -> str:
    return f"{(est - meas) / meas:+.1%}" if meas else "-"


def render_costs(r: CostReport) -> str:
    unit = r.compiled.spec.time_unit
    lines = [
        f"costs of {r.compiled.spec.name}: estimated from measured rates vs measured, after a "
        f"warm-up of {r.warmup} {unit}",
        f"CPU in seconds per second of application time; constants: {_constants_origin(r.costs)}",
        f"{'operator':<40} {'est rows':>10} {'meas rows':>10} {'err':>7} {'est bytes':>10}"
        f" {'meas bytes':>10} {'est cpu':>9} {'meas cpu':>9}",
    ]
    if not r.warmup and warmup_of(r.compiled.plan):
        lines.insert(
            1,
            "the input is shorter than the largest window: the windows never fill, so the "
            "steady-state estimates run ahead of what was measured",
        )
    for node in r.compiled.plan.nodes:
        e, m = r.estimates[node.id], r.measured[node.id]
        label = f"#{node.id} {describe(node.op)}"[:40]
        lines.append(
            f"{label:<40} {e.rows:>10.1f} {m.rows:>10.1f} {_error(e.rows, m.rows):>7}"
            f" {human_bytes(e.bytes):>10} {human_bytes(m.bytes):>10} {e.cpu:>9.2e} {m.cpu:>9.2e}"
        )
        lines.append(f"{'':<4}{e.formula}")
        if e.assumed:
            lines.append(f"{'':<4}assumed (not measured): {', '.join(e.assumed)}")
    obs = r.observed
    rates = ", ".join(f"{k} d = {v:.3g} {unit}" for k, v in obs.source_d.items())
    lines.append(f"measured: {rates or 'no stream elements'}")
    for nid, s in obs.selectivity.items():
        lines.append(f"  #{nid} selectivity {s:.4g}")
    for nid, n in obs.groups.items():
        lines.append(f"  #{nid} keys {n:.4g}")
    total_e = sum(e.bytes for e in r.estimates.values())
    total_m = sum(m.bytes for m in r.measured.values())
    lines.append(f"synopses in all: estimated {human_bytes(total_e)}, measured {human_bytes(total_m)}")
    spec = r.compiled.spec
    unit_s = spec.time_unit_ns / 1e9
    lines.extend(explain_choices(r.compiled.plan, spec.resources.join, obs, unit_s))
    return "\n".join(lines)
