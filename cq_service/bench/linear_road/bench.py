"""``cq bench linear-road``: the Linear Road pipeline's state per named view with and without
k-constraints, time per tuple, the validator's verdict, and the time compression the engine
reaches at L = 1 (docs/linear-road.md, "The benchmark").

Both runs read the same generated input; the second runs the pipeline with `CONSTRAINTS`
declared on its streams. Memory is each view's peak state (rows and bytes held by the operators
of its own plan, sampled after every engine step). The throughput figure is simulated seconds
per wall second at L = 1 — an upper bound on the sustained L if cost grows linearly with L; no
response-time (5 s) check is made here.
"""

from __future__ import annotations

import shutil
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cq_service.bench.linear_road.check import OUTPUTS, PIPELINE, _bag_minus, _key, read_outputs

__all__ = [
    "CONSTRAINTS",
    "VIEWS",
    "ViewState",
    "bench",
    "clustering_k",
    "per_car_bound",
    "with_constraints",
]

# The views the thesis measures (STREAM's names). CarExitStr is the `exiting` column of
# CurCarSeg in this pipeline, so it has no operators of its own.
VIEWS = ("CurCarSeg", "AccSeg", "CarExitStr", "NegTollStr")

# What the generator promises, declared on the pipeline's stream: a car's reports come
# clustered (CA on vid) and time is ordered (OA(0) on time). CA_K replaces the k of `ca`.
CONSTRAINTS = """    constraints:
      - {kind: ca, attribute: vid, k: CA_K}
      - {kind: oa, attribute: time, k: 0}
"""


def clustering_k(rows: Sequence[Mapping[str, int]], attribute: str = "vid") -> int:
    """The true k of CA on `attribute` in `rows` (arrival order): the most other-valued rows
    after a value's first row and before one of its later rows (thesis 003 §6.2)."""
    first: dict[int, int] = {}
    count: dict[int, int] = {}
    k = 0
    for t, r in enumerate(rows):
        v = r[attribute]
        if v in first:
            k = max(k, t - first[v] - count[v])
            count[v] += 1
        else:
            first[v], count[v] = t, 1
    return k


def per_car_bound(rows: Sequence[Mapping[str, int]]) -> dict[str, Any]:
    """The least ratio any exact reduction of per-car state can reach on `rows`: the most cars
    on the road at once (between their first and last position report, both included) over the
    cars seen. Even knowing each car's last report in advance, its row (its latest segment, its
    last reports) must be kept until then, while the plain windows keep every car seen."""
    first: dict[int, int] = {}
    last: dict[int, int] = {}
    for t, r in enumerate(rows):
        if r["type"] == 0:
            first.setdefault(r["vid"], t)
            last[r["vid"]] = t
    events = sorted([(t, 0) for t in first.values()] + [(t, 1) for t in last.values()])
    on = peak = 0
    for _, leaving in events:  # at one position a car arrives (0) before it leaves (1)
        on += -1 if leaving else 1
        peak = max(peak, on)
    seen = len(first)
    return {
        "cars_seen": seen,
        "peak_cars_on_road": peak,
        "ratio": round(peak / seen, 3) if seen else None,
    }


@dataclass
class ViewState:
    """A view's peak state: rows and bytes."""

    rows: int = 0
    bytes: int = 0


@dataclass
class Run:
    seconds: float
    states: dict[str, ViewState] = field(default_factory=dict)
    outputs: dict[str, list] = field(default_factory=dict)
    reductions: list[str] = field(default_factory=list)


def with_constraints(text: str, ca_k: int | str = "auto") -> str:
    """The pipeline text with `CONSTRAINTS` (CA's k = `ca_k`) declared on its Input stream."""
    anchor = "    source: {type: file, path: data/input.jsonl, format: jsonl}\n"
    if anchor not in text:
        raise ValueError("the Linear Road pipeline's Input source line changed")
    return text.replace(anchor, anchor + CONSTRAINTS.replace("CA_K", str(ca_k)), 1)


