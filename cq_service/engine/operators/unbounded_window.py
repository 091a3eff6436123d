"""`[Range Unbounded]`, `[Rows Unbounded]` and the default window: every tuple so far."""

from __future__ import annotations

from cq_service.engine.batch import Batch
from cq_service.engine.operators.window_base import WindowOperator

__all__ = ["UnboundedWindow"]


class UnboundedWindow(WindowOperator):
    kind = "unbounded window"

    def on_batch(self, batch: Batch) -> None:
        self.emit(self.admit(batch))
