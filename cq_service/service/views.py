"""What the HTTP API reads and changes of a worker, as JSON-ready values.

Each function runs on the engine thread (the API hands it over with `Worker.call`), so it sees
a consistent worker. Unknown pipelines and queries raise KeyError (the API's 404).
"""

from __future__ import annotations

import json
import math
import time
from collections import Counter
from dataclasses import asdict, is_dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from cq_service.catalog import CatalogUnavailable, PipelineControlRecord
from cq_service.compiler import compile_pipeline
from cq_service.engine.operators.base import NEVER
from cq_service.engine.operators.join import Join
from cq_service.engine.operators.range_window import RangeWindow
from cq_service.engine.operators.select import Select
from cq_service.engine.statistics import EntityStatistics
from cq_service.plan.explain import explain
from cq_service.plan.shared_joins import share_window_joins
from cq_service.service.live_graph import LiveGraph
from cq_service.service.reconciler import API, REJECTION_REASONS
from cq_service.service.results import ResultTee
from cq_service.spec.model import LATENCY_BOUNDED_SCHEDULER, SHARE_SCHEDULER, PipelineSpec
from cq_service.spec.sys_stream import SYS_STREAM_FIELDS
from cq_service.stats import render_live, render_streamon

if TYPE_CHECKING:
    from cq_service.service.worker import Worker

__all__ = [
    "adjust_query",
    "describe",
    "explain_pipeline",
    "live_feed",
    "metrics_snapshot",
    "pipeline_adjustments",
    "pipeline_control",
    "pipeline_deployments",
    "query_adjustments",
    "query_status",
    "set_pipeline_control",
    "subscribe",
    "window_settings",
]


def describe(worker: Worker) -> dict[str, Any]:
    """Pipelines, their queries with status and counts, their schedulers, the resource
    manager's view of their budgets, and rejected files."""
    records = {(r.pipeline, r.name): r for r in worker.catalog.queries()}
    pipelines: dict[str, Any] = {}
    for (pipeline, name), r in records.items():
        p = pipelines.setdefault(pipeline, {"name": pipeline, "queries": {}})
        p["queries"][name] = query_status(worker, pipeline, name, r)
    for name, spec in {**worker.pipelines, **worker.spark_jobs.specs}.items():
        pipelines.setdefault(name, {"name": name, "queries": {}})["file"] = spec.path
    for path, errors in worker.errors.items():
        # A file that never loaded is recorded under its stem; an API text under its name.
        name = worker.file_pipeline.get(path) or (
            path.removeprefix(API) if path.startswith(API) else Path(path).stem
        )
        entry = pipelines.setdefault(name, {"name": name, "queries": {}})
        entry["rejected"] = {"file": path, "errors": errors}
    controls = {c.pipeline: c for c in worker.catalog.pipeline_controls()}
    for p in pipelines.values():
        deployments = worker.catalog.deployments(p["name"])
        p["last_deployment"] = _record_json(deployments[-1]) if deployments else None
        choice = worker.schedulers.get(p["name"])
        p["scheduling"] = None if choice is None else choice.to_json()
        control = controls.get(p["name"])
        p["control"] = None if control is None else _control_json(control)
        budget = worker.budgets.states.get(p["name"])
        p["budget"] = None if budget is None else budget.to_json()
        p["spark"] = worker.spark_jobs.status(p["name"])  # None: not a runner-spark job
        archived = worker.archives.last.get(p["name"])  # the scheduled archive's last run
        p["archive"] = None if archived is None else asdict(archived)
    return {
        "pipelines": list(pipelines.values()),
        "paused": worker.paused,
        "reconcile_error": worker.reconciler.failure,  # the last rescan's, outside any pipeline
    }


def pipeline_control(worker: Worker, pipeline: str) -> dict[str, Any]:
    """A deployment's control as stored, and the scheduler it runs with (None: not running)."""
    _check_known(worker, pipeline)
    control = worker.catalog.pipeline_control(pipeline)
    choice = worker.schedulers.get(pipeline)
    empty = {"scheduler": None, "latency_bound_ms": None, "share": None, "updated_at": None}
    return {
        "pipeline": pipeline,
        **(empty if control is None else _control_json(control)),
        "effective": None if choice is None else choice.to_json(),
    }


