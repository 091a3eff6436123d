"""Istream: at each instant, the tuples the relation gained (R(τ) − R(τ−1), as a bag)."""

from __future__ import annotations

import numpy as np

from cq_service.engine.batch import Batch
from cq_service.engine.consolidate import consolidate, expand
from cq_service.engine.instants import InstantBuffer
from cq_service.engine.operators.base import UnaryOperator

__all__ = ["Istream", "RelationToStream"]


class RelationToStream(UnaryOperator):
    """Base of Istream and Dstream: consolidate each complete instant, keep one sign."""

    kind = "istream"
    sign = 1

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self._buffer = InstantBuffer()

    def state_size(self) -> tuple[int, int]:
        return self._buffer.rows, self._buffer.nbytes

    def on_batch(self, batch: Batch) -> None:
        self._out(self._buffer.add(batch))

    def on_heartbeat(self, ts: int) -> None:
        self._out(self._buffer.complete(ts))

    def _out(self, done: Batch | None) -> None:
        if done is None:
            return
        if self.sign > 0 and bool((done.w > 0).all()):
            net = done  # nothing to cancel
        else:
            net = consolidate(done)
            keep = net.w * self.sign > 0
            if not keep.all():
                net = net.filter(keep)
            net = Batch(net.columns, net.ts, np.abs(net.w), net.ticks)
        self.emit(expand(net))


class Istream(RelationToStream):
    kind = "istream"
    sign = 1
