"""A-Greedy for MJoin pipelines (thesis 003 §5.2; docs/joins.md, "Probe orders that adapt").

A pipeline's probes are pipelined filters with drop probing: a partial result that finds no
match in the next input ends there, one that finds several goes on as several. The cheapest
order puts first the probes that leave the fewest rows, so the greedy invariant is on each
position's *fanout* — matches per row reaching it, conditional on the inputs bound before (the
matrix view's conditional selectivities, here counted by the join's profiles,
engine/probe_order.py): at every position the input probed has the smallest fanout among
those that could be probed there. Every probe is a hash lookup, so costs are taken equal.

Estimates are decayed sums over the profiles (`DECAY` per profile of the same position), used
once `MIN_ROWS` rows back them. A position violates the invariant when another candidate's
fanout is below `alpha` times the current one's (the thrash guard); the correction puts that
candidate there and keeps the rest of the order as it was, as far as each probe stays joined
to those before it.

On StreaMon (engine/streamon.py): `observe` is the profiler (the decayed counts), and
`reoptimize` the invariant check of the pipelines observed since the last one.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from cq_service.engine.probe_order import PositionProfile

__all__ = ["GreedyProbes"]


class GreedyProbes:
    """The probe orders of one MJoin's pipelines."""

    name = "a-greedy"
    every = 16  # profile a pipeline once every this many runs
    rows = 64  # partial rows profiled per position
    DECAY = 0.8
    MIN_ROWS = 32

    def __init__(self, n: int, alpha: float = 0.9):
        if not 0 < alpha <= 1:
            raise ValueError(f"thrash guard alpha must be in (0, 1], got {alpha}")
        self.n = n
        self.alpha = alpha
        # (pipeline, inputs bound, candidate) -> [rows, matches], decayed
        self._seen: dict[tuple[int, frozenset[int], int], list[float]] = {}
        self.switches = 0
        self.kind = f"probe order: {self.name}"
        self.watches = (
            f"{n} pipelines: matches per row at each position (every {self.every}th run, "
            f"{self.rows} rows)"
        )
        # pipelines observed since the last `reoptimize`: their order and candidates then
        self._observed: dict[
            int, tuple[tuple[int, ...], Callable[[frozenset[int]], Sequence[int]]]
        ] = {}
        self._chosen: dict[int, tuple[int, ...]] = {}

    def fanout(self, pipeline: int, bound: frozenset[int], t: int) -> float | None:
        """Matches per row of input t probed after `bound`, once MIN_ROWS rows back it."""
        s = self._seen.get((pipeline, bound, t))
        return None if s is None or s[0] < self.MIN_ROWS else s[1] / s[0]

    def observe(
        self,
        pipeline: int,
        order: tuple[int, ...],
        profile: Sequence[PositionProfile],
        candidates: Callable[[frozenset[int]], Sequence[int]],
    ) -> None:
        for p in profile:
            for t, m in p.matches.items():
                s = self._seen.setdefault((pipeline, p.bound, t), [0.0, 0.0])
                s[0] = s[0] * self.DECAY + p.rows
                s[1] = s[1] * self.DECAY + m
        self._observed[pipeline] = (order, candidates)

    # -- StreaMon (engine/streamon.py) ----------------------------------------------------------

    def significant(self) -> bool:
        return bool(self._observed)

    def reoptimize(self) -> bool:
        observed, self._observed = self._observed, {}
        for pipeline, (order, candidates) in observed.items():
            new = self.choose(pipeline, order, candidates)
            if new is not None:
                self._chosen[pipeline] = new
        return bool(self._chosen)

    def take_orders(self) -> dict[int, tuple[int, ...]]:
        chosen, self._chosen = self._chosen, {}
        return chosen

    def statistics(self) -> dict[str, object]:
        return {"estimates": len(self._seen), "switches": self.switches}

    def choose(
        self,
        pipeline: int,
        order: tuple[int, ...],
        candidates: Callable[[frozenset[int]], Sequence[int]],
    ) -> tuple[int, ...] | None:
        """The pipeline's corrected order where a position violates the invariant under the
        guard, else None."""
        bound = frozenset({pipeline})
        for k, t in enumerate(order[1:], start=1):
            here = self.fanout(pipeline, bound, t)
            if here is None:
                return None  # not profiled this far yet
            known = {
                c: f
                for c in candidates(bound)
                if (f := self.fanout(pipeline, bound, c)) is not None
            }
            best = min(known, key=lambda c: (known[c], c))
            if known[best] < self.alpha * here:
                new = _corrected(order, k, best, candidates)
                if new is not None:
                    self.switches += 1
                    return new
            bound = bound | {t}
        return None


def _corrected(
    order: tuple[int, ...],
    k: int,
    best: int,
    candidates: Callable[[frozenset[int]], Sequence[int]],
) -> tuple[int, ...] | None:
    """`order` with `best` at position k and the others after it in their order, each placed
    as soon as it is joined to those before it; None when that cannot be done."""
    placed = [*order[:k], best]
    rest = [t for t in order[k:] if t != best]
    while rest:
        allowed = set(candidates(frozenset(placed)))
        nxt = next((t for t in rest if t in allowed), None)
        if nxt is None:
            return None
        placed.append(nxt)
        rest.remove(nxt)
    return tuple(placed)
