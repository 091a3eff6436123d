"""Window reduction versus load shedding on a windowed equi-join (brief-costmodel §5, Figs. 9–11).

Two streams S(ts, a) and T(ts, a) of random integers a in 0–49 arrive at 100 tuples/s each
(Poisson: exponential gaps of mean 10 ms, integer ms timestamps), and the real engine runs

    SELECT * FROM S [Range 10 s], T [Range 10 s] WHERE S.a = T.a

three times over the same input: with the full windows, with both windows halved to 5 s, and
with the full windows but each window shedding half its tuples (p = ½). Both ways halve the
join's state; the paper's point is what they cost in results: halving the windows keeps ½ of
the results (exactly those whose two timestamps are within 5 s) and still does ½ of the probe
and result work, while shedding keeps only ¼ (a result needs both of its tuples kept) and does
¼ of it. The result tuples carry both timestamps, so every run's results are compared with the
full run's as multisets.

Measured per run: the join's state (rows and bytes, the time-weighted average over application
time after a warm-up of one window, measured by `PlanMeter`), its CPU (busy seconds, the median
over repeats, and a count that is not wall-clock noise: probe work = the join's input elements,
`+` and `−`, plus the result elements written, `+` and `−`), and the results it produced. The join's own output count is
shown too: it also holds pairs that cancel within one step (a new tuple and an expired one),
more of them the shorter the window, so it is not the model's result work.
"""

from __future__ import annotations

import statistics
import tempfile
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from cq_service.adaptive.filter_order import pipeline_orderers
from cq_service.adaptive.measure import PlanMeter
from cq_service.adaptive.poisson import KEYS, poisson_timestamps
from cq_service.compiler import compile_pipeline
from cq_service.engine.build import SourceOptions, build_executor
from cq_service.engine.executor import Executor
from cq_service.engine.operators.join import Join
from cq_service.engine.operators.range_window import RangeWindow
from cq_service.io import open_source
from cq_service.spec import load_pipeline_text

__all__ = ["RUNS", "Setting", "generate", "run", "text"]

RATE = 100  # tuples per second per stream
WINDOW_S = 10
CHUNK_ROWS = 100  # rows per source read: about 1 s of one stream, so state is seen every ~1 s


@dataclass(frozen=True)
class Setting:
    label: str
    window_s: int
    shed: float


