"""How close the cost model's memory and CPU estimates come to the engine's measurements.

Each case runs one query over Poisson streams of random integer keys on the real engine, with
a `PlanMeter` measuring every operator's state (averaged over application time after the
windows fill) and CPU. The model then estimates the same plan from the measured source rates,
selectivities and key counts (`adaptive.estimate`); the relative error of each operator's
memory, and of its CPU, is reported. Cases cover joins of two to four streams (plan levels 2
to 4 above the windows) and grouped and scalar aggregations, across rates, window sizes and
granularities, as brief-costmodel §6 lists them.
"""

from __future__ import annotations

import statistics
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from cq_service.adaptive.estimate import estimate_plan
from cq_service.adaptive.measure import PlanMeter
from cq_service.bench.costmodel.streams import KEYS, poisson_timestamps
from cq_service.compiler import load_and_compile
from cq_service.cql import logical as L
from cq_service.runner import run_pipeline

__all__ = ["Case", "CaseResult", "as_json", "cases", "poisson_stream", "run", "run_case", "text"]


@dataclass(frozen=True)
class Case:
    """One query over `streams` Poisson streams S0, S1, …, each with `d` ms between elements,
    windows of `window` ms at granularity `g`, for `seconds` of application time."""

    name: str
    shape: str  # join2, join3, join4, group, scalar
    d: float
    window: int
    g: int = 1
    seconds: float = 600.0

    @property
    def streams(self) -> int:
        return {"join2": 2, "join3": 3, "join4": 4}.get(self.shape, 1)

    @property
    def level(self) -> int:
        """Operators above the windows on the longest path (the paper's plan height)."""
        return {"join2": 1, "join3": 2, "join4": 3}.get(self.shape, 1)


@dataclass
class CaseResult:
    case: Case
    # operator label -> (estimated rows, measured rows, estimated cpu, measured cpu)
    operators: dict[str, tuple[float, float, float, float]] = field(default_factory=dict)

    def memory_error(self, label: str) -> float:
        est, meas, _, _ = self.operators[label]
        return abs(est - meas) / meas if meas else 0.0

    def cpu_error(self, label: str) -> float:
        _, _, est, meas = self.operators[label]
        return abs(est - meas) / meas if meas else 0.0


def cases(quick: bool = False) -> list[Case]:
    seconds = 300.0 if quick else 900.0
    out = []
    for d in (10.0, 40.0):
        for window in (2_000, 10_000):
            for g in (1, 1_000):
                if g >= window:
                    continue
                out.append(Case(f"join2 d={d:g} w={window} g={g}", "join2", d, window, g, seconds))
    for shape in ("join3", "join4"):
        out.append(Case(f"{shape} d=40 w=2000", shape, 40.0, 2_000, 1, seconds))
    for d in (10.0, 50.0):
        for window in (6_000, 60_000):
            for g in (1, 100, 1_000):
                out.append(Case(f"group d={d:g} w={window} g={g}", "group", d, window, g, seconds))
                out.append(Case(f"scalar d={d:g} w={window} g={g}", "scalar", d, window, g, seconds))
    if quick:
        out = [c for c in out if c.window <= 10_000][::2]
    return out


def poisson_stream(d: float, seconds: float, seed: int) -> pa.Table:
    """Integer millisecond timestamps with exponential gaps of mean `d`, keys uniform on
    0..KEYS-1."""
    rng = np.random.default_rng(seed)
    ts = poisson_timestamps(rng, d, seconds)
    return pa.table({"ts": ts, "a": rng.integers(0, KEYS, len(ts)), "v": rng.integers(0, 1000, len(ts))})


def _query(case: Case) -> str:
    w = f"[Range {case.window}]"
    if case.shape == "group":
        return f"SELECT a, COUNT(*) AS n, SUM(v) AS s FROM S0 {w} GROUP BY a"
    if case.shape == "scalar":
        return f"SELECT COUNT(*) AS n, SUM(v) AS s FROM S0 {w}"
    k = case.streams
    items = ", ".join(f"S{i} {w}" for i in range(k))
    where = " AND ".join(f"S0.a = S{i}.a" for i in range(1, k))
    return f"SELECT * FROM {items} WHERE {where}"