def set_pipeline_control(
    worker: Worker, pipeline: str, fields: dict[str, Any], *, merge: bool
) -> dict[str, Any]:
    """Change a deployment's control: `fields` replace it (`merge`: only the fields given,
    and a scheduler other than chain_bounded drops the stored bound, one other than chain_share
    the stored share)."""
    _check_known(worker, pipeline)
    scheduler = fields.get("scheduler")
    bound = fields.get("latency_bound_ms")
    share = fields.get("share")
    stored = worker.catalog.pipeline_control(pipeline) if merge else None
    if stored is not None:
        if "scheduler" not in fields:
            scheduler = stored.scheduler
        if "latency_bound_ms" not in fields and scheduler == LATENCY_BOUNDED_SCHEDULER:
            bound = stored.latency_bound_ms
        if "share" not in fields and scheduler == SHARE_SCHEDULER:
            share = stored.share
    worker.set_scheduler(pipeline, scheduler, bound, share)
    return pipeline_control(worker, pipeline)


def query_status(worker: Worker, pipeline: str, name: str, record: Any = None) -> dict[str, Any]:
    record = record or worker.catalog.query(pipeline, name)
    if record is None:
        raise KeyError(f"{pipeline}/{name}")
    out = _record_json(record)
    key = f"{pipeline}/{name}"
    sink = worker.engine.sinks.get(key)
    out["running"] = key in worker.queries
    if sink is not None:
        out["results"] = sink.written
        out["frontier"] = None if sink.watermark == NEVER else int(sink.watermark)
    return out


def explain_pipeline(worker: Worker, pipeline: str, live: bool = False) -> str:
    """The pipeline's plan, its current filter orders and adjustable windows; `live` adds
    every entity's statistics now (`cq explain --live`, docs/sys-stream.md)."""
    spec = worker.pipelines.get(pipeline)
    if spec is None:
        raise KeyError(f"pipeline {pipeline}")
    choice = worker.schedulers.get(pipeline) or worker.scheduler_choice(pipeline, spec)
    # As the worker plans queries that start together: joins differing only in windows shared.
    text = explain(share_window_joins(compile_pipeline(spec).plan, spec.resources.shared_join),
                   choice.name, spec.resources.filter_order)
    orders = [
        f"\n  {op.name} {op.describe()}"
        for op in worker.engine.executor.operators
        if isinstance(op, Select | Join) and op.owner == spec.name and "[" in op.describe()
    ]
    if orders:
        text += "\nfilter orders now (F1.. as written):" + "".join(orders)
    settings = {k: v for k, v in window_settings(worker).items() if k[0] == pipeline}
    if settings:
        text += "\nadjustable windows now (size, granularity in " + spec.time_unit + "):"
        for (_, query, item), (size, grain) in sorted(settings.items()):
            text += f"\n  {query} {item}: [Range {size}]" + (f" Γ({grain})" if grain > 1 else "")
    if live:
        text += "\n\n" + _live_table(worker, spec)
    return text


def _live_table(worker: Worker, spec: PipelineSpec) -> str:
    watched = [
        w.status()
        for op in worker.engine.executor.operators
        if op.owner == spec.name
        for w in op.watches()
    ]
    table = render_live(
        _live_rows(worker, spec),
        "live (totals and rates since each entity started; F1.. as written):",
    )
    return table + "\n" + render_streamon(watched)


def _live_rows(worker: Worker, spec: PipelineSpec) -> list[tuple]:
    """The statistics of the pipeline's operators, queues and sinks, and of the sources it
    reads (shared with other deployments: their counts are the source's)."""
    inputs = {n.lower() for n in (*spec.streams, *spec.relations)}
    return [
        r for r in EntityStatistics(worker.engine.executor).now()
        if r[0] == spec.name or (r[1] == "source" and r[2].lower() in inputs)
    ]


