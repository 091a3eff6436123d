"""Scalability of the resource manager in the spirit of the paper's Fig. 12 (brief-costmodel §5).

The paper's random plan mix (`querymix`: 50 Poisson sources, joins, aggregations, QoS ranges,
weights) on the paper's timeline × `scale`: the initial queries, a trickle of new ones from
1 h, a burst at 2 h; memory over time against the budget. Two modes:

**Engine mode** (`run_engine`, hundreds of queries). The real `Worker`, with an SQLite catalog,
runs the generated pipeline file with `resources.memory_budget`: admission control at deploy,
`BudgetKeeper.tick` every `manage_every` of application time, every change through
`Worker.adjust` and on record in the catalog. A query arrives by a change of the pipeline file
and `Worker.reconcile`, one query per change, as queries arrive in the paper's timeline. Each
stream is a parquet file released up to the bench's clock, with a heartbeat at the clock, as
an up-to-date live source delivers it (`_Paced`): every source keeps the same application
time, and a stream first read later starts at the clock. The pipelines use the round-robin
scheduler: Chain's choice scans every operator at each step, which at thousands of operators
would take most of the run, and the order changes what waits in queues, not the state
measured here. Every `step` of application time the sources deliver, the worker steps and
the operators' state is sampled (`state_size`, as the keeper measures it).

**Model mode** (`run_model`, the paper's 5,000 queries). No engine: one `ManagedQuery` per
query with an `Observed` built from what the generator knows. Rounds at every arrival and
every `manage_every`: `admit` the arrivals (and the queries rejected before, as the worker
retries them), then `decide`, applied with the worker's band (shrink when the estimate passes
the target, grow back below (1 − grow_margin) of it, aim halfway). Memory follows each
query's settings with the engine's delays (`_History`): a new query fills up over its window,
and a change l → l' at t shows from t + min(l, l') to t + max(l, l'). How long `decide` takes
for 5,000 queries is the scalability figure; it is called as the worker calls it.

In both, the budget is a share of what the initial queries need at full precision by the
model (the generator's rates, selectivities and keys); every setting on record is checked
against its query's ranges, and every rejection is kept with its reason.
"""

from __future__ import annotations

import tempfile
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from cq_service.adaptive.manager import Budget, ManagedQuery, admit, decide
from cq_service.bench.costmodel.querymix import (
    COLUMNS,
    NESTED_LOOPS,
    RATE_PER_MIN,
    GenQuery,
    Mix,
    Timeline,
    generate,
    managed_queries,
    need,
    pipeline_text,
    write_streams,
)
from cq_service.catalog import Catalog
from cq_service.io.base import RawChunk
from cq_service.service.config import ServiceConfig
from cq_service.service.views import window_settings
from cq_service.service.worker import Worker
from cq_service.stats import human_bytes

__all__ = [
    "ENGINE",
    "MODEL",
    "as_json",
    "chart",
    "run",
    "run_engine",
    "run_mode",
    "run_model",
    "summary",
    "text",
]

# -- engine mode: the real worker ---------------------------------------------------------------

PIPELINE = "scalability"


@dataclass
class _Clock:
    """The bench's application time (ms): what the live sources have delivered up to."""

    now: int = -1


class _Paced:
    """A file source's reader released up to the clock: each read gives the rows at or before
    it, with a heartbeat at it, as a live source that is up to date would (an idle Kafka
    partition included). Rows before `start` (a stream first read after 0) are skipped: a
    live source opened then would not have them. The bench's files are small: read at once."""

    def __init__(self, reader: Any, clock: _Clock, start: int):
        self.reader = reader
        self.clock = clock
        chunks = list(reader)
        if chunks:
            self.rows = _concat(chunks)
        else:  # every column of the bench's streams is an int
            empty = np.zeros(0, dtype=np.int64)
            columns = tuple(pa.array([], pa.int64()) for _ in COLUMNS)
            self.rows = RawChunk(columns, empty, empty.astype(np.int8), empty)
        self.at = int(np.searchsorted(self.rows.ts, start, side="left"))

    def read(self) -> RawChunk:
        now = self.clock.now
        end = max(self.at, int(np.searchsorted(self.rows.ts, now, side="right")))
        out = _slice(self.rows, self.at, end)
        self.at = end
        return replace(out, heartbeat=now)


