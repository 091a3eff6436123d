"""The worker (`cq serve`): every deployed pipeline in one live engine.

One thread owns the engine and runs a loop: poll the sources (unless the queues are over their
budget — then the sources are paused), drain the operators, move followers' clocks, and, on
their intervals, reconcile the pipelines folder and write a checkpoint. Everything else — the
HTTP API, `cq deploy` — hands work to that thread with `call`, so the engine is never touched
by two threads.

Deploying a pipeline diffs it query by query against what runs: a query whose plan, sink and
sources are unchanged keeps running with its state; a changed one is replaced (the new version
starts at the sources' current time); a removed one stops. An invalid pipeline is rejected with
its errors recorded in the catalog, and the version already running keeps running.

Each deployment has its own scheduling policy (`ByOwner`: deployments take turns, each picks
its own operators). Its scheduler is its control in the catalog (set through the API), else the
worker's `policy`, else the pipeline file's `resources`; a policy object is replaced only when
that choice changes, so a redeploy keeps what Chain has learned.
"""

from __future__ import annotations

import hashlib
import json
import logging
import queue
import re
import subprocess
import threading
import time
from collections import Counter
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any, TypeVar

from apscheduler.schedulers.background import BackgroundScheduler

from cq_service.catalog import AdjustmentRecord, Catalog, PipelineControlRecord
from cq_service.catalog.spec_json import sink_json, stream_json
from cq_service.compiler import CompiledPipeline, compile_pipeline
from cq_service.cql import logical as L
from cq_service.engine.adjust import KNOBS, Adjustment, on_item, parse_knob
from cq_service.engine.build import SourceOptions
from cq_service.engine.live import LiveEngine
from cq_service.engine.operators.base import NEVER
from cq_service.engine.operators.range_window import RangeWindow
from cq_service.engine.scheduler import ByOwner, SchedulingPolicy
from cq_service.engine.scheduler import policy as make_policy
from cq_service.errors import AdjustmentError, CQError
from cq_service.io import open_sink, open_source
from cq_service.io.dead_letter import DeadLetterSink
from cq_service.plan.planner import plan_queries
from cq_service.plan.rewrite import simplify
from cq_service.runner import DeadLetterRouter, scheduler_of
from cq_service.service.archiving import ArchiveSchedule
from cq_service.service.budgets import BudgetKeeper
from cq_service.service.checkpoint import (
    OffsetTracker,
    ResumeFilter,
    combine_cuts,
    horizons,
    query_cut,
)
from cq_service.service.config import ServiceConfig
from cq_service.service.handover import handover_key, open_handover
from cq_service.service.results import ResultTee
from cq_service.service.spark_jobs import SparkJobs
from cq_service.spec import load_pipeline
from cq_service.spec.model import (
    DEFAULT_SCHEDULER,
    LATENCY_BOUNDED_SCHEDULER,
    PipelineSpec,
    QosSpec,
    SinkSpec,
    StreamSpec,
)

__all__ = ["DeployResult", "SchedulerChoice", "Worker"]

log = logging.getLogger("cq.worker")
T = TypeVar("T")


@dataclass
class _Source:
    key: str
    stream: StreamSpec
    reader: Any  # the io reader, wrapped in an OffsetTracker when it has partitions
    dead_letter: DeadLetterSink


@dataclass
class _Query:
    key: str  # pipeline/query
    pipeline: str
    name: str
    fingerprint: tuple
    source_keys: dict[str, str]  # source name in the query -> source key
    horizons: dict[str, int | None]  # source key -> horizon
    relations: set[str]  # source keys that are relations
    gates: dict[str, int] = field(default_factory=dict)
    tee: ResultTee | None = None
    handover: int | None = None  # T2 of a backfill it takes over from (docs/backfill.md)

    @property
    def version(self) -> str:
        """A digest of what the query computes and where it writes."""
        text = re.sub(r"span=Span\([^)]*\)", "", repr(self.fingerprint))  # positions don't count
        return _hash_json(text)[:16]


@dataclass(frozen=True)
class SchedulerChoice:
    """A deployment's scheduler, its latency bound (seconds; chain_bounded only) and where the
    choice came from: ``control`` (the catalog), ``config`` (the worker's `policy`) or ``file``."""

    name: str
    latency_bound: float | None
    origin: str

    def same_policy(self, policy: SchedulingPolicy) -> bool:
        return (policy.name, getattr(policy, "bound", None)) == (self.name, self.latency_bound)

    def to_json(self) -> dict[str, Any]:
        bound = self.latency_bound
        return {
            "scheduler": self.name,
            "latency_bound_ms": None if bound is None else round(bound * 1000, 6),
            "from": self.origin,
        }


