"""Model mode of the scalability experiment (`scalability`): the resource manager alone, with
no engine, at the paper's scale (5,000 queries).

`run_model`: one `ManagedQuery` per query with an `Observed` built from what the generator
knows. Rounds at every arrival and every `manage_every`: `admit` the arrivals (and the queries
rejected before, as the worker retries them), then `decide`, applied with the worker's band
(shrink when the estimate passes the target, grow back below (1 − grow_margin) of it, aim
halfway). Memory follows each query's settings with the engine's delays (`_History`): a new
query fills up over its window, and a change l → l' at t shows from t + min(l, l') to
t + max(l, l'). How long `decide` takes for 5,000 queries is the scalability figure; it is
called as the worker calls it.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cq_service.adaptive.manager import Budget, ManagedQuery, admit, decide
from cq_service.bench.costmodel.querymix import Mix, managed_queries, write_streams
from cq_service.bench.costmodel.scalability_report import Series
from cq_service.stats import human_bytes

__all__ = ["run_model"]


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
    series = Series()
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
    """`scalability_engine._check_settings` for the model's own log and final settings."""
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
