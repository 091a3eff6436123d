"""The scheduler's seam: a policy picks the next operator to run.

The executor calls `attach` whenever its plan changes and `choose` before every step. Policies
other than round-robin treat sources as arrivals: a source is read only when no other operator
has useful work (`ready`), and then the one furthest behind in time, so a join waiting for it
is fed first.
"""

from __future__ import annotations

from typing import Protocol

from cq_service.engine.operators.base import Operator
from cq_service.engine.operators.source import SourceOperator

__all__ = ["SchedulingPolicy", "fallback", "ready"]


class SchedulingPolicy(Protocol):
    name: str

    def attach(self, operators: list[Operator]) -> None:
        """The executor's whole plan (sources included), after any change."""

    def choose(self, operators: list[Operator]) -> Operator | None:
        """The next operator to run among `operators`, or None when none is runnable."""


def ready(operators: list[Operator]) -> list[Operator]:
    """Operators other than sources that would make progress if run now."""
    return [
        op
        for op in operators
        if not op.is_source and op.runnable() and not op.blocked()
    ]


def fallback(operators: list[Operator]) -> Operator | None:
    """When nothing is ready: the runnable source furthest behind, else any runnable operator
    (a blocked one buffers its input, so that backpressure never stalls the plan)."""
    best: SourceOperator | None = None
    for op in operators:
        if (
            op.is_source
            and op.runnable()
            and (best is None or op.watermark < best.watermark)
        ):
            best = op
    if best is not None:
        return best
    for op in operators:
        if op.runnable():
            return op
    return None
