"""The seam between an MJoin and whatever orders its pipelines' probes (docs/joins.md, "Probe
orders that adapt"; issue 25 part 2).

Input i's pipeline probes the other inputs one after the other (engine/operators/mjoin.py);
which order is up to a `ProbeOrderer`, injected from above (the engine never imports
`cq_service.adaptive`, which holds the greedy one). Every `every` runs of a pipeline the MJoin
profiles it: at each position of the current order it takes up to `rows` of the partial
results that reached it and counts, for every input that could come next there (joined by an
equality to those bound, and probed through an index the join already keeps), how many matches
each row has in that input's synopsis. It gives the orderer those counts
(`observe(i, order, profile, candidates)`: the profiler's statistics).

The orderer is a StreaMon `ReOptimizer` (engine/streamon.py): when `significant()` after an
observation, the join flags its watch, and polls it once the pipelines of that time slice ran
(where it adopted orders before StreaMon); `reoptimize()` chooses the new orders, and the join
takes them (`take_orders`) and adopts each one it accepts.
Any order that keeps each probe connected gives the same result, so the order may change at
any batch. Only orders through indexes the join keeps are adopted: adapting never adds state.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
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
    """Chooses each pipeline's probe order from the profiles an MJoin takes (a StreaMon
    `ReOptimizer`: `kind`, `watches`, `statistics`, `significant`, `reoptimize`)."""

    name: str
    kind: str
    watches: str
    every: int  # profile a pipeline once every this many runs
    rows: int  # at most this many partial rows per position

    def statistics(self) -> Mapping[str, object]: ...

    def significant(self) -> bool:
        """Whether a pipeline was observed since the last `reoptimize`."""
        ...

    def reoptimize(self) -> bool:
        """Choose the observed pipelines' orders; True if it chose a new one."""
        ...

    def take_orders(self) -> dict[int, tuple[int, ...]]:
        """The new orders `reoptimize` chose, by pipeline (then forgotten)."""
        ...

    def observe(
        self,
        pipeline: int,
        order: tuple[int, ...],
        profile: Sequence[PositionProfile],
        candidates: Callable[[frozenset[int]], Sequence[int]],
    ) -> None:
        """The pipeline's profile at each position of `order` it reached. `candidates(bound)`:
        the inputs that may be probed after those bound."""
        ...


ProbeOrdererFactory = Callable[[int], ProbeOrderer]
"""Makes the probe orderer of an MJoin of this many inputs."""
