"""Memory accounting: rows and bytes of every queue and synopsis, with their peaks."""

from __future__ import annotations

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
    """Samples synopses after each scheduling step (queues track themselves).

    Only the operator that ran can have changed its synopsis, so a step samples that one and
    keeps the others' last sizes: the cost of a sample does not grow with the plan."""

    operators: list[Operator]
    queues: list[Queue]
    synopses: dict[str, Usage] = field(default_factory=dict)
    peak_total_bytes: int = 0
    _synopsis_bytes: int = 0

    def sample(self, ran: Operator | None = None) -> None:
        """After `ran` ran (None: sample every operator)."""
        for op in self.operators if ran is None else (ran,):
            rows, nbytes = op.state_size()
            u = self.synopses.get(op.name)
            if u is None:
                u = self.synopses[op.name] = Usage()
            self._synopsis_bytes += nbytes - u.bytes
            u.set(rows, nbytes)
        total = self._synopsis_bytes + sum(q.bytes for q in self.queues)
        self.peak_total_bytes = max(self.peak_total_bytes, total)
