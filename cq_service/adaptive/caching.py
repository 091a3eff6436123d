"""A-Caching: which subresult caches an MJoin keeps (thesis 003 §5.3; docs/joins.md,
"A-Caching"; the seam: engine/cache_policy.py).

Costs are counted in rows handled (a probe's lookups and its output rows), from the MJoin's
statistics of each candidate segment since the last choice:

- without a cache, a row reaching the segment costs W = work / rows_in (the segment's probes);
- with one, it costs a lookup (`LOOKUP`) plus its share of the output (rows_out / rows_in),
  and a miss (probability 1 − hit) costs W on top, to fill the entry;
- keeping the cache consistent costs one invalidation per update of a segment input when its
  rows name their entries (`full_key`), else a scan of the entries per update batch, counted
  as `SCAN` per entry.

    benefit = rows_in · (hit · W − LOOKUP − rows_out / rows_in)
              + CALL · (batches − fills) · probes − PASS · batches − KEY · keys
    cost    = updates · INVALIDATE            (+ entries · SCAN without a full key)

The engine runs a batch through a pipeline at once, so the rows of one key in a batch share
one fill (they count as hits), a batch with no key missing skips the segment's probe calls
(each costs about `CALL` rows whatever its size), and every batch pays a pass through the
cache (`PASS`) and a lookup per distinct key (`KEY`). W is the work per row of a full traversal
(profiled runs, and a used cache's fills: one row per missing key).

The hit probability of an unused candidate comes from profiling it: a key-only shadow kept
consistent like a cache (the thesis counts probe keys in a Bloom filter; the shadow is exact).
A used cache's comes from its own lookups. Per pipeline, the caches are the set of disjoint
segments with the largest total net benefit (`best_segments`, a dynamic programme over
positions, against exhaustive search in the tests); across pipelines, the chosen ones share
the memory pool greedily by net benefit per row held. Candidates not chosen are profiled
again every `REPROFILE` choices, and the ones being profiled stay so until an estimate backs
them (the Used / Profiled / Unused states); a choice happens every `every` steps of the join.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from cq_service.engine.cache_policy import Choice, Segment, SegmentStats

__all__ = ["ACaching", "best_segments", "net_benefit"]

LOOKUP = 1.0
INVALIDATE = 1.0
SCAN = 0.05
# The engine probes a batch at a time (vectorised), so a call has a fixed cost besides its
# rows, and a cache looks its keys up one by one in Python. In rows of work (as measured on
# the joins bench: a probe call ~0.45 ms, a row ~0.6 µs, a key's lookup and entry a few µs):
CALL = 750.0  # one probe call
# one pass of a batch through a cache (keys, lookups, gathering the entries' rows, fills'
# bookkeeping): about four probe calls (1.5 ms against 0.35 ms on the skewed 3-way case)
PASS = 3000.0
KEY = 4.0  # one distinct key of a batch looked up


def net_benefit(s: SegmentStats) -> float | None:
    """Rows of work a cache on `s.segment` saves net of its upkeep, over the stats' period;
    None while nothing backs an estimate."""
    if s.rows_in <= 0 or s.lookups <= 0 or s.work <= 0:
        return None
    hit = s.hits / s.lookups
    per_row = s.work / (s.traversals or s.rows_in)
    benefit = s.rows_in * (hit * per_row - LOOKUP - s.rows_out / s.rows_in)
    # per batch: the probes' calls saved when no key is missing; the cache's own pass and keys
    probes = s.segment.end - s.segment.start
    benefit += CALL * (s.batches - s.fills) * probes - PASS * s.batches - KEY * s.keys
    cost = s.updates * INVALIDATE + (0.0 if s.full_key else s.entries * SCAN)
    return benefit - cost


def best_segments(nets: dict[Segment, float], positions: int) -> tuple[float, list[Segment]]:
    """Disjoint segments of one pipeline (probes 0..positions−1) with the largest total of
    positive `nets`: best[k] = max(best[k+1], net(k, e) + best[e])."""
    by_start: dict[int, list[Segment]] = {}
    for seg, v in nets.items():
        if v > 0:
            by_start.setdefault(seg.start, []).append(seg)
    best: list[tuple[float, list[Segment]]] = [(0.0, [])] * (positions + 1)
    for k in range(positions - 1, -1, -1):
        top = best[k + 1]
        for seg in by_start.get(k, ()):
            v, rest = best[seg.end]
            if nets[seg] + v > top[0]:
                top = (nets[seg] + v, [seg, *rest])
        best[k] = top
    return best[0]


class ACaching:
    """The caches of one MJoin of `n` inputs."""

    name = "a-caching"
    every = 16  # steps between choices
    REPROFILE = 4  # profile the unused candidates again every this many choices

    def __init__(self, n: int):
        self.n = n
        self.choices = 0

    def choose(self, stats: Sequence[SegmentStats], pool_rows: int) -> Choice:
        self.choices += 1
        nets: dict[Segment, float] = {}
        for s in stats:
            v = net_benefit(s)
            if v is not None:
                nets[s.segment] = v
                s.history.append(v)
                del s.history[:-4]
        chosen: list[Segment] = []
        for i in sorted({s.segment.pipeline for s in stats}):
            mine = {seg: v for seg, v in nets.items() if seg.pipeline == i}
            _, segs = best_segments(mine, self.n - 1)
            chosen.extend(segs)
        used = self._share(chosen, nets, {s.segment: s for s in stats}, pool_rows)
        reprofile = self.choices % self.REPROFILE == 0
        profiled = frozenset(
            s.segment
            for s in stats
            if s.segment not in used
            and (reprofile or (s.state == "profiled" and s.segment not in nets))
        )
        return Choice(used, profiled)

    @staticmethod
    def _share(
        chosen: Iterable[Segment],
        nets: dict[Segment, float],
        stats: dict[Segment, SegmentStats],
        pool_rows: int,
    ) -> dict[Segment, int]:
        """The pool's rows for each chosen cache, by net benefit per row it would hold (the
        entries it would keep times the rows per entry, with room to double), while they last."""

        def need(seg: Segment) -> int:
            s = stats[seg]
            per_key = s.rows_out / max(1, s.rows_in)
            return max(64, int(2 * max(s.cached_rows, s.entries * max(1.0, per_key))))

        left = pool_rows
        out: dict[Segment, int] = {}
        for seg in sorted(chosen, key=lambda g: (-nets[g] / need(g), g)):
            rows = min(need(seg), left)
            if rows <= 0:
                break
            out[seg] = rows
            left -= rows
        return out