def _slice(c: RawChunk, a: int, b: int) -> RawChunk:
    return RawChunk(
        tuple(col.slice(a, b - a) for col in c.columns), c.ts[a:b], c.ops[a:b], c.record[a:b]
    )


def _concat(parts: list[RawChunk]) -> RawChunk:
    if len(parts) == 1:
        return parts[0]
    columns = tuple(
        pa.concat_arrays([p.columns[i] for p in parts]) for i in range(len(parts[0].columns))
    )
    return RawChunk(
        columns,
        np.concatenate([p.ts for p in parts]),
        np.concatenate([p.ops for p in parts]),
        np.concatenate([p.record for p in parts]),
    )


@dataclass
class _Series:
    """Samples over application time (ms): measured and estimated bytes, queries running,
    queries rejected so far."""

    t: list[int] = field(default_factory=list)
    measured: list[float] = field(default_factory=list)
    estimated: list[float] = field(default_factory=list)
    running: list[int] = field(default_factory=list)
    rejected: list[int] = field(default_factory=list)

    def add(self, t: int, measured: float, estimated: float, running: int, rejected: int) -> None:
        self.t.append(t)
        self.measured.append(measured)
        self.estimated.append(estimated)
        self.running.append(running)
        self.rejected.append(rejected)

    def to_json(self) -> dict[str, list]:
        return dict(self.__dict__)


