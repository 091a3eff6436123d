"""`cq calibrate`: the engine's per-read and per-row CPU constants (`adaptive.cpu`), measured on
this machine.

A set of calibration pipelines runs on the engine, each over two Poisson streams of random
integer keys (`bench.costmodel`) at one rate, window size, granularity and number of rows per
source read. Every pipeline holds
the same queries — equi-joins on a key with few or many values, nested-loop joins with no,
a loose or a tight residual, IN subqueries, grouped and scalar aggregations, filters and
samples of several selectivities, DISTINCT, set operations, the three relation-to-stream
operators, a view — so that, across settings, an operator kind's rows in, rows out and
candidate pairs vary independently. A `PlanMeter` measures each operator's busy seconds, rows
in and rows out, and its stream sources' reads, after the windows fill; each pipeline runs `repeat` times and the median busy
time counts (rows are the same every run).

Each kind's `KindCost` is the non-negative least-squares fit of

    seconds = per_in · rows in + per_out · rows out + per_pair · candidate pairs
              + per_read · source reads reaching it

over its samples, weighted so that every sample's *relative* error counts alike (the samples
span orders of magnitude). A nested-loop join's candidate pairs are the rows out of the same
join without its residual, which every pipeline runs over the same windows. A term whose
column is proportional to another's in every sample (a project's rows in and out) cannot be
told apart: the fit keeps the fewest terms that fit as well.

Sources are read 16 to 1 024 rows at a time (the settings vary it): every run of an operator
has a fixed cost besides its rows (its Python and Arrow calls), paid once per batch a read
sends down the plan, which `per_read` prices; `cq explain --costs` reads `BATCH_ROWS` (1 024)
rows at a time, and a live worker's reads are as large as its polls. Operators that work
instant by instant (set operations, IN subqueries) cost more per row when each instant holds
one element than when it holds hundreds: the constants are the best fit across the settings,
and the fit errors say how far that goes.
"""

from __future__ import annotations

import itertools
import json
import os
import platform
import statistics
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq

from cq_service.adaptive.cpu import BATCH_ROWS, EngineCosts, KindCost
from cq_service.adaptive.measure import PlanMeter
from cq_service.adaptive.poisson import poisson_stream
from cq_service.compiler import load_and_compile
from cq_service.cql import logical as L
from cq_service.plan.physical import PhysicalPlan
from cq_service.runner import run_pipeline

__all__ = [
    "BATCH_ROWS",
    "Calibration",
    "Fit",
    "Sample",
    "Setting",
    "calibrate",
    "fit_kind",
    "machine",
    "nnls",
    "reads_per_node",
    "settings",
]

_TIE = 1e-6  # relative residual within which a fit with fewer terms is preferred


@dataclass(frozen=True)
class Setting:
    """One calibration pipeline: streams S0 and S1 with `d` ms between elements, windows of
    `window` ms at granularity `g`, about `elements` of each stream after the windows fill,
    sources read `batch_rows` rows at a time."""

    d: float
    window: int
    g: int
    elements: int
    batch_rows: int = BATCH_ROWS

    @property
    def seconds(self) -> float:
        """Application time the streams cover: the warm-up, then `elements` elements."""
        return (self.window + self.g + self.elements * self.d) / 1_000

    @property
    def name(self) -> str:
        return f"d={self.d:g} w={self.window} g={self.g} b={self.batch_rows}"


@dataclass(frozen=True)
class Sample:
    """One operator of one calibration pipeline: busy seconds (median over the runs) for the
    rows it took in and gave out, a nested-loop join's candidate pairs and the source reads
    whose batches reached it (the sum over its inputs, as the estimate counts them)."""

    kind: str
    seconds: float
    rows_in: int
    rows_out: int
    pairs: int
    label: str  # setting and operator, for the report
    reads: float = 0.0

    def terms(self) -> tuple[float, float, float, float]:
        return (self.rows_in, self.rows_out, self.pairs, self.reads)