def _run(workdir: Path, text: str) -> Run:
    from cq_service.compiler import load_and_compile, run_plan
    from cq_service.runner import run_pipeline

    path = workdir / PIPELINE.name
    path.write_text(text)
    compiled = load_and_compile(path)
    plan = run_plan(compiled)
    owners = {f"#{n.id}": [q for q in n.queries if q in VIEWS] for n in plan.nodes}
    result = Run(0.0, {v: ViewState() for v in VIEWS})

    def sample(executor: Any) -> None:
        now: dict[str, ViewState] = {}
        for op in executor.operators:
            for view in owners.get(op.name, ()):
                rows, nbytes = op.state_size()
                s = now.setdefault(view, ViewState())
                s.rows += rows
                s.bytes += nbytes
        for view, s in now.items():
            peak = result.states[view]
            peak.rows, peak.bytes = max(peak.rows, s.rows), max(peak.bytes, s.bytes)

    start = time.perf_counter()
    report = run_pipeline(compiled, after_step=sample)
    result.seconds = time.perf_counter() - start
    result.outputs = read_outputs(workdir)
    for op in report.executor.operators:
        red = getattr(op, "reduction", None)
        if red is not None:
            result.reductions.append(f"{op.name}: {red.describe()}")
        elif getattr(op, "cluster", None) is not None:
            result.reductions.append(f"{op.name}: {op.describe_reduction()}")
    return result


def _equal(got: Mapping[str, list], want: Mapping[str, list]) -> bool:
    for name in OUTPUTS:
        gk = [_key(r) for r in got[name]]
        ek = [_key(r) for r in want[name]]
        if _bag_minus(got[name], gk, ek) or _bag_minus(want[name], ek, gk):
            return False
    return True


def bench(
    rows: Sequence[Mapping[str, int]], workdir: Path, duration: int, ca_k: int | str = "auto"
) -> dict[str, Any]:
    """Both runs over `rows` (simulated `duration` seconds at L = 1) in `workdir`, the second
    with CA(`ca_k`) on vid (`"true"`: the input's own k, `clustering_k`); the JSON report."""
    true_k = clustering_k(rows)
    if ca_k == "true":
        ca_k = true_k
    from cq_service.bench.linear_road.check import comparable_expected, write_input
    from cq_service.bench.linear_road.validator import validate

    workdir.mkdir(parents=True, exist_ok=True)
    write_input(rows, workdir)
    text = PIPELINE.read_text()
    plain = _run(workdir, text)
    constrained = _run(workdir, with_constraints(text, ca_k))
    shutil.rmtree(workdir / "out", ignore_errors=True)
    last = max((int(r["time"]) for r in rows), default=0)
    want = comparable_expected(validate(list(rows)), last)
    views = {}
    for v in VIEWS:
        a, b = plain.states[v], constrained.states[v]
        views[v] = {
            "rows_without": a.rows,
            "rows_with": b.rows,
            "bytes_without": a.bytes,
            "bytes_with": b.bytes,
            "ratio": round(b.bytes / a.bytes, 3) if a.bytes else None,
        }
    return {
        "benchmark": "linear-road",
        "scale": 1,
        "duration_s": duration,
        "input_rows": len(rows),
        "views": views,
        "constraints": [
            line.strip().removeprefix("- ").replace("CA_K", str(ca_k))
            for line in CONSTRAINTS.splitlines()[1:]
        ],
        "ca_vid_true_k": true_k,
        "per_car_bound": per_car_bound(rows),
        "reductions_in_use": constrained.reductions,
        "validated": {
            "without": _equal(plain.outputs, want),
            "with": _equal(constrained.outputs, want),
        },
        "seconds": {"without": round(plain.seconds, 2), "with": round(constrained.seconds, 2)},
        "us_per_tuple": {
            "without": round(1e6 * plain.seconds / max(len(rows), 1), 1),
            "with": round(1e6 * constrained.seconds / max(len(rows), 1), 1),
        },
        "time_compression_at_L1": {
            "without": round(duration / plain.seconds, 2) if plain.seconds else None,
            "with": round(duration / constrained.seconds, 2) if constrained.seconds else None,
        },
    }
