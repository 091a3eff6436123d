"""The instants of a set of inputs, as ticks (see `cql.clocks`)."""

from __future__ import annotations

from cq_service.engine.batch import Batch, merge_ticks
from cq_service.engine.consolidate import unique_sorted
from cq_service.engine.operators.base import MultiInputOperator

__all__ = ["Clock"]


class Clock(MultiInputOperator):
    kind = "clock"

    def describe(self) -> str:
        return f"clock over {len(self.inputs)} input(s)"

    def on_aligned(self, ready: list[Batch | None]) -> None:
        parts = [b for b in ready if b is not None]
        ticks = merge_ticks(*(b.ticks for b in parts), *(unique_sorted(b.ts) for b in parts))
        if len(ticks):
            self.emit(self.empty(ticks))