@dataclass(frozen=True)
class Fit:
    """A kind's constants and how well they reproduce its samples: mean and largest relative
    error, and the mean relative error of the 1 µs placeholder."""

    kind: str
    cost: KindCost
    samples: int
    error: float
    max_error: float
    placeholder_error: float

    def to_json(self) -> dict:
        return {
            "samples": self.samples,
            "mean_error": self.error,
            "max_error": self.max_error,
            "placeholder_error": self.placeholder_error,
        }


@dataclass
class Calibration:
    """What `calibrate` measured and fitted: `costs` are the constants to save."""

    costs: EngineCosts
    fits: dict[str, Fit]
    samples: list[Sample] = field(default_factory=list)
    seconds: float = 0.0  # wall time of the calibration

    def to_json(self) -> dict:
        """The constants file: `EngineCosts.to_json` plus each kind's fit (which `load` ignores)."""
        return {**self.costs.to_json(), "fit": {k: f.to_json() for k, f in self.fits.items()}}

    def save(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(self.to_json(), indent=2) + "\n")

    def text(self) -> str:
        lines = [
            f"CPU constants measured on {self.costs.machine}",
            f"{'kind':<14} {'per read':>11} {'per row in':>11} {'per row out':>11} {'per pair':>11}"
            f" {'samples':>7} {'mean err':>8} {'max err':>8} {'1 µs err':>8}",
        ]
        for kind, f in self.fits.items():
            c = f.cost
            lines.append(
                f"{kind:<14} {c.per_read:>11.3e} {c.per_in:>11.3e} {c.per_out:>11.3e} {c.per_pair:>11.3e}"
                f" {f.samples:>7} {f.error:>8.1%} {f.max_error:>8.1%} {f.placeholder_error:>8.1%}"
            )
        lines.append(
            "seconds per source read and per row; errors relative to each sample's measured busy time"
        )
        lines.append(f"calibration took {self.seconds:.0f} s")
        return "\n".join(lines)


def settings(quick: bool = False) -> list[Setting]:
    """Rates, windows, granularities and read sizes chosen so that each kind's reads, rows in,
    rows out and pairs vary independently, and instants hold one element or hundreds."""
    if quick:
        return [Setting(4.0, 2_000, 1, 4_000, 64), Setting(20.0, 20_000, 1_000, 4_000, 1_024)]
    return [
        Setting(2.0, 1_000, 1, 10_000, 1_024),
        Setting(4.0, 2_000, 1, 10_000, 64),
        Setting(4.0, 8_000, 500, 10_000, 256),
        Setting(10.0, 4_000, 100, 10_000, 16),
        Setting(20.0, 20_000, 1_000, 10_000, 1_024),
        Setting(20.0, 4_000, 1, 6_000, 16),
    ]


def _queries(window: int) -> dict[str, str]:
    """The calibration queries over S0 and S1 (with keys `a` on 0..49 and values `v` on
    0..999), with Range windows of `window` ms. The nested-loop joins read a tenth of the
    window and a fifth of the keys, their pairs growing with the square of the rows; the IN
    subquery's outer side reads a tenth of the window too."""
    w, c = f"[Range {window}]", f"[Range {max(1, window // 10)}]"
    return {
        "join_a": f"SELECT * FROM S0 {w}, S1 {w} WHERE S0.a = S1.a",
        "join_v": f"SELECT * FROM S0 {w}, S1 {w} WHERE S0.v = S1.v",
        "cross": f"SELECT * FROM S0 {c}, S1 {c} WHERE S0.a < 10 AND S1.a < 10",
        "cross_half": f"SELECT * FROM S0 {c}, S1 {c} WHERE S0.a < 10 AND S1.a < 10 AND S0.v < S1.v",
        "cross_few": f"SELECT * FROM S0 {c}, S1 {c} WHERE S0.a < 10 AND S1.a < 10"
        " AND S0.v + 950 < S1.v",
        "semi": f"SELECT a, v FROM S0 {c} WHERE a IN (SELECT a FROM S1 {w})",
        "group_a": f"SELECT a, COUNT(*) AS n, SUM(v) AS s FROM S0 {w} GROUP BY a",
        "group_v": f"SELECT v, COUNT(*) AS n FROM S1 {w} GROUP BY v",
        "scalar": f"SELECT COUNT(*) AS n, SUM(v) AS s FROM S0 {w}",
        "filter_few": f"SELECT Istream(a) FROM S0 {w} WHERE v < 100",
        "filter_most": "SELECT a, v FROM S1 WHERE v < 900",
        "sample_few": f"SELECT Istream(a) FROM S0 {w} SAMPLE(10)",
        "sample_most": f"SELECT Dstream(a) FROM S1 {w} SAMPLE(70)",
        "distinct_a": f"SELECT DISTINCT a FROM S0 {w}",
        "distinct_v": f"SELECT DISTINCT v FROM S1 {w}",
        "union": f"SELECT a FROM S0 {w} UNION SELECT a FROM S1 {w}",
        "except": f"SELECT v FROM S0 {w} EXCEPT SELECT v FROM S1 {w}",
        "union_all": f"SELECT a FROM S0 {w} UNION ALL SELECT v FROM S1 {w}",
        "rstream": "SELECT Rstream(a) FROM S1 [Rows 20]",
        "viewed": f"SELECT COUNT(*) AS n FROM half {w}",
    }