@dataclass
class DeployResult:
    pipeline: str
    status: str  # applied | rejected | unchanged | removed
    added: list[str] = field(default_factory=list)
    replaced: list[str] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)
    kept: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    rejected: dict[str, str] = field(default_factory=dict)  # query -> why it did not fit

    def to_json(self) -> dict[str, Any]:
        return self.__dict__.copy()


class Worker:
    def __init__(self, config: ServiceConfig, catalog: Catalog):
        self.config = config
        self.catalog = catalog
        # Deployments take turns; each is scheduled by its own policy (`_apply_scheduler`).
        self.scheduling = ByOwner(lambda: make_policy(config.policy or DEFAULT_SCHEDULER))
        self.engine = LiveEngine(
            self.scheduling, budget=config.batch_rows, step_seconds=config.step_seconds
        )
        self.schedulers: dict[str, SchedulerChoice] = {}  # running deployments' schedulers
        self.sources: dict[str, _Source] = {}
        self.queries: dict[str, _Query] = {}
        self.pipelines: dict[str, PipelineSpec] = {}  # running versions, by name
        self.files: dict[str, str] = {}  # pipeline file -> content hash last applied
        self.file_pipeline: dict[str, str] = {}  # pipeline file -> pipeline name
        self.errors: dict[str, list[str]] = {}  # pipeline file -> errors of the last attempt
        self.paused = False
        self.ready = False
        self._engine_thread: threading.Thread | None = None  # the thread in `run`
        self._commands: queue.Queue[tuple[Callable[[], Any], Future]] = queue.Queue()
        self._stop = threading.Event()
        # What the last worker of this name left: consumed as its queries come back during the
        # first reconcile, then forgotten.
        saved = catalog.load_checkpoint(config.name)
        self._restore: dict[str, dict[str, Any]] = dict(saved.queries or {}) if saved else {}
        self._restore_offsets: dict[str, dict[str, int]] = (
            dict(saved.offsets or {}) if saved else {}
        )
        self._handovers: dict[str, tuple[Any, int]] = {}  # source key -> (plan, T2)
        self._checkpoint_due = 0.0
        self._reconcile_due = 0.0
        self.checkpoints = 0
        self.budgets = BudgetKeeper(self)  # the resource manager (service/budgets.py)
        self._manager: BackgroundScheduler | None = None
        # `archive.every`: the deployed pipelines' archives, off the engine thread.
        # `resources: {runner: spark}`: those pipelines run as Spark jobs, not on the engine.
        self.spark_jobs = SparkJobs(
            Path(config.spark_checkpoints) / config.name, trigger=config.spark_trigger
        )
        self.archives = ArchiveSchedule(lambda: {**self.pipelines, **self.spark_jobs.specs},
                                        catalog)

    # -- the loop ---------------------------------------------------------------------------

    def run(self) -> None:
        """Run until `stop` is called."""
        self._engine_thread = threading.current_thread()
        try:
            self.reconcile()
            self._restore.clear()
            self._restore_offsets.clear()
            self.ready = True
            self._start_manager()
            self.archives.start()
            while not self._stop.is_set():
                self.step()
        finally:
            self._shutdown()

    def step(self) -> None:
        read = self._poll_sources()
        self.engine.executor.drain(max_steps=10_000)
        self.engine.executor.follow_clocks()
        self._run_commands()
        now = time.monotonic()
        if now >= self._reconcile_due:
            self._reconcile_due = now + self.config.reconcile_interval
            self.reconcile()
        if now >= self._checkpoint_due:
            self._checkpoint_due = now + self.config.checkpoint_interval
            self.checkpoint()
        if not read:
            time.sleep(0.005)

    def stop(self) -> None:
        self._stop.set()

    def _start_manager(self) -> None:
        """The resource manager's rounds, every `manage_interval` seconds, on the engine
        thread (between steps)."""
        if self.config.manage_interval <= 0:
            return
        self._manager = BackgroundScheduler(daemon=True)
        self._manager.add_job(
            self._manage,
            "interval",
            seconds=self.config.manage_interval,
            max_instances=1,
            coalesce=True,
            id="resource-manager",
        )
        self._manager.start()

    def _manage(self) -> None:
        if self._stop.is_set():
            return
        try:
            self.call(self.budgets.tick, timeout=max(30.0, 4 * self.config.manage_interval))
        except Exception:  # a round that fails or times out: the next one tries again
            log.exception("resource manager round failed")

    def call(self, fn: Callable[[], T], timeout: float = 30.0) -> T:
        """Run `fn` on the engine thread, between steps; returns its result."""
        if threading.current_thread() is self._engine_thread:
            return fn()
        fut: Future = Future()
        self._commands.put((fn, fut))
        return fut.result(timeout)

    def _run_commands(self) -> None:
        while True:
            try:
                fn, fut = self._commands.get_nowait()
            except queue.Empty:
                return
            try:
                fut.set_result(fn())
            except Exception as e:  # the caller gets it; the worker goes on
                fut.set_exception(e)

    def _poll_sources(self) -> bool:
        executor = self.engine.executor
        queued = executor.queued_rows()
        if not self.paused and queued > self.config.queue_budget:
            self.paused = True
            for s in self.sources.values():
                getattr(s.reader, "pause", lambda: None)()
        elif self.paused and queued <= self.config.queue_budget // 2:
            self.paused = False
            for s in self.sources.values():
                getattr(s.reader, "resume", lambda: None)()
        if self.paused:
            return False
        read = False
        for op in executor.sources:
            if op.exhausted:
                continue
            before = op.rows_in
            op.run(self.config.batch_rows)
            read |= op.rows_in != before
        return read

    # -- deploying --------------------------------------------------------------------------

    def reconcile(self) -> list[DeployResult]:
        """Apply every pipeline file in the folder that changed since it was last seen; stop
        the pipelines whose files are gone."""
        folder = Path(self.config.pipelines)
        results = []
        seen: set[str] = set()
        for path in sorted(folder.rglob("*.y*ml")) if folder.is_dir() else []:
            if any(part.startswith(".") for part in path.relative_to(folder).parts):
                continue
            key = str(path)
            seen.add(key)
            try:
                digest = hashlib.sha256(path.read_bytes()).hexdigest()
            except OSError:
                continue
            if self.files.get(key) == digest:
                continue
            self.files[key] = digest
            results.append(self.deploy_file(path, digest))
        for key in [k for k in self.files if k not in seen]:
            del self.files[key]
            name = self.file_pipeline.pop(key, None)
            if name is not None and name not in self.file_pipeline.values():
                results.append(self.undeploy(name))
        return results

    def deploy_file(self, path: Path, digest: str | None = None) -> DeployResult:
        """Validate and deploy one pipeline file (`digest`: its content hash, if known)."""
        digest = _hash_text(path) if digest is None else digest
        revision = _git_revision(path)
        name = self.file_pipeline.get(str(path), path.stem)
        try:
            compiled = compile_pipeline(load_pipeline(path))
            name = compiled.spec.name
            self.file_pipeline[str(path)] = name
            result = self.deploy(compiled, revision, digest)
        except CQError as e:  # invalid, or a source or sink that cannot be opened
            errors = e.lines()
            self.errors[str(path)] = errors
            self.catalog.record_deployment(name, digest, revision, "rejected", "\n".join(errors))
            log.warning("rejected %s: %s", path, "; ".join(errors))
            return DeployResult(name, "rejected", errors=errors)
        self.errors.pop(str(path), None)
        return result

    def deploy(
        self, compiled: CompiledPipeline, revision: str | None = None, spec_hash: str | None = None
    ) -> DeployResult:
        """Run this version of a pipeline: diff it query by query against what runs."""
        spec = compiled.spec
        name = spec.name
        if spec.resources.runner == "spark":
            return self._deploy_on_spark(spec, revision, spec_hash)
        self.spark_jobs.stop(name)  # back from Spark to the engine
        result = DeployResult(name, "applied")
        active = {q.name: q for q in self.catalog.queries(name)}
        desired: dict[str, _Query] = {}
        bound = {}
        for bq in compiled.queries:
            qspec = spec.queries[bq.name]
            if qspec.sink is None:
                continue  # a view runs inside the queries that read it
            record = active.get(bq.name)
            if record is not None and not record.active:
                continue
            desired[bq.name] = self._describe_query(spec, bq, qspec.sink)
            bound[bq.name] = bq
        running = {q.name: q for q in self.queries.values() if q.pipeline == name}
        for qname, q in running.items():
            new = desired.get(qname)
            if new is None or new.fingerprint != q.fingerprint:
                self._stop_query(q)
                (result.replaced if new is not None else result.removed).append(qname)
        start = [n for n in desired if n not in running or n in result.replaced]
        result.kept = [n for n in desired if n not in start]
        turned_away: dict[str, _Query] = {}
        for r in self.budgets.admit(spec, [desired[n] for n in start], [bound[n] for n in start]):
            qname = r.query.split("/", 1)[1]
            result.rejected[qname] = r.reason
            start.remove(qname)
            turned_away[qname] = desired.pop(qname)
        result.added = [n for n in start if n not in result.replaced]
        if start:
            try:
                self._start_queries(spec, [desired[n] for n in start], [bound[n] for n in start])
            except CQError:
                # A sink or source that cannot be opened: back to the version that ran.
                for q in [q for q in self.queries.values() if q.pipeline == name]:
                    self._stop_query(q)
                previous = self.pipelines.get(name)
                if previous is not None and previous is not spec:
                    self.deploy(compile_pipeline(previous))
                raise
        for qname in desired:
            q = desired[qname] if qname in start else running[qname]
            self.catalog.upsert_query(
                name,
                qname,
                spec.queries[qname].cql,
                sink_json(spec.queries[qname].sink),
                spec.queries[qname].weight,
                q.version,
                "running",
                start_after=_start_after(q.gates),
                qos=_qos_ranges(spec.queries[qname].qos),
            )
        for qname in result.removed:
            self.catalog.set_query_status(name, qname, "stopped")
        for qname, reason in result.rejected.items():
            qspec = spec.queries[qname]
            self.catalog.upsert_query(
                name, qname, qspec.cql, sink_json(qspec.sink), qspec.weight,
                turned_away[qname].version, "stopped",
                error=f"rejected by admission control: {reason}", qos=_qos_ranges(qspec.qos),
            )
            self.catalog.log_adjustment(name, "rejected", {"reason": reason}, query=qname)
            log.warning("%s/%s: rejected by admission control: %s", name, qname, reason)
        for stream in [*spec.streams.values(), *spec.relations.values()]:
            self.catalog.upsert_source(name, stream)  # `cq relation load` checks against these
        self._drop_unread_sources()
        self.pipelines[name] = spec
        self._apply_scheduler(name, spec)
        if not (result.added or result.replaced or result.removed or result.rejected):
            result.status = "unchanged"
        spec_hash = _hash_text(Path(spec.path)) if spec_hash is None else spec_hash
        self.catalog.record_deployment(name, spec_hash, revision, "applied")
        self.checkpoint()
        log.info(
            "deployed %s: added %s, replaced %s, removed %s, kept %s",
            name,
            result.added,
            result.replaced,
            result.removed,
            result.kept,
        )
        return result

    def _deploy_on_spark(
        self, spec: PipelineSpec, revision: str | None, spec_hash: str | None
    ) -> DeployResult:
        """A runner-spark pipeline: its own Spark job (service/spark_jobs.py) instead of the
        engine; what ran of it on the engine stops."""
        name = spec.name
        spec_hash = _hash_text(Path(spec.path)) if spec_hash is None else spec_hash
        result = DeployResult(name, "applied")
        change = self.spark_jobs.deploy(spec, spec_hash)  # SparkRunnerError: nothing changes
        for q in [q for q in self.queries.values() if q.pipeline == name]:
            self._stop_query(q)
        self.pipelines.pop(name, None)
        self.schedulers.pop(name, None)
        self._drop_unread_sources()
        queries = [n for n, q in spec.queries.items() if q.sink is not None]
        if change == "unchanged":
            result.status, result.kept = "unchanged", queries
        else:
            (result.added if change == "added" else result.replaced).extend(queries)
            for qname in queries:
                qspec = spec.queries[qname]
                self.catalog.upsert_query(
                    name, qname, qspec.cql, sink_json(qspec.sink), qspec.weight,
                    spec_hash, "running", qos=_qos_ranges(qspec.qos),
                )
            for stream in [*spec.streams.values(), *spec.relations.values()]:
                self.catalog.upsert_source(name, stream)
        self.catalog.record_deployment(name, spec_hash, revision, "applied")
        log.info("deployed %s on Spark: %s", name, change)
        return result

    def undeploy(self, name: str) -> DeployResult:
        result = DeployResult(name, "removed")
        on_spark = self.spark_jobs.specs.get(name)
        if on_spark is not None and self.spark_jobs.stop(name):
            for qname in [n for n, q in on_spark.queries.items() if q.sink is not None]:
                self.catalog.set_query_status(name, qname, "stopped")
                result.removed.append(qname)
        for q in [q for q in self.queries.values() if q.pipeline == name]:
            self._stop_query(q)
            self.catalog.set_query_status(name, q.name, "stopped")
            result.removed.append(q.name)
        self.pipelines.pop(name, None)
        self.schedulers.pop(name, None)  # its policy went with its operators (ByOwner.attach)
        self._drop_unread_sources()
        self.catalog.record_deployment(name, "", None, "removed")
        self.checkpoint()
        return result

    def set_active(self, pipeline: str, query: str, active: bool) -> None:
        """Start or stop a query by its control flag (kept in the catalog)."""
        self.catalog.set_control(pipeline, query, active=active)
        spec = self.pipelines.get(pipeline)
        if spec is not None:
            self.deploy(compile_pipeline(spec))

    # -- scheduling -------------------------------------------------------------------------

    def set_scheduler(
        self, pipeline: str, scheduler: str | None, latency_bound_ms: float | None
    ) -> PipelineControlRecord:
        """Store a deployment's scheduler control (None: back to the configuration's or the
        file's) and, if it runs, schedule it so from the next step on."""
        record = self.catalog.set_pipeline_control(
            pipeline, scheduler=scheduler, latency_bound_ms=latency_bound_ms
        )
        spec = self.pipelines.get(pipeline)
        if spec is not None:
            self._apply_scheduler(pipeline, spec)
        return record

    def scheduler_choice(self, pipeline: str, spec: PipelineSpec) -> SchedulerChoice:
        """The deployment's control, else the worker's `policy`, else the file's resources."""
        control = self.catalog.pipeline_control(pipeline)
        if control is not None and control.scheduler is not None:
            ms = control.latency_bound_ms
            return SchedulerChoice(control.scheduler, None if ms is None else ms / 1000, "control")
        if self.config.policy:
            return SchedulerChoice(self.config.policy, None, "config")
        name, bound = scheduler_of(spec)
        return SchedulerChoice(name, bound, "file")

    def _apply_scheduler(self, pipeline: str, spec: PipelineSpec) -> None:
        """Schedule the deployment by its current choice; its policy object (and what it has
        learned) is kept while the choice is the same."""
        choice = self.scheduler_choice(pipeline, spec)
        current = self.scheduling.policies.get(pipeline)
        if current is None or not choice.same_policy(current):
            self.scheduling.set(pipeline, make_policy(choice.name, choice.latency_bound))
        previous = self.schedulers.get(pipeline)
        self.schedulers[pipeline] = choice
        if previous is not None and previous != choice:
            self.catalog.log_adjustment(
                pipeline, "scheduler", {"from": previous.to_json(), "to": choice.to_json()}
            )
            log.info("%s: scheduler %s (%s)", pipeline, choice.name, choice.origin)

    # -- window adjustments -----------------------------------------------------------------

    def adjust(
        self, pipeline: str, query: str, knob: str, value: int, reason: str = "api"
    ) -> list[Adjustment]:
        """Change a running query's window size or granularity inside its QoS (the pipeline
        file's `qos`); each change is logged in the catalog with the query's version, so a
        restored query makes it again. Raises KeyError for a query that does not run and
        AdjustmentError for a knob or value its QoS does not allow."""
        spec = self.pipelines.get(pipeline)
        q = self.queries.get(f"{pipeline}/{query}")
        if spec is None or q is None:
            raise KeyError(f"{pipeline}/{query}")
        kind, name = parse_knob(knob)
        for win in on_item(self.engine.windows(pipeline, query), name):
            _check_qos(spec.queries[query].qos, kind, value, win.names)
        made = self.engine.adjust(pipeline, query, knob, value, reason)
        for a in made:
            detail = {**a.to_json(), "version": q.version}
            del detail["query"], detail["knob"]
            self.catalog.log_adjustment(pipeline, a.knob, detail, query=query)
            log.info("%s/%s: %s of %s %d -> %d from %d (%s)", pipeline, query, a.knob,
                     a.window, a.old, a.new, a.since, reason)
        return made

    def _replay_adjustments(self, q: _Query) -> None:
        """A restored query's logged changes (those of its version), made again."""
        records = [
            logged_adjustment(r)
            for r in self.catalog.adjustments(q.pipeline, query=q.name)
            if r.kind in KNOBS and r.detail.get("version") == q.version
        ]
        if records:
            self.engine.replay(q.pipeline, records)

    # -- queries ----------------------------------------------------------------------------

    def _describe_query(self, spec: PipelineSpec, bq: Any, sink: SinkSpec) -> _Query:
        inputs = {**spec.streams, **spec.relations}
        plan = simplify(bq.plan)
        needs = horizons(plan)  # every source the query reads, with its horizon
        streams = {n: inputs[_declared(inputs, n)] for n in needs}
        keys = {n: source_key(s, spec.time_unit) for n, s in streams.items()}
        until = self.catalog.handover(spec.name, bq.name)
        if until is not None:  # its streams: the archive, then Kafka (service/handover.py)
            for n, s in streams.items():
                if not s.is_relation:
                    keys[n] = handover_key(spec.name, bq.name, s.name)
                    self._handovers[keys[n]] = (bq.plan, until)
        fingerprint = (plan, sink_json(sink), tuple(sorted(keys.items())))
        hz = {keys[n]: h for n, h in needs.items()}
        relations = {keys[n] for n, s in streams.items() if s.is_relation}
        return _Query(
            f"{spec.name}/{bq.name}", spec.name, bq.name, fingerprint, keys, hz, relations,
            handover=until,
        )

    def _start_queries(self, spec: PipelineSpec, queries: list[_Query], bound: list[Any]) -> None:
        inputs = {**spec.streams, **spec.relations}
        # Queries restored from a checkpoint (same version) start behind their old gates and
        # drop what was delivered; those with equal gates are planned together so they share
        # state again. Every other query starts now.
        groups: dict[str, list[int]] = {}
        saved: dict[str, dict[str, Any]] = {}
        for i, q in enumerate(queries):
            data = self._restore.pop(q.key, None)
            gates = None
            if data is not None and data.get("version") == q.version:
                saved[q.key] = data
                gates = data.get("gates")
            # A handed-over query reads sources of its own: it is planned alone.
            alone = q.key if q.handover is not None else None
            groups.setdefault(json.dumps([gates, alone], sort_keys=True), []).append(i)
        for gates_text, members in groups.items():
            gates = json.loads(gates_text)[0]
            source_keys: dict[str, str] = {}
            for i in members:
                for n, key in queries[i].source_keys.items():
                    self._ensure_source(key, inputs[_declared(inputs, n)], spec)
                    source_keys[n] = key
            pairs = []
            writers = {}
            for i in members:
                q, bq = queries[i], bound[i]
                pairs.append((replace(bq, name=q.key), spec.queries[q.name].sink))
            plan = plan_queries(pairs)
            for s in plan.sinks:
                q = next(queries[i] for i in members if queries[i].key == s.query)
                writer = open_sink(_for_worker(s.sink), list(s.columns), s.types)
                q.tee = ResultTee(writer, list(s.columns))
                frontier = int(saved.get(q.key, {}).get("frontier", NEVER))
                if q.handover is not None:
                    frontier = max(frontier, q.handover)
                writers[s.query] = ResumeFilter(q.tee, frontier) if frontier != NEVER else q.tee
            used = self.engine.add_queries(
                plan,
                source_keys,
                writers,
                None if gates is None else {k: int(v) for k, v in gates.items()},
                owner=spec.name,
            )
            for i in members:
                q = queries[i]
                q.gates = {k: v for k, v in used.items() if k in q.source_keys.values()}
                self.queries[q.key] = q
                if q.key in saved:
                    self._replay_adjustments(q)

    def _stop_query(self, q: _Query) -> None:
        self.engine.remove_query(q.key)
        self.queries.pop(q.key, None)
        if q.tee is not None:
            q.tee.close_subscribers()

    def _ensure_source(self, key: str, stream: StreamSpec, spec: PipelineSpec) -> None:
        if key in self.sources:
            return
        if key in self._handovers:
            plan, until = self._handovers[key]
            reader = open_handover(spec, stream, plan, until, self.catalog, self.config.batch_rows)
        else:
            reader = open_source(stream, spec.time_unit, self.config.batch_rows, live=True)
        if hasattr(reader, "positions") and key not in self._handovers:
            offsets = self._restore_offsets.get(key)
            if offsets:
                reader.seek({int(p): int(o) for p, o in offsets.items()})
            reader = OffsetTracker(reader)
        dead = DeadLetterSink(_for_worker(spec.dead_letter))
        fields = [f.name for f in stream.schema]
        source = L.Source(
            stream.name,
            tuple(L.Field(f.name, f.type, stream.name) for f in stream.schema),
            stream.is_relation,
        )
        self.engine.add_source(
            key,
            source,
            reader,
            SourceOptions(stream.is_relation, stream.max_delay, stream.late, stream.heartbeat),
            DeadLetterRouter(dead, {stream.name: fields}),
        )
        self.sources[key] = _Source(key, stream, reader, dead)

    def _drop_unread_sources(self) -> None:
        for key in [k for k in self.sources if self.engine.readers_of(k) == 0]:
            s = self.sources.pop(key)
            self.engine.remove_source(key)
            s.reader.close()
            s.dead_letter.close()

    # -- checkpoints ------------------------------------------------------------------------

    def checkpoint(self) -> None:
        """Make every result so far durable, then record what a restart must replay."""
        for sink in self.engine.sinks.values():
            sink.writer.flush()
        for s in self.sources.values():
            s.dead_letter.flush()
        frontiers = {key: self.engine.sinks[key].watermark for key in self.queries}
        queries = {
            key: {
                "frontier": int(frontiers[key]),
                "gates": {k: int(v) for k, v in q.gates.items()},
                "version": q.version,
            }
            for key, q in self.queries.items()
        }
        offsets: dict[str, dict[str, int]] = {}
        for key, s in self.sources.items():
            if not isinstance(s.reader, OffsetTracker):
                continue
            cuts = [
                query_cut(
                    frontiers[q.key],
                    q.horizons.get(key),
                    q.gates.get(key, NEVER),
                    key in q.relations,
                )
                for q in self.queries.values()
                if key in q.source_keys.values()
            ]
            cut = combine_cuts(cuts)
            at = s.reader.offsets(cut)
            offsets[key] = {str(p): int(o) for p, o in at.items()}
        # During the first reconcile, what the last worker left for queries and sources not
        # back yet is kept, so nothing is lost before they are.
        for key, data in self._restore.items():
            queries.setdefault(key, data)
        for key, data in self._restore_offsets.items():
            offsets.setdefault(key, data)
        self.catalog.save_checkpoint(self.config.name, _min_frontier(queries), offsets, queries)
        for key, s in self.sources.items():
            if isinstance(s.reader, OffsetTracker) and key in offsets:
                at = {int(p): o for p, o in offsets[key].items()}
                s.reader.commit(at, metadata=self.config.name)
                s.reader.forget_before(at)
        self.checkpoints += 1

    def _shutdown(self) -> None:
        self.spark_jobs.stop_all()
        if self._manager is not None:
            self._manager.shutdown(wait=False)
        self.archives.stop()
        try:
            self.checkpoint()
        except Exception:  # a broken sink must not hide why we stopped
            log.exception("final checkpoint failed")
        for sink in self.engine.sinks.values():
            sink.writer.close()
        for s in self.sources.values():
            s.reader.close()
            s.dead_letter.close()


