"""Application time: reordering within a skew bound, and finding late elements.

After an element with timestamp m has arrived, an element with timestamp < m − δ (δ =
`max_delay`) is late. Everything with timestamp ≤ m − δ − 1 can then be released in timestamp
order (stably: equal timestamps keep arrival order), and that is the source's heartbeat.

A stream may also carry heartbeats in its records (`heartbeat: {field, offset}`): a record
whose field is f promises that no later element has a timestamp below f + offset. The bound is
then the larger of the two; an element below it is late.

A partitioned source (Kafka) gives the partition of each element and its own heartbeats
(`advance`). The skew bound then holds per partition — an element is late when it is more than
δ before the latest timestamp of *its* partition — and the stream-wide bound is the source's
heartbeat (the minimum over its partitions, which only the source can know). An element at or
below a heartbeat already released is late too (a partition that was idle and delivers again).
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
        self.heartbeat = NONE  # the source's own heartbeats (`advance`)
        self.passed = NONE  # the largest watermark released so far
        self._max_by_partition: dict[int, int] | None = None  # set once partitions are seen
        self._pending: Batch | None = None

    @property
    def rows(self) -> int:
        return 0 if self._pending is None else len(self._pending)

    @property
    def nbytes(self) -> int:
        return 0 if self._pending is None else self._pending.nbytes()

    @property
    def partitioned(self) -> bool:
        """Whether the skew bound is kept per partition (the source gave partitions)."""
        return self._max_by_partition is not None

    def partition_max(self, partition: int) -> int:
        """The latest timestamp seen in `partition` (NONE: none yet)."""
        return (self._max_by_partition or {}).get(partition, NONE)

    @property
    def watermark(self) -> int:
        if self.max_seen == NONE or self.partitioned:
            skew = NONE
        else:
            skew = int(self.max_seen) - self.max_delay - 1
        promise = NONE if self.promised == NONE else int(self.promised) - 1
        return max(skew, promise, int(self.heartbeat))

    def advance(self, heartbeat: int) -> None:
        """The source's heartbeat: no element it gives later has a timestamp at or below it
        (an element that does is late)."""
        self.heartbeat = max(int(self.heartbeat), int(heartbeat))

    def late_mask(
        self,
        ts: np.ndarray,
        promises: np.ndarray | None = None,
        partition: np.ndarray | None = None,
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Which of these elements (in arrival order) are late, the latest timestamp seen
        before each of them (in its partition, if `partition` gives each element's), and the
        heartbeat promised before each of them (NONE: none); updates both. `promises[i]` is
        element i's own heartbeat (field + offset, NONE when it has none)."""
        if len(ts) == 0:
            empty = np.zeros(0, dtype=np.int64)
            return np.zeros(0, dtype=bool), empty, empty
        if promises is None and partition is None and not self.partitioned:
            in_order = self._in_order(ts)
            if in_order is not None:
                return in_order
        return self._late_mask(ts, promises, partition)

    def _late_mask(
        self, ts: np.ndarray, promises: np.ndarray | None, partition: np.ndarray | None
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        running = np.maximum.accumulate(ts)
        if partition is None and not self.partitioned:
            before = np.empty_like(ts)
            before[0] = self.max_seen
            before[1:] = np.maximum(running[:-1], self.max_seen)
        else:
            before = self._before_by_partition(ts, partition)
        promised = np.full(len(ts), self.promised, dtype=np.int64)
        if promises is not None:
            promised[1:] = np.maximum(np.maximum.accumulate(promises)[:-1], self.promised)
            self.promised = max(int(self.promised), int(promises.max()))
        late = ts < promised
        known = before != NONE
        late[known] |= ts[known] < before[known] - self.max_delay
        if self.passed != NONE:
            late |= ts <= self.passed
        self.max_seen = max(int(self.max_seen), int(running[-1]))
        return late, before, promised

    def _in_order(self, ts: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
        """`late_mask` of an unpartitioned batch without promises when none of it is late: in
        timestamp order from at least every bound (the latest seen less the delay, the
        promised heartbeat, the released one). None when that does not hold."""
        first = int(ts[0])
        if self.max_seen != NONE and first < int(self.max_seen) - self.max_delay:
            return None
        if first < int(self.promised) or (self.passed != NONE and first <= int(self.passed)):
            return None
        if len(ts) > 1 and not bool((ts[1:] >= ts[:-1]).all()):
            return None
        n = len(ts)
        before = np.empty(n, dtype=np.int64)
        before[0] = self.max_seen
        before[1:] = np.maximum(ts[:-1], self.max_seen)
        self.max_seen = max(int(self.max_seen), int(ts[-1]))
        return np.zeros(n, dtype=bool), before, np.broadcast_to(np.int64(self.promised), n)

    def _before_by_partition(self, ts: np.ndarray, partition: np.ndarray | None) -> np.ndarray:
        if self._max_by_partition is None:
            self._max_by_partition = {}
        maxima = self._max_by_partition
        parts = np.zeros(len(ts), dtype=np.int64) if partition is None else np.asarray(partition)
        before = np.empty_like(ts)
        for p in np.unique(parts).tolist():
            idx = np.flatnonzero(parts == p)
            prev = maxima.get(p, NONE)
            running = np.maximum.accumulate(ts[idx])
            b = np.empty(len(idx), dtype=np.int64)
            b[0] = prev
            b[1:] = np.maximum(running[:-1], prev)
            before[idx] = b
            maxima[p] = max(prev, int(running[-1]))
        return before

    def push(self, batch: Batch) -> Batch | None:
        """Add on-time elements; return those now releasable, in timestamp order."""
        if len(batch):
            if self._pending is not None and len(self._pending):
                batch = Batch.concat([self._pending, batch])
            if not _sorted(batch.ts):
                batch = batch.take(np.argsort(batch.ts, kind="stable"))
            self._pending = batch
        upto = self.watermark
        self.passed = max(int(self.passed), upto)
        return self._release(upto)

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
