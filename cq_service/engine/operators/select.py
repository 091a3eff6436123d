"""Selection: keep the elements whose predicate is TRUE."""

from __future__ import annotations

from cq_service.cql.logical import BExpr
from cq_service.engine.batch import Batch
from cq_service.engine.expressions import compile_predicate
from cq_service.engine.operators.base import UnaryOperator
from cq_service.engine.queues import Queue, QueueReader

__all__ = ["Select"]


class Select(UnaryOperator):
    kind = "select"
    STRUCTURE = frozenset({"_pred"})

    def __init__(self, name: str, inputs: list[QueueReader], output: Queue, predicate: BExpr):
        super().__init__(name, inputs, output)
        self._pred = compile_predicate(predicate)

    def on_batch(self, batch: Batch) -> None:
        if len(batch):
            batch = batch.filter(self._pred(batch.columns, len(batch)))
        self.emit(batch)