def run_engine(
    mix: Mix,
    folder: Path,
    budget: float,
    *,
    step: int | None = None,
    progress: Callable[[str], None] | None = None,
) -> dict[str, Any]:
    """Run `mix` on a real worker with `budget` bytes, in `folder` (streams, pipeline file,
    catalog). Every `step` ms of application time (default: 30 s of the paper's) the sources
    deliver up to the clock and the worker steps; the arrivals are deployed at their instants
    and the manager runs every `manage_every`. Returns plain data: the setup, the samples,
    the rejections, the changes made and the checks."""
    tl = mix.timeline
    end = tl.ms(tl.end)
    step = step or tl.ms(30_000)
    folder.mkdir(parents=True, exist_ok=True)
    pipelines = folder / "pipelines"
    pipelines.mkdir(exist_ok=True)
    write_streams(mix, pipelines, end)
    catalog = Catalog(f"sqlite:///{folder / 'catalog.db'}")
    catalog.upgrade()
    config = ServiceConfig(
        pipelines=str(pipelines),
        catalog=catalog.url,
        port=0,
        checkpoint_interval=1e9,
        reconcile_interval=1e9,
        manage_interval=0,  # the bench runs the manager on application time
    )
    worker = Worker(config, catalog)
    clock = _Clock()
    path = pipelines / f"{PIPELINE}.yaml"
    arrivals = sorted({q.arrives for q in mix.queries})
    deployed: list[GenQuery] = []  # the queries in the pipeline file
    rejected: dict[str, dict[str, Any]] = {}
    series = _Series()
    ticks: list[float] = []
    deploys: list[float] = []
    started = time.perf_counter()

    def deploy(t: int) -> None:
        """The queries arriving at `t`, one file change and reconcile each (see the module's
        notes), so each is admitted against everything deployed before it; a rejected one
        is taken out of the file again."""
        arriving = [q for q in mix.queries if q.arrives == t]
        for q in arriving:
            t0 = time.perf_counter()
            deployed.append(q)
            path.write_text(pipeline_text(mix, deployed, budget, PIPELINE))
            for result in worker.reconcile():
                for name, reason in result.rejected.items():
                    rejected[name] = {"query": name, "at": t, "reason": reason}
            if q.name in rejected:
                deployed.remove(q)
            for op in worker.engine.sources.values():
                if not isinstance(op.reader, _Paced):
                    op.reader = _Paced(op.reader, clock, clock.now + 1)
            deploys.append(time.perf_counter() - t0)
        if progress is not None and len(arriving) > 5:
            progress(
                f"t = {t / 1000:g} s: deployed {len(arriving)} queries, {len(rejected)} rejected"
            )

    def sample(t: int) -> None:
        ops = worker.engine.operators_of(PIPELINE)
        state = worker.budgets.states.get(PIPELINE)
        running = sum(1 for q in worker.queries.values() if q.pipeline == PIPELINE)
        series.add(
            t,
            float(sum(op.state_size()[1] for op in ops)),
            state.estimated.memory if state is not None else 0.0,
            running,
            len(rejected),
        )

    due_tick = tl.ms(tl.manage_every)
    t = 0
    while t <= end:
        while arrivals and arrivals[0] <= t:
            deploy(arrivals.pop(0))
        clock.now = t
        worker.step()
        if t >= due_tick:
            t0 = time.perf_counter()
            worker.budgets.tick()
            ticks.append(time.perf_counter() - t0)
            due_tick += tl.ms(tl.manage_every)
        sample(t)
        if progress is not None and t % (50 * step) < step:
            progress(
                f"t = {t / 1000:.0f} s: {series.running[-1]} queries, "
                f"{human_bytes(series.measured[-1])} measured, "
                f"{time.perf_counter() - started:.0f} s"
            )
        t += step
    wall = time.perf_counter() - started
    state = worker.budgets.states[PIPELINE]
    log = worker.catalog.adjustments(PIPELINE)
    settings = window_settings(worker)
    worker.stop()
    catalog.close()
    return {
        "mode": "engine",
        "budget": budget,
        "reserve": state.budget.reserve,
        "step": step,
        "series": series.to_json(),
        "rejections": sorted(rejected.values(), key=lambda r: (r["at"], r["query"])),
        "changes": _changes(log),
        "checks": _check_settings(mix, log, settings),
        "tick_seconds": ticks,
        "deploy_seconds": deploys,
        "wall_seconds": wall,
    }


def _changes(log: list) -> dict[str, int]:
    """Changes on record by kind."""
    out: dict[str, int] = {}
    for r in log:
        out[r.kind] = out.get(r.kind, 0) + 1
    return out


def _check_settings(mix: Mix, log: list, settings: dict) -> dict[str, Any]:
    """Every window size and granularity on record, and every one in force at the end, against
    the query's generated range and ladder."""
    by_name = {q.name: q for q in mix.queries}
    outside = []
    checked = 0

    def check(query: str, knob: str, value: int, where: str) -> None:
        nonlocal checked
        q = by_name[query]
        lo, hi = q.window
        ok = lo <= value <= hi if knob == "window" else value in q.ladder
        checked += 1
        if not ok:
            outside.append({"query": query, "knob": knob, "value": value, "where": where})

    for r in log:
        if r.kind in ("window", "granularity"):
            check(r.query, r.kind, int(r.detail["new"]), "log")
    for (_, query, _), (size, granularity) in settings.items():
        check(query, "window", size, "end")
        check(query, "granularity", granularity, "end")
    return {"settings_checked": checked, "outside": outside}


# -- model mode: the manager alone, at the paper's scale ----------------------------------------


