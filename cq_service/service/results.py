"""A query's results on their way to its sink, also sent to live subscribers (the API's
streaming endpoint)."""

from __future__ import annotations

import queue
from collections.abc import Sequence
from typing import Any

import numpy as np
import pyarrow as pa

from cq_service.io.sinks import json_lines

__all__ = ["ResultTee", "Subscription"]

_END = None


class Subscription:
    """Result lines (DESIGN §5 JSON objects) for one reader; None marks the end. A reader that
    falls `capacity` lines behind is cut off (its stream ends with an error line) rather than
    slowing the engine down."""

    def __init__(self, capacity: int = 10_000):
        self.lines: queue.Queue[str | None] = queue.Queue(capacity)
        self.overflowed = False

    def offer(self, line: str | None) -> bool:
        try:
            self.lines.put_nowait(line)
            return True
        except queue.Full:
            self.overflowed = True
            return False


class ResultTee:
    def __init__(self, writer: Any, names: Sequence[str]):
        self.writer = writer
        self.names = list(names)
        self.written = 0
        self._subscribers: list[Subscription] = []

    def __getattr__(self, name: str) -> Any:
        return getattr(self.writer, name)

    def write(self, ts: np.ndarray, ops: np.ndarray, columns: Sequence[pa.Array]) -> None:
        self.writer.write(ts, ops, columns)
        self.written += len(ts)
        if self._subscribers and len(ts):
            lines = json_lines(ts, ops, columns, self.names).to_pylist()
            for sub in list(self._subscribers):
                for line in lines:
                    if not sub.offer(line.rstrip("\n")):
                        self._subscribers.remove(sub)
                        break

    def subscribe(self) -> Subscription:
        sub = Subscription()
        self._subscribers.append(sub)
        return sub

    def unsubscribe(self, sub: Subscription) -> None:
        if sub in self._subscribers:
            self._subscribers.remove(sub)

    def close_subscribers(self) -> None:
        for sub in self._subscribers:
            sub.offer(_END)
        self._subscribers.clear()
