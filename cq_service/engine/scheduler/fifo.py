"""FIFO: the oldest waiting input first, pushed through its whole path before the next.

Outputs inherit their input's stamp, so the operator holding the oldest stamp is the one
holding the oldest block; among equal stamps the one latest in the plan runs first, which
carries a block to the end of its path before its siblings start.
"""

from __future__ import annotations

from cq_service.engine.operators.base import Operator
from cq_service.engine.scheduler.base import fallback, ready

__all__ = ["Fifo", "oldest", "oldest_with_stamp"]


class Fifo:
    name = "fifo"

    def __init__(self) -> None:
        self._order: dict[int, int] = {}

    def attach(self, operators: list[Operator]) -> None:
        self._order = {id(op): k for k, op in enumerate(operators)}

    def choose(self, operators: list[Operator]) -> Operator | None:
        return oldest(ready(operators), self._order) or fallback(operators)


def oldest(candidates: list[Operator], order: dict[int, int]) -> Operator | None:
    """The candidate whose next input is oldest; ties go to the latest in plan `order`."""
    return oldest_with_stamp(candidates, order)[0]


def oldest_with_stamp(
    candidates: list[Operator], order: dict[int, int]
) -> tuple[Operator | None, float]:
    """`oldest`, with the stamp of its next input (infinity when there is none)."""
    best: Operator | None = None
    key: tuple[float, int] | None = None
    for op in candidates:
        stamp = op.head_stamp()
        k = (stamp if stamp is not None else float("inf"), -order.get(id(op), 0))
        if key is None or k < key:
            best, key = op, k
    return best, key[0] if key is not None else float("inf")
