"""What a NEXMark benchmark run records: the queries, the engines, one cell per engine and query,
and a saved run read back. Shared by the runner (`nexmark.py`) and the report (`report.py`),
which import it and not each other."""

from __future__ import annotations

import json
import statistics
from dataclasses import dataclass, field
from pathlib import Path

__all__ = ["ENGINES", "INPUTS", "QUERIES", "Cell", "Row", "disagreements", "load"]

QUERIES = tuple(f"q{i}" for i in range(9))
ENGINES = ("cq", "spark", "flink")
# The streams each query reads: its events/s and its I/O floor count these events only.
INPUTS: dict[str, tuple[str, ...]] = {
    "q0": ("bid",), "q1": ("bid",), "q2": ("bid",), "q3": ("person", "auction"),
    "q4": ("auction", "bid"), "q5": ("bid",), "q6": ("auction", "bid"), "q7": ("bid",),
    "q8": ("person", "auction"),
}


@dataclass
class Cell:
    """One engine on one query. Two times per run: `seconds` in-process (from defining the
    query, planning and compiling it and opening its sources, to its last output written; the
    engine's runtime already started) and `process_seconds` (the child process, spawn to exit).
    Events/s: the events of the streams the query reads ÷ the median of each."""

    supported: bool = True
    seconds: list[float] = field(default_factory=list)
    events_per_s: float | None = None
    peak_rss: int | None = None
    rows: int | None = None
    latency_ms: dict | None = None
    note: str = ""
    agrees: bool | None = None  # None: not compared
    state_bytes: int | None = None  # cq: peak synopsis and queue memory, whole input
    half_state_bytes: int | None = None  # cq: the same on the first half of the input
    process_seconds: list[float] = field(default_factory=list)
    process_events_per_s: float | None = None

    def settle(self, events_read: int) -> None:
        """Both events/s from the medians of both times: `events_read` is the events of the
        streams the query reads, not every generated event."""
        if self.seconds:
            self.events_per_s = events_read / statistics.median(self.seconds)
        if self.process_seconds:
            self.process_events_per_s = events_read / statistics.median(self.process_seconds)


@dataclass
class Row:
    query: str
    cells: dict[str, Cell] = field(default_factory=dict)
    floor_events_per_s: float | None = None
    events_read: int | None = None  # the events of the streams the query reads


def load(folder: Path) -> tuple[list[Row], dict]:
    """The rows and meta of a saved run (`nexmark.save`)."""
    doc = json.loads((folder / "nexmark.json").read_text())
    rows = [
        Row(
            r["query"],
            {e: Cell(**c) for e, c in r["cells"].items()},
            r["floor_events_per_s"],
            r.get("events_read"),
        )
        for r in doc["rows"]
    ]
    return rows, doc["meta"]


def disagreements(rows: list[Row]) -> list[str]:
    """One line per peer whose comparable result differs from ours."""
    return [
        f"{r.query}: {e}: {c.note}"
        for r in rows
        for e, c in r.cells.items()
        if c.agrees is False
    ]
