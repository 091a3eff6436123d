"""Holding elements back until their instant is complete."""

from __future__ import annotations

import numpy as np

from cq_service.engine.batch import Batch, merge_ticks
from cq_service.engine.consolidate import unique_sorted

__all__ = ["InstantBuffer", "instants_of"]


class InstantBuffer:
    """Buffers elements of instants that may still receive elements.

    Input arrives in timestamp order, so when an element with timestamp t arrives every instant
    before t is complete; a heartbeat at τ completes τ too. `add` and `complete` return the
    elements (and ticks) of newly completed instants, in order.
    """

    def __init__(self) -> None:
        self._pending: list[Batch] = []

    @property
    def rows(self) -> int:
        return sum(len(b) for b in self._pending)

    @property
    def nbytes(self) -> int:
        return sum(b.nbytes() for b in self._pending)

    def add(self, batch: Batch) -> Batch | None:
        self._pending.append(batch)
        if len(batch) == 0:
            return None
        return self._cut(int(batch.ts[-1]) - 1)

    def complete(self, upto: int) -> Batch | None:
        return self._cut(upto)

    def _cut(self, upto: int) -> Batch | None:
        if not self._pending:
            return None
        whole = Batch.concat(self._pending)
        head, tail = whole.split_at_time(upto)
        self._pending = [tail] if len(tail) or len(tail.ticks) else []
        if len(head) == 0 and len(head.ticks) == 0:
            return None
        return head


def instants_of(batch: Batch) -> np.ndarray:
    """Sorted distinct instants of a batch: its element timestamps and its ticks."""
    return merge_ticks(unique_sorted(batch.ts), batch.ticks)  # both sorted: merged, not sorted
