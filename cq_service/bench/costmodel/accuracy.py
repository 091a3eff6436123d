"""How close the cost model's memory and CPU estimates come to the engine's, out of sample.

Each case runs one query over Poisson streams of random integer keys on the real engine, with
a `PlanMeter` measuring every operator's state (averaged over application time after the
windows fill), CPU and runs. Cases cover joins of two to four streams (plan levels 2 to 4 above
the windows) and grouped and scalar aggregations, across rates, window sizes and
granularities, as brief-costmodel §6 lists them.

The experiment has two workloads. The *fit* workload (`cases`, seed `seed`) is run first: from
it come the joins' selectivities, the groupings' key counts and the sources' element sizes
(the median over its cases of each query shape) and the CPU constants of every operator kind
(`calibrate.fit_kind` over its operators). The *test* workload (`test_case`: other seeds,
every rate changed by a factor 2.5 or 3, every window doubled) is then estimated from those
and from its own settings only — its rates, windows, granularities and rows per read, which a
deployment declares before it runs — and compared with what the engine measures on it.
Nothing measured on the test workload reaches its estimate (`predict` takes the case and the
fit, never a measurement). The fit's own errors are reported too, labelled in-sample.
"""

from __future__ import annotations

import statistics
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import pyarrow.parquet as pq

from cq_service.adaptive.calibrate import Fit, Sample, fit_kind, reads_per_node
from cq_service.adaptive.cpu import EngineCosts
from cq_service.adaptive.estimate import Observed, OperatorEstimate, estimate_plan
from cq_service.adaptive.measure import Measured, PlanMeter
from cq_service.adaptive.poisson import poisson_stream
from cq_service.compiler import load_and_compile
from cq_service.cql import logical as L
from cq_service.plan.physical import PhysicalPlan
from cq_service.runner import run_pipeline

__all__ = [
    "KINDS",
    "Case",
    "CaseResult",
    "CaseRun",
    "Fitted",
    "Outcome",
    "as_json",
    "cases",
    "evaluate",
    "fit",
    "measure_case",
    "poisson_stream",
    "predict",
    "run",
    "run_case",
    "test_case",
    "text",
]

KINDS = {"WindowOp": "window", "Join": "join", "Aggregate": "aggregate"}  # operators reported


@dataclass(frozen=True)
class Case:
    """One query over `streams` Poisson streams S0, S1, …, each with `d` ms between elements,
    windows of `window` ms at granularity `g`, for `seconds` of application time. Sources are
    read in chunks of a tenth of a window (`batch_rows`), so the state is sampled often enough
    to average."""

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

    @property
    def batch_rows(self) -> int:
        return max(8, int(self.window / 10 / self.d))


def cases(quick: bool = False) -> list[Case]:
    """The fit workload: 34 cases, or 9 (every shape, both rates, fine and coarse
    granularities) of 150 s when `quick`."""
    if quick:
        s = 150.0
        return [
            Case("join2 d=10 w=2000 g=1", "join2", 10.0, 2_000, 1, s),
            Case("join2 d=40 w=10000 g=1", "join2", 40.0, 10_000, 1, s),
            Case("join2 d=10 w=10000 g=1000", "join2", 10.0, 10_000, 1_000, s),
            Case("join3 d=40 w=2000", "join3", 40.0, 2_000, 1, s),
            Case("join4 d=40 w=2000", "join4", 40.0, 2_000, 1, s),
            Case("group d=10 w=6000 g=1", "group", 10.0, 6_000, 1, s),
            Case("group d=50 w=6000 g=100", "group", 50.0, 6_000, 100, s),
            Case("scalar d=50 w=6000 g=1", "scalar", 50.0, 6_000, 1, s),
            Case("scalar d=10 w=6000 g=1000", "scalar", 10.0, 6_000, 1_000, s),
        ]
    seconds = 900.0
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
    return out


def test_case(c: Case) -> Case:
    """The out-of-sample counterpart of fit case `c`: the rate divided by 3 where it was 50/s
    or more (d ≤ 20 ms), else multiplied by 2.5; the window doubled; the same granularity,
    query shape and length."""
    d = c.d * 3 if c.d <= 20 else c.d / 2.5
    w = c.window * 2
    return Case(f"{c.shape} d={d:g} w={w} g={c.g}", c.shape, d, w, c.g, c.seconds)


