"""Static-priority scheduling: run the ready operator of highest priority.

Priorities come from measured statistics (`statistics`) and are recomputed only when those
drift, so choosing costs one pass over the operators. Ties go to the operator holding the
oldest input (earliest stamp), then to the one latest in the plan: within a chain of equal
priorities this pushes the oldest block through to the end, as Chain's guarantee requires.
"""

from __future__ import annotations

import time
from abc import ABC, abstractmethod

from cq_service.engine.operators.base import MultiInputOperator, Operator
from cq_service.engine.scheduler.base import fallback, ready
from cq_service.engine.scheduler.paths import operator_paths, queue_readers
from cq_service.engine.scheduler.statistics import OperatorStatistics

__all__ = ["PriorityPolicy"]

REFRESH_CALLS = 32  # choose() calls between statistics windows ...
REFRESH_SECONDS = 0.05  # ... or this much time, whichever comes first


class PriorityPolicy(ABC):
    name = "priority"

    def __init__(self, statistics: OperatorStatistics | None = None) -> None:
        self.statistics = statistics or OperatorStatistics()
        self.priority: dict[int, float] = {}
        self.paths: list[list[Operator]] = []
        self.shared: list[list[Operator]] = []  # the readers of each queue read by several
        self._co_readers: dict[int, list[Operator]] = {}  # op -> readers of its shared queues
        self._operators: list[Operator] = []
        self._order: dict[int, int] = {}
        self._calls = 0
        self._refreshed = time.perf_counter()

    @abstractmethod
    def priorities(self, paths: list[list[Operator]]) -> dict[int, float]:
        """Priority of each operator (by id) on `paths`, from `self.statistics`."""

    def attach(self, operators: list[Operator]) -> None:
        self._operators = operators
        self._order = {id(op): k for k, op in enumerate(operators)}
        readers = queue_readers(operators)
        self.paths = operator_paths(operators, readers)
        self.shared = [g for g in readers.values() if len(g) > 1]
        self._co_readers = {}
        for group in self.shared:
            for op in group:
                mates = self._co_readers.setdefault(id(op), [])
                mates.extend(g for g in group if g not in mates)
        self._joins = [op for op in operators if isinstance(op, MultiInputOperator)]
        self._upstream = _upstream(operators)
        self.statistics.forget(operators)
        self.statistics.refresh(operators)
        self.rebuild()

    def rebuild(self) -> None:
        self.priority = self.priorities(self.paths)

    def priority_of(self, op: Operator) -> float:
        return self.priority.get(id(op), 0.0)

    def choose(self, operators: list[Operator]) -> Operator | None:
        self._calls += 1
        if (
            self._calls % REFRESH_CALLS == 0
            or time.perf_counter() - self._refreshed > REFRESH_SECONDS
        ):
            self._refreshed = time.perf_counter()
            if self.statistics.refresh(self._operators):
                self.rebuild()
        return self.highest(ready(operators), self._lent()) or fallback(operators)

    def _lent(self) -> dict[int, float]:
        """Priorities lent across blocked joins. A join whose inputs wait for the time of
        another input (a burst on one stream) frees nothing until that input moves: the
        operators feeding the lagging input borrow the highest priority of the waiting side,
        so the two sides advance together instead of one starving behind the other. A
        borrower that reads a shared queue lends to the queue's other readers too: alone it
        would run ahead of them and free none of the queue."""
        lent: dict[int, float] = {}
        for join in self._joins:
            if not join.blocked() or not any(r.pending() for r in join.inputs):
                continue
            lagging = join.lagging_ports()
            ups = self._upstream[id(join)]
            waiting = [u for p, us in enumerate(ups) if p not in lagging for u in us]
            lend = max(
                [self.priority.get(id(join), 0.0)]
                + [self.priority.get(id(u), 0.0) for u in waiting]
            )
            for p in lagging:
                for u in ups[p]:
                    for v in self._co_readers.get(id(u), (u,)):
                        if lend > max(self.priority.get(id(v), 0.0), lent.get(id(v), 0.0)):
                            lent[id(v)] = lend
        return lent

    def highest(
        self, candidates: list[Operator], lent: dict[int, float] | None = None
    ) -> Operator | None:
        best: Operator | None = None
        key: tuple[float, float, int] | None = None
        for op in candidates:
            stamp = op.head_stamp()
            prio = self.priority.get(id(op), 0.0)
            if lent:
                prio = max(prio, lent.get(id(op), prio))
            k = (
                -prio,
                stamp if stamp is not None else float("inf"),
                -self._order.get(id(op), 0),
            )
            if key is None or k < key:
                best, key = op, k
        return best

    def terminal(self, op: Operator) -> bool:
        """The end of a path: what it writes leaves the engine (σ = 0 on the chart)."""
        return op.output.readers == 0


def _upstream(operators: list[Operator]) -> dict[int, list[list[Operator]]]:
    """For each multi-input operator, the operators upstream of each input port."""
    producer = {id(op.output): op for op in operators}
    out: dict[int, list[list[Operator]]] = {}
    for op in operators:
        if not isinstance(op, MultiInputOperator):
            continue
        ports = []
        for r in op.inputs:
            seen: list[Operator] = []
            stack = [producer.get(id(r.queue))]
            while stack:
                u = stack.pop()
                if u is None or u in seen:
                    continue
                seen.append(u)
                stack.extend(producer.get(id(x.queue)) for x in u.inputs)
            ports.append(seen)
        out[id(op)] = ports
    return out
