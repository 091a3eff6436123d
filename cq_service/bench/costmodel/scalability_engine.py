"""Engine mode of the scalability experiment (`scalability`): the real worker runs hundreds of
generated queries under a memory budget.

`run_engine`: the real `Worker`, with an SQLite catalog, runs the generated pipeline file with
`resources.memory_budget`: admission control at deploy, `BudgetKeeper.tick` every
`manage_every` of application time, every change through `Worker.adjust` and on record in the
catalog. A query arrives by a change of the pipeline file and `Worker.reconcile`, one query
per change, as queries arrive in the paper's timeline. Each stream is a parquet file released
up to the bench's clock, with a heartbeat at the clock, as an up-to-date live source delivers
it (`_Paced`): every source keeps the same application time, and a stream first read later
starts at the clock. The pipelines use the round-robin scheduler: Chain's choice scans every
operator at each step, which at thousands of operators would take most of the run, and the
order changes what waits in queues, not the state measured here. Every `step` of application
time the sources deliver, the worker steps and the operators' state is sampled
(`state_size`, as the keeper measures it).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from cq_service.bench.costmodel.querymix import (
    COLUMNS,
    GenQuery,
    Mix,
    pipeline_text,
    write_streams,
)
from cq_service.bench.costmodel.scalability_report import Series
from cq_service.catalog import Catalog
from cq_service.io.base import RawChunk
from cq_service.service.config import ServiceConfig
from cq_service.service.views import window_settings
from cq_service.service.worker import Worker
from cq_service.stats import human_bytes

__all__ = ["PIPELINE", "run_engine"]

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
    series = Series()
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