test_case.__test__ = False  # type: ignore[attr-defined]  # not a pytest test


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


# -- measuring ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class CaseRun:
    """One case run on the engine `repeat` times: its plan, the model's inputs as measured
    (`observed`), each node's measurement (CPU: the median over the runs) and the CPU samples
    a calibration fits."""

    case: Case
    plan: PhysicalPlan
    observed: Observed
    measured: dict[int, Measured]
    samples: list[Sample]


def measure_case(case: Case, seed: int = 0, repeat: int = 1) -> CaseRun:
    """Run `case` on the engine `repeat` times (the median CPU counts; rows are the same)."""
    with tempfile.TemporaryDirectory(prefix="cq-costmodel-") as tmp:
        compiled = load_and_compile(_pipeline(case, Path(tmp), seed))
        meters = []
        for _ in range(repeat):
            meter = PlanMeter(compiled.plan, unit_seconds=1e-3)
            report = run_pipeline(compiled, batch_rows=case.batch_rows, after_step=meter, cpu_time=True,
                                  panes=False)
            meter.finish(report.executor)
            meters.append(meter)
    plan = compiled.plan
    runs = [m.measured() for m in meters]
    measured = {}
    for nid, first in runs[0].items():
        cpu = statistics.median(r[nid].cpu for r in runs)
        measured[nid] = Measured(first.rows, first.bytes, cpu, first.rows_in, first.rows_out, first.span, first.runs)
    reads = reads_per_node(plan, {nid: m.runs for nid, m in measured.items()})
    samples = [
        Sample(n.kind, m.cpu * m.span * 1e-3, m.rows_in, m.rows_out, 0, f"{case.name} #{n.id}", reads[n.id])
        for n in plan.nodes
        if (m := measured[n.id]).span and m.cpu > 0 and (m.rows_in or m.rows_out)
    ]
    return CaseRun(case, plan, meters[0].observed(), measured, samples)


# -- fitting and predicting -----------------------------------------------------------------------


@dataclass(frozen=True)
class Fitted:
    """What the fit workload gives the test workload's estimates: per query shape, each node's
    selectivity and key count and each source's element size (medians over the fit cases of
    that shape), and the CPU constants fitted over all its operators."""

    selectivity: dict[tuple[str, int], float]
    groups: dict[tuple[str, int], float]
    row_bytes: dict[tuple[str, str], float]
    costs: EngineCosts
    fits: dict[str, Fit]


def fit(runs: list[CaseRun]) -> Fitted:
    """Everything the model does not take from a workload's settings, from `runs` alone."""
    sel: dict[tuple[str, int], list[float]] = {}
    groups: dict[tuple[str, int], list[float]] = {}
    sizes: dict[tuple[str, str], list[float]] = {}
    by_kind: dict[str, list[Sample]] = {}
    for r in runs:
        shape = r.case.shape
        for nid, s in r.observed.selectivity.items():
            sel.setdefault((shape, nid), []).append(s)
        for nid, n in r.observed.groups.items():
            groups.setdefault((shape, nid), []).append(n)
        for name, b in r.observed.row_bytes.items():
            sizes.setdefault((shape, name), []).append(b)
        for smp in r.samples:
            by_kind.setdefault(smp.kind, []).append(smp)
    fits = {k: fit_kind(k, v) for k, v in sorted(by_kind.items())}
    costs = EngineCosts({k: f.cost for k, f in fits.items()}, "the fit workload")
    med = statistics.median
    return Fitted(
        {k: med(v) for k, v in sel.items()},
        {k: med(v) for k, v in groups.items()},
        {k: med(v) for k, v in sizes.items()},
        costs,
        fits,
    )


def predict(case: Case, plan: PhysicalPlan, fitted: Fitted) -> dict[int, OperatorEstimate]:
    """The estimate of `case` from its settings (rates, windows, granularity, rows per read)
    and `fitted` only."""
    shape = case.shape
    names = [f"S{i}" for i in range(case.streams)]
    observed = Observed(
        source_d={s: case.d for s in names},
        row_bytes={s: b for (sh, s), b in fitted.row_bytes.items() if sh == shape},
        selectivity={nid: v for (sh, nid), v in fitted.selectivity.items() if sh == shape},
        groups={nid: v for (sh, nid), v in fitted.groups.items() if sh == shape},
        max_delay={s: 0 for s in names},
        read_rows={s: float(case.batch_rows) for s in names},
    )
    return estimate_plan(plan, observed, costs=fitted.costs, unit_seconds=1e-3)


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

    def signed_cpu_error(self, label: str) -> float:
        _, _, est, meas = self.operators[label]
        return (est - meas) / meas if meas else 0.0


