"""Adaptation delays of run-time window and granularity changes (brief-costmodel §4, Fig. 7).

A change applies to tuples from its instant t on; tuples already in a window keep the interval
they were given (docs/resources.md, "Run-time window changes"). So what a change frees, or the
room it fills, shows only later:

- **Join.** `S [Range 60 s] ⋈ T [Range 60 s] WHERE S.a = T.a` over the Figs. 9–11 streams
  (Poisson, 100 tuples/s each, keys 0–49). Both windows shrink to 30 s at t = 80 s and grow
  back to 60 s at t = 150 s, through `engine.adjust` (what the worker's `LiveEngine.adjust`
  calls). The brief predicts that a change l → l' at t starts to show at t + min(l, l') and
  completes at t + max(l, l'): 110 / 140 s and 180 / 210 s. The join's state is the windows'
  current tuples (its net rows; for Γ = 1 the windows' own rows), watched with the rows the join
  holds, which also count retractions it has not consolidated yet.
- **Aggregation.** `SELECT k, COUNT(*), SUM(v) FROM S [Range 60 s] GROUP BY k` (100 tuples/s,
  keys 0–9,999) with the granularity ladder [1 ms, 20 s], Γ changed from 1 ms to 20 s at
  t = 80 s. Γ(g) rounds each new tuple's interval inward to multiples of g (l' = l − g), so
  fewer tuples are valid at once and fewer groups are present. New tuples wait for the next
  multiple of g while old ones keep leaving, so the state falls at once, in teeth of length g,
  and settles when the last old tuple leaves: at t + l.

A hook after every scheduling step makes the changes (at their instants, just before the input
reaches them), samples the watched operators' rows once per second of application time (each
at its own watermark) and feeds a `PlanMeter` until the first change: the model's level for
each setting (`estimate_plan(…, windows=…)`) starts from what was measured before anything
changed, as the resource manager's would.

**Reading the delays off the samples.** Bands of ±`BAND_SIGMAS` Poisson deviations (√rows)
around the two levels the model estimates: the change has *started* to show at the first sample
after t outside the old level's band, and is *complete* at the first sample from which on every
one is inside the new level's band. A band crossing lags the instant it marks by the band's
width over the slope, so the instants are also read off straight lines fitted to the samples
just past the exit and just before the entry (over half the stretch the state is expected to
move in a straight line: |l − l'| for a window change, one granule for Γ), where they meet the
levels measured before and after (medians). `quick` scales every time by `QUICK_SCALE`.
"""

from __future__ import annotations

import tempfile
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from cq_service.adaptive.estimate import estimate_plan
from cq_service.adaptive.measure import PlanMeter
from cq_service.adaptive.poisson import KEYS, poisson_timestamps
from cq_service.bench.costmodel.shedding import RATE
from cq_service.bench.costmodel.shedding import generate as join_streams
from cq_service.compiler import load_and_compile
from cq_service.cql import logical as L
from cq_service.engine.adjust import Adjustment
from cq_service.engine.executor import Executor
from cq_service.errors import AdjustmentError
from cq_service.plan.physical import PhysicalPlan
from cq_service.runner import run_pipeline

__all__ = [
    "AGGREGATE",
    "BAND_SIGMAS",
    "GROUP_KEYS",
    "JOIN",
    "QUICK_SCALE",
    "Change",
    "Experiment",
    "as_json",
    "chart",
    "detect",
    "run",
    "run_experiment",
    "text",
]

BAND_SIGMAS = 4.0
QUICK_SCALE = 0.5
CHUNK_ROWS = 25  # rows per source read: ¼ s of a stream, so changes and samples land on time
GROUP_KEYS = 10_000  # the aggregation's keys: the groups present follow the window's tuples


@dataclass(frozen=True)
class Change:
    """Set `knob` (engine/adjust.py: window or granularity) to `value` ms from `at` ms."""

    at: int
    knob: str
    value: int


@dataclass(frozen=True)
class Experiment:
    """Query `query` with Range windows of `window` ms at granularity `granularity` until
    `changes`, over `end` ms of input. `watch` names the state sampled ("join": the rows the
    join holds, "windows": the windows' rows, "aggregate": the groups); delays are read off
    `primary`."""

    name: str
    query: str
    window: int
    granularity: int
    changes: tuple[Change, ...]
    end: int
    watch: tuple[str, ...]
    primary: str

    def scaled(self, scale: float) -> Experiment:
        """Every instant and duration × `scale` (a granularity of 1 stays 1)."""

        def ms(x: int) -> int:
            return x if x == 1 else round(x * scale)

        changes = tuple(Change(ms(c.at), c.knob, ms(c.value)) for c in self.changes)
        return Experiment(
            self.name,
            self.query,
            ms(self.window),
            ms(self.granularity),
            changes,
            ms(self.end),
            self.watch,
            self.primary,
        )

    def settings(self) -> list[tuple[int, int, int]]:
        """(from instant, window, granularity) of each setting in turn, the first from 0."""
        out = [(0, self.window, self.granularity)]
        for c in self.changes:
            _, w, g = out[-1]
            if c.knob == "window":
                w = c.value
            else:
                g = c.value
            out.append((c.at, w, g))
        return out