def source_key(stream: StreamSpec, time_unit: str) -> str:
    """Streams declared alike (in any pipeline) are one source."""
    data = {
        **stream_json(stream),
        "schema": [(f.name, f.type.value) for f in stream.schema],  # in order
        "max_delay": stream.max_delay,
        "late": stream.late,
        "heartbeat": stream.heartbeat,
        "time_unit": time_unit,
    }
    return f"{stream.name}@{_hash_json(json.dumps(data, sort_keys=True, default=str))[:10]}"


def _for_worker(sink: SinkSpec) -> SinkSpec:
    """File sinks append under the worker: a restart must not erase delivered results."""
    if sink.type == "file":
        return replace(sink, options={**sink.options, "append": True})
    return sink


def _declared(inputs: dict[str, StreamSpec], name: str) -> str:
    if name in inputs:
        return name
    lower = {k.lower(): k for k in inputs}
    return lower[name.lower()]


def _qos_ranges(qos: QosSpec) -> dict[str, list[int]] | None:
    """A query's QoS ranges as the catalog keeps them: `window` (every Range window) or
    `window:NAME`, and `granularity` as [finest, coarsest] of its ladder (time_unit)."""
    if not qos.adjustable:
        return None
    out = {("window" if r.stream is None else f"window:{r.stream}"): [r.low, r.high]
           for r in qos.windows}
    if qos.granularity:
        out["granularity"] = [qos.granularity[0], qos.granularity[-1]]
    return out