def _compare(run: CaseRun, est: dict[int, OperatorEstimate]) -> CaseResult:
    result = CaseResult(run.case)
    for node in run.plan.nodes:
        if node.kind in KINDS:
            m, e = run.measured[node.id], est[node.id]
            result.operators[_label(node.op, node.id)] = (e.rows, m.rows, e.cpu, m.cpu)
    return result


@dataclass
class Outcome:
    """The fit workload's results (in-sample: its own measurements in its estimate) and the
    test workload's (out of sample), with the fit between them."""

    fitted: Fitted
    in_sample: list[CaseResult]
    out_of_sample: list[CaseResult]
    repeat: int = 1


Measure = Callable[[Case, int, int], CaseRun]


def evaluate(
    fit_cases: list[Case],
    test_cases: list[Case],
    *,
    seed: int = 0,
    repeat: int = 1,
    measure: Measure = measure_case,
) -> Outcome:
    """Fit on `fit_cases` (seed `seed`), then estimate each of `test_cases` (seeds from
    `seed` + 1 000) before it runs and compare with its measurement."""
    fit_runs = [measure(c, seed + i, repeat) for i, c in enumerate(fit_cases)]
    fitted = fit(fit_runs)
    in_sample = [
        _compare(r, estimate_plan(r.plan, r.observed, costs=fitted.costs, unit_seconds=1e-3))
        for r in fit_runs
    ]
    out = []
    for i, c in enumerate(test_cases):
        test_run = measure(c, seed + 1_000 + i, repeat)
        out.append(_compare(test_run, predict(c, test_run.plan, fitted)))
    return Outcome(fitted, in_sample, out, repeat)


def run(quick: bool = False, seed: int = 0, repeat: int | None = None) -> Outcome:
    """The experiment: the fit workload and its out-of-sample counterpart. `repeat` runs per
    case (median CPU): 3, or 1 when `quick`."""
    chosen = cases(quick)
    return evaluate(chosen, [test_case(c) for c in chosen], seed=seed, repeat=repeat or (1 if quick else 3))


def run_case(case: Case, seed: int = 0) -> CaseResult:
    """In-sample: `case` estimated from its own measured rates, selectivities and key counts
    (what `cq explain --costs` shows; the memory formulas' unit tests use it), CPU from the
    shipped constants."""
    r = measure_case(case, seed)
    return _compare(r, estimate_plan(r.plan, r.observed, unit_seconds=1e-3))


# -- reporting ------------------------------------------------------------------------------------


def _by_kind(results: list[CaseResult], error: Callable[[CaseResult, str], float]) -> dict[str, list[float]]:
    out: dict[str, list[float]] = {}
    for r in results:
        for label in r.operators:
            out.setdefault(label.split("#")[0], []).append(error(r, label))
    return out


def summary(results: list[CaseResult]) -> dict[str, dict[str, float]]:
    """Per kind (window, join, aggregate): the mean, median and largest relative error of
    memory and of CPU, and the median signed CPU error (negative: underestimated)."""
    out: dict[str, dict[str, float]] = {}
    mem = _by_kind(results, CaseResult.memory_error)
    cpu = _by_kind(results, CaseResult.cpu_error)
    signed = _by_kind(results, CaseResult.signed_cpu_error)
    for kind in ("window", "join", "aggregate"):
        if kind not in mem:
            continue
        out[kind] = {
            "operators": len(mem[kind]),
            "memory_mean": statistics.fmean(mem[kind]),
            "memory_median": statistics.median(mem[kind]),
            "memory_max": max(mem[kind]),
            "cpu_mean": statistics.fmean(cpu[kind]),
            "cpu_median": statistics.median(cpu[kind]),
            "cpu_max": max(cpu[kind]),
            "cpu_signed_median": statistics.median(signed[kind]),
        }
    return out


