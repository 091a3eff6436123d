"""Memory accounting: rows and bytes of every queue and synopsis, with peaks and averages.

Queue memory (the elements waiting between operators: what scheduling decides) is tracked
apart from synopses (operator state: what windows and budgets decide). Averages are over
wall-clock time, so a burst weighs as long as it lasts. `trace`, when a list, receives
(seconds since start, queue rows, queue bytes) after every step, for benchmark charts
(`restart(trace=True)`).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from cq_service.engine.operators.base import Operator
from cq_service.engine.queues import Queue

__all__ = ["MemoryMonitor", "Usage"]


@dataclass
class Usage:
    rows: int = 0
    bytes: int = 0
    peak_rows: int = 0
    peak_bytes: int = 0

    def set(self, rows: int, nbytes: int) -> None:
        self.rows, self.bytes = rows, nbytes
        self.peak_rows = max(self.peak_rows, rows)
        self.peak_bytes = max(self.peak_bytes, nbytes)


@dataclass
class MemoryMonitor:
    """Samples after each scheduling step (queues track themselves).

    Only the operator that ran can have changed its synopsis, so a step samples that one and
    keeps the others' last sizes: the cost of a sample grows with the queues, not the plan."""

    operators: list[Operator]
    queues: list[Queue]
    synopses: dict[str, Usage] = field(default_factory=dict)
    queued: Usage = field(default_factory=Usage)  # all queues together
    peak_total_bytes: int = 0
    trace: list[tuple[float, int, int]] | None = None
    _synopsis_bytes: int = 0
    _start: float = field(default_factory=time.perf_counter)
    _last: float = 0.0
    _row_seconds: float = 0.0  # integrals of queue rows and bytes over time
    _byte_seconds: float = 0.0

    def sample(self, ran: Operator | None = None) -> None:
        """After `ran` ran (None: sample every operator)."""
        for op in self.operators if ran is None else (ran,):
            rows, nbytes = op.state_size()
            u = self.synopses.get(op.name)
            if u is None:
                u = self.synopses[op.name] = Usage()
            self._synopsis_bytes += nbytes - u.bytes
            u.set(rows, nbytes)
        now = time.perf_counter() - self._start
        elapsed = now - self._last
        self._row_seconds += self.queued.rows * elapsed
        self._byte_seconds += self.queued.bytes * elapsed
        self._last = now
        q_rows = q_bytes = 0
        for q in self.queues:
            q_rows += q.rows
            q_bytes += q.bytes
        self.queued.set(q_rows, q_bytes)
        self.peak_total_bytes = max(self.peak_total_bytes, self._synopsis_bytes + q_bytes)
        if self.trace is not None:
            self.trace.append((now, q_rows, q_bytes))

    @property
    def synopsis_bytes(self) -> int:
        """The operators' synopses now (as last sampled)."""
        return self._synopsis_bytes

    def restart(self, trace: bool = False) -> None:
        """Measure from now: averages, peaks of the queues and (if `trace`) a new trace."""
        self._start = time.perf_counter()
        self._last = self._row_seconds = self._byte_seconds = 0.0
        self.queued = Usage()
        self.trace = [] if trace else None
        self.sample()

    def carry_over(self, old: MemoryMonitor) -> None:
        """Keep `old`'s peaks, averages and trace (the plan changed under a running engine)."""
        self.peak_total_bytes = old.peak_total_bytes
        self.queued.peak_rows, self.queued.peak_bytes = old.queued.peak_rows, old.queued.peak_bytes
        self._start, self._last = old._start, old._last
        self._row_seconds, self._byte_seconds = old._row_seconds, old._byte_seconds
        self.trace = old.trace

    @property
    def average_queue_rows(self) -> float:
        return self._row_seconds / self._last if self._last > 0 else float(self.queued.rows)

    @property
    def average_queue_bytes(self) -> float:
        return self._byte_seconds / self._last if self._last > 0 else float(self.queued.bytes)