JOIN = Experiment(
    "join",
    "join",
    window=60_000,
    granularity=1,
    changes=(Change(80_000, "window", 30_000), Change(150_000, "window", 60_000)),
    end=250_000,
    watch=("windows", "join"),
    primary="windows",
)
AGGREGATE = Experiment(
    "aggregation",
    "agg",
    window=60_000,
    granularity=1,
    changes=(Change(80_000, "granularity", 20_000),),
    end=200_000,
    watch=("aggregate", "windows"),
    primary="aggregate",
)

_HEAD = """\
version: 1
name: costmodel-delays
time_unit: ms
streams:
"""
_STREAM = """\
  {name}:
    schema: {{{columns}}}
    timestamp: ts
    source: {{type: file, path: {name}.parquet, format: parquet}}
"""
_QUERIES = {
    "join": """\
queries:
  join:
    cql: SELECT * FROM S [Range {w}], T [Range {w}] WHERE S.a = T.a
    sink: {{type: blackhole}}
    qos: {{window: [{lo}, {hi}]}}
""",
    "aggregation": """\
queries:
  agg:
    cql: SELECT k, COUNT(*) AS n, SUM(v) AS s FROM S [Range {w}] GROUP BY k
    sink: {{type: blackhole}}
    qos: {{granularity: [{ladder}]}}
""",
}


def _aggregate_stream(seconds: float, seed: int) -> pa.Table:
    """S(ts, k, v): Poisson arrivals at `RATE` per second, keys uniform on 0..GROUP_KEYS−1."""
    rng = np.random.default_rng(seed)
    ts = poisson_timestamps(rng, 1000 / RATE, seconds)
    k = rng.integers(0, GROUP_KEYS, len(ts), dtype=np.int64)
    return pa.table({"ts": ts, "k": k, "v": rng.integers(0, 1000, len(ts), dtype=np.int64)})


def _pipeline(exp: Experiment, folder: Path, seed: int) -> Path:
    """Write `exp`'s streams and pipeline file into `folder`; returns the file."""
    seconds = exp.end / 1000
    text = _HEAD
    if exp.name == "join":
        tables = join_streams(seconds, seed)
        columns = "ts: int, a: int"
    else:
        tables = {"S": _aggregate_stream(seconds, seed)}
        columns = "ts: int, k: int, v: int"
    for name, table in tables.items():
        pq.write_table(table, folder / f"{name}.parquet")
        text += _STREAM.format(name=name, columns=columns)
    sizes = [w for _, w, _ in exp.settings()]
    ladder = sorted({g for _, _, g in exp.settings()})
    text += _QUERIES[exp.name].format(
        w=exp.window, lo=min(sizes), hi=max(sizes), ladder=", ".join(map(str, ladder))
    )
    path = folder / "pipeline.yaml"
    path.write_text(text)
    return path


_WATCHED = {"join": L.Join, "aggregate": L.Aggregate, "windows": L.WindowOp}


def _nodes(plan: PhysicalPlan, what: str) -> tuple[int, ...]:
    return tuple(n.id for n in plan.nodes if isinstance(n.op, _WATCHED[what]))


@dataclass
class _Series:
    """Samples of the summed rows of some operators, each at their (smallest) watermark."""

    positions: list[int]  # the operators' positions in the executor
    times: list[int] = field(default_factory=list)
    rows: list[int] = field(default_factory=list)
    due: int = 0