RUNS = (
    Setting("full", WINDOW_S, 0.0),
    Setting("window", WINDOW_S // 2, 0.0),
    Setting("shedding", WINDOW_S, 0.5),
)

PIPELINE = """\
version: 1
name: costmodel-shedding
time_unit: ms
streams:
  S:
    schema: {{ts: int, a: int}}
    timestamp: ts
    source: {{type: file, path: S.parquet, format: parquet}}
  T:
    schema: {{ts: int, a: int}}
    timestamp: ts
    source: {{type: file, path: T.parquet, format: parquet}}
queries:
  join:
    cql: SELECT * FROM S [Range {w} s], T [Range {w} s] WHERE S.a = T.a
    sink: {{type: blackhole}}
"""


def generate(seconds: float, seed: int) -> dict[str, pa.Table]:
    """S and T: Poisson arrivals at `RATE` per second over `seconds`, keys uniform."""
    rng = np.random.default_rng(seed)
    tables = {}
    for name in ("S", "T"):
        ts = poisson_timestamps(rng, 1000 / RATE, seconds)
        a = rng.integers(0, KEYS, len(ts), dtype=np.int64)
        tables[name] = pa.table({"ts": ts, "a": a})
    return tables


class _Results:
    """The join's insertions (`+`), each kept as one integer: (S.ts, T.ts, a) packed."""

    def __init__(self, span: int):
        if span * span * KEYS >= 2**63:
            raise ValueError("too long a run to pack a result in an int64")
        self.span = span
        self._keys: list[np.ndarray] = []

    def write(self, ts: np.ndarray, ops: np.ndarray, columns) -> None:
        s_ts, s_a, t_ts, t_a = (np.asarray(c, dtype=np.int64) for c in columns)
        plus = ops > 0
        if not np.array_equal(s_a[plus], t_a[plus]):
            raise AssertionError("the join produced a pair with different keys")
        self._keys.append((s_ts[plus] * self.span + t_ts[plus]) * KEYS + s_a[plus])

    def flush(self) -> None:
        pass

    def close(self) -> None:
        pass

    def keys(self) -> np.ndarray:
        return np.concatenate(self._keys) if self._keys else np.empty(0, np.int64)


@dataclass
class _Run:
    state_rows: float
    state_bytes: float
    join_seconds: float
    join_in: int
    join_out: int
    result_elements: int
    probe_work: int
    results: int
    shed_in: int
    shed_dropped: int


def _run_once(folder: Path, setting: Setting, seed: int, span: int) -> tuple[_Run, np.ndarray]:
    compiled = compile_pipeline(
        load_pipeline_text(PIPELINE.format(w=setting.window_s), folder / "pipeline.yaml")
    )
    spec = compiled.spec
    readers = {
        name: open_source(spec.streams[name], spec.time_unit, CHUNK_ROWS) for name in ("S", "T")
    }
    results = _Results(span)
    executor = build_executor(
        compiled.plan,
        readers=readers,
        writers={"join": results},
        options={name: SourceOptions() for name in readers},
        filter_order=pipeline_orderers(spec),
    )
    windows = [op for op in executor.operators if isinstance(op, RangeWindow)]
    (join,) = [op for op in executor.operators if isinstance(op, Join)]
    if setting.shed:
        for k, w in enumerate(windows):  # a seed per window: S and T drop different positions
            w.shed(setting.shed, seed=2 * seed + k)
    meter = PlanMeter(compiled.plan, unit_seconds=1e-3)
    try:
        _drive(executor, meter)
    finally:
        for r in readers.values():
            r.close()
    state = meter.measured()[compiled.plan.nodes[executor.operators.index(join)].id]
    rows, nbytes = state.rows, state.bytes
    keys = results.keys()
    written = sum(s.written for s in executor.sinks)
    return _Run(
        state_rows=rows,
        state_bytes=nbytes,
        join_seconds=join.busy_seconds,
        join_in=join.rows_in,
        join_out=join.rows_out,
        result_elements=written,
        probe_work=join.rows_in + written,
        results=len(keys),
        shed_in=sum(w.shed_in for w in windows),
        shed_dropped=sum(w.shed_dropped for w in windows),
    ), keys


def _drive(executor: Executor, meter: PlanMeter) -> None:
    """Read a chunk of every source and run everything downstream, then let `meter` sample
    the state (after its warm-up, a window's length); at the end of input, let the executor
    finish."""
    while any(not s.exhausted for s in executor.sources):
        for s in executor.sources:
            if not s.exhausted:
                executor.step(s)
        executor.drain()
        meter(executor)
    executor.run()
    meter.finish(executor)


def _counts(keys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    return np.unique(keys, return_counts=True)


def _found(sub: np.ndarray, sup: tuple[np.ndarray, np.ndarray]) -> int:
    """How many elements of the multiset `sub` the multiset `sup` (values, counts) holds."""
    values, counts = _counts(sub)
    sv, sc = sup
    if len(values) == 0:
        return 0
    i = np.minimum(np.searchsorted(sv, values), max(len(sv) - 1, 0))
    hit = (sv[i] == values) if len(sv) else np.zeros(len(values), bool)
    return int(np.minimum(counts[hit], sc[i][hit]).sum())


def _checks(full: np.ndarray, window: np.ndarray, shedding: np.ndarray, span: int) -> dict:
    full_counts = _counts(full)
    pair = full // KEYS
    s_ts, t_ts = pair // span, pair % span
    close = full[np.abs(s_ts - t_ts) <= WINDOW_S * 1000 // 2]
    return {
        "window_subset": _found(window, full_counts) == len(window),
        "shedding_subset": _found(shedding, full_counts) == len(shedding),
        "close_results": len(close),
        "close_kept_by_window": _found(close, _counts(window)) / max(len(close), 1),
        "window_is_close_results": len(window) == len(close)
        and bool(np.array_equal(np.sort(window), np.sort(close))),
    }


def run(seconds: float = 600, seed: int = 0, repeats: int = 1) -> dict:
    """The three runs over one input; timings are medians over `repeats` (everything else is
    the same every time). Returns plain data: settings, per-run figures, ratios to the full
    run, and the result checks."""
    tables = generate(seconds, seed)
    span = int(seconds * 1000) + 1
    per_run: dict[str, list[_Run]] = {s.label: [] for s in RUNS}
    keys: dict[str, np.ndarray] = {}
    with tempfile.TemporaryDirectory(prefix="cq-costmodel-") as tmp:
        folder = Path(tmp)
        for name, table in tables.items():
            pq.write_table(table, folder / f"{name}.parquet")
        for _ in range(max(1, repeats)):
            for setting in RUNS:
                measured, keys[setting.label] = _run_once(folder, setting, seed, span)
                per_run[setting.label].append(measured)
    runs = {}
    for setting in RUNS:
        first = per_run[setting.label][0]
        runs[setting.label] = {
            **asdict(setting),
            **asdict(first),
            "join_seconds": statistics.median(r.join_seconds for r in per_run[setting.label]),
        }
    full = runs["full"]
    ratio_keys = ("state_rows", "state_bytes", "join_seconds", "probe_work", "results")
    ratios = {
        label: {k: runs[label][k] / full[k] if full[k] else float("nan") for k in ratio_keys}
        for label in runs
    }
    return {
        "seconds": seconds,
        "seed": seed,
        "repeats": max(1, repeats),
        "rate_per_stream": RATE,
        "keys": KEYS,
        "tuples": {name: t.num_rows for name, t in tables.items()},
        "runs": runs,
        "ratios": ratios,
        "checks": _checks(keys["full"], keys["window"], keys["shedding"], span),
    }


_PAPER = {"full": "1 / 1 / 1", "window": "½ / ½ / ½", "shedding": "½ / ¼ / ¼"}


def text(result: dict) -> str:
    """A small table: each run's figures and their ratio to the full run."""
    n = result["tuples"]
    lines = [
        f"Window reduction vs load shedding (brief-costmodel §5, Figs. 9–11): "
        f"S [Range {WINDOW_S} s] ⋈ T [Range {WINDOW_S} s] on a ∈ 0..{result['keys'] - 1}, "
        f"{result['seconds']:g} s at {result['rate_per_stream']}/s per stream "
        f"({n['S']:,} + {n['T']:,} tuples), seed {result['seed']}, "
        f"join seconds the median of {result['repeats']}",
        "",
        f"{'run':<22}{'state rows':>11}{'state kB':>10}{'join s':>9}{'probe work':>13}"
        f"{'results':>12}   {'÷ full: state':>13}{'join s':>8}{'probe':>7}{'results':>9}"
        f"   paper (state / CPU / results)",
    ]
    names = {
        "full": f"full {WINDOW_S} s windows",
        "window": f"windows {WINDOW_S // 2} s",
        "shedding": f"shed p = {result['runs']['shedding']['shed']:g}",
    }
    for label, r in result["runs"].items():
        q = result["ratios"][label]
        lines.append(
            f"{names.get(label, label):<22}{r['state_rows']:>11,.0f}{r['state_bytes'] / 1e3:>10.1f}"
            f"{r['join_seconds']:>9.2f}{r['probe_work']:>13,}{r['results']:>12,}   "
            f"{q['state_rows']:>13.3f}{q['join_seconds']:>8.3f}{q['probe_work']:>7.3f}"
            f"{q['results']:>9.3f}   {_PAPER.get(label, '')}"
        )
    c = result["checks"]
    shed = result["runs"]["shedding"]
    lines += [
        "",
        f"state bytes ÷ full: window {result['ratios']['window']['state_bytes']:.3f}, "
        f"shedding {result['ratios']['shedding']['state_bytes']:.3f}; "
        f"shedding dropped {shed['shed_dropped']:,} of {shed['shed_in']:,} tuples",
        f"results ⊆ full run's: window {_yes(c['window_subset'])}, "
        f"shedding {_yes(c['shedding_subset'])}; full-run results with timestamps within "
        f"{WINDOW_S // 2} s kept by the window run: {c['close_kept_by_window']:.1%} "
        f"(of {c['close_results']:,}; exactly those: {_yes(c['window_is_close_results'])})",
    ]
    return "\n".join(lines)


def _yes(ok: bool) -> str:
    return "yes" if ok else "NO"
