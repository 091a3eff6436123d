"""The seam between an MJoin and whatever orders its pipelines' probes (docs/joins.md, "Probe
orders that adapt"; issue 25 part 2).

Input i's pipeline probes the other inputs one after the other (engine/operators/mjoin.py);
which order is up to a `ProbeOrderer`, injected from above (the engine never imports
`cq_service.adaptive`, which holds the greedy one). Every `every` runs of a pipeline the MJoin
profiles it: at each position of the current order it takes up to `rows` of the partial
results that reached it and counts, for every input that could come next there (joined by an
equality to those bound, and probed through an index the join already keeps), how many matches
each row has in that input's synopsis. It gives the orderer those counts
(`observe(i, order, profile, candidates)`) and adopts the order the orderer returns, if any.
Any order that keeps each probe connected gives the same result, so the order may change at
any batch. Only orders through indexes the join keeps are adopted: adapting never adds state.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol

__all__ = ["PositionProfile", "ProbeOrderer", "ProbeOrdererFactory"]


@dataclass(frozen=True)
class PositionProfile:
    """At one position of a pipeline: the inputs bound before it, the rows profiled, and per
    candidate input the matches those rows had in it."""

    bound: frozenset[int]
    rows: int
    matches: dict[int, int]


class ProbeOrderer(Protocol):
    """Chooses each pipeline's probe order from the profiles an MJoin takes."""

    name: str
    every: int  # profile a pipeline once every this many runs
    rows: int  # at most this many partial rows per position

    def observe(
        self,
        pipeline: int,
        order: tuple[int, ...],
        profile: Sequence[PositionProfile],
        candidates: Callable[[frozenset[int]], Sequence[int]],
    ) -> tuple[int, ...] | None:
        """The pipeline's profile at each position of `order` it reached; a new order, or None
        to keep it. `candidates(bound)`: the inputs that may be probed after those bound."""
        ...


ProbeOrdererFactory = Callable[[int], ProbeOrderer]
"""Makes the probe orderer of an MJoin of this many inputs."""