def _check_qos(qos: QosSpec, kind: str, value: int, names: tuple[str, ...]) -> None:
    """`value` for knob `kind` of the window on FROM item `names` lies inside `qos`."""
    if kind == "granularity":
        if value not in qos.granularity:
            rungs = ", ".join(map(str, qos.granularity)) or "none"
            raise AdjustmentError(f"granularity {value} is not a rung of the qos ladder ({rungs})")
        return
    r = qos.window_range(names)
    if r is None:
        raise AdjustmentError(f"the window of {names[0]} has no qos.window range")
    if not r.low <= value <= r.high:
        raise AdjustmentError(
            f"window {value} for {names[0]} is outside its qos range [{r.low}, {r.high}]"
        )


def _start_after(gates: dict[str, int]) -> int | None:
    """The latest gate of a query's sources (None: it reads them from the start)."""
    live = [g for g in gates.values() if g != NEVER]
    return max(live) if live else None


def _min_frontier(queries: dict[str, dict[str, Any]]) -> int:
    values = [int(d["frontier"]) for d in queries.values()]
    return min(values) if values else int(NEVER)


def _hash_json(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def _hash_text(path: Path) -> str:
    try:
        return hashlib.sha256(path.read_bytes()).hexdigest()
    except OSError:
        return ""


def _git_revision(path: Path) -> str | None:
    try:
        out = subprocess.run(
            ["git", "-C", str(path.parent), "rev-parse", "HEAD"],
            capture_output=True,
            text=True,
            timeout=5,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return (out.stdout.strip() or None) if out.returncode == 0 else None


# -- what the API reads (each runs on the engine thread via Worker.call) -----------------------


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
        name = worker.file_pipeline.get(path)
        entry = pipelines.setdefault(name or path, {"name": name or path, "queries": {}})
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
    return {"pipelines": list(pipelines.values()), "paused": worker.paused}


def pipeline_control(worker: Worker, pipeline: str) -> dict[str, Any]:
    """A deployment's control as stored, and the scheduler it runs with (None: not running)."""
    _check_known(worker, pipeline)
    control = worker.catalog.pipeline_control(pipeline)
    choice = worker.schedulers.get(pipeline)
    empty = {"scheduler": None, "latency_bound_ms": None, "updated_at": None}
    return {
        "pipeline": pipeline,
        **(empty if control is None else _control_json(control)),
        "effective": None if choice is None else choice.to_json(),
    }


def set_pipeline_control(
    worker: Worker, pipeline: str, fields: dict[str, Any], *, merge: bool
) -> dict[str, Any]:
    """Change a deployment's control: `fields` replace it (`merge`: only the fields given,
    and a scheduler other than chain_bounded drops the stored bound)."""
    _check_known(worker, pipeline)
    scheduler = fields.get("scheduler")
    bound = fields.get("latency_bound_ms")
    stored = worker.catalog.pipeline_control(pipeline) if merge else None
    if stored is not None:
        if "scheduler" not in fields:
            scheduler = stored.scheduler
        if "latency_bound_ms" not in fields and scheduler == LATENCY_BOUNDED_SCHEDULER:
            bound = stored.latency_bound_ms
    worker.set_scheduler(pipeline, scheduler, bound)
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


def explain_pipeline(worker: Worker, pipeline: str) -> str:
    from cq_service.plan.explain import explain

    spec = worker.pipelines.get(pipeline)
    if spec is None:
        raise KeyError(pipeline)
    choice = worker.schedulers.get(pipeline) or worker.scheduler_choice(pipeline, spec)
    text = explain(compile_pipeline(spec).plan, choice.name)
    settings = {k: v for k, v in window_settings(worker).items() if k[0] == pipeline}
    if settings:
        text += "\nadjustable windows now (size, granularity in " + spec.time_unit + "):"
        for (_, query, item), (size, grain) in sorted(settings.items()):
            text += f"\n  {query} {item}: [Range {size}]" + (f" Γ({grain})" if grain > 1 else "")
    return text


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
            "lag": int(s.reader.lag()) if hasattr(s.reader, "lag") else 0,
            "watermark": None if op.watermark == NEVER else int(op.watermark),
        }
    statuses = Counter(d.status for d in worker.catalog.deployments())
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
        "sources": sources,
        "sinks": {key: sink.written for key, sink in worker.engine.sinks.items()},
        "paused": worker.paused,
        "checkpoints": worker.checkpoints,
        "adjustments": len(worker.catalog.adjustments()),
        "deployments": {s: statuses[s] for s in ("applied", "rejected", "removed")},
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
        "budgets": {name: st.to_json() for name, st in worker.budgets.states.items()},
    }