_VIEWS = {"half": "SELECT a, v FROM S1 WHERE v < 500"}  # read by `viewed`, no sink


def _pipeline(s: Setting, folder: Path, seed: int) -> Path:
    lines = ["version: 1", "name: calibrate", "time_unit: ms", "streams:"]
    for i in range(2):
        path = folder / f"S{i}.parquet"
        pq.write_table(poisson_stream(s.d, s.seconds, seed * 10 + i), path)
        lines += [
            f"  S{i}:",
            "    schema: {a: int, v: int}",
            "    timestamp: ts",
            f"    source: {{type: file, path: {path}, format: parquet}}",
        ]
    lines.append("queries:")
    for name, cql in _VIEWS.items():
        lines += [f"  {name}:", f'    cql: "{cql}"']
    for name, cql in _queries(s.window).items():
        lines += [f"  {name}:", f'    cql: "{cql}"', "    sink: {type: blackhole}"]
        if s.g > 1:
            lines.append(f"    qos: {{granularity: [{s.g}, {s.g * 2}]}}")
    path = folder / "pipeline.yaml"
    path.write_text("\n".join(lines) + "\n")
    return path


def _cross_of(plan: PhysicalPlan) -> dict[tuple[int, ...], int]:
    """Node id of the plain cross product (no keys, no residual) over each pair of inputs."""
    return {
        tuple(n.inputs): n.id
        for n in plan.nodes
        if isinstance(n.op, L.Join) and not n.op.left_keys and n.op.residual is None
    }


def reads_per_node(plan: PhysicalPlan, runs: dict[int, int]) -> dict[int, float]:
    """Source reads whose batches reach each node: a stream source's own runs, else the sum
    over the node's inputs (as `estimate_plan` counts them)."""
    out: dict[int, float] = {}
    for node in plan.nodes:
        if isinstance(node.op, L.Source):
            out[node.id] = 0.0 if node.op.is_relation else float(runs.get(node.id, 0))
        else:
            out[node.id] = sum(out[i] for i in node.inputs)
    return out


def _measure(s: Setting, seed: int, repeat: int, batch_rows: int | None) -> list[Sample]:
    """Run setting `s` `repeat` times; one sample per operator that took rows after warm-up."""
    with tempfile.TemporaryDirectory(prefix="cq-calibrate-") as tmp:
        compiled = load_and_compile(_pipeline(s, Path(tmp), seed))
        runs = []
        for _ in range(repeat):
            meter = PlanMeter(compiled.plan, unit_seconds=1e-3)
            report = run_pipeline(
                compiled, batch_rows=batch_rows or s.batch_rows, after_step=meter, cpu_time=True,
                panes=False,
            )
            meter.finish(report.executor)
            runs.append(meter.measured())
    plan = compiled.plan
    cross = _cross_of(plan)
    reads = reads_per_node(plan, {nid: m.runs for nid, m in runs[0].items()})
    samples = []
    for node in plan.nodes:
        ms = [r[node.id] for r in runs]
        m = ms[0]
        if not m.span or not (m.rows_in or m.rows_out):
            continue
        busy = statistics.median(x.cpu * x.span * 1e-3 for x in ms)
        pairs = 0
        if isinstance(node.op, L.Join) and not node.op.left_keys:
            plain = cross.get(tuple(node.inputs))
            if plain is None:
                continue  # its candidate pairs were not measured
            pairs = runs[0][plain].rows_out
        if busy > 0:
            label = f"{s.name} #{node.id} {node.kind}"
            samples.append(Sample(node.kind, busy, m.rows_in, m.rows_out, pairs, label, reads[node.id]))
    return samples