@dataclass
class _History:
    """One query's settings over time, as (from instant, largest window l, memory M at those
    settings). A window holds the tuples of the last l time units, each kept for the length it
    was given on arrival, so at τ the setting from a to b (the next one's start) holds
    M·|[max(a, τ − l), min(b, τ)]| / l: a new query fills up over its window, and a change
    l → l' at t shows from t + min(l, l') to t + max(l, l') (brief §4; a granularity change
    alone, over t to t + l)."""

    steps: list[tuple[float, float, float]] = field(default_factory=list)

    def set(self, t: float, window: float, memory: float) -> None:
        self.steps.append((t, max(window, 1.0), memory))

    def at(self, t: float) -> float:
        total = 0.0
        for k, (a, w, m) in enumerate(self.steps):
            b = self.steps[k + 1][0] if k + 1 < len(self.steps) else t
            total += m * max(0.0, min(b, t) - max(a, t - w)) / w
        return total

    def forget(self, t: float) -> None:
        """Drop the settings that hold nothing from `t` on."""
        while len(self.steps) > 1 and self.steps[1][0] <= t - self.steps[0][1]:
            self.steps.pop(0)


def _largest(settings: dict[str, tuple[int, int]]) -> int:
    return max((s for s, _ in settings.values()), default=0)


def run_model(
    mix: Mix,
    folder: Path,
    budget: float,
    *,
    reserve: float = 0.1,
    grow_margin: float = 0.1,
    progress: Callable[[str], None] | None = None,
) -> dict[str, Any]:
    """The manager over `mix` with no engine: rounds at every arrival and every `manage_every`
    (`admit` for the arrivals, then `decide` with the worker's band: shrink past the target,
    grow back below (1 − grow_margin) of it, aiming halfway). Memory follows each query's
    settings with the delays of brief §4. Returns plain data like `run_engine`'s, with each
    round's time."""
    tl = mix.timeline
    end = tl.ms(tl.end)
    limit = Budget(budget, budget * reserve)
    aim = Budget(limit.target * (1 - grow_margin / 2))
    folder.mkdir(parents=True, exist_ok=True)
    write_streams(mix, folder, 0)
    t0 = time.perf_counter()
    managed = {q.key: q for q in managed_queries(mix, list(mix.queries), folder)}
    build_seconds = time.perf_counter() - t0
    arrivals = sorted({q.arrives for q in mix.queries})
    every = tl.ms(tl.manage_every)
    rounds = sorted(set(arrivals) | set(range(every, end + 1, every)))
    running: list[ManagedQuery] = []
    settings: dict[str, dict[str, tuple[int, int]]] = {}
    keep: dict[str, float] = {}  # the share of its input a query keeps (shedding the rest)
    paths: dict[str, _History] = {}
    rejected: dict[str, dict[str, Any]] = {}
    log: list[tuple[int, str, str, int]] = []  # (instant, query, knob, value)
    timings: list[dict[str, float]] = []
    series = _Series()
    sample_every = tl.ms(30_000)
    next_sample = 0

    def memory(t: float) -> float:
        for p in paths.values():
            p.forget(t)
        return sum(p.at(t) for p in paths.values())

    def estimated() -> float:
        return sum(q.cost(settings[q.key], keep[q.key]).memory for q in running)

    def change(t: int, q: ManagedQuery, new: dict[str, tuple[int, int]], kept: float) -> None:
        old = settings[q.key]
        paths[q.key].set(t, _largest(new), q.cost(new, kept).memory)
        settings[q.key] = new
        for label, (size, g) in new.items():
            if size != old[label][0]:
                log.append((t, q.key, "window", size))
            if g != old[label][1]:
                log.append((t, q.key, "granularity", g))
        if kept != keep[q.key]:
            log.append((t, q.key, "shed", 1.0 - kept))
        keep[q.key] = kept

    for t in rounds:
        while next_sample <= t:
            series.add(next_sample, memory(next_sample), estimated(), len(running), len(rejected))
            next_sample += sample_every
        new = [managed[q.name] for q in mix.queries if q.arrives == t]
        took: dict[str, float] = {"t": t, "queries": len(running) + len(new)}
        if new:
            c0 = time.perf_counter()
            admitted, turned = admit(running, new, limit)
            took["admit"] = time.perf_counter() - c0
            for q in admitted:
                s = q.settings(1.0, 1.0)  # a new query starts at its file's settings
                settings[q.key] = s
                keep[q.key] = 1.0
                paths[q.key] = _History()
                paths[q.key].set(t, _largest(s), q.cost(s).memory)
                running.append(q)
            for r in turned:
                rejected[r.query] = {"query": r.query, "at": t, "reason": r.reason}
        c0 = time.perf_counter()
        decision = decide(running, aim)
        took["decide"] = time.perf_counter() - c0
        timings.append(took)
        current = estimated()
        fits_now = current <= limit.target
        room = current < limit.target * (1 - grow_margin)
        finer = any(
            _finer(decision.settings[q.key], settings[q.key]) or decision.keep[q.key] > keep[q.key]
            for q in running
        )
        if not fits_now or (room and finer):
            for q in running:
                want, kept = decision.settings[q.key], decision.keep[q.key]
                if want != settings[q.key] or kept != keep[q.key]:
                    change(t, q, want, kept)
        if progress is not None:
            progress(
                f"t = {t / 1000:.0f} s: {len(running)} queries, decide {took['decide']:.2f} s, "
                f"{human_bytes(memory(t))} modelled"
            )
    while next_sample <= end:
        series.add(next_sample, memory(next_sample), estimated(), len(running), len(rejected))
        next_sample += sample_every
    return {
        "mode": "model",
        "budget": budget,
        "reserve": limit.reserve,
        "series": series.to_json(),
        "rejections": sorted(rejected.values(), key=lambda r: (r["at"], r["query"])),
        "changes": {k: sum(1 for e in log if e[2] == k) for k in ("window", "granularity", "shed")},
        "checks": _check_model(mix, log, settings),
        "rounds": timings,
        "build_seconds": build_seconds,
        "wall_seconds": time.perf_counter() - t0,
    }