class _Probe:
    """The hook after every step: makes `changes` of `query` once the input is within `lead`
    of their instant, samples the watched operators every `period` of application time, and
    feeds `meter` (at the same pace) until the first change."""

    def __init__(
        self,
        plan: PhysicalPlan,
        query: str,
        changes: Sequence[Change],
        watch: dict[str, tuple[int, ...]],
        period: int,
        meter: PlanMeter,
        lead: int = 2_000,
    ):
        index = {n.id: i for i, n in enumerate(plan.nodes)}
        self.query = query
        self.pending = list(changes)
        self.first = changes[0].at if changes else None
        self.period = period
        self.meter = meter
        self.lead = lead
        self.series = {k: _Series([index[n] for n in ids]) for k, ids in watch.items()}
        self.made: list[Adjustment] = []

    def __call__(self, executor: Executor) -> None:
        clock = max(s.max_seen for s in executor.sources)
        while self.pending and clock >= self.pending[0].at - self.lead:
            self._make(executor, self.pending.pop(0))
        sampled = False
        for s in self.series.values():
            ops = [executor.operators[i] for i in s.positions]
            wm = min(op.watermark for op in ops)
            if wm >= s.due:
                s.times.append(wm)
                s.rows.append(sum(op.state_size()[0] for op in ops))
                s.due = (wm // self.period + 1) * self.period
                sampled = True
        if sampled and (self.first is None or clock < self.first):
            self.meter(executor)

    def _make(self, executor: Executor, c: Change) -> None:
        reason = "bench costmodel delays"
        try:
            made = executor.adjust(self.query, c.knob, c.value, at=c.at, reason=reason)
        except AdjustmentError:  # the input is past the instant: as soon as the windows can
            made = executor.adjust(self.query, c.knob, c.value, reason=reason)
        self.made.extend(made)


def _fit_crossing(t: np.ndarray, v: np.ndarray, level: float) -> float | None:
    """Where a straight line fitted to (t, v) reaches `level` (None: under 3 points, flat)."""
    if len(t) < 3:
        return None
    b, a = np.polyfit(t.astype(float), v.astype(float), 1)
    return float((level - a) / b) if b != 0 else None


def detect(
    times: np.ndarray,
    values: np.ndarray,
    since: float,
    until: float,
    old: float,
    new: float,
    span: float,
    *,
    sigmas: float = BAND_SIGMAS,
) -> dict[str, float | None]:
    """How the samples (`times`, `values`) go from the level `old` to `new` after a change at
    `since` (and before `until`), with bands of ±`sigmas`·√level around both levels:

    - ``exit``: the first sample from `since` on outside the old band;
    - ``entry``: the first sample from which on every one is inside the new band (None when
      the last is not);
    - ``old_level``, ``new_level``: the medians of the samples within `span` before `since` up
      to the exit, and from the entry on;
    - ``start``, ``complete``: where lines fitted to the samples within `span` after the exit
      and before the entry (those between the two) meet those levels.
    """
    out: dict[str, float | None] = dict.fromkeys(
        ("exit", "entry", "start", "complete", "old_level", "new_level")
    )
    seg = (times >= since) & (times < until)
    t, v = times[seg], values[seg]
    if len(t) == 0:
        return out
    in_old = np.abs(v - old) <= sigmas * np.sqrt(max(old, 1.0))
    in_new = np.abs(v - new) <= sigmas * np.sqrt(max(new, 1.0))
    left = np.flatnonzero(~in_old)
    if len(left):
        out["exit"] = exit_ = float(t[left[0]])
    if not in_new[-1]:
        return out
    k = int(np.flatnonzero(~in_new)[-1]) + 1 if not in_new.all() else 0
    out["entry"] = entry = float(t[k])
    out["new_level"] = new_level = float(np.median(v[k:]))
    before = (times >= since - span) & (times < (exit_ if len(left) else since))
    if not len(left) or not before.any():
        return out
    out["old_level"] = old_level = float(np.median(values[before]))
    between = (t >= exit_) & (t < entry)
    first = between & (t < exit_ + span)
    out["start"] = _fit_crossing(t[first], v[first], old_level)
    last = between & (t > entry - span)
    out["complete"] = _fit_crossing(t[last], v[last], new_level)
    return out


def run_experiment(exp: Experiment, seed: int = 0, scale: float = 1.0) -> dict:
    """Run `exp` (every time × `scale`) on the engine. Returns plain data (times in ms): the
    settings with the model's level for each watched state, the changes made, the samples,
    each change's predicted and measured delays, and the steady levels measured."""
    exp = exp.scaled(scale)
    period = max(1, round(1000 * scale))
    with tempfile.TemporaryDirectory(prefix="cq-costmodel-") as tmp:
        compiled = load_and_compile(_pipeline(exp, Path(tmp), seed))
        plan = compiled.plan
        meter = PlanMeter(plan, unit_seconds=1e-3)
        watch = {w: _nodes(plan, w) for w in exp.watch}
        probe = _Probe(plan, exp.query, exp.changes, watch, period, meter)
        report = run_pipeline(compiled, batch_rows=CHUNK_ROWS, after_step=probe, panes=False)
    observed = meter.observed()
    windows = _nodes(plan, "windows")
    settings = []
    for since, w, g in exp.settings():
        est = estimate_plan(
            plan, observed, unit_seconds=1e-3, windows=dict.fromkeys(windows, (w, g))
        )
        rows = {k: sum(est[n].rows for n in ids) for k, ids in watch.items()}
        settings.append({"since": since, "window": w, "granularity": g, "estimated_rows": rows})
    samples = {k: {"t": s.times, "rows": s.rows} for k, s in probe.series.items()}
    result = {
        "experiment": exp.name,
        "scale": scale,
        "seed": seed,
        "end": exp.end,
        "rate_per_stream": RATE,
        "keys": KEYS if exp.name == "join" else GROUP_KEYS,
        "primary": exp.primary,
        "sigmas": BAND_SIGMAS,
        "wall_seconds": report.seconds,
        "adjustments": [a.to_json() for a in probe.made],
        "settings": settings,
        "samples": samples,
    }
    result["events"] = _events(exp, settings, samples, sorted({a.since for a in probe.made}))
    result["steady"] = _steady(exp, settings, samples)
    return result


def _events(exp: Experiment, settings: list[dict], samples: dict, sinces: list[int]) -> list[dict]:
    """Each change: predicted start and completion, and what `detect` reads off the primary
    state's samples."""
    t = np.asarray(samples[exp.primary]["t"], dtype=float)
    v = np.asarray(samples[exp.primary]["rows"], dtype=float)
    out = []
    for k, since in enumerate(sinces):
        a, b = settings[k], settings[k + 1]
        until = sinces[k + 1] if k + 1 < len(sinces) else exp.end
        if a["window"] != b["window"]:  # tuples admitted before keep the old length
            label = f"window {a['window'] / 1000:g} s → {b['window'] / 1000:g} s"
            low, high = sorted((a["window"], b["window"]))
            predicted = (since + low, since + high)
            span = (high - low) / 2
        else:  # new tuples wait for a granule while old ones leave, over one window
            label = f"Γ {_duration(a['granularity'])} → {_duration(b['granularity'])}"
            predicted = (since, since + a["window"])
            span = b["granularity"] / 2
        old, new = a["estimated_rows"][exp.primary], b["estimated_rows"][exp.primary]
        measured = detect(t, v, since, until, old, new, span)
        out.append({"event": label, "since": since, "predicted": predicted, "measured": measured})
    return out


def _steady(exp: Experiment, settings: list[dict], samples: dict) -> list[dict]:
    """Each setting once every tuple in the windows was admitted under it (from its instant
    plus the longer of the old and new window, the first after a window and a granule) to the
    next change: the mean of every watched state against the model's level."""
    out = []
    for k, s in enumerate(settings):
        if k == 0:
            lo = s["window"] + s["granularity"]
        else:
            lo = s["since"] + max(s["window"], settings[k - 1]["window"])
        hi = settings[k + 1]["since"] if k + 1 < len(settings) else exp.end
        measured = {}
        for what, series in samples.items():
            t, rows = np.asarray(series["t"]), np.asarray(series["rows"], dtype=float)
            inside = (t >= lo) & (t < hi)
            measured[what] = float(rows[inside].mean()) if inside.any() else None
        out.append({"from": lo, "to": hi, "estimated": s["estimated_rows"], "measured": measured})
    return out


def run(quick: bool = False, seed: int = 0) -> dict:
    """Both experiments; `quick` scales every time by `QUICK_SCALE`."""
    scale = QUICK_SCALE if quick else 1.0
    return {
        "join": run_experiment(JOIN, seed, scale),
        "aggregation": run_experiment(AGGREGATE, seed, scale),
    }


def as_json(result: dict) -> dict:
    """`result` without the samples (the chart shows them): settings, changes, delays, levels."""
    return {k: {f: v for f, v in r.items() if f != "samples"} for k, r in result.items()}


def _duration(ms: float) -> str:
    return f"{ms / 1000:g} s" if ms >= 1000 else f"{ms:g} ms"


def _s(ms: float | None) -> str:
    return "—" if ms is None else f"{ms / 1000:.1f}"


_STATES = {"windows": "windows' rows", "join": "join rows held", "aggregate": "groups"}


def text(result: dict) -> str:
    """Per change: predicted and measured start and completion; then the steady levels."""
    join, agg = result["join"], result["aggregation"]
    scale = join["scale"]
    lines = [
        "Adaptation delays (brief-costmodel §4, Fig. 7): a change at t shows from t + min(l, l') "
        "to t + max(l, l'); after a Γ change the state settles by t + l",
        f"join: S [Range {_duration(JOIN.window * scale)}] ⋈ T [Range "
        f"{_duration(JOIN.window * scale)}] on a ∈ 0..{join['keys'] - 1}, "
        f"{join['rate_per_stream']}/s per stream, state = the windows' tuples; aggregation: "
        f"COUNT(*), SUM(v) GROUP BY k over [Range {_duration(AGGREGATE.window * scale)}], "
        f"k ∈ 0..{agg['keys'] - 1:,}, {agg['rate_per_stream']}/s, state = groups; "
        f"seed {join['seed']}" + (f", times × {scale:g}" if scale != 1 else ""),
        "",
        f"{'change':<34}{'at s':>7}   {'predicted start / complete':>27}"
        f"   {'measured start / complete':>26}   {'band exit / entry':>18}",
    ]
    for r in (join, agg):
        for e in r["events"]:
            p, m = e["predicted"], e["measured"]
            lines.append(
                f"{r['experiment'] + ': ' + e['event']:<34}{_s(e['since']):>7}   "
                f"{_s(p[0]) + ' / ' + _s(p[1]):>27}   "
                f"{_s(m['start']) + ' / ' + _s(m['complete']):>26}   "
                f"{_s(m['exit']) + ' / ' + _s(m['entry']):>18}"
            )
    lines += [
        "",
        f"{'steady state':<34}{'from s':>7}{'to s':>7}   {'state':<16}{'estimated':>11}"
        f"{'measured':>11}{'÷ est':>8}",
    ]
    for r in (join, agg):
        for s, st in zip(r["settings"], r["steady"]):
            name = f"{r['experiment']}: window {_duration(s['window'])}, Γ {_duration(s['granularity'])}"
            for what in r["samples"]:
                est, meas = st["estimated"][what], st["measured"][what]
                ratio = f"{meas / est:>8.3f}" if meas is not None and est else f"{'—':>8}"
                lines.append(
                    f"{name:<34}{_s(st['from']):>7}{_s(st['to']):>7}   {_STATES[what]:<16}"
                    f"{est:>11,.0f}{(meas or 0):>11,.0f}{ratio}"
                )
                name = ""
    return "\n".join(lines)


def chart(result: dict, path: Path) -> None:
    """The join's state over time, measured (the windows' tuples and the rows the join holds)
    against the model's level moved through the predicted delays; below, the aggregation's
    groups against its levels. Written as a PNG to `path`."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(2, 1, figsize=(9, 7))
    for ax, r in zip(axes, (result["join"], result["aggregation"])):
        for what, series in r["samples"].items():
            t = np.asarray(series["t"]) / 1000
            style = {"lw": 1.2} if what == r["primary"] else {"lw": 0.8, "alpha": 0.5}
            ax.plot(t, series["rows"], label=f"measured: {_STATES[what]}", **style)
        xs, ys = _predicted_path(r)
        ax.plot(
            xs,
            ys,
            "k--",
            lw=1,
            label=f"model: {_STATES[r['primary']]}, through the predicted delays",
        )
        for k, e in enumerate(r["events"]):
            ax.axvline(
                e["since"] / 1000, color="grey", lw=0.7, ls=":", label="change" if not k else None
            )
            for j, x in enumerate(e["predicted"]):
                label = "predicted start, completion" if not (k or j) else None
                ax.axvline(x / 1000, color="tab:red", lw=0.6, ls=":", label=label)
        ax.set_xlim(0, r["end"] / 1000)
        ax.set_ylabel("rows")
        ax.legend(fontsize=7, loc="upper left")
        changes = "; ".join(f"{e['event']} at {e['since'] / 1000:g} s" for e in r["events"])
        ax.set_title(f"{r['experiment']}: {changes}", fontsize=9)
    axes[-1].set_xlabel("application time (s)")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def _predicted_path(r: dict) -> tuple[list[float], list[float]]:
    """The model's level for the primary state from the end of the warm-up, held until each
    change's predicted start and moved in a straight line to the next level by its predicted
    completion."""
    levels = [s["estimated_rows"][r["primary"]] for s in r["settings"]]
    xs, ys = [r["steady"][0]["from"] / 1000], [levels[0]]
    for k, e in enumerate(r["events"]):
        start, complete = e["predicted"]
        xs += [start / 1000, complete / 1000]
        ys += [levels[k], levels[k + 1]]
    xs.append(r["end"] / 1000)
    ys.append(levels[len(r["events"])])
    return xs, ys
