"""Application time: reordering within a skew bound, and finding late elements.

After an element with timestamp m has arrived, an element with timestamp < m − δ (δ =
`max_delay`) is late. Everything with timestamp ≤ m − δ − 1 can then be released in timestamp
order (stably: equal timestamps keep arrival order), and that is the source's heartbeat.

A stream may also carry heartbeats in its records (`heartbeat: {field, offset}`): a record
whose field is f promises that no later element has a timestamp below f + offset. The bound is
then the larger of the two; an element below it is late.
"""

from __future__ import annotations

import numpy as np

from cq_service.engine.batch import Batch

__all__ = ["Reorderer"]

NONE = np.iinfo(np.int64).min


class Reorderer:
    def __init__(self, max_delay: int):
        self.max_delay = max_delay
        self.max_seen = NONE
        self.promised = NONE  # the records' heartbeats: no later timestamp is below this
        self._pending: Batch | None = None

    @property
    def rows(self) -> int:
        return 0 if self._pending is None else len(self._pending)

    @property
    def nbytes(self) -> int:
        return 0 if self._pending is None else self._pending.nbytes()

    @property
    def watermark(self) -> int:
        skew = NONE if self.max_seen == NONE else int(self.max_seen) - self.max_delay - 1
        promise = NONE if self.promised == NONE else int(self.promised) - 1
        return max(skew, promise)

    def late_mask(
        self, ts: np.ndarray, promises: np.ndarray | None = None
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Which of these elements (in arrival order) are late, the latest timestamp seen
        before each of them, and the heartbeat promised before each of them (NONE: none);
        updates both. `promises[i]` is element i's own heartbeat (field + offset, NONE when
        it has none)."""
        if len(ts) == 0:
            empty = np.zeros(0, dtype=np.int64)
            return np.zeros(0, dtype=bool), empty, empty
        running = np.maximum.accumulate(ts)
        before = np.empty_like(ts)
        before[0] = self.max_seen
        before[1:] = np.maximum(running[:-1], self.max_seen)
        promised = np.full(len(ts), self.promised, dtype=np.int64)
        if promises is not None:
            promised[1:] = np.maximum(np.maximum.accumulate(promises)[:-1], self.promised)
            self.promised = max(int(self.promised), int(promises.max()))
        late = ts < promised
        known = before != NONE
        late[known] |= ts[known] < before[known] - self.max_delay
        self.max_seen = max(int(self.max_seen), int(running[-1]))
        return late, before, promised

    def push(self, batch: Batch) -> Batch | None:
        """Add on-time elements; return those now releasable, in timestamp order."""
        if len(batch):
            if self._pending is not None and len(self._pending):
                batch = Batch.concat([self._pending, batch])
            if not _sorted(batch.ts):
                batch = batch.take(np.argsort(batch.ts, kind="stable"))
            self._pending = batch
        return self._release(self.watermark)

    def flush(self) -> Batch | None:
        """Release everything (end of input)."""
        return self._release(np.iinfo(np.int64).max)

    def _release(self, upto: int) -> Batch | None:
        if self._pending is None or len(self._pending) == 0:
            return None
        head, tail = self._pending.split_at_time(upto)
        self._pending = tail
        return head if len(head) else None


def _sorted(ts: np.ndarray) -> bool:
    return len(ts) < 2 or bool((ts[1:] >= ts[:-1]).all())
