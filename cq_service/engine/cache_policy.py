"""The seam between an MJoin and whatever chooses its subresult caches (docs/joins.md,
"A-Caching"; issue 25 part 3).

A *candidate cache* is a segment of a pipeline: positions [start, end) of input `pipeline`'s
probes (at least two probes). Its key is the values of the equalities joining the inputs
bound before the segment to those in it; its entries hold, per key, the segment's join of
its inputs' current relations (engine/operators/mjoin_cache.py). The MJoin keeps statistics
for each candidate (`SegmentStats`: rows that reached it, the work its probes did, updates to
its inputs, the CPU seconds its probes, its cache's passes, its invalidations and its shadow
took, and — while the candidate is *profiled* — would-be hits of a key-only shadow) and
every `every` steps asks the selector (`choose(stats, pool_rows)`) which candidates to *use*
(a real cache) and which to *profile*; the rest are *unused*. Which caches exist never
changes a result: every cache is kept consistent with the relations it reads.
The engine never imports `cq_service.adaptive`, which holds the A-Caching selector.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Protocol

__all__ = ["CacheSelector", "CacheSelectorFactory", "Choice", "Segment", "SegmentStats"]


@dataclass(frozen=True, order=True)
class Segment:
    """Probes [start, end) of input `pipeline`'s order (0 = the first input probed)."""

    pipeline: int
    start: int
    end: int

    def overlaps(self, other: Segment) -> bool:
        return self.pipeline == other.pipeline and self.start < other.end and other.start < self.end


@dataclass
class SegmentStats:
    """What the MJoin saw of a candidate since the last choice (counts of rows)."""

    segment: Segment
    full_key: bool  # every update to its inputs names the entries it invalidates
    rows_in: int = 0  # partial rows that reached the segment
    work: int = 0  # rows its probes looked up and produced (when run, not from a cache)
    rows_out: int = 0  # rows that left it
    updates: int = 0  # rows of its inputs inserted or deleted
    lookups: int = 0  # rows looked up in its cache or shadow
    hits: int = 0  # of those, found (or sharing a fill with an earlier row of their batch)
    traversals: int = 0  # rows whose run through the segment `work` counts (0: rows_in)
    batches: int = 0  # batches looked up (each one call of the probes, uncached)
    fills: int = 0  # of those, batches with a key missing (the probes ran for it)
    keys: int = 0  # distinct keys looked up, summed over the batches
    # CPU seconds the engine spent, measured (time.thread_time) over the same period, and
    # what they were spent on (halved, not floored, at each choice: their ratios persist):
    plain_s: float = 0.0  # running the segment's probes uncached (whole runs through it)
    plain_rows: float = 0.0  # rows those runs started with
    plain_calls: float = 0.0  # probe calls in those runs
    plain_work: float = 0.0  # rows those probes looked up and produced
    cache_s: float = 0.0  # passes through its used cache: lookups, fills, gathering, filters
    cache_rows: float = 0.0  # rows those passes looked up
    upkeep_s: float = 0.0  # invalidating its cache or shadow as the segment's inputs change
    profile_s: float = 0.0  # looking its shadow up and filling it while profiled
    entries: int = 0  # entries held now
    cached_rows: int = 0  # result rows held now
    state: str = "unused"  # used | profiled | unused
    history: list[float] = field(default_factory=list)  # net benefits at earlier choices


@dataclass(frozen=True)
class Choice:
    """The candidates to use and to profile (the rest are dropped), and each used one's share
    of the pool, in result rows."""

    used: dict[Segment, int]
    profiled: frozenset[Segment]


class CacheSelector(Protocol):
    """Chooses an MJoin's caches from the statistics it keeps."""

    name: str
    every: int  # steps between choices

    def choose(self, stats: Sequence[SegmentStats], pool_rows: int) -> Choice:
        """The caches to keep from now on, within `pool_rows` cached result rows."""
        ...


CacheSelectorFactory = Callable[[int], CacheSelector]
"""Makes the cache selector of an MJoin of this many inputs."""
