"""The worker (`cq serve`): every deployed pipeline in one live engine.

One thread owns the engine and runs a loop: poll the sources (unless the queues, or the results
the sinks hold unacknowledged, are over their budgets — then the sources are paused — and as
much of each pausable source as its deployments' memory budgets leave room for, pacing.py;
nothing while the last turn left work undone), drain the operators for at most `turn_seconds`, move followers' clocks, run what other threads
handed over, and, on their intervals, reconcile the pipelines folder, write a checkpoint and
gather the dependencies' outages. Everything else — the HTTP API, `cq deploy`, the resource
manager's rounds — hands work to that thread with `call`, so the engine is never touched by
two threads; since a turn is bounded in time, a call waits about one turn.

A broker or the catalog going away does not stop the loop (dependencies.py): sources read
nothing, sinks keep their results, checkpoints and deployments wait and are retried with
backoff, and `/readyz` says what is unreachable until it answers again.

The worker is the loop and the composition of its parts, each in a module of its own:
running.py (what runs: `Runtime`), reconciler.py (the pipelines folder), deployer.py
(deploying a version query by query), checkpointer.py (checkpoints and what a restart
restores), scheduling.py (each deployment's scheduler), adjusting.py (window changes inside
the QoS), budgets.py (the resource manager), spark_jobs.py and archiving.py (Spark), and
views.py (what the API reads).
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future
from pathlib import Path
from typing import Any, TypeVar

from apscheduler.schedulers.background import BackgroundScheduler

from cq_service.catalog import Catalog, CatalogUnavailable, PipelineControlRecord
from cq_service.compiler import CompiledPipeline
from cq_service.engine.adjust import Adjustment
from cq_service.engine.live import LiveEngine
from cq_service.engine.scheduler import ByOwner
from cq_service.engine.scheduler import policy as make_policy
from cq_service.errors import Unreachable
from cq_service.io.reachability import Backoff
from cq_service.service import adjusting, failpoints
from cq_service.service.archiving import ArchiveSchedule
from cq_service.service.budgets import BudgetKeeper
from cq_service.service.checkpointer import Checkpointer
from cq_service.service.config import ServiceConfig
from cq_service.service.dependencies import INTERVAL_S, Dependencies, gather
from cq_service.service.deployer import Deployer, DeployResult
from cq_service.service.pacing import Pacing
from cq_service.service.reconciler import Reconciler
from cq_service.service.restore import RestorePoint
from cq_service.service.running import RunningQuery, RunningSource, Runtime
from cq_service.service.scheduling import SchedulerChoice, Schedulers
from cq_service.service.snapshots import SnapshotStore
from cq_service.service.spark_jobs import SparkJobs
from cq_service.spec.model import DEFAULT_SCHEDULER, PipelineSpec

__all__ = ["DeployResult", "SchedulerChoice", "Worker"]

log = logging.getLogger("cq.worker")
T = TypeVar("T")
LAG_INTERVAL_S = 1.0  # how often the sources' lags are asked for /metrics


class Worker:
    def __init__(self, config: ServiceConfig, catalog: Catalog):
        self.config = config
        self.catalog = catalog
        failpoints.arm(config.failpoints)  # crash tests only; empty: none
        # Deployments take turns; each is scheduled by its own policy (scheduling.py).
        policies = ByOwner(lambda: make_policy(config.policy or DEFAULT_SCHEDULER))
        engine = LiveEngine(policies, budget=config.batch_rows, step_seconds=config.step_seconds)
        self.runtime = Runtime(config, catalog, policies, engine)
        self.paused = False
        self.ready = False
        self._engine_thread: threading.Thread | None = None  # the thread in `run`
        self._commands: queue.Queue[tuple[Callable[[], Any], Future]] = queue.Queue()
        self._stop = threading.Event()
        self._reconcile_due = 0.0
        # What the worker depends on, and when to look at the catalog again once it is away.
        self.dependencies = Dependencies()
        self._dependencies_due = 0.0
        self._catalog_backoff = Backoff(config.retry_backoff, config.retry_backoff_max)
        self._catalog_ping_due = 0.0
        # /metrics' counts from the catalog, as it last gave them (shown while it is away)
        self.catalog_counts: dict[str, Any] = {
            "deployments": {"applied": 0, "rejected": 0, "removed": 0}, "adjustments": 0
        }
        # State snapshots (snapshots.py) and what the last worker of this name left (restore.py)
        self.snapshots = (
            SnapshotStore(config.snapshot_folder, config.snapshot_keep)
            if config.snapshot_interval > 0 else None
        )
        self.restore = RestorePoint(catalog, config.name, self.snapshots)
        self.checkpointer = Checkpointer(
            self.runtime, self.restore, self.snapshots, self.dependencies
        )
        self.budgets = BudgetKeeper(self.runtime)  # the resource manager (service/budgets.py)
        engine.entity_sources.append(self.budgets.entity_rows)  # on SysStream
        self.pacing = Pacing(self.runtime, self.budgets, self._round_now)  # pacing.py
        self.lags: dict[str, int] = {}  # source key -> records behind, as last asked
        self._lags_due = 0.0
        self._manager: BackgroundScheduler | None = None
        # `resources: {runner: spark}`: those pipelines run as Spark jobs, not on the engine.
        # `archive.every`: the deployed pipelines' archives, off the engine thread.
        master = config.spark_master or None
        self.spark_jobs = SparkJobs(
            Path(config.spark_checkpoints) / config.name, trigger=config.spark_trigger,
            master=master,
        )
        self.archives = ArchiveSchedule(lambda: {**self.pipelines, **self.spark_jobs.specs},
                                        catalog, master=master)
        self._schedulers = Schedulers(self.runtime)
        self.deployer = Deployer(
            self.runtime, self.budgets, self.checkpointer, self.restore, self._schedulers,
            self.spark_jobs,
        )
        self.reconciler = Reconciler(self.runtime, self.deployer, self.dependencies)

    # -- what runs (runtime) ----------------------------------------------------------------

    @property
    def engine(self) -> LiveEngine:
        return self.runtime.engine

    @property
    def scheduling(self) -> ByOwner:
        return self.runtime.scheduling

    @property
    def sources(self) -> dict[str, RunningSource]:
        return self.runtime.sources

    @property
    def queries(self) -> dict[str, RunningQuery]:
        return self.runtime.queries

    @property
    def pipelines(self) -> dict[str, PipelineSpec]:
        return self.runtime.pipelines

    @property
    def schedulers(self) -> dict[str, SchedulerChoice]:
        """The running deployments' scheduler choices."""
        return self._schedulers.choices

    @property
    def errors(self) -> dict[str, list[str]]:
        """Pipeline file -> the errors of its last, rejected, attempt."""
        return self.reconciler.errors

    @property
    def file_pipeline(self) -> dict[str, str]:
        return self.reconciler.file_pipeline

    @property
    def checkpoints(self) -> int:
        """Checkpoints written by this worker."""
        return self.checkpointer.written

    # -- the loop ---------------------------------------------------------------------------

    def run(self) -> None:
        """Run until `stop` is called."""
        self._engine_thread = threading.current_thread()
        try:
            self.reconcile()
            self.restore.forget()
            self.ready = True
            self._start_manager()
            self.archives.start()
            while not self._stop.is_set():
                self.step()
        finally:
            self._shutdown()

    def step(self) -> None:
        read = self._poll_sources()
        self._run_commands()
        self.engine.executor.drain(max_steps=10_000, seconds=self.config.turn_seconds)
        self.engine.executor.follow_clocks()
        self._run_commands()
        now = time.monotonic()
        if now >= self._lags_due:
            self._lags_due = now + LAG_INTERVAL_S
            self._refresh_lags()
        if now >= self._reconcile_due:
            self._reconcile_due = now + self.config.reconcile_interval
            self.reconcile()
        if now >= self.checkpointer.due:
            self.checkpoint()
        if now >= self._dependencies_due:
            self._dependencies_due = now + INTERVAL_S
            self._check_dependencies(now)
        if not read:
            time.sleep(0.005)

    def stop(self) -> None:
        self._stop.set()

    def _round_now(self, pipeline: str) -> None:
        """A round of the resource manager for one deployment, now (the pacing asks)."""
        if self.catalog.outage is not None:
            return  # its changes are logged in the catalog: none while it is away
        self.budgets.tick(pipeline)

    def _refresh_lags(self) -> None:
        """How far behind each source with a lag (Kafka) is, for /metrics and the pacing: as
        its last fetch told, on the engine thread once a second, so neither /metrics nor the
        loop waits on a broker (`lag()` asks the brokers and can block for seconds)."""
        for key, s in self.sources.items():
            lag = getattr(s.reader, "known_lag", None) or getattr(s.reader, "lag", None)
            if lag is None:
                continue
            try:
                self.lags[key] = int(lag())
            except Exception:  # an outage: keep the last figure; dependencies.py reports it
                log.debug("lag of %s not known now", key, exc_info=True)
        for key in [k for k in self.lags if k not in self.sources]:
            del self.lags[key]

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
        if self._stop.is_set() or self.catalog.outage is not None:
            return  # its changes are logged in the catalog: none while it is away
        try:
            self.call(self.budgets.tick, timeout=max(30.0, 4 * self.config.manage_interval))
        except Exception:  # a round that fails or times out: the next one tries again
            if not self._stop.is_set():
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

    def _check_dependencies(self, now: float) -> None:
        """Look at the catalog again if it is away (when the backoff says so), then gather
        every part's outages for readiness and metrics."""
        if self.catalog.outage is not None and now >= self._catalog_ping_due:
            try:
                self.catalog.ping()
            except CatalogUnavailable as e:
                self.dependencies.retried(e.outage.dependency)
                self._catalog_ping_due = now + self._catalog_backoff.next()
            else:
                self._catalog_backoff.reset()
        known, outages = gather(self.runtime, self.reconciler.waiting.values())
        self.dependencies.observe(known, outages)

    def buffered_bytes(self) -> int:
        """Bytes of results the sinks (and dead-letter sinks) hold, not acknowledged yet."""
        parts = [sink.writer for sink in self.engine.sinks.values()]
        parts += [s.dead_letter for s in self.sources.values()] + self.runtime.retiring
        return sum(getattr(part, "pending", (0, 0))[1] for part in parts)

    def _poll_sources(self) -> bool:
        executor = self.engine.executor
        queued = executor.queued_rows()
        buffered = self.buffered_bytes()
        budget, buffer = self.config.queue_budget, self.config.sink_buffer_bytes
        if not self.paused and (queued > budget or buffered > buffer):
            self.paused = True
            for s in self.sources.values():
                getattr(s.reader, "pause", lambda: None)()
        elif self.paused and queued <= budget // 2 and buffered <= buffer // 2:
            self.paused = False
            for s in self.sources.values():
                getattr(s.reader, "resume", lambda: None)()
        held = self.pacing.turn()  # pausable sources over their deployments' budgets
        if self.paused or not executor.drained:
            return False  # (the last turn's drain was cut short: the engine is behind)
        paced = {id(self.engine.sources[k]) for k in held if k in self.engine.sources}
        read = False
        for op in executor.sources:
            if op.exhausted or id(op) in paced:
                continue
            before = op.rows_in
            op.run(self.config.batch_rows)
            read |= op.rows_in != before
        return read

    # -- deploying (reconciler.py, deployer.py) ---------------------------------------------

    def reconcile(self) -> list[DeployResult]:
        """Apply every pipeline file in the folder that changed since it was last seen; stop
        the pipelines whose files are gone."""
        return self.reconciler.reconcile()

    def deploy_file(self, path: Path) -> DeployResult:
        """Validate and deploy one pipeline file now."""
        return self.reconciler.deploy_file(path)

    def deploy_text(self, text: str, filename: str, at: Path | None = None) -> DeployResult:
        """Deploy pipeline `text` sent through the API (kept in the catalog, deployed again at
        every start-up; `at`: the file outside the pipelines folder it was read from)."""
        return self.reconciler.deploy_text(text, filename, at)

    def deploy(
        self, compiled: CompiledPipeline, revision: str | None = None, spec_hash: str | None = None
    ) -> DeployResult:
        """Run this version of a pipeline: diff it query by query against what runs."""
        return self.deployer.deploy(compiled, revision, spec_hash)

    def undeploy(self, name: str) -> DeployResult:
        return self.deployer.undeploy(name)

    def set_active(self, pipeline: str, query: str, active: bool) -> None:
        """Start or stop a query by its control flag (kept in the catalog)."""
        self.deployer.set_active(pipeline, query, active)

    # -- scheduling and adjustments (scheduling.py, adjusting.py) ---------------------------

    def set_scheduler(
        self,
        pipeline: str,
        scheduler: str | None,
        latency_bound_ms: float | None,
        share: float | None = None,
    ) -> PipelineControlRecord:
        return self._schedulers.set(pipeline, scheduler, latency_bound_ms, share)

    def scheduler_choice(self, pipeline: str, spec: PipelineSpec) -> SchedulerChoice:
        return self._schedulers.choice(pipeline, spec)

    def adjust(
        self, pipeline: str, query: str, knob: str, value: int, reason: str = "api"
    ) -> list[Adjustment]:
        """Change a running query's window size or granularity inside its QoS."""
        return adjusting.adjust(self.runtime, pipeline, query, knob, value, reason)

    # -- checkpoints (checkpointer.py) ------------------------------------------------------

    def checkpoint(self) -> bool:
        """Make every result so far durable, then record what a restart must replay; False
        (nothing recorded, tried again after a backoff) when a dependency is unreachable."""
        return self.checkpointer.write()

    def _shutdown(self) -> None:
        while True:  # what was handed over and will not run now: its callers stop waiting
            try:
                _, fut = self._commands.get_nowait()
            except queue.Empty:
                break
            fut.set_exception(RuntimeError("the worker stopped"))
        self.spark_jobs.stop_all()
        if self._manager is not None:
            self._manager.shutdown(wait=False)
        self.archives.stop()
        self.checkpointer.snapshot_due = 0.0  # a clean stop leaves a snapshot: nothing to replay
        try:
            if not self.checkpoint():
                assert self.checkpointer.postponed is not None
                log.warning(
                    "final checkpoint not written: %s; a restart replays from the last one",
                    self.checkpointer.postponed.describe(),
                )
        except Exception:  # a broken sink must not hide why we stopped
            log.exception("final checkpoint failed")
        parts = [sink.writer for sink in self.engine.sinks.values()] + self.runtime.retiring
        for s in self.sources.values():
            parts += [s.reader, s.dead_letter]
        for part in parts:
            try:
                part.close()
            except Unreachable as e:  # after the last checkpoint: a restart makes them again
                log.warning("closed without delivering everything: %s", e.outage.describe())
            except Exception:  # the others still get closed
                log.exception("closing %r failed", part)
