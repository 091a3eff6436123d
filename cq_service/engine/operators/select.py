"""Selection: keep the elements whose predicate is TRUE, one conjunct at a time in the order
the injected orderer chooses (engine/conjunction.py)."""

from __future__ import annotations

from cq_service.cql.logical import BExpr
from cq_service.engine.batch import Batch
from cq_service.engine.conjunction import Conjunction
from cq_service.engine.filter_order import OrdererFactory
from cq_service.engine.operators.base import UnaryOperator
from cq_service.engine.queues import Queue, QueueReader
from cq_service.engine.streamon import Watch

__all__ = ["Select"]


class Select(UnaryOperator):
    kind = "select"
    STRUCTURE = frozenset({"conjunction"})

    def __init__(
        self,
        name: str,
        inputs: list[QueueReader],
        output: Queue,
        predicate: BExpr,
        orderer: OrdererFactory | None = None,
    ):
        super().__init__(name, inputs, output)
        self.conjunction = Conjunction(predicate, orderer, owner=name)

    def describe(self) -> str:
        order = self.conjunction.describe()
        return f"{self.kind} [{order}]" if order else self.kind

    def filter_order(self) -> str:
        return self.conjunction.describe()

    def watches(self) -> list[Watch]:
        watch = self.conjunction.watch
        return [] if watch is None else [watch]

    def on_batch(self, batch: Batch) -> None:
        self.emit(self.conjunction.apply(batch))
