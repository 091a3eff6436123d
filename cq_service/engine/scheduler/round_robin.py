"""Round-robin: each runnable operator in turn, in plan order (sources included)."""

from __future__ import annotations

from cq_service.engine.operators.base import Operator

__all__ = ["RoundRobin"]


class RoundRobin:
    name = "round_robin"

    def __init__(self) -> None:
        self._next = 0

    def attach(self, operators: list[Operator]) -> None:
        self._next = 0

    def choose(self, operators: list[Operator]) -> Operator | None:
        n = len(operators)
        for k in range(n):
            op = operators[(self._next + k) % n]
            if op.runnable():
                self._next = (self._next + k + 1) % n
                return op
        return None