def _levels(results: list[CaseResult]) -> dict[str, float]:
    """Mean relative memory error of joins and aggregations, by plan level."""
    by_level: dict[str, list[float]] = {}
    for r in results:
        for label in r.operators:
            if label.startswith(("join", "aggregate")):
                key = f"{label.split('#')[0]} level {r.case.level}"
                by_level.setdefault(key, []).append(r.memory_error(label))
    return {k: statistics.fmean(v) for k, v in sorted(by_level.items())}


def _cases_json(results: list[CaseResult]) -> list[dict]:
    return [
        {
            "case": r.case.name,
            "level": r.case.level,
            "batch_rows": r.case.batch_rows,
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
    ]


def as_json(o: Outcome) -> dict:
    return {
        "repeat": o.repeat,
        "out_of_sample": {
            "summary": summary(o.out_of_sample),
            "mean_memory_error_by_level": _levels(o.out_of_sample),
            "cases": _cases_json(o.out_of_sample),
        },
        "in_sample": {
            "summary": summary(o.in_sample),
            "mean_memory_error_by_level": _levels(o.in_sample),
            "cases": _cases_json(o.in_sample),
        },
        "fitted": {
            "selectivity": {f"{s}#{n}": v for (s, n), v in o.fitted.selectivity.items()},
            "groups": {f"{s}#{n}": v for (s, n), v in o.fitted.groups.items()},
            "costs": o.fitted.costs.to_json()["kinds"],
            "fit": {k: f.to_json() for k, f in o.fitted.fits.items()},
        },
    }


def _table(results: list[CaseResult]) -> list[str]:
    lines = [
        f"{'case':<30} {'rows/read':>9} {'operator':<12} {'est rows':>10} {'meas rows':>10} {'err':>7}"
        f" {'est cpu':>9} {'meas cpu':>9} {'err':>7}"
    ]
    for r in results:
        for label, (e, m, ec, mc) in r.operators.items():
            lines.append(
                f"{r.case.name:<30} {r.case.batch_rows:>9} {label:<12} {e:>10.1f} {m:>10.1f}"
                f" {r.memory_error(label):>7.1%} {ec:>9.2e} {mc:>9.2e} {r.signed_cpu_error(label):>+7.1%}"
            )
    return lines


def _summary_lines(results: list[CaseResult]) -> list[str]:
    lines = [
        f"  {'kind':<10} {'ops':>4} {'mem mean':>9} {'mem max':>8} {'cpu mean':>9} {'cpu median':>10}"
        f" {'cpu max':>8} {'cpu signed median':>18}"
    ]
    for kind, s in summary(results).items():
        lines.append(
            f"  {kind:<10} {s['operators']:>4} {s['memory_mean']:>9.2%} {s['memory_max']:>8.2%}"
            f" {s['cpu_mean']:>9.1%} {s['cpu_median']:>10.1%} {s['cpu_max']:>8.1%}"
            f" {s['cpu_signed_median']:>+18.1%}"
        )
    return lines


def text(o: Outcome) -> str:
    lines = [
        "OUT OF SAMPLE: the test workload (other seeds, rates ×2.5 or ÷3, windows ×2), estimated"
        " from its settings and the fit workload's selectivities, key counts and CPU constants",
        f"(CPU: seconds per second of application time, median of {o.repeat} run(s); cpu err signed)",
        *_table(o.out_of_sample),
        "out-of-sample errors by operator kind:",
        *_summary_lines(o.out_of_sample),
        "out-of-sample mean memory error of joins and aggregations by plan level:",
        *(f"  {k:<24} {v:.2%}" for k, v in _levels(o.out_of_sample).items()),
        "",
        "IN SAMPLE (the fit workload estimated from its own measurements: a check of the fit,"
        " not of prediction):",
        *_summary_lines(o.in_sample),
        "CPU constants fitted on the fit workload (seconds per source read, per row in, per row out):",
    ]
    for kind, f in o.fitted.fits.items():
        c = f.cost
        lines.append(
            f"  {kind:<10} {c.per_read:>10.3e} {c.per_in:>10.3e} {c.per_out:>10.3e}"
            f"  ({f.samples} samples, in-sample mean error {f.error:.1%})"
        )
    return "\n".join(lines)
