"""Application time: reordering within a skew bound, and finding late elements.

After an element with timestamp m has arrived, an element with timestamp < m − δ (δ =
`max_delay`) is late. Everything with timestamp ≤ m − δ − 1 can then be released in timestamp
order (stably: equal timestamps keep arrival order), and that is the source's heartbeat.
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
        self._pending: Batch | None = None

    @property
    def rows(self) -> int:
        return 0 if self._pending is None else len(self._pending)

    @property
    def nbytes(self) -> int:
        return 0 if self._pending is None else self._pending.nbytes()

    @property
    def watermark(self) -> int:
        if self.max_seen == NONE:
            return NONE
        return int(self.max_seen) - self.max_delay - 1

    def late_mask(self, ts: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Which of these elements (in arrival order) are late, and the latest timestamp seen
        before each of them; updates the running maximum."""
        if len(ts) == 0:
            return np.zeros(0, dtype=bool), np.zeros(0, dtype=np.int64)
        running = np.maximum.accumulate(ts)
        before = np.empty_like(ts)
        before[0] = self.max_seen
        before[1:] = np.maximum(running[:-1], self.max_seen)
        late = np.zeros(len(ts), dtype=bool)
        known = before != NONE
        late[known] = ts[known] < before[known] - self.max_delay
        self.max_seen = max(int(self.max_seen), int(running[-1]))
        return late, before

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
