"""Window operators run by hand: batches built from (ts, row[, weight]) tuples (`B`), a window
fed batches and heartbeats through its input queue (`Harness`) and what it emitted (`Out`).
Shared by tests/unit/engine/test_windows.py and tests/property/test_window_ca.py."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

import numpy as np

from cq_service.engine.batch import Batch
from cq_service.engine.queues import Heartbeat, Queue
from cq_service.types import DataType
from tests.unit.engine.batches import relation_at

TYPES = [DataType.INT, DataType.STRING]


def B(*elems: tuple, ticks: tuple[int, ...] = (), types=TYPES) -> Batch:
    """A batch of (ts, row) or (ts, row, weight) elements; ticks default to the timestamps."""
    ts = [e[0] for e in elems]
    tk = sorted(set(ts) | set(ticks))
    return Batch.from_rows(
        [e[1] for e in elems],
        ts,
        [e[2] if len(e) > 2 else 1 for e in elems],
        types,
        np.asarray(tk, dtype=np.int64),
    )


@dataclass
class Out:
    """What a window emitted: its elements, its ticks and the heartbeats it passed on."""

    elements: list[tuple[int, tuple, int]] = field(default_factory=list)  # (ts, row, w)
    ticks: set[int] = field(default_factory=set)
    heartbeats: list[int] = field(default_factory=list)

    def at(self, t: int) -> Counter:
        """The relation at instant t: every delta with timestamp ≤ t applied."""
        return relation_at(self.elements, t)

    def changes(self) -> dict[int, Counter]:
        """Net change per instant (zero nets dropped)."""
        out: dict[int, Counter] = {}
        for ts, row, w in self.elements:
            out.setdefault(ts, Counter())[row] += w
        return {t: Counter({r: w for r, w in c.items() if w}) for t, c in out.items() if any(c.values())}


class Harness:
    """A window operator made by `make(name, inputs, output)`, fed through a queue and read
    back into an `Out`."""

    def __init__(self, make, types=TYPES):
        self.inq = Queue("in")
        out = Queue("out")
        self.reader = out.reader()
        self.op = make("w", [self.inq.reader()], out)
        self.op.out_types = list(types)
        self.out = Out()

    def feed(self, *items: Batch | Heartbeat | int) -> Out:
        """Push items (an int is a heartbeat) and run the operator until it has read them."""
        for it in items:
            self.inq.push(Heartbeat(it) if isinstance(it, int) else it)
        while self.op.runnable():
            self.op.run(3)
        last = None
        while (item := self.reader.get()) is not None:
            if isinstance(item, Heartbeat):
                self.out.heartbeats.append(item.ts)
                continue
            ts = item.ts.tolist()
            assert ts == sorted(ts), "timestamps out of order in a batch"
            if last is not None and ts:
                assert ts[0] >= last
            if ts:
                last = ts[-1]
            self.out.elements.extend(zip(ts, item.rows(), item.w.tolist()))
            self.out.ticks.update(item.ticks.tolist())
        return self.out
