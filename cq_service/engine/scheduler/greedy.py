"""Per-operator greedy: priority (1 − σ)/c, the memory an operator frees per second.

It ignores what comes after an operator, so a fast, very selective operator behind a slow one
starves (brief-scheduling, "Competing strategies"); Chain fixes that. (Not the shared-join
"Greedy"/MQT of paper 002.)
"""

from __future__ import annotations

from cq_service.engine.operators.base import Operator
from cq_service.engine.scheduler.priority import PriorityPolicy

__all__ = ["Greedy"]


class Greedy(PriorityPolicy):
    name = "greedy"

    def priorities(self, paths: list[list[Operator]]) -> dict[int, float]:
        out: dict[int, float] = {}
        for path in paths:
            for op in path:
                sel = 0.0 if self.terminal(op) else self.statistics.selectivity(op)
                out[id(op)] = (1.0 - sel) / self.statistics.cost(op)
        return out