def live_feed(worker: Worker, graph: LiveGraph) -> dict[str, Any]:
    """One message of the web view's feed: the graph now and `explain?live=true`'s rows
    (SysStream's columns, by name)."""
    data = graph.snapshot()
    spec = worker.pipelines[graph.pipeline]
    columns = [name for name, _, _ in SYS_STREAM_FIELDS]
    data["entities"] = [
        dict(zip(columns, map(_json_number, r), strict=True)) for r in _live_rows(worker, spec)
    ]
    return data


def _json_number(v: object) -> object:
    """A value as JSON has it: an infinite or NaN float (a k not learned yet) is null, as in
    the jsonl sinks (DESIGN §5); the `constraint` column tells it from no constraint."""
    return None if isinstance(v, float) and not math.isfinite(v) else v


def subscribe(worker: Worker, pipeline: str, name: str) -> tuple[ResultTee, Any]:
    q = worker.queries.get(f"{pipeline}/{name}")
    if q is None or q.tee is None:
        raise KeyError(f"{pipeline}/{name}")
    return q.tee, q.tee.subscribe()


def metrics_snapshot(worker: Worker) -> dict[str, Any]:
    """Numbers for /metrics: per-operator queues and synopses, sources, sinks, the worker."""
    ex = worker.engine.executor
    ex.memory.sample()
    sources = {}
    for key, s in worker.sources.items():
        op = worker.engine.sources[key]
        sources[key] = {
            "elements": op.rows_in,
            "late": op.late_count,
            "malformed": op.malformed_count,
            "dead_lettered": s.dead_letter.count,
            "lag": worker.lags.get(key, 0),  # asked once a second by the loop
            "watermark": None if op.watermark == NEVER else int(op.watermark),
        }
    counts = _catalog_counts(worker)
    queued = ex.memory.queued
    latency = {}
    for key, sink in worker.engine.sinks.items():
        q = worker.queries.get(key)
        pipeline, name = (q.pipeline, q.name) if q is not None else key.split("/", 1)
        h = sink.latency
        latency[(pipeline, name)] = {
            "count": h.count,
            "sum": h.total,
            "p50": h.quantile(0.5),
            "p99": h.quantile(0.99),
            "max": h.max,
        }
    return {
        "queues": {q.name: (q.rows, q.bytes) for q in ex.queues},
        "synopses": {n: (u.rows, u.bytes) for n, u in ex.memory.synopses.items()},
        "constraints": {
            op.name: asdict(st) for op in ex.operators if (st := op.constraint_status()) is not None
        },
        "sources": sources,
        "sinks": {key: sink.written for key, sink in worker.engine.sinks.items()},
        "paused": worker.paused,
        "checkpoints": worker.checkpoints,
        "checkpoint_age": _checkpoint_age(worker),
        "snapshots": _snapshots(worker),
        "adjustments": counts["adjustments"],
        "deployments": counts["deployments"],
        "rejections": {
            reason: worker.reconciler.rejections[reason] for reason in REJECTION_REASONS
        },
        "pending": _pending(worker),
        "dependencies": {
            name: asdict(state) for name, state in worker.dependencies.states().items()
        },
        "peak_bytes": ex.memory.peak_total_bytes,
        "queued": {
            "rows": queued.rows,
            "bytes": queued.bytes,
            "peak_rows": queued.peak_rows,
            "peak_bytes": queued.peak_bytes,
            "average_rows": ex.memory.average_queue_rows,
            "average_bytes": ex.memory.average_queue_bytes,
        },
        "latency": latency,
        "schedulers": {name: c.to_json() for name, c in worker.schedulers.items()},
        "windows": window_settings(worker),
        "budgets": {name: _budget(worker, name, st) for name, st in worker.budgets.states.items()},
        "pacing": {key: asdict(pace) for key, pace in worker.pacing.sources.items()},
    }


def _budget(worker: Worker, pipeline: str, state: Any) -> dict[str, Any]:
    """A deployment's budget state, with the tuples each query's windows shed so far."""
    shed: dict[str, int] = {}
    for q in worker.queries.values():
        if q.pipeline == pipeline:
            dropped = sum(w.shed_dropped for w in worker.engine.windows(pipeline, q.name))
            if dropped:
                shed[q.name] = dropped
    return {**state.to_json(), "shed_tuples": shed}


