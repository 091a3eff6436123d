"""Deploying a pipeline version on the live engine: diffed query by query against what runs.

A query whose plan, sink and sources are unchanged keeps running with its state; a changed one
is replaced (the new version starts at the sources' current time); a removed one stops
(docs/service.md, "Deploying"). It happens in two phases: first every source and sink the new
and changed queries need is opened while everything runs on — one that cannot be opened rejects
the version with nothing stopped (`DeployErrors`, each at its FILE:LINE:COL) — then what
changed or went is stopped and the new queries start on what was opened. The queries that start
together are planned together: equal subplans run once and joins differing only in their
windows share one join (plan/shared_joins.py, per `resources.shared_join`). Queries restored from
the last worker's checkpoint start behind their old gates and drop what was delivered. A
runner-spark pipeline runs as its own Spark job instead (spark_jobs.py).
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from cq_service.adaptive.filter_order import pipeline_orderers
from cq_service.adaptive.join_choice import join_chooser
from cq_service.adaptive.k_constraints import monitor_adherence
from cq_service.catalog.spec_json import sink_json
from cq_service.compiler import CompiledPipeline, compile_pipeline
from cq_service.cql import logical as L
from cq_service.engine.build import SourceOptions
from cq_service.engine.join_constraints import declared as declared_constraints
from cq_service.engine.live import GroupState
from cq_service.engine.operators.base import NEVER
from cq_service.errors import CQError, Span, Unreachable
from cq_service.io import open_sink, open_source
from cq_service.io.dead_letter import DeadLetterSink
from cq_service.plan.mjoins import multiway_joins
from cq_service.plan.physical import SinkNode
from cq_service.plan.planner import plan_queries
from cq_service.plan.rewrite import simplify
from cq_service.plan.shared_joins import share_window_joins
from cq_service.runner import DeadLetterRouter
from cq_service.service import failpoints
from cq_service.service.adjusting import qos_ranges, replay_adjustments
from cq_service.service.budgets import BudgetKeeper
from cq_service.service.checkpoint import OffsetTracker, ResumeFilter, horizons
from cq_service.service.checkpointer import Checkpointer
from cq_service.service.handover import handover_key, open_handover
from cq_service.service.restore import RestorePoint
from cq_service.service.results import ResultTee
from cq_service.service.running import (
    RunningQuery,
    RunningSource,
    Runtime,
    declared,
    file_digest,
    source_key,
    worker_sink,
)
from cq_service.service.scheduling import Schedulers
from cq_service.service.spark_jobs import SparkJobs
from cq_service.spec.model import PipelineSpec, SinkSpec, StreamSpec

__all__ = ["DeployErrors", "DeployResult", "Deployer"]

log = logging.getLogger("cq.worker")


@dataclass
class DeployResult:
    pipeline: str
    status: str  # applied | rejected | unchanged | removed | waiting (for a dependency)
    added: list[str] = field(default_factory=list)
    replaced: list[str] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)
    kept: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    rejected: dict[str, str] = field(default_factory=dict)  # query -> why it did not fit

    def to_json(self) -> dict[str, Any]:
        return self.__dict__.copy()


class Deployer:
    def __init__(
        self,
        rt: Runtime,
        budgets: BudgetKeeper,
        checkpoints: Checkpointer,
        restore: RestorePoint,
        schedulers: Schedulers,
        spark_jobs: SparkJobs,
    ):
        self.rt = rt
        self.schedulers = schedulers
        self.budgets = budgets
        self.checkpoints = checkpoints
        self.restore = restore
        self.spark_jobs = spark_jobs
        self._handovers: dict[str, tuple[Any, int]] = {}  # source key -> (plan, T2)
        self._opened: dict[str, Any] = {}  # query key -> its sink, opened by phase 1

    def deploy(
        self, compiled: CompiledPipeline, revision: str | None = None, spec_hash: str | None = None
    ) -> DeployResult:
        """Run this version of a pipeline: diff it query by query against what runs
        (`spec_hash`: its file's content hash, read from the file if not given)."""
        rt = self.rt
        spec = compiled.spec
        name = spec.name
        spec_hash = file_digest(Path(spec.path)) if spec_hash is None else spec_hash
        if spec.resources.runner == "spark":
            return self._deploy_on_spark(spec, revision, spec_hash)
        result = DeployResult(name, "applied")
        active = {q.name: q for q in rt.catalog.queries(name)}
        desired: dict[str, RunningQuery] = {}
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
        running = {q.name: q for q in rt.queries_of(name)}
        changed = [
            n for n in desired if n not in running or desired[n].fingerprint != running[n].fingerprint
        ]
        # Phase 1: open every new source and sink while the running version runs on; one that
        # cannot be opened rejects the deployment (Unreachable: it waits) with nothing stopped.
        self._open_new(spec, [desired[n] for n in changed], [bound[n] for n in changed])
        self.spark_jobs.stop(name)  # back from Spark to the engine
        # Phase 2: stop what changed or went, start the new version on what phase 1 opened.
        try:
            for qname, q in running.items():
                new = desired.get(qname)
                if new is None or new.fingerprint != q.fingerprint:
                    self.stop_query(q)
                    (result.replaced if new is not None else result.removed).append(qname)
            failpoints.hit("deploy.stopped")
            start = [n for n in desired if n not in running or n in result.replaced]
            result.kept = [n for n in desired if n not in start]
            turned_away: dict[str, RunningQuery] = {}
            admitted = self.budgets.admit(
                spec, [desired[n] for n in start], [bound[n] for n in start]
            )
            for r in admitted:
                qname = r.query.split("/", 1)[1]
                result.rejected[qname] = r.reason
                start.remove(qname)
                turned_away[qname] = desired.pop(qname)
            result.added = [n for n in start if n not in result.replaced]
            if start:
                self._start_queries(spec, [desired[n] for n in start], [bound[n] for n in start])
        except Exception:
            # Not a source or sink (phase 1 opened those): a failure of the engine itself. The
            # pipeline is left as the previous version, restarted from empty state.
            log.exception("deploying %s failed after its queries were stopped", name)
            self._close_opened()
            for q in rt.queries_of(name):
                self.stop_query(q)
            previous = rt.pipelines.get(name)
            if previous is not None and previous is not spec:
                self.deploy(compile_pipeline(previous))
            raise
        finally:
            self._close_opened()
        failpoints.hit("deploy.started")
        for qname in desired:
            q = desired[qname] if qname in start else running[qname]
            rt.catalog.upsert_query(
                name,
                qname,
                spec.queries[qname].cql,
                sink_json(spec.queries[qname].sink),
                spec.queries[qname].weight,
                q.version,
                "running",
                start_after=_start_after(q.gates),
                qos=qos_ranges(spec.queries[qname].qos),
            )
        for qname in result.removed:
            rt.catalog.set_query_status(name, qname, "stopped")
        for qname, reason in result.rejected.items():
            qspec = spec.queries[qname]
            rt.catalog.upsert_query(
                name, qname, qspec.cql, sink_json(qspec.sink), qspec.weight,
                turned_away[qname].version, "stopped",
                error=f"rejected by admission control: {reason}", qos=qos_ranges(qspec.qos),
            )
            rt.catalog.log_adjustment(name, "rejected", {"reason": reason}, query=qname)
            log.warning("%s/%s: rejected by admission control: %s", name, qname, reason)
        for stream in [*spec.streams.values(), *spec.relations.values()]:
            rt.catalog.upsert_source(name, stream)  # `cq relation load` checks against these
        self.drop_unread_sources()
        rt.pipelines[name] = spec
        self.schedulers.apply(name, spec)
        if not (result.added or result.replaced or result.removed or result.rejected):
            result.status = "unchanged"
        rt.catalog.record_deployment(name, spec_hash, revision, "applied")
        self.checkpoints.write()
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
        self, spec: PipelineSpec, revision: str | None, spec_hash: str
    ) -> DeployResult:
        """A runner-spark pipeline: its own Spark job (service/spark_jobs.py) instead of the
        engine; what ran of it on the engine stops."""
        rt = self.rt
        name = spec.name
        result = DeployResult(name, "applied")
        change = self.spark_jobs.deploy(spec, spec_hash)  # SparkRunnerError: nothing changes
        for q in rt.queries_of(name):
            self.stop_query(q)
        rt.pipelines.pop(name, None)
        self.schedulers.forget(name)
        self.drop_unread_sources()
        queries = [n for n, q in spec.queries.items() if q.sink is not None]
        if change == "unchanged":
            result.status, result.kept = "unchanged", queries
        else:
            (result.added if change == "added" else result.replaced).extend(queries)
            for qname in queries:
                qspec = spec.queries[qname]
                rt.catalog.upsert_query(
                    name, qname, qspec.cql, sink_json(qspec.sink), qspec.weight,
                    spec_hash, "running", qos=qos_ranges(qspec.qos),
                )
            for stream in [*spec.streams.values(), *spec.relations.values()]:
                rt.catalog.upsert_source(name, stream)
        rt.catalog.record_deployment(name, spec_hash, revision, "applied")
        log.info("deployed %s on Spark: %s", name, change)
        return result

    def undeploy(self, name: str) -> DeployResult:
        """Stop every query of pipeline `name` (its file is gone)."""
        rt = self.rt
        result = DeployResult(name, "removed")
        on_spark = self.spark_jobs.specs.get(name)
        if on_spark is not None and self.spark_jobs.stop(name):
            for qname in [n for n, q in on_spark.queries.items() if q.sink is not None]:
                rt.catalog.set_query_status(name, qname, "stopped")
                result.removed.append(qname)
        for q in rt.queries_of(name):
            self.stop_query(q)
            rt.catalog.set_query_status(name, q.name, "stopped")
            result.removed.append(q.name)
        rt.pipelines.pop(name, None)
        self.schedulers.forget(name)  # its policy went with its operators (ByOwner.attach)
        self.drop_unread_sources()
        rt.catalog.record_deployment(name, "", None, "removed")
        self.checkpoints.write()
        return result

    def set_active(self, pipeline: str, query: str, active: bool) -> None:
        """Start or stop a query by its control flag (kept in the catalog)."""
        self.rt.catalog.set_control(pipeline, query, active=active)
        spec = self.rt.pipelines.get(pipeline)
        if spec is not None:
            self.deploy(compile_pipeline(spec))

    # -- queries --------------------------------------------------------------------------------

    def _describe_query(self, spec: PipelineSpec, bq: Any, sink: SinkSpec) -> RunningQuery:
        inputs = {**spec.streams, **spec.relations}
        plan = simplify(bq.plan)
        needs = horizons(plan)  # every source the query reads, with its horizon
        streams = {n: inputs[declared(inputs, n)] for n in needs}
        keys = {n: source_key(s, spec.time_unit) for n, s in streams.items()}
        until = self.rt.catalog.handover(spec.name, bq.name)
        if until is not None:  # its streams: the archive, then Kafka (service/handover.py)
            for n, s in streams.items():
                if not s.is_relation:
                    keys[n] = handover_key(spec.name, bq.name, s.name)
                    self._handovers[keys[n]] = (bq.plan, until)
        fingerprint = (plan, sink_json(sink), tuple(sorted(keys.items())))
        hz = {keys[n]: h for n, h in needs.items()}
        relations = {keys[n] for n, s in streams.items() if s.is_relation}
        return RunningQuery(
            f"{spec.name}/{bq.name}", spec.name, bq.name, fingerprint, keys, hz, relations,
            handover=until,
        )

    def _start_queries(
        self, spec: PipelineSpec, queries: list[RunningQuery], bound: list[Any]
    ) -> None:
        rt = self.rt
        inputs = {**spec.streams, **spec.relations}
        # Queries of the same version as the last worker's come back (restore.py): from the
        # snapshot when it holds their group and its sources, else by replay behind their old
        # gates; those with equal gates are planned together so they share state again. Every
        # other query starts now.
        groups: dict[str, list[int]] = {}
        saved: dict[str, dict[str, Any]] = {}
        from_snapshot: dict[int, tuple[GroupState, list[RunningQuery]]] = {}
        afresh: set[str] = set()
        for i, q in enumerate(queries):
            for n, key in q.source_keys.items():
                self._ensure_source(key, inputs[declared(inputs, n)], spec)
            data = self.restore.saved_query(q.key)
            gates = None
            if data is not None and data.get("version") == q.version:
                saved[q.key] = data
                gates = data.get("gates")
                group = self.restore.snapshot_group(q.key, q.version)
                if group is not None and q.handover is None and self._sources_restored(
                    group, inputs, spec
                ):
                    from_snapshot.setdefault(id(group), (group, []))[1].append(q)
                    continue
                gates = self._replayable(q, gates)
                if gates is None:
                    afresh.add(q.key)
            # A handed-over query reads sources of its own: it is planned alone.
            alone = q.key if q.handover is not None else None
            groups.setdefault(json.dumps([gates, alone], sort_keys=True), []).append(i)
        for group, members in from_snapshot.values():
            self._restore_group(group, members, saved, spec)
        for gates_text, members in groups.items():
            gates = json.loads(gates_text)[0]
            source_keys = {n: key for i in members for n, key in queries[i].source_keys.items()}
            pairs = []
            writers = {}
            for i in members:
                q, bq = queries[i], bound[i]
                pairs.append((replace(bq, name=q.key), spec.queries[q.name].sink))
            # Joins of the group that differ only in their windows share one join, as on `cq
            # run` (plan/shared_joins.py); a snapshot keeps this plan (GroupState.plan).
            # Under `join: auto` the form of each n-way join is chosen as `cq run` chooses
            # it (adaptive/join_choice.py, from default statistics at deployment).
            choose = join_chooser(None, spec.time_unit_ns / 1e9)
            plan = multiway_joins(plan_queries(pairs), spec.resources.join, choose)
            plan = share_window_joins(plan, spec.resources.shared_join)
            for s in plan.sinks:
                q = next(queries[i] for i in members if queries[i].key == s.query)
                frontier = int(saved.get(q.key, {}).get("frontier", NEVER))
                if q.handover is not None:
                    frontier = max(frontier, q.handover)
                writers[s.query] = self._writer(q, s, frontier)
            used = rt.engine.add_queries(
                plan,
                source_keys,
                writers,
                None if gates is None else {k: int(v) for k, v in gates.items()},
                owner=spec.name,
                filter_order=pipeline_orderers(spec),
                constraints=declared_constraints(spec.streams, spec.queries),
                adherence=monitor_adherence,
            )
            for i in members:
                q = queries[i]
                q.gates = {k: v for k, v in used.items() if k in q.source_keys.values()}
                rt.queries[q.key] = q
                if q.key in saved and q.key not in afresh:
                    replay_adjustments(rt, q)

    def _writer(self, q: RunningQuery, s: SinkNode, frontier: int) -> Any:
        """Query `q`'s result writer, dropping results at or before `frontier` (delivered)."""
        writer = self._opened.pop(q.key, None)
        if writer is None or (writer.names, writer.types) != (tuple(s.columns), tuple(s.types)):
            if writer is not None:
                writer.close()
            writer = self.rt.tune(open_sink(worker_sink(s.sink), list(s.columns), s.types))
        q.tee = ResultTee(writer, list(s.columns))
        return ResumeFilter(q.tee, frontier) if frontier != NEVER else q.tee

    def _open_new(
        self, spec: PipelineSpec, queries: list[RunningQuery], bound: list[Any]
    ) -> None:
        """Open the sources and sinks of the queries about to start, before anything stops.

        Every one is tried; those that fail are raised together as `DeployErrors`, each at
        its place in the pipeline file (`Unreachable` if all that failed is a dependency that
        cannot be reached now: the deployment waits). Whatever was opened is closed again and
        the sources it added are dropped: the engine is as before."""
        rt = self.rt
        inputs = {**spec.streams, **spec.relations}
        errors: list[CQError] = []
        away: Unreachable | None = None
        had = set(rt.sources)
        failed: set[str] = set()  # source keys that did not open (once per source)
        for q, bq in zip(queries, bound, strict=True):
            for n, key in q.source_keys.items():
                if key in failed:
                    continue
                stream = inputs[declared(inputs, n)]
                failed.add(key)
                try:
                    self._ensure_source(key, stream, spec)
                    failed.discard(key)
                except Unreachable as e:
                    away = away or e
                except Exception as e:  # any failure to open is the deployment's
                    errors.append(_located(e, f"source of {stream.name}", stream.source.span,
                                           spec.path))
            sink = spec.queries[q.name].sink
            assert sink is not None
            try:
                [node] = plan_queries([(replace(bq, name=q.key), sink)]).sinks
            except Exception as e:  # caught before anything stops, like a sink
                message = e.message if isinstance(e, CQError) else f"{type(e).__name__}: {e}"
                errors.append(CQError(f"query {q.name} cannot be planned: {message}",
                                      spec.queries[q.name].span, file=spec.path))
                continue
            try:
                self._opened[q.key] = rt.tune(
                    open_sink(worker_sink(node.sink), list(node.columns), node.types)
                )
            except Unreachable as e:
                away = away or e
            except Exception as e:
                errors.append(_located(e, f"sink of {q.name}", sink.span, spec.path))
        if errors or away is not None:
            self._close_opened()
            for key in set(rt.sources) - had:
                self.restore.restored_sources.pop(key, None)
            self.drop_unread_sources()
            if errors:
                raise DeployErrors(errors, file=spec.path)
            assert away is not None
            raise away

    def _close_opened(self) -> None:
        """Close the sinks phase 1 opened that no query took."""
        while self._opened:
            _, writer = self._opened.popitem()
            try:
                writer.close()
            except Exception:  # one that cannot close must not hide the cause
                log.exception("closing an unused sink failed")

    def _sources_restored(
        self, group: GroupState, inputs: dict[str, StreamSpec], spec: PipelineSpec
    ) -> bool:
        """Whether every source of a saved group comes back from the snapshot (opening those
        not open yet)."""
        for name, key in group.source_keys.items():
            try:
                self._ensure_source(key, inputs[declared(inputs, name)], spec)
            except KeyError:  # a stream of the group's other queries is gone from the file
                return False
        return all(key in self.restore.restored_sources for key in group.source_keys.values())

    def _restore_group(
        self,
        group: GroupState,
        members: list[RunningQuery],
        saved: dict[str, dict[str, Any]],
        spec: PipelineSpec,
    ) -> None:
        """Rebuild a saved group of deployment `spec` from the snapshot; its queries not in
        `members` (changed or gone since) are left out."""
        rt = self.rt
        writers = {}
        for s in group.plan.sinks:
            q = next((m for m in members if m.key == s.query), None)
            if q is not None:
                frontier = max(int(saved[q.key].get("frontier", NEVER)),
                               self.restore.snapshot_frontier(q.key) or int(NEVER))
                writers[s.query] = self._writer(q, s, frontier)
        used = rt.engine.restore_group(
            group, writers, [q.key for q in members], pipeline_orderers(spec),
            declared_constraints(spec.streams, spec.queries), monitor_adherence,
        )
        for q in members:
            q.gates = {k: v for k, v in used.items() if k in q.source_keys.values()}
            rt.queries[q.key] = q
        log.info("restored from the snapshot: %s", ", ".join(q.key for q in members))

    def _replayable(self, q: RunningQuery, gates: dict[str, int] | None) -> dict[str, int] | None:
        """A query of the same version whose group the snapshot does not hold is rebuilt by
        replay behind its gates — unless a source it reads came back from the snapshot and
        the query needs what came before the snapshot (a gate before it, or a relation):
        then it starts afresh (None)."""
        for key, gate in (gates or {}).items():
            cut = self.restore.restored_sources.get(key)
            if cut is not None and (key in q.relations or int(gate) < cut):
                log.warning("%s starts afresh: it needs %s from before the snapshot", q.key, key)
                return None
        return gates

    def stop_query(self, q: RunningQuery) -> None:
        writer = self.rt.engine.remove_query(q.key, close_sink=False)
        if writer is not None:
            self.rt.retire(writer)  # delivered now, or by a checkpoint once its broker is back
        self.rt.queries.pop(q.key, None)
        if q.tee is not None:
            q.tee.close_subscribers()

    def _ensure_source(self, key: str, stream: StreamSpec, spec: PipelineSpec) -> None:
        rt = self.rt
        if key in rt.sources:
            return
        if key in self._handovers:
            plan, until = self._handovers[key]
            reader = open_handover(spec, stream, plan, until, rt.catalog, rt.config.batch_rows)
        else:
            reader = rt.tune(
                open_source(stream, spec.time_unit, rt.config.batch_rows, live=True)
            )
        saved = None
        if hasattr(reader, "positions") and key not in self._handovers:
            saved = self.restore.snapshot_source(key)
            offsets = saved[0] if saved is not None else self.restore.saved_offsets(key)
            if offsets:
                reader.seek({int(p): int(o) for p, o in offsets.items()})
            reader = OffsetTracker(reader)
        dead = rt.tune(DeadLetterSink(worker_sink(spec.dead_letter)))
        fields = [f.name for f in stream.schema]
        source = L.Source(
            stream.name,
            tuple(L.Field(f.name, f.type, stream.name) for f in stream.schema),
            stream.is_relation,
        )
        rt.engine.add_source(
            key,
            source,
            reader,
            SourceOptions(stream.is_relation, stream.max_delay, stream.late, stream.heartbeat),
            DeadLetterRouter(dead, {stream.name: fields}),
        )
        rt.sources[key] = RunningSource(key, stream, reader, dead)
        if saved is not None:  # its state at the snapshot: it goes on from there
            rt.engine.restore_source(key, saved[1])
            self.restore.restored_sources[key] = int(rt.engine.sources[key].watermark)

    def drop_unread_sources(self) -> None:
        rt = self.rt
        for key in [k for k in rt.sources if rt.engine.readers_of(k) == 0]:
            s = rt.sources.pop(key)
            rt.engine.remove_source(key)
            s.reader.close()
            s.dead_letter.close()


class DeployErrors(CQError):
    """The sources and sinks of a deployment that could not be opened, each rendered
    ``FILE:LINE:COL: message``."""

    def __init__(self, errors: list[CQError], *, file: str | None = None):
        self.errors = errors
        super().__init__(f"{len(errors)} source(s) or sink(s) cannot be opened", file=file)

    def lines(self) -> list[str]:
        return [e.render() for e in self.errors]

    def render(self) -> str:
        return "\n".join(self.lines())


def _located(error: Exception, what: str, span: Span, file: str) -> CQError:
    """`error` of opening `what`, at `span` in pipeline `file`."""
    message = error.message if isinstance(error, CQError) else f"{type(error).__name__}: {error}"
    where = error.span if isinstance(error, CQError) and error.span is not None else span
    return CQError(f"{what} cannot be opened: {message}", where, file=file)


def _start_after(gates: dict[str, int]) -> int | None:
    """The latest gate of a query's sources (None: it reads them from the start)."""
    live = [g for g in gates.values() if g != NEVER]
    return max(live) if live else None
