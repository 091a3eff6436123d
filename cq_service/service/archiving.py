"""The worker's scheduled archive: `cq archive` for each deployed pipeline with
``archive.every`` (docs/archive.md).

An apscheduler job looks every `CHECK_SECONDS` for pipelines whose archive is due (never run
by this worker, or last started `every` seconds ago or more) and archives them one after
another, in the job's own thread: a Spark job blocks for seconds to minutes, so it never runs
on the engine thread. A run that fails is logged and tried again at the next due time; the
last outcome per pipeline is kept for the status API (`last`).
"""

from __future__ import annotations

import functools
import logging
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from apscheduler.schedulers.background import BackgroundScheduler

from cq_service.catalog import Catalog
from cq_service.spec.model import PipelineSpec

__all__ = ["CHECK_SECONDS", "ArchiveOutcome", "ArchiveSchedule"]

log = logging.getLogger(__name__)

CHECK_SECONDS = 10.0


@dataclass(frozen=True)
class ArchiveOutcome:
    """The last scheduled run for a pipeline: when it started (wall clock), how long it took,
    rows and files written, or the error."""

    started: float
    seconds: float
    rows: int = 0
    files: int = 0
    dead_letters: int = 0
    error: str | None = None


class ArchiveSchedule:
    """Archives `pipelines()` (name -> running spec) on their `archive.every` schedule."""

    def __init__(
        self,
        pipelines: Callable[[], Mapping[str, PipelineSpec]],
        catalog: Catalog,
        archive: Callable[..., Any] | None = None,
        clock: Callable[[], float] = time.time,
        master: str | None = None,
    ):
        """`archive(spec, catalog)` archives one pipeline (default: `archive_pipeline` on a
        Spark session of `master`, None: local[2])."""
        self._pipelines = pipelines
        self._catalog = catalog
        self._archive = archive
        self._master = master
        self._clock = clock
        self._started: dict[str, float] = {}  # pipeline -> when its last run started
        self.last: dict[str, ArchiveOutcome] = {}
        self._scheduler: BackgroundScheduler | None = None
        self._lock = threading.Lock()

    def start(self, check_seconds: float = CHECK_SECONDS) -> None:
        self._scheduler = BackgroundScheduler(daemon=True)
        self._scheduler.add_job(
            self.tick,
            "interval",
            seconds=check_seconds,
            max_instances=1,
            coalesce=True,
            id="archive",
        )
        self._scheduler.start()

    def stop(self) -> None:
        if self._scheduler is not None:
            self._scheduler.shutdown(wait=False)
            self._scheduler = None

    def due(self) -> list[PipelineSpec]:
        """The deployed pipelines whose archive is due now."""
        now = self._clock()
        found = []
        for name, spec in sorted(dict(self._pipelines()).items()):
            every = spec.archive.every if spec.archive is not None else None
            if every is None:
                continue
            started = self._started.get(name)
            if started is None or now - started >= every:
                found.append(spec)
        return found

    def tick(self) -> None:
        """Archive every pipeline that is due (one after another)."""
        with self._lock:
            for spec in self.due():
                self._run(spec)

    def _run(self, spec: PipelineSpec) -> None:
        archive = self._archive
        if archive is None:
            from cq_service.batch.archive import archive_pipeline

            archive = functools.partial(archive_pipeline, master=self._master)
        started = self._clock()
        self._started[spec.name] = started
        t0 = time.monotonic()
        try:
            result = archive(spec, self._catalog)
        except Exception as e:  # the job's boundary: log, keep the schedule
            log.exception("scheduled archive of %s failed", spec.name)
            self.last[spec.name] = ArchiveOutcome(
                started, time.monotonic() - t0, error=f"{type(e).__name__}: {e}"
            )
            return
        streams = result.streams
        outcome = ArchiveOutcome(
            started,
            time.monotonic() - t0,
            rows=sum(s.rows for s in streams),
            files=sum(s.files for s in streams),
            dead_letters=sum(s.dead_letters for s in streams),
        )
        self.last[spec.name] = outcome
        log.info(
            "archived %s: %d rows in %d files, %d dead letters (%.1f s)",
            spec.name, outcome.rows, outcome.files, outcome.dead_letters, outcome.seconds,
        )  # fmt: skip
