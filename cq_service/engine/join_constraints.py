"""The seam between a binary join and the k-constraint it may exploit (issue 26;
docs/linear-road.md, "Constraints").

A many-one equi-join S' → S (each S' tuple joins at most one S tuple) may be declared to keep
referential integrity RIDS(k): an S' tuple whose S partner arrives after it gets it within k
arrivals on S (thesis 003 §6.6). The join (engine/operators/join_reduction.py) then drops an S'
row once k S arrivals have passed since it came and no partner is present: it will never join.

Where k comes from is an `Adherence`, injected from above: a declared k is `FixedAdherence`;
`k: auto` is learned by a k-Mon monitor (`cq_service.adaptive.k_constraints`, which the engine
never imports) made by an `AdherenceFactory`. With no factory an `auto` constraint keeps
k = ∞: no row is dropped and the join is the plain one. The join feeds the adherence the join
keys of both sides' insertions in arrival order and reads `k` before each collection.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

from cq_service.cql import logical as L
from cq_service.spec.model import ConstraintSpec

__all__ = [
    "KINDS",
    "Adherence",
    "AdherenceFactory",
    "Declared",
    "FixedAdherence",
    "JoinConstraint",
    "adherence_for",
    "declared",
    "join_constraint",
]

# The constraint kinds a binary join exploits (CA and OA are declared on streams and checked by
# monitors; their reductions are not built in the join yet).
KINDS: tuple[str, ...] = ("rids",)


@dataclass(frozen=True)
class JoinConstraint:
    """RIDS(k) on a join: `many` is the port (0 left, 1 right) of S', the many side; `k` the
    declared adherence, None for `k: auto`; `label` names it in explain and statistics."""

    kind: str
    many: int
    k: int | None
    label: str = ""

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"unknown join constraint kind {self.kind!r}")
        if self.many not in (0, 1):
            raise ValueError(f"the many side is port 0 or 1, got {self.many}")
        if self.k is not None and self.k < 0:
            raise ValueError(f"k must be at least 0, got {self.k}")

    def describe(self) -> str:
        k = "auto" if self.k is None else str(self.k)
        side = "left" if self.many == 0 else "right"
        return f"{self.kind.upper()}(k={k}, many side {side})" + (
            f" {self.label}" if self.label else ""
        )


class Adherence(Protocol):
    """The k a join may use for one constraint."""

    @property
    def k(self) -> float:
        """The adherence in use: an int, or ∞ (`math.inf`) while unknown."""
        ...

    @property
    def increases(self) -> int:
        """How many times k was reset to ∞ by an observed increase."""
        ...

    def observe(self, port: int, keys: Sequence[Hashable]) -> None:
        """Insertions on input `port`, by join key, in arrival order (runs of one port at a
        time, interleaved as they arrive)."""
        ...


class FixedAdherence:
    """A declared k: it never changes."""

    increases = 0

    def __init__(self, k: float) -> None:
        self._k = k

    @property
    def k(self) -> float:
        return self._k

    def observe(self, port: int, keys: Sequence[Hashable]) -> None:
        return None


AdherenceFactory = Callable[[JoinConstraint], Adherence]
"""Makes the adherence of a `k: auto` constraint (a k-Mon monitor)."""


def adherence_for(c: JoinConstraint, factory: AdherenceFactory | None) -> Adherence:
    """The declared k, else the factory's monitor, else k = ∞ (the plain join)."""
    if c.k is not None:
        return FixedAdherence(c.k)
    if factory is None:
        return FixedAdherence(math.inf)
    return factory(c)


Declared = Mapping[str, tuple[ConstraintSpec, ...]]
"""The constraints a pipeline declares, by the lower-cased name of the stream or view."""


def declared(streams: Mapping[str, object], queries: Mapping[str, object]) -> Declared:
    """The `constraints` of a pipeline's streams and queries (spec.model's StreamSpec and
    QuerySpec), by lower-cased name; those without any left out."""
    out: dict[str, tuple[ConstraintSpec, ...]] = {}
    for name, s in [*streams.items(), *queries.items()]:
        cs = getattr(s, "constraints", ())
        if cs:
            out[name.lower()] = cs
    return out


def origin(op: L.LogicalOp, index: int) -> tuple[str, str] | None:
    """The stream or view, and its column, that column `index` of `op` is, unchanged, through
    windows, selections and projections; None when it is computed or the input is not a stream
    (a stream's arrivals are what a constraint counts)."""
    while True:
        if isinstance(op, L.WindowOp | L.Filter):
            op = op.input
        elif isinstance(op, L.Project):
            e = op.exprs[index]
            if not isinstance(e, L.ColRef):
                return None
            op, index = op.input, e.index
        elif isinstance(op, L.Source):
            return None if op.is_relation else (op.name, op.schema[index].name)
        elif isinstance(op, L.View):
            return (op.name, op.fields[index].name) if op.is_stream else None
        else:
            return None


def join_constraint(
    op: L.Join, constraints: Declared
) -> tuple[JoinConstraint, ConstraintSpec] | None:
    """The RIDS constraint a two-way join may use: one declared on a stream read by one side,
    on a column it is joined by, referencing the column the other side's stream is joined by
    there; with it, the declaration it came from. None when there is none."""
    if not constraints:
        return None
    for lk, rk in zip(op.left_keys, op.right_keys):
        if not (isinstance(lk, L.ColRef) and isinstance(rk, L.ColRef)):
            continue
        ends = (origin(op.left, lk.index), origin(op.right, rk.index))
        if ends[0] is None or ends[1] is None:
            continue
        for many in (0, 1):
            (stream, column), (other, other_column) = ends[many], ends[1 - many]
            for c in constraints.get(stream.lower(), ()):
                if (
                    c.kind == "rids"
                    and c.references is not None
                    and c.attribute.lower() == column.lower()
                    and c.references[0].lower() == other.lower()
                    and c.references[1].lower() == other_column.lower()
                ):
                    label = f"{stream}.{column} -> {other}.{other_column}"
                    return JoinConstraint("rids", many, c.k, label), c
    return None