def _pipeline(case: Case, folder: Path, seed: int) -> Path:
    lines = ["version: 1", f"name: costmodel-{case.shape}", "time_unit: ms", "streams:"]
    for i in range(case.streams):
        path = folder / f"S{i}.parquet"
        pq.write_table(poisson_stream(case.d, case.seconds, seed * 10 + i), path)
        lines += [
            f"  S{i}:",
            "    schema: {a: int, v: int}",
            "    timestamp: ts",
            f"    source: {{type: file, path: {path}, format: parquet}}",
        ]
    lines += ["queries:", "  q:", f'    cql: "{_query(case)}"', "    sink: {type: blackhole}"]
    if case.g > 1:
        lines.append(f"    qos: {{granularity: [{case.g}, {case.g * 2}]}}")
    path = folder / "pipeline.yaml"
    path.write_text("\n".join(lines) + "\n")
    return path


def _label(op: L.LogicalOp, node_id: int) -> str:
    if isinstance(op, L.WindowOp):
        return f"window#{node_id}"
    return f"{type(op).__name__.lower()}#{node_id}"


def run_case(case: Case, seed: int = 0) -> CaseResult:
    """Run `case` on the engine and estimate it from what was measured. Sources are read in
    chunks of a tenth of a window, so the state is sampled often enough to average."""
    batch_rows = max(8, int(case.window / 10 / case.d))
    with tempfile.TemporaryDirectory(prefix="cq-costmodel-") as tmp:
        compiled = load_and_compile(_pipeline(case, Path(tmp), seed))
        meter = PlanMeter(compiled.plan, unit_seconds=1e-3)
        report = run_pipeline(compiled, batch_rows=batch_rows, after_step=meter)
        meter.finish(report.executor)
    measured = meter.measured()
    est = estimate_plan(compiled.plan, meter.observed(), unit_seconds=1e-3)
    result = CaseResult(case)
    for node in compiled.plan.nodes:
        if isinstance(node.op, (L.WindowOp, L.Join, L.Aggregate)):
            m, e = measured[node.id], est[node.id]
            result.operators[_label(node.op, node.id)] = (e.rows, m.rows, e.cpu, m.cpu)
    return result


def run(quick: bool = False, seed: int = 0) -> list[CaseResult]:
    return [run_case(c, seed) for c in cases(quick)]


def _summary(results: list[CaseResult]) -> dict[str, float]:
    """Mean relative memory error of joins and aggregations, by plan level."""
    by_level: dict[str, list[float]] = {}
    for r in results:
        for label in r.operators:
            if label.startswith(("join", "aggregate")):
                key = f"{label.split('#')[0]} level {r.case.level}"
                by_level.setdefault(key, []).append(r.memory_error(label))
    return {k: statistics.fmean(v) for k, v in sorted(by_level.items())}


def as_json(results: list[CaseResult]) -> dict:
    return {
        "cases": [
            {
                "case": r.case.name,
                "level": r.case.level,
                "operators": {
                    label: {
                        "estimated_rows": e,
                        "measured_rows": m,
                        "memory_error": r.memory_error(label),
                        "estimated_cpu": ec,
                        "measured_cpu": mc,
                        "cpu_error": r.cpu_error(label),
                    }
                    for label, (e, m, ec, mc) in r.operators.items()
                },
            }
            for r in results
        ],
        "mean_memory_error": _summary(results),
    }


def text(results: list[CaseResult]) -> str:
    lines = [
        f"{'case':<30} {'operator':<14} {'est rows':>10} {'meas rows':>10} {'err':>7}"
        f" {'est cpu':>9} {'meas cpu':>9} {'err':>7}"
    ]
    for r in results:
        for label, (e, m, ec, mc) in r.operators.items():
            lines.append(
                f"{r.case.name:<30} {label:<14} {e:>10.1f} {m:>10.1f} {r.memory_error(label):>7.1%}"
                f" {ec:>9.2e} {mc:>9.2e} {r.cpu_error(label):>7.1%}"
            )
    lines.append("mean memory error of joins and aggregations:")
    for k, v in _summary(results).items():
        lines.append(f"  {k:<24} {v:.2%}")
    return "\n".join(lines)