def window_settings(worker: Worker) -> dict[tuple[str, str, str], tuple[int, int]]:
    """(pipeline, query, FROM item) -> (size, granularity) now, of every adjustable window."""
    return {
        (op.owner, op.query, op.label): (op.size, op.granularity)
        for op in worker.engine.executor.operators
        if isinstance(op, RangeWindow) and op.query is not None
    }


def logged_adjustment(record: AdjustmentRecord) -> Adjustment:
    """A window change as the catalog's adjustments log keeps it (`Worker.adjust`)."""
    return Adjustment.from_json({**record.detail, "query": record.query, "knob": record.kind})


def adjust_query(
    worker: Worker, pipeline: str, name: str, knob: str, value: int
) -> dict[str, Any]:
    made = worker.adjust(pipeline, name, knob, value, reason="api")
    return {"adjustments": [a.to_json() for a in made]}


def query_adjustments(worker: Worker, pipeline: str, name: str) -> list[dict[str, Any]]:
    if worker.catalog.query(pipeline, name) is None:
        raise KeyError(f"{pipeline}/{name}")
    return [_record_json(r) for r in worker.catalog.adjustments(pipeline, query=name)]


def _check_known(worker: Worker, pipeline: str) -> None:
    """A pipeline is known while it runs or while the catalog has its queries."""
    if pipeline not in worker.pipelines and not worker.catalog.queries(pipeline):
        raise KeyError(f"pipeline {pipeline}")


def _control_json(control: PipelineControlRecord) -> dict[str, Any]:
    return {
        "scheduler": control.scheduler,
        "latency_bound_ms": control.latency_bound_ms,
        "updated_at": control.updated_at.isoformat(),
    }


def _record_json(record: Any) -> dict[str, Any]:
    from dataclasses import asdict, is_dataclass

    data = asdict(record) if is_dataclass(record) else dict(record)
    return json.loads(json.dumps(data, default=str))
