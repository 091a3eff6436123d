"""Pipelines with ``resources: {runner: spark}`` in the worker: each runs as its own Spark
Structured Streaming job (`batch.streaming.StreamingJob`), in a thread of its own, instead of on
the embedded engine (docs/spark-runner.md, "In the worker").

A job's checkpoint (Spark's Kafka offsets, the engine state, the clocks) is kept under
``<spark_checkpoints>/<worker>/<pipeline>/<version>``, the version being the pipeline file's
hash: a worker restarted with the same name resumes each job where it stopped, with nothing
emitted twice but what the last uncommitted micro-batch wrote (at-least-once, like the worker's
own sinks). A new version of the file stops the old job and starts the new one on a checkpoint
of its own, from the streams' configured start: its sinks get the new version's results from
the beginning of the topics, as a `cq spark-submit` with a new checkpoint would write them.
A job that fails is logged and kept with its error (`status`); the next deploy of a changed file
starts it again.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cq_service.errors import CQError
from cq_service.spec.model import PipelineSpec

__all__ = ["SparkJobs", "SparkRunnerError"]

log = logging.getLogger(__name__)


class SparkRunnerError(CQError):
    """A runner-spark pipeline with queries the Spark runner cannot run."""

    def __init__(self, lines: list[str]):
        super().__init__("; ".join(lines))
        self._lines = lines

    def lines(self) -> list[str]:
        return list(self._lines)


@dataclass
class _Running:
    spec: PipelineSpec
    version: str
    job: Any  # batch.streaming.StreamingJob
    thread: threading.Thread
    error: str | None = None
    stopping: bool = False


class SparkJobs:
    """The worker's runner-spark pipelines, by name."""

    def __init__(
        self,
        checkpoints: str | Path,
        trigger: str = "5 seconds",
        session: Callable[[], Any] | None = None,
        master: str | None = None,
    ):
        """`master`: the Spark master the jobs run on (None: local[2]); `session`, if given,
        makes the SparkSession instead (tests)."""
        self.checkpoints = Path(checkpoints)
        self.trigger = trigger
        self.master = master
        self._session = session
        self._jobs: dict[str, _Running] = {}
        self._lock = threading.Lock()

    @property
    def specs(self) -> dict[str, PipelineSpec]:
        with self._lock:
            return {name: r.spec for name, r in self._jobs.items()}

    def running(self, name: str) -> bool:
        with self._lock:
            return name in self._jobs

    def deploy(self, spec: PipelineSpec, version: str) -> str:
        """Run this version of `spec` on Spark: "added", "replaced" or "unchanged". Raises
        SparkRunnerError (one line per unsupported query) and leaves what runs alone."""
        from cq_service.batch.streaming import StreamingJob, check

        problems = check(spec)
        if problems:
            raise SparkRunnerError(
                [f"{p.render()} (unsupported by runner spark)" for p in problems]
            )
        with self._lock:
            current = self._jobs.get(spec.name)
        if current is not None and current.version == version and current.error is None:
            return "unchanged"
        if current is not None:
            self.stop(spec.name)
        folder = self.checkpoints / spec.name / version[:16]
        job = StreamingJob(spec, self._spark(), folder)
        thread = threading.Thread(target=self._run, args=(spec.name, job),
                                  name=f"spark-{spec.name}", daemon=True)
        with self._lock:
            self._jobs[spec.name] = _Running(spec, version, job, thread)
        thread.start()
        log.info("%s: running on Spark (checkpoint %s)", spec.name, folder)
        return "added" if current is None else "replaced"

    def stop(self, name: str, timeout: float = 60.0) -> bool:
        """Stop `name`'s job, if one runs; True if it did."""
        with self._lock:
            running = self._jobs.get(name)
        if running is None:
            return False
        running.stopping = True
        running.job.stop()
        running.thread.join(timeout)
        with self._lock:
            if self._jobs.get(name) is running:
                del self._jobs[name]
        return True

    def stop_all(self) -> None:
        for name in list(self.specs):
            self.stop(name)

    def status(self, name: str) -> dict[str, Any] | None:
        """The job's counters (micro-batches, results per query, late and malformed elements,
        up to which instant each query's results are final) and its error, if it failed."""
        with self._lock:
            r = self._jobs.get(name)
        if r is None:
            return None
        report = r.job.report
        return {
            "runner": "spark",
            "version": r.version,
            "alive": r.thread.is_alive(),
            "batches": report.batches,
            "results": dict(report.results),
            "final_up_to": dict(report.ended_at),
            "late": dict(report.late),
            "malformed": dict(report.malformed),
            "error": r.error,
        }

    def _spark(self) -> Any:
        if self._session is not None:
            return self._session()
        from cq_service.batch.streaming import spark_session

        return spark_session(self.master)

    def _run(self, name: str, job: Any) -> None:
        try:
            job.run(available_now=False, final=False, processing_time=self.trigger)
        except Exception as e:  # the job's boundary: keep the worker, record the failure
            with self._lock:
                r = self._jobs.get(name)
            if r is not None and r.job is job and not r.stopping:
                r.error = f"{type(e).__name__}: {e}"
                log.exception("%s: the Spark job failed", name)