def nnls(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """min ‖a·x − b‖ subject to x ≥ 0, for a few columns: the best least-squares solution over
    every subset of columns whose solution is non-negative (the NNLS optimum is the
    unconstrained solution on its support). A subset with fewer columns wins a tie, so
    columns that are proportional to one another are not split arbitrarily.

    >>> nnls(np.array([[1.0, 0.0], [0.0, 1.0]]), np.array([2.0, -1.0])).tolist()
    [2.0, 0.0]
    """
    n = a.shape[1]
    norms = np.linalg.norm(a, axis=0)
    scaled = np.divide(a, norms, out=np.zeros_like(a, dtype=float), where=norms > 0)
    best, best_res = np.zeros(n), float(np.linalg.norm(b))
    for k in range(1, n + 1):
        for cols in itertools.combinations([j for j in range(n) if norms[j] > 0], k):
            sub = scaled[:, cols]
            x, *_ = np.linalg.lstsq(sub, b, rcond=None)
            if (x < 0).any():
                continue
            res = float(np.linalg.norm(sub @ x - b))
            if res < best_res * (1 - _TIE):
                best, best_res = np.zeros(n), res
                best[list(cols)] = x
    return np.divide(best, norms, out=np.zeros(n), where=norms > 0)


def _errors(cost: KindCost, samples: list[Sample]) -> np.ndarray:
    c = EngineCosts({"k": cost})
    return np.array([abs(c.cpu("k", *s.terms()) - s.seconds) / s.seconds for s in samples])


def fit_kind(kind: str, samples: list[Sample]) -> Fit:
    """`kind`'s constants fitted to `samples` (all of that kind) by NNLS on relative error."""
    a = np.array([s.terms() for s in samples], dtype=float)
    y = np.array([s.seconds for s in samples], dtype=float)
    x = nnls(a / y[:, None], np.ones(len(samples)))
    cost = KindCost(*(float(v) for v in x))
    err = _errors(cost, samples)
    return Fit(
        kind,
        cost,
        len(samples),
        float(err.mean()),
        float(err.max()),
        float(_errors(KindCost(), samples).mean()),
    )


def machine() -> str:
    """The CPU model, cores and Python version."""
    model = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return f"{model}, {os.cpu_count()} cores, Python {platform.python_version()}"


def calibrate(
    quick: bool = False,
    seed: int = 0,
    repeat: int | None = None,
    batch_rows: int | None = None,
    progress: Callable[[str], None] | None = None,
) -> Calibration:
    """Run the calibration pipelines and fit every kind they exercise. `repeat` runs per
    pipeline (median busy time): 3, or 1 when `quick`; sources are read `batch_rows` rows at a
    time (None: each setting's own). Kinds not exercised keep the placeholder (`KindCost()`) when the constants are used."""
    start = time.perf_counter()
    repeat = repeat or (1 if quick else 3)
    chosen = settings(quick)
    samples: list[Sample] = []
    for i, s in enumerate(chosen):
        if progress:
            progress(f"[{i + 1}/{len(chosen)}] {s.name}, {repeat} run(s)")
        samples += _measure(s, seed * 100 + i, repeat, batch_rows)
    by_kind: dict[str, list[Sample]] = {}
    for smp in samples:
        by_kind.setdefault(smp.kind, []).append(smp)
    fits = {k: fit_kind(k, v) for k, v in sorted(by_kind.items())}
    costs = EngineCosts(
        {k: f.cost for k, f in fits.items()},
        f"{machine()}; sources read {batch_rows or 'from 16 to 1 024'} rows at a time",
    )
    return Calibration(costs, fits, samples, time.perf_counter() - start)