def _finer(want: dict[str, tuple[int, int]], now: dict[str, tuple[int, int]]) -> bool:
    return any(s > now[k][0] or g < now[k][1] for k, (s, g) in want.items())


def _check_model(mix: Mix, log: list, settings: dict) -> dict[str, Any]:
    """`_check_settings` for the model's own log and final settings."""
    by_name = {q.name: q for q in mix.queries}
    outside = []
    checked = 0
    final = [(q, "window", s) for q, ss in settings.items() for s, _ in ss.values()]
    final += [(q, "granularity", g) for q, ss in settings.items() for _, g in ss.values()]
    for query, knob, value in [(q, k, v) for _, q, k, v in log if k != "shed"] + final:
        lo, hi = by_name[query].window
        ok = lo <= value <= hi if knob == "window" else value in by_name[query].ladder
        checked += 1
        if not ok:
            outside.append({"query": query, "knob": knob, "value": value})
    return {"settings_checked": checked, "outside": outside}


# -- the experiment as `cq bench costmodel` runs it --------------------------------------------

SCALE = 0.1  # every duration of the paper's × this: 2 h 30 min become 15 min
QUICK_SCALE = 0.02
ENGINE = Timeline(initial=120, trickle=2, burst=60, scale=SCALE)
ENGINE_QUICK = Timeline(initial=24, trickle=1, burst=12, scale=QUICK_SCALE)
MODEL = Timeline(manage_every=600_000, scale=SCALE)  # the paper's 5,000, 10 per 72 s and 500
MODEL_QUICK = Timeline(initial=1_000, trickle=2, burst=100, manage_every=600_000, scale=SCALE)
# The budget: this share of what the initial queries need at full precision. Shorter windows
# (the quick run's) make the multi-way joins' full need less extreme, so the minimum settings
# are a larger share of it.
ENGINE_SHARE = 0.5
ENGINE_QUICK_SHARE = 0.7
MODEL_SHARE = 0.2


