"""The scheduler's seam: a policy picks the next operator to run."""

from __future__ import annotations

from typing import Protocol

from cq_service.engine.operators.base import Operator

__all__ = ["SchedulingPolicy"]


class SchedulingPolicy(Protocol):
    name: str

    def choose(self, operators: list[Operator]) -> Operator | None:
        """The next operator to run, or None when none is runnable."""
