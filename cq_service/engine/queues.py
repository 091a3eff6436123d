"""Queues between operators: batches and heartbeats, one read cursor per consumer.

A queue carries `Batch`es and `Heartbeat`s in order. A heartbeat at τ promises that no later
batch on the queue holds an element with timestamp ≤ τ: instant τ is complete. A queue read by
several operators (a shared subplan) keeps one cursor per reader and frees an item once every
reader has passed it, so sharing costs no copy.

Every item carries a *stamp*: the wall-clock time (``time.perf_counter``) at which the input it
derives from entered the engine. Scheduling policies read stamps to find the oldest waiting
work (FIFO, ties in Chain, latency bounds); sinks turn them into latencies.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass
from itertools import islice

from cq_service.engine.batch import Batch

__all__ = ["Heartbeat", "Item", "Queue", "QueueReader"]

_DETACHED = 1 << 62  # the cursor of a detached reader: past every item
NO_HEARTBEAT = -(1 << 63)


@dataclass(frozen=True, slots=True)
class Heartbeat:
    ts: int


Item = Batch | Heartbeat


class Queue:
    """FIFO with per-reader cursors. Memory is counted once per item, however many readers."""

    def __init__(self, name: str):
        self.name = name
        self._items: deque[Item] = deque()
        self._stamps: deque[float] = deque()  # parallel to _items
        self._sizes: deque[int] = deque()  # bytes of each item (0 for heartbeats)
        self._base = 0  # absolute index of _items[0]
        self._cursors: list[int] = []  # detached readers hold _DETACHED
        self.readers = 0  # readers still attached
        self.rows = 0
        self.bytes = 0
        self.peak_rows = 0
        self.peak_bytes = 0
        self.total_rows = 0
        self.total_bytes = 0
        self.last_heartbeat = NO_HEARTBEAT  # the latest heartbeat pushed

    def reader(self) -> QueueReader:
        self._cursors.append(self._base + len(self._items))
        self.readers += 1
        return QueueReader(self, len(self._cursors) - 1)

    def detach(self, reader: QueueReader) -> None:
        """Stop `reader` (an operator removed from a running engine) holding items back."""
        if self._cursors[reader.index] == _DETACHED:
            return
        self._cursors[reader.index] = _DETACHED
        self.readers -= 1
        if self.readers == 0:
            self._items.clear()
            self._stamps.clear()
            self._sizes.clear()
            self._base = 0
            self._cursors = [_DETACHED] * len(self._cursors)
            self.rows = self.bytes = 0
        else:
            self._release()

    def push(self, item: Item, stamp: float = 0.0) -> None:
        if not self.readers:
            return  # nobody reads this queue
        self._items.append(item)
        self._stamps.append(stamp)
        if isinstance(item, Batch):
            n = len(item)
            size = item.nbytes()
            self._sizes.append(size)
            self.rows += n
            self.total_rows += n
            self.bytes += size
            self.total_bytes += size
            self.peak_rows = max(self.peak_rows, self.rows)
            self.peak_bytes = max(self.peak_bytes, self.bytes)
        else:
            self._sizes.append(0)
            self.last_heartbeat = max(self.last_heartbeat, item.ts)

    def _get(self, reader: QueueReader) -> Item | None:
        pos = self._cursors[reader.index]
        k = pos - self._base
        if k >= len(self._items):
            return None
        item = self._items[k]
        reader.stamp = self._stamps[k]
        reader.bytes_read += self._sizes[k]
        self._cursors[reader.index] = pos + 1
        if k == 0:
            self._release()
        return item

    def _peek(self, reader: QueueReader) -> Item | None:
        k = self._cursors[reader.index] - self._base
        return self._items[k] if k < len(self._items) else None

    def _head_stamp(self, reader: QueueReader) -> float | None:
        k = self._cursors[reader.index] - self._base
        return self._stamps[k] if k < len(self._items) else None

    def _pending(self, reader: QueueReader) -> int:
        return self._base + len(self._items) - self._cursors[reader.index]

    def _pending_bytes(self, reader: QueueReader) -> int:
        k = max(0, self._cursors[reader.index] - self._base)
        return sum(self._sizes[i] for i in range(k, len(self._sizes)))

    def _pending_rows(self, reader: QueueReader) -> int:
        k = max(0, self._cursors[reader.index] - self._base)
        return sum(len(b) for b in islice(self._items, k, None) if isinstance(b, Batch))

    def _release(self) -> None:
        low = min(self._cursors)  # detached readers never hold anything back
        while self._base < low and self._items:
            item = self._items.popleft()
            self._stamps.popleft()
            size = self._sizes.popleft()
            self._base += 1
            if isinstance(item, Batch):
                self.rows -= len(item)
                self.bytes -= size

    def __len__(self) -> int:
        return len(self._items)


class QueueReader:
    """One consumer's view of a queue. `stamp` is the stamp of the item read last and
    `bytes_read` counts the bytes of every batch read (the scheduler's statistics)."""

    __slots__ = ("bytes_read", "index", "queue", "stamp")

    def __init__(self, queue: Queue, index: int):
        self.queue = queue
        self.index = index
        self.stamp = 0.0
        self.bytes_read = 0

    def get(self) -> Item | None:
        return self.queue._get(self)

    def peek(self) -> Item | None:
        """The next item, without reading it."""
        return self.queue._peek(self)

    def head_stamp(self) -> float | None:
        """The stamp of the next item (None when nothing is pending)."""
        return self.queue._head_stamp(self)

    def pending(self) -> int:
        """Items not yet read by this reader."""
        return self.queue._pending(self)

    def has_pending(self) -> bool:
        """Whether some item is not yet read by this reader."""
        q = self.queue
        return q._base + len(q._items) > q._cursors[self.index]

    def pending_bytes(self) -> int:
        """Bytes of the batches not yet read by this reader."""
        return self.queue._pending_bytes(self)

    def pending_rows(self) -> int:
        """Elements of the batches not yet read by this reader."""
        return self.queue._pending_rows(self)