def run_mode(
    mode: str,
    timeline: Timeline,
    share: float,
    seed: int = 0,
    nested_loops: float = NESTED_LOOPS,
    progress: Callable[[str], None] | None = None,
) -> dict[str, Any]:
    """One mode ("engine" or "model") over the mix of `timeline`, with a budget of `share` of
    what its initial queries need at full precision (by the model)."""
    mix = generate(timeline, seed, nested_loops=nested_loops)
    with tempfile.TemporaryDirectory(prefix="cq-scalability-") as tmp:
        folder = Path(tmp)
        (folder / "need").mkdir()
        write_streams(mix, folder / "need", 0)
        initial = managed_queries(mix, mix.arrived(0), folder / "need")
        full, least = need(initial, 1.0), need(initial, 0.0)
        budget = share * full
        runner = run_engine if mode == "engine" else run_model
        result = runner(mix, folder / mode, budget, progress=progress)
    result.update(
        seed=seed,
        timeline=asdict(timeline),
        arrivals=timeline.arrivals(),
        kinds=mix.kinds,
        nested_loops=nested_loops,
        streams=len(mix.rates),
        share=share,
        need_full=full,
        need_least=least,
    )
    result["summary"] = summary(result)
    return result


def run(
    quick: bool = False,
    seed: int = 0,
    nested_loops: float = NESTED_LOOPS,
    progress: Callable[[str], None] | None = None,
) -> dict[str, dict[str, Any]]:
    """Both modes: the engine's hundreds of queries and the model's 5,000 (`quick`: fewer,
    and the engine's times × QUICK_SCALE)."""
    engine = (ENGINE_QUICK, ENGINE_QUICK_SHARE) if quick else (ENGINE, ENGINE_SHARE)
    model = MODEL_QUICK if quick else MODEL
    return {
        "engine": run_mode("engine", *engine, seed, nested_loops, progress),
        "model": run_mode("model", model, MODEL_SHARE, seed, nested_loops, progress),
    }


def summary(r: dict[str, Any]) -> dict[str, Any]:
    """The numbers the report gives: peaks against the budget, queries, changes, timings."""
    s = r["series"]
    t = np.asarray(s["t"], dtype=float)
    m = np.asarray(s["measured"], dtype=float)
    budget, reserve = r["budget"], r["reserve"]
    tl = Timeline(**r["timeline"])
    burst = tl.ms(tl.burst_at)
    peak = int(np.argmax(m)) if len(m) else 0
    out: dict[str, Any] = {
        "max_bytes": float(m.max()) if len(m) else 0.0,
        "max_at": float(t[peak]) if len(m) else 0.0,
        "max_over_budget": float(m.max() / budget) if len(m) else 0.0,
        "max_over_budget_plus_reserve": float(m.max() / (budget + reserve)) if len(m) else 0.0,
        "within_budget_plus_reserve": bool((m <= budget + reserve).all()),
        "samples_over_budget": int((m > budget).sum()),
        "samples": len(m),
        "arrived": sum(n for _, n in r["arrivals"]),
        "running_at_end": s["running"][-1] if s["running"] else 0,
        "rejected": len(r["rejections"]),
        "rejected_at_burst": sum(1 for x in r["rejections"] if x["at"] == burst),
        "settings_checked": r["checks"]["settings_checked"],
        "settings_outside": len(r["checks"]["outside"]),
        "changes": r["changes"],
        "wall_seconds": r["wall_seconds"],
    }
    if r["mode"] == "engine":
        out["tick_seconds"] = _stats(r["tick_seconds"])
        out["deploy_seconds"] = _stats(r["deploy_seconds"])
    else:
        out["decide_seconds"] = _stats([x["decide"] for x in r["rounds"]])
        out["first_decide"] = r["rounds"][0]["decide"] if r["rounds"] else 0.0
        out["largest_decide"] = max(
            (x for x in r["rounds"]), key=lambda x: x["queries"], default={"queries": 0}
        )
    return out


