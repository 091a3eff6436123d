"""`cq run`'s progress display on a terminal, and `cq bench`'s status line (`BenchStatus`).

`cq run`'s display: per source, the elements read, the rate and, for
a finite source whose size is known (a file), how far it is and the time left; per query, the
results written so far.

It reads the running executor between scheduling steps (`run_pipeline`'s `after_step`) and
redraws at most every `every` seconds; it writes to its own console (stderr), so the results
and `--stats` on stdout are unchanged. Off with `cq run --quiet` and whenever stderr is not a
terminal.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

from rich.console import Console, Group
from rich.live import Live
from rich.progress import (
    BarColumn,
    Progress,
    SpinnerColumn,
    TaskID,
    TaskProgressColumn,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)

if TYPE_CHECKING:
    from cq_service.engine.executor import Executor

__all__ = ["BenchStatus", "RunProgress", "bench_steps"]

SCALE = 10_000  # a known total is shown in ten-thousandths: units differ by source


class RunProgress:
    """A live display of a `cq run`: call `update(executor)` after every step (it redraws at
    most every `every` seconds; `force=True` for the final counts), `close()` at the end."""

    def __init__(self, console: Console | None = None, every: float = 0.2):
        self.console = console or Console(stderr=True)
        self.every = every
        self._sources = Progress(
            TextColumn("{task.description}"),
            BarColumn(),
            TaskProgressColumn(),
            TextColumn("{task.fields[count]}"),
            TimeRemainingColumn(),
            console=self.console,
        )
        self._queries = Progress(
            TextColumn("{task.description}"),
            TextColumn("{task.fields[count]}"),
            console=self.console,
        )
        self._tasks: dict[str, TaskID] = {}
        self._started = time.monotonic()
        self._last = float("-inf")
        self._live = Live(
            Group(self._sources, self._queries), console=self.console, auto_refresh=False
        )
        self._live.start()

    def update(self, executor: Executor, *, force: bool = False) -> None:
        now = time.monotonic()
        if not force and now - self._last < self.every:
            return
        self._last = now
        elapsed = max(now - self._started, 1e-9)
        for src in executor.sources:
            done = getattr(src.reader, "progress", lambda: None)()
            rows = src.rows_out
            count = f"{rows:,} elements ({rows / elapsed:,.0f}/s)"
            if src.exhausted:
                count += ", done"
                done = None if done is None else (1, 1)
            completed = 0 if done is None else SCALE * done[0] // max(done[1], 1)
            self._set(
                self._sources,
                f"source {src.name}",
                count,
                total=None if done is None else SCALE,
                completed=completed,
            )
        for sink in executor.sinks:
            self._set(self._queries, f"query {sink.name}", f"{sink.written:,} results")
        self._live.refresh()

    def _set(self, progress: Progress, label: str, count: str, **fields: int | None) -> None:
        task = self._tasks.get(label)
        if task is None:
            task = self._tasks[label] = progress.add_task(label, count=count, total=None)
        progress.update(task, count=count, **fields)  # type: ignore[arg-type]

    def close(self) -> None:
        """Stop the display (what it shows last stays on the terminal)."""
        self._live.stop()


class BenchStatus:
    """`cq bench`'s status line on a terminal: the step it is on (which query on which engine,
    as the benchmark says it) and the time since the start, with a spinner. Each step's
    message is also printed above the line, so the log of steps stays; the line itself goes
    at `close()`."""

    def __init__(self, title: str, console: Console | None = None):
        self.title = title
        self.console = console or Console(stderr=True)
        self._progress = Progress(
            SpinnerColumn(),
            TextColumn("{task.description}"),
            TimeElapsedColumn(),
            console=self.console,
            transient=True,
        )
        self._task = self._progress.add_task(title, total=None)
        self._progress.start()

    def say(self, message: str) -> None:
        self._progress.console.print(message, markup=False, highlight=False)
        step = message.strip().splitlines()[0] if message.strip() else ""
        self._progress.update(self._task, description=f"{self.title}: {step}")

    def close(self) -> None:
        self._progress.stop()


@contextmanager
def bench_steps(title: str, *, quiet: bool = False) -> Iterator[Callable[[str], None]]:
    """Where a benchmark's step messages go: stderr, and — when stderr is a terminal and not
    `quiet` — above a `BenchStatus` line that shows the latest step."""
    if quiet or not sys.stderr.isatty():
        yield lambda message: print(message, file=sys.stderr, flush=True)
        return
    status = BenchStatus(title)
    try:
        yield status.say
    finally:
        status.close()