def _catalog_counts(worker: Worker) -> dict[str, Any]:
    """Deployments by status and adjustments logged, from the catalog — or, while it cannot
    be reached, as it gave them last (metrics must answer during an outage)."""
    try:
        statuses = Counter(d.status for d in worker.catalog.deployments())
        adjustments = len(worker.catalog.adjustments())
    except CatalogUnavailable:
        return worker.catalog_counts
    worker.catalog_counts = {
        "deployments": {s: statuses[s] for s in ("applied", "rejected", "removed")},
        "adjustments": adjustments,
    }
    return worker.catalog_counts


def _snapshots(worker: Worker) -> dict[str, Any] | None:
    store, cp = worker.snapshots, worker.checkpointer
    if store is None:
        return None
    return {"written": store.written, "failures": cp.snapshot_failures, "corrupt": store.corrupt,
            "restored": worker.restore.started_from or 0, "seconds": cp.snapshot_seconds}


def _checkpoint_age(worker: Worker) -> float | None:
    """Seconds since the last checkpoint this worker wrote (None: none yet)."""
    last = worker.checkpointer.last_written
    return None if last is None else max(0.0, time.time() - last)


def _pending(worker: Worker) -> dict[str, tuple[int, int]]:
    """Per query: results written to its sink and not acknowledged yet (elements, bytes)."""
    out = {}
    for key, sink in worker.engine.sinks.items():
        pending = getattr(sink.writer, "pending", None)
        if pending is not None:
            out[key] = pending
    return out


def window_settings(worker: Worker) -> dict[tuple[str, str, str], tuple[int, int]]:
    """(pipeline, query, FROM item) -> (size, granularity) now, of every adjustable window."""
    return {
        (op.owner, op.query, op.label): (op.size, op.granularity)
        for op in worker.engine.executor.operators
        if isinstance(op, RangeWindow) and op.query is not None
    }


def adjust_query(
    worker: Worker, pipeline: str, name: str, knob: str, value: int
) -> dict[str, Any]:
    made = worker.adjust(pipeline, name, knob, value, reason="api")
    return {"adjustments": [a.to_json() for a in made]}


def query_adjustments(worker: Worker, pipeline: str, name: str) -> list[dict[str, Any]]:
    if worker.catalog.query(pipeline, name) is None:
        raise KeyError(f"{pipeline}/{name}")
    return [_record_json(r) for r in worker.catalog.adjustments(pipeline, query=name)]


def pipeline_deployments(worker: Worker, pipeline: str) -> list[dict[str, Any]]:
    """The pipeline's deployment log, oldest first (a rejected file's `error`:
    ``FILE:LINE:COL: message``)."""
    found = worker.catalog.deployments(pipeline)
    if not found:
        _check_known(worker, pipeline)
    return [_record_json(d) for d in found]


def pipeline_adjustments(worker: Worker, pipeline: str, limit: int) -> list[dict[str, Any]]:
    """The newest `limit` entries of the pipeline's adjustments log, oldest first: window and
    granularity changes, shedding, scheduler changes and admission control's rejections, each
    with its reason."""
    found = worker.catalog.adjustments(pipeline, limit=limit)
    if not found:
        _check_known(worker, pipeline)
    return [_record_json(r) for r in found]


def _check_known(worker: Worker, pipeline: str) -> None:
    """A pipeline is known while it runs or while the catalog has its queries."""
    if pipeline not in worker.pipelines and not worker.catalog.queries(pipeline):
        raise KeyError(f"pipeline {pipeline}")


def _control_json(control: PipelineControlRecord) -> dict[str, Any]:
    return {
        "scheduler": control.scheduler,
        "latency_bound_ms": control.latency_bound_ms,
        "share": control.share,
        "updated_at": control.updated_at.isoformat(),
    }


def _record_json(record: Any) -> dict[str, Any]:
    data = asdict(record) if is_dataclass(record) else dict(record)
    return json.loads(json.dumps(data, default=str))
