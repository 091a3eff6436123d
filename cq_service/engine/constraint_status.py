"""What an operator that exploits a k-constraint reports about it (issue 26; SysStream's
constraint columns, docs/sys-stream.md): the constraint, the k in use, and what it cost.

A join using RIDS (engine/operators/join_reduction.py) and a partitioned rows window using CA
(engine/operators/rows_window.py) each return one from `Operator.constraint_status`; every
other operator returns None.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

__all__ = ["ConstraintStatus", "format_k"]


@dataclass(frozen=True)
class ConstraintStatus:
    """One operator's constraint now. `kind` is ``rids`` or ``ca``; `attribute` names the
    constrained column (``Bid.auction -> Auction.id``, ``Pos.car``); `k` is the adherence in
    use (`math.inf` while k-Mon has not learned it, after a reset, or for `k: auto` with no
    monitor); `increases` the resets of a learned k by an observed increase (0 for a declared
    k); `violations` arrivals that broke the constraint at k; `missed` results lost by them
    (false negatives); `dropped` rows (RIDS) or partitions (CA) freed."""

    kind: str
    attribute: str
    k: float
    increases: int
    violations: int
    missed: int
    dropped: int

    def describe(self) -> str:
        """One line for `cq explain --live`."""
        return (
            f"{self.kind.upper()} {self.attribute} k={format_k(self.k)}, "
            f"{self.increases} increases, {self.violations} violations, {self.missed} missed, "
            f"{self.dropped} dropped"
        )


def format_k(k: float) -> str:
    """k as people read it: an integer, or ∞."""
    return "∞" if math.isinf(k) else str(int(k)) if float(k).is_integer() else str(k)
