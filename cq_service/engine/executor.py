"""The executor: a single thread running operators as the scheduling policy picks them.

It also keeps the pipeline's clock: while some sources are still reading, a source that is
exhausted follows the slowest active source's heartbeat; when every source is exhausted, all of
them send the final heartbeat at the largest timestamp seen (docs/semantics.md, end of input).

`run` is for finite inputs (``cq run``). A live worker instead polls its sources itself and
calls `drain` to run everything downstream of them; its plan may change between calls
(`replace_plan`).

A step runs an operator for at most `budget` elements and, when `step_seconds` is set, for about
that long: the budget is cut to `step_seconds` over the operator's measured seconds per element
(a run still takes at least one batch). A policy decides again after every step, so this is the
engine's preemption: an operator that is slow per element cannot hold the engine for a whole
budget while a burst arrives (Chain assumes operators run one time unit at a time).

The executor owns the plan's StreaMon registry (engine/streamon.py): `replace_plan` registers
the operators' re-optimizers (`Operator.watches`) and unregisters those of operators that left,
and after every step the registry re-optimizes the ones flagged since (nothing when none is).
"""

from __future__ import annotations

import time
from collections.abc import Callable

from cq_service.engine.adjust import Adjustment, adjust, replay
from cq_service.engine.memory import MemoryMonitor
from cq_service.engine.operators.base import NEVER, Operator
from cq_service.engine.operators.sink import SinkOperator
from cq_service.engine.operators.source import SourceOperator
from cq_service.engine.queues import Queue
from cq_service.engine.scheduler import Chain, SchedulingPolicy
from cq_service.engine.streamon import StreaMon

__all__ = ["Executor"]


class Executor:
    def __init__(
        self,
        operators: list[Operator],
        queues: list[Queue],
        policy: SchedulingPolicy | None = None,
        budget: int = 65_536,
        step_seconds: float | None = None,
    ):
        if step_seconds is not None and step_seconds <= 0:
            raise ValueError("step_seconds must be positive")
        self.policy = policy or Chain()
        self.budget = budget
        self.step_seconds = step_seconds
        self.steps = 0
        # what a step's busy time is read from: wall time (what latency sees), or the thread's
        # CPU time (time.thread_time: what a CPU budget counts, blind to other processes)
        self.clock: Callable[[], float] = time.perf_counter
        self.drained = True  # the last `drain` stopped because nothing was runnable
        self.adjustments: list[Adjustment] = []  # every change made, in order
        self._clock = NEVER
        self.streamon = StreaMon()  # the plan's re-optimizers, polled between steps
        self.replace_plan(operators, queues)

    def replace_plan(self, operators: list[Operator], queues: list[Queue]) -> None:
        """Run these operators from now on (a live worker adds and removes queries)."""
        self.operators = operators
        self.queues = queues
        self.sources = [op for op in operators if isinstance(op, SourceOperator)]
        self.sinks = [op for op in operators if isinstance(op, SinkOperator)]
        self.downstream = [op for op in operators if not isinstance(op, SourceOperator)]
        old = getattr(self, "memory", None)
        self.memory = MemoryMonitor(operators, queues)
        if old is not None:
            self.memory.carry_over(old)
        self.memory.sample()
        self.policy.attach(operators)
        self.streamon.replace(w for op in operators for w in op.watches())

    def set_policy(self, policy: SchedulingPolicy) -> None:
        """Schedule with `policy` from the next step on (results do not change)."""
        self.policy = policy
        policy.attach(self.operators)

    def adjust(
        self, query: str, knob: str, value: int, *, at: int | None = None, reason: str = ""
    ) -> list[Adjustment]:
        """Change a window knob of `query` (engine/adjust.py); the changes are also appended
        to `adjustments`."""
        made = adjust(self.operators, query, knob, value, at=at, reason=reason)
        self.adjustments.extend(made)
        return made

    def replay(self, records: list[Adjustment]) -> None:
        """Make the changes of an earlier run's log at the same instants (before running)."""
        self.adjustments.extend(replay(self.operators, records))

    def step(self, op: Operator) -> None:
        """Run `op` for one budget, timing it (the priority policies learn costs from it)."""
        read = op.bytes_in
        budget = self.budget
        if self.step_seconds is not None and op.busy_seconds > 0 and op.rows_in > 0:
            budget = max(1, min(budget, int(self.step_seconds * op.rows_in / op.busy_seconds)))
        start = self.clock()
        op.run(budget)
        seconds = self.clock() - start
        op.busy_seconds += seconds
        op.run_cost.add(op.bytes_in - read, seconds)
        self.steps += 1
        self.memory.sample(op)
        self.streamon.poll()  # O(1) unless a re-optimizer flagged a significant change

    def drain(self, max_steps: int = 1_000_000, seconds: float | None = None) -> int:
        """Run every operator but the sources until none is runnable, or `max_steps` were
        taken, or (when given) `seconds` have passed; returns the steps taken."""
        steps = 0
        deadline = None if seconds is None else time.perf_counter() + seconds
        self.drained = False
        while steps < max_steps:
            if deadline is not None and steps and time.perf_counter() >= deadline:
                break
            op = self.policy.choose(self.downstream)
            if op is None:
                self.drained = True
                break
            self.step(op)
            steps += 1
        return steps

    def follow_clocks(self) -> None:
        """Live: exhausted sources and followers (stored relations) move with the slowest
        source still reading."""
        clock = self._clock_of([s for s in self.sources if not s.exhausted and not s.follows_clock])
        if clock == NEVER:
            return
        for s in self.sources:
            if s.exhausted:
                s.follow_clock(clock)
            elif s.follows_clock:
                s.follow_live(clock)

    def queued_rows(self) -> int:
        """Elements waiting in queues (the live worker pauses its sources above a budget)."""
        return sum(q.rows for q in self.queues)

    def run(self, after_step: Callable[[Executor], None] | None = None) -> None:
        """Run until every source is exhausted and every queue drained; then flush sinks.
        `after_step(self)`, if given, is called after every step (a test adjusts windows
        from it)."""
        self.memory.sample()
        while True:
            op = self.policy.choose(self.operators)
            if op is None:
                if not self._advance_clock():
                    break
                continue
            self.step(op)
            if after_step is not None:
                after_step(self)
            if isinstance(op, SourceOperator):
                self._advance_clock()
        for sink in self.sinks:
            sink.finish()

    def _advance_clock(self) -> bool:
        """Move exhausted sources' heartbeats; True if that gave anyone work."""
        active = [s for s in self.sources if not s.exhausted]
        clock = self._clock_of(active)
        if clock <= self._clock and active:
            return False
        self._clock = max(self._clock, clock)
        moved = False
        for s in self.sources:
            if s.exhausted:
                before = s.watermark
                s.follow_clock(clock)
                moved |= s.watermark != before
        return moved or any(op.runnable() for op in self.operators)

    def _clock_of(self, leaders: list[SourceOperator]) -> int:
        """The pipeline's time: the slowest leading source's heartbeat or, with none left,
        the largest timestamp any source saw (the end of input)."""
        if leaders:
            return min(s.watermark for s in leaders)
        seen = [s.max_seen for s in self.sources if s.max_seen != NEVER]
        return max(seen) if seen else NEVER