def _stats(xs: list[float]) -> dict[str, float]:
    if not xs:
        return {"n": 0, "mean": 0.0, "max": 0.0, "total": 0.0}
    return {
        "n": len(xs),
        "mean": float(np.mean(xs)),
        "max": float(max(xs)),
        "total": float(sum(xs)),
    }


def as_json(result: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """`result` as stored, bytes rounded to whole bytes."""
    out = {}
    for mode, r in result.items():
        series = {
            k: [round(x) for x in v] if k in ("measured", "estimated") else v
            for k, v in r["series"].items()
        }
        out[mode] = {**r, "series": series}
    return out


def _minutes(ms: float) -> str:
    s = ms / 1000
    return f"{s / 60:g} min" if s >= 60 and s % 60 == 0 else f"{s:g} s"


def text(result: dict[str, dict[str, Any]]) -> str:
    """The report: each mode's setup, its peak memory against the budget, the queries admitted
    and rejected (with reasons), the changes and the manager's time."""
    lines = ["Scalability (brief-costmodel §5, Fig. 12): memory over time against the budget"]
    for mode, r in result.items():
        lines += ["", *_mode_text(mode, r)]
    return "\n".join(lines)


def _mode_text(mode: str, r: dict[str, Any]) -> list[str]:
    tl = Timeline(**r["timeline"])
    s = r["summary"]
    kinds = ", ".join(f"{k} {n}" for k, n in r["kinds"].items())
    trickle = [a for a in r["arrivals"][1:] if a[1] == tl.trickle]
    title = (
        "engine mode (the worker, pipeline file → deploy → admission → manager → adjustments)"
        if mode == "engine"
        else "model mode (adaptive.manager alone, memory from the model with delays)"
    )
    lines = [
        f"{title}, times × {tl.scale:g}, seed {r['seed']}",
        f"  queries: {tl.initial:,} at 0, {tl.trickle} every {_minutes(tl.ms(tl.trickle_every))} "
        f"from {_minutes(tl.ms(tl.trickle_from))} ({len(trickle)} times), {tl.burst} at "
        f"{_minutes(tl.ms(tl.burst_at))}, end {_minutes(tl.ms(tl.end))}; manager every "
        f"{_minutes(tl.ms(tl.manage_every))}",
        f"  mix: {kinds}; {r['nested_loops']:.0%} of joins nested-loop; {r['streams']} Poisson "
        f"streams at {RATE_PER_MIN[0]:g}–{RATE_PER_MIN[1]:g} tuples/min",
        f"  budget {human_bytes(r['budget'])} = {r['share']:.0%} of the "
        f"{human_bytes(r['need_full'])} the initial queries need at full precision (model; "
        f"{human_bytes(r['need_least'])} at their minimum settings); reserve "
        f"{human_bytes(r['reserve'])}, target {human_bytes(r['budget'] - r['reserve'])}",
        f"  {'measured' if mode == 'engine' else 'modelled'} memory: max "
        f"{human_bytes(s['max_bytes'])} at {s['max_at'] / 1000:g} s = "
        f"{s['max_over_budget']:.3f} × budget = {s['max_over_budget_plus_reserve']:.3f} × "
        f"(budget + reserve): {'never over' if s['within_budget_plus_reserve'] else 'OVER'} "
        f"budget + reserve; {s['samples_over_budget']} of {s['samples']} samples over the budget",
        f"  queries: {s['arrived']:,} arrived, {s['running_at_end']:,} running at the end, "
        f"{s['rejected']} rejected by admission control ({s['rejected_at_burst']} of them in the "
        f"burst), each taken out of the file again",
        f"  settings: {', '.join(f'{n:,} {k}' for k, n in s['changes'].items()) or 'no change'}; "
        f"{s['settings_checked']:,} checked against their ranges, {s['settings_outside']} outside",
    ]
    if mode == "engine":
        tk, dp = s["tick_seconds"], s["deploy_seconds"]
        lines.append(
            f"  manager rounds: {tk['n']}, mean {tk['mean']:.2f} s, max {tk['max']:.2f} s; "
            f"deploys: {dp['n']}, mean {dp['mean']:.2f} s; run {s['wall_seconds'] / 60:.1f} min"
        )
    else:
        dc, big = s["decide_seconds"], s["largest_decide"]
        lines.append(
            f"  decide: first round ({r['rounds'][0]['queries']:,} queries, no estimate cached) "
            f"{s['first_decide']:.1f} s; at the most queries ({big['queries']:,}) "
            f"{big.get('decide', 0):.1f} s; {dc['n']} rounds, mean {dc['mean']:.2f} s; "
            f"building the queries {r['build_seconds']:.0f} s; run {s['wall_seconds'] / 60:.1f} min"
        )
    for x in r["rejections"][:REJECTIONS_SHOWN]:
        lines.append(f"  rejected {x['query']} at {x['at'] / 1000:g} s: {x['reason']}")
    if len(r["rejections"]) > REJECTIONS_SHOWN:
        lines.append(f"  … and {len(r['rejections']) - REJECTIONS_SHOWN} more (the JSON has all)")
    return lines


REJECTIONS_SHOWN = 5


def chart(r: dict[str, Any], path: Path) -> None:
    """Memory over time against the budget (and budget ± reserve), the arrivals marked; below,
    the queries running and rejected. Written as a PNG to `path`."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    tl = Timeline(**r["timeline"])
    s = r["series"]
    t = np.asarray(s["t"]) / 1000
    mib = 2**20
    fig, (top, low) = plt.subplots(
        2, 1, figsize=(9, 6.5), sharex=True, gridspec_kw={"height_ratios": [3, 1]}
    )
    label = "measured (operators' state)" if r["mode"] == "engine" else "model, with delays"
    top.plot(t, np.asarray(s["measured"]) / mib, lw=1.2, label=label)
    top.plot(
        t,
        np.asarray(s["estimated"]) / mib,
        lw=0.8,
        alpha=0.7,
        label="estimate at the settings in force",
    )
    b, res = r["budget"] / mib, r["reserve"] / mib
    top.axhline(b + res, color="tab:red", ls=":", lw=1, label="budget + reserve")
    top.axhline(b, color="tab:red", lw=1, label="budget")
    top.axhline(b - res, color="tab:red", ls="--", lw=0.8, label="budget − reserve (target)")
    for ax in (top, low):
        ax.axvspan(
            tl.ms(tl.trickle_from) / 1000,
            tl.ms(tl.trickle_to) / 1000,
            color="grey",
            alpha=0.12,
            label="trickle" if ax is top else None,
        )
        ax.axvline(
            tl.ms(tl.burst_at) / 1000,
            color="k",
            ls="-.",
            lw=0.8,
            label="burst" if ax is top else None,
        )
    top.set_ylabel("MiB")
    top.set_ylim(0, max(b + 2 * res, float(np.max(s["measured"], initial=0)) / mib * 1.05))
    top.legend(fontsize=7, loc="lower right")
    mode = "engine" if r["mode"] == "engine" else "model only"
    top.set_title(
        f"{mode}: {sum(n for _, n in r['arrivals']):,} queries, budget "
        f"{human_bytes(r['budget'])} ({r['share']:.0%} of full precision), times × {tl.scale:g}",
        fontsize=9,
    )
    low.plot(t, s["running"], label="queries running")
    low.plot(t, s["rejected"], label="rejected so far")
    low.set_ylabel("queries")
    low.legend(fontsize=7, loc="upper left")
    low.set_xlabel(f"application time (s; the paper's × {tl.scale:g})")
    low.set_xlim(0, tl.ms(tl.end) / 1000)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
