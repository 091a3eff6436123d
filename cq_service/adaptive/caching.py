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

**Measured costs.** The row model prices a cache's own work with constants; the engine also
measures what it actually pays, in CPU seconds (`SegmentStats.plain_s`, `cache_s`, `upkeep_s`,
`profile_s`): the segment's probes when run uncached, the passes through a used cache (lookups,
fills, gathering, the filters after it), and the invalidations of its cache or shadow on every
update of a segment input (a window's expiries included). `seconds_per_row` turns seconds into
rows of work (the plain probes' seconds over their rows of work, `CALL` per call). Then

- a candidate whose cache has run is valued by `measured_net`: rows_in · (plain CPU per row −
  cache CPU per row) − upkeep CPU, all measured (the measure outlives the cache: halving keeps
  its ratios, so a cache dropped for costing more than it saves is not tried again blindly);
- one never run by the row model, with the cached cost scaled by what the caches run so far
  cost against the model (`cache_cost_ratio`, the median over the used ones: `ACaching.ratio`)
  and the upkeep measured on its shadow in place of the modelled one.

Profiling costs too (a shadow's lookups and its invalidations): while a profiling round finds
no cache to use, the next one comes twice as late (`REPROFILE` up to `MAX_REPROFILE` choices).

The hit probability of an unused candidate comes from profiling it: a key-only shadow kept
consistent like a cache (the thesis counts probe keys in a Bloom filter; the shadow is exact).
A used cache's comes from its own lookups. Per pipeline, the caches are the set of disjoint
segments with the largest total net benefit (`best_segments`, a dynamic programme over
positions, against exhaustive search in the tests); across pipelines, the chosen ones share
the memory pool greedily by net benefit per row held. Candidates not chosen are profiled
again every `REPROFILE` choices (backing off as above), and the ones being profiled stay so
until an estimate backs them (the Used / Profiled / Unused states); a choice happens every
`every` steps of the join.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from cq_service.engine.cache_policy import Choice, Segment, SegmentStats

__all__ = [
    "ACaching",
    "best_segments",
    "cache_cost_ratio",
    "measured_net",
    "modelled_costs",
    "net_benefit",
    "net_value",
    "seconds_per_row",
]

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


def _modelled_upkeep(s: SegmentStats) -> float:
    return s.updates * INVALIDATE + (0.0 if s.full_key else s.entries * SCAN)


def modelled_costs(s: SegmentStats) -> tuple[float, float] | None:
    """Rows of work of the rows that reached `s.segment`, (through its probes, through a
    cache on it), by the row model; None while nothing backs an estimate."""
    if s.rows_in <= 0 or s.lookups <= 0 or s.work <= 0:
        return None
    hit = s.hits / s.lookups
    per_row = s.work / (s.traversals or s.rows_in)
    probes = s.segment.end - s.segment.start
    plain = s.rows_in * per_row + CALL * s.batches * probes
    cached = s.rows_in * ((1 - hit) * per_row + LOOKUP + s.rows_out / s.rows_in)
    cached += CALL * s.fills * probes + PASS * s.batches + KEY * s.keys
    return plain, cached


def net_benefit(s: SegmentStats) -> float | None:
    """Rows of work a cache on `s.segment` saves net of its upkeep, over the stats' period,
    by the row model alone; None while nothing backs an estimate."""
    costs = modelled_costs(s)
    if costs is None:
        return None
    return costs[0] - costs[1] - _modelled_upkeep(s)


def seconds_per_row(s: SegmentStats) -> float | None:
    """CPU seconds per row of work (the row model's unit: a row looked up or produced, `CALL`
    per probe call), from the segment's probes run uncached; None if never timed."""
    rows = s.plain_work + CALL * s.plain_calls
    if s.plain_s <= 0 or rows <= 0:
        return None
    return s.plain_s / rows


def measured_net(s: SegmentStats) -> float | None:
    """The net benefit of a cache on `s.segment` from what the engine measured, in rows of
    work: the rows that reached the segment times (CPU per row through its probes − CPU per
    row through its cache), less the CPU of keeping it consistent. None until both the plain
    probes and a used cache have been timed."""
    unit = seconds_per_row(s)
    if unit is None or s.cache_rows <= 0 or s.plain_rows <= 0 or s.rows_in <= 0:
        return None
    saved = s.rows_in * (s.plain_s / s.plain_rows - s.cache_s / s.cache_rows)
    return (saved - s.upkeep_s) / unit


def cache_cost_ratio(s: SegmentStats) -> float | None:
    """A used cache's measured CPU per row looked up over what the row model charges it."""
    unit = seconds_per_row(s)
    costs = modelled_costs(s)
    if unit is None or costs is None or s.cache_rows <= 0 or costs[1] <= 0:
        return None
    return (s.cache_s / s.cache_rows / unit) / (costs[1] / s.rows_in)


def net_value(s: SegmentStats, ratio: float = 1.0) -> float | None:
    """What the selector goes by, in rows of work: `measured_net` once a cache on the segment
    has run; before, the row model with its cached cost scaled by `ratio` (what the caches
    run so far cost against the model) and the upkeep measured on the candidate's shadow in
    place of the modelled one."""
    got = measured_net(s)
    if got is not None:
        return got
    costs = modelled_costs(s)
    if costs is None:
        return None
    unit = seconds_per_row(s)
    upkeep = s.upkeep_s / unit if unit is not None and s.upkeep_s > 0 else _modelled_upkeep(s)
    return costs[0] - ratio * costs[1] - upkeep


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
    REPROFILE = 4  # profile the unused candidates again every this many choices, at first
    MAX_REPROFILE = 64  # ... doubling while profiling finds nothing to use, up to this

    def __init__(self, n: int):
        self.n = n
        self.choices = 0
        self.reprofile = self.REPROFILE
        self._next_profile = self.REPROFILE
        self.ratio = 1.0  # caches' measured cost over the row model's, learnt as they run

    def choose(self, stats: Sequence[SegmentStats], pool_rows: int) -> Choice:
        self.choices += 1
        ratios = [r for s in stats if s.state == "used" and (r := cache_cost_ratio(s))]
        if ratios:
            self.ratio = sorted(ratios)[len(ratios) // 2]
        nets: dict[Segment, float] = {}
        for s in stats:
            v = net_value(s, self.ratio)
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
        if any(s.state == "profiled" for s in stats):  # a profiling round ends here
            self.reprofile = self.REPROFILE if used else min(2 * self.reprofile, self.MAX_REPROFILE)
        reprofile = self.choices >= self._next_profile
        if reprofile:
            self._next_profile = self.choices + self.reprofile
        # a candidate whose cache has run is valued by its measures, not its shadow's hits:
        # profiling it again would cost and tell nothing
        profiled = frozenset(
            s.segment
            for s in stats
            if s.segment not in used
            and measured_net(s) is None
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
