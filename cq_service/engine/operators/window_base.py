"""What every window shares: the inner WHERE applied before the cutoff."""

from __future__ import annotations

from cq_service.cql.logical import BExpr
from cq_service.engine.batch import Batch
from cq_service.engine.expressions import compile_predicate
from cq_service.engine.operators.base import UnaryOperator
from cq_service.engine.queues import Queue, QueueReader

__all__ = ["WindowOperator"]


class WindowOperator(UnaryOperator):
    """Stream -> relation. Subclasses turn admitted tuples into ``+``/``−`` deltas."""

    kind = "window"

    def __init__(self, name: str, inputs: list[QueueReader], output: Queue, where: BExpr | None):
        super().__init__(name, inputs, output)
        self._where = compile_predicate(where) if where is not None else None

    def admit(self, batch: Batch) -> Batch:
        """The tuples that pass the window's inner WHERE (ticks are kept)."""
        if self._where is None or len(batch) == 0:
            return batch
        return batch.filter(self._where(batch.columns, len(batch)))
