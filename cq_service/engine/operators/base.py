"""The operator contract and the run loop, written once.

The executor sees only `run(budget)`, `runnable()` and the statistics. Subclasses implement what
differs: `on_batch` (unary) or `on_run` (several inputs, called in timestamp order across the
inputs), `on_heartbeat` (time-driven output such as window expiries), and `state_size`.

Inputs with several ports are aligned here: data is buffered per port and released, merged in
timestamp order, only up to the smallest heartbeat of all ports, so an operator always sees every
input's elements of instant τ before anything later. That is what makes results independent of
scheduling.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Any, ClassVar

import numpy as np

from cq_service.engine.batch import EMPTY_TICKS, Batch, merge_ticks
from cq_service.engine.constraint_status import ConstraintStatus
from cq_service.engine.queues import Heartbeat, Queue, QueueReader
from cq_service.engine.run_cost import RunCost
from cq_service.engine.streamon import Watch
from cq_service.types import DataType

__all__ = ["MultiInputOperator", "Operator", "StateMismatch", "UnaryOperator"]

NEVER = np.iinfo(np.int64).min


class StateMismatch(ValueError):
    """A saved state that does not fit the operator it is loaded into."""


class Operator(ABC):
    """Reads input queues, writes one output queue."""

    kind = "operator"
    is_source: ClassVar[bool] = False  # (a class flag: isinstance on an ABC is slow per step)
    # Attributes that are structure, not state: built from the plan (queues, readers, compiled
    # expressions) or counters of this process (which start again at 0, as Prometheus counters
    # do), never saved by `snapshot`. Each class lists its own; `snapshot` takes the union over
    # the class and its bases.
    STRUCTURE: ClassVar[frozenset[str]] = frozenset({
        "name", "inputs", "output", "out_types", "stamp", "busy_seconds", "run_cost", "owner",
        "rows_in", "rows_out",
    })

    def __init__(self, name: str, inputs: list[QueueReader], output: Queue):
        self.name = name
        self.inputs = inputs
        self.output = output
        self.rows_in = 0
        self.rows_out = 0
        self.watermark = NEVER  # the last heartbeat emitted
        self.out_types: list[DataType] = []  # set by the builder
        self.stamp = 0.0  # stamp of the input item being processed; outputs inherit it
        self.busy_seconds = 0.0  # time spent in `run` (the executor measures it)
        self.run_cost = RunCost()  # fixed and per-byte cost of a run (the executor fits it)
        self.owner = ""  # the deployment whose queries use it (a live engine sets it)

    # -- executor-facing ----------------------------------------------------------------------

    # Backpressure: an operator whose output queue holds this many rows waits until its
    # readers catch up, so queues stay bounded whatever the relative speeds.
    high_water = 262_144

    def runnable(self) -> bool:
        # (a loop, not any() over a generator: the scheduler asks every operator every step)
        if self.output.rows >= self.high_water:
            return False
        for r in self.inputs:  # noqa: SIM110
            if r.has_pending():
                return True
        return False

    @abstractmethod
    def run(self, budget: int) -> int:
        """Process input items until about `budget` elements are consumed; returns the work
        done (elements consumed, at least 1 for a heartbeat)."""

    def state_size(self) -> tuple[int, int]:
        """(rows, bytes) held in this operator's synopses."""
        return (0, 0)

    # -- state snapshots (engine/live.py `snapshot`, docs/service.md "State snapshots") --------

    def snapshot(self) -> dict[str, Any]:
        """Everything this operator holds that a restart would otherwise rebuild by replaying
        its input: every attribute but its structure. Taken with its input queues empty (the
        engine quiesces first); the caller serialises it at once (values are not copied)."""
        skip = _structure(type(self))
        return {k: v for k, v in vars(self).items() if k not in skip}

    def restore(self, state: dict[str, Any]) -> None:
        """Load what `snapshot` saved into this operator, built from the same plan node."""
        skip = _structure(type(self))
        mine = {k for k in vars(self) if k not in skip}
        if set(state) != mine:
            raise StateMismatch(
                f"{self.name}: saved state has {sorted(set(state) ^ mine)} where the "
                f"operator differs"
            )
        vars(self).update(state)

    @property
    def bytes_in(self) -> int:
        """Bytes of the batches read from the inputs so far."""
        return sum(r.bytes_read for r in self.inputs)

    @property
    def bytes_out(self) -> int:
        """Bytes of the batches written to the output that someone reads."""
        return self.output.total_bytes

    def head_stamp(self) -> float | None:
        """The stamp of the oldest input item waiting for this operator (None: none)."""
        oldest = None
        for r in self.inputs:
            s = r.head_stamp()
            if s is not None and (oldest is None or s < oldest):
                oldest = s
        return oldest

    def blocked(self) -> bool:
        """True when running would only buffer input without producing anything (an
        operator waiting for another input's time); the scheduler passes it over."""
        return False

    def describe(self) -> str:
        """One line for `cq explain`."""
        return self.kind

    def filter_order(self) -> str:
        """The current order of its conjuncts (a selection, a join's residual), e.g.
        ``a-greedy: F3, F1, F2``; '' when it orders none."""
        return ""

    def constraint_status(self) -> ConstraintStatus | None:
        """The k-constraint it exploits now (k in use, violations, missed, dropped); None
        when it uses none."""
        return None

    def watches(self) -> list[Watch]:
        """Its re-optimizers, which the executor registers with StreaMon
        (engine/streamon.py) while the operator is in its plan; none by default."""
        return []

    # -- subclass helpers ---------------------------------------------------------------------

    def empty(self, ticks: np.ndarray | None = None) -> Batch:
        """An output batch with no elements (carrying `ticks`)."""
        return Batch.empty(self.out_types, ticks if ticks is not None else EMPTY_TICKS)

    def emit(self, batch: Batch) -> None:
        if len(batch) or len(batch.ticks):
            self.rows_out += len(batch)
            self.output.push(batch, self.stamp)

    def emit_heartbeat(self, ts: int) -> None:
        if ts > self.watermark:
            self.watermark = ts
            self.output.push(Heartbeat(ts), self.stamp)

    def on_heartbeat(self, ts: int) -> None:  # noqa: B027 - optional hook
        """Instant `ts` and everything before it is complete on every input."""


class UnaryOperator(Operator):
    """One input, processed as it comes (the input is already in timestamp order)."""

    def on_batch(self, batch: Batch) -> None:
        raise NotImplementedError

    def run(self, budget: int) -> int:
        work = 0
        reader = self.inputs[0]
        while True:
            if work >= budget and not isinstance(reader.peek(), Heartbeat):
                break  # heartbeats right behind the last batch are always taken: they are free
            item = reader.get()
            if item is None:
                break
            self.stamp = reader.stamp
            if isinstance(item, Heartbeat):
                self.on_heartbeat(item.ts)
                self.emit_heartbeat(item.ts)
                work += 1
            else:
                self.rows_in += len(item)
                self.on_batch(item)
                work += max(1, len(item))
        return work


class MultiInputOperator(Operator):
    """Several inputs, released to `on_run` in timestamp order up to the common heartbeat."""

    def __init__(self, name: str, inputs: list[QueueReader], output: Queue):
        super().__init__(name, inputs, output)
        self._buffers: list[list[Batch]] = [[] for _ in inputs]
        self._port_heartbeats: list[int] = [NEVER for _ in inputs]

    def on_run(self, port: int, batch: Batch) -> None:
        """Elements of one input, all earlier than (or at the same instant as) anything not yet
        delivered from the other inputs."""
        raise NotImplementedError

    def buffered_rows(self) -> int:
        return sum(len(b) for buf in self._buffers for b in buf)

    def blocked(self) -> bool:
        """Reading now would release nothing: some input's time (its heartbeat so far, or
        the latest one waiting in its queue) has not passed what was already released."""
        times = self._input_times()
        return not times or min(times) <= self.watermark

    def lagging_ports(self) -> list[int]:
        """The inputs whose time holds this operator back (the scheduler feeds them first)."""
        times = self._input_times()
        low = min(times, default=NEVER)
        return [p for p, t in enumerate(times) if t == low]

    def _input_times(self) -> list[int]:
        times = []
        for port, r in enumerate(self.inputs):
            hb = self._port_heartbeats[port]
            if r.pending():
                hb = max(hb, r.queue.last_heartbeat)
            times.append(hb)
        return times

    def run(self, budget: int) -> int:
        """Read the inputs in turn, a batch at a time, releasing whatever the heartbeats allow
        as soon as they allow it."""
        work = 0
        took = [False] * len(self.inputs)  # every input gets at least one batch per run
        progress = True
        while progress:
            progress = False
            for port, reader in enumerate(self.inputs):
                nxt = reader.peek()
                if nxt is None:
                    continue
                if not isinstance(nxt, Heartbeat) and work >= budget and took[port]:
                    continue
                item = reader.get()
                self.stamp = reader.stamp
                progress = True
                if isinstance(item, Heartbeat):
                    self._port_heartbeats[port] = max(self._port_heartbeats[port], item.ts)
                    work += 1
                    self._release()
                else:
                    took[port] = True
                    self.rows_in += len(item)
                    self._buffers[port].append(item)
                    work += max(1, len(item))
        return work

    def _release(self) -> None:
        upto = min(self._port_heartbeats)
        if upto <= self.watermark:
            return
        ready: list[Batch | None] = []
        for port, buf in enumerate(self._buffers):
            done: list[Batch] = []
            rest: list[Batch] = []
            for b in buf:  # ticks need not follow element order across batches: split each
                head, tail = b.split_at_time(upto)
                if len(head) or len(head.ticks):
                    done.append(head)
                if len(tail) or len(tail.ticks):
                    rest.append(tail)
            self._buffers[port] = rest
            ready.append(Batch.concat(done) if done else None)
        self.on_aligned(ready)
        self.on_heartbeat(upto)
        self.emit_heartbeat(upto)

    def on_aligned(self, ready: list[Batch | None]) -> None:
        """Every input's elements (and ticks) up to the common heartbeat; None for an input
        with nothing new. The default hands them to `on_run` in timestamp order; operators that
        can work on whole deltas at once (a join) override this."""
        self._deliver_in_order(ready)

    def _deliver_in_order(self, ready: list[Batch | None]) -> None:
        """Call `on_run` on runs of consecutive elements of one port, in timestamp order
        (a port's elements of instant τ come before the next port's elements of τ)."""
        parts = [(p, b) for p, b in enumerate(ready) if b is not None]
        if not parts:
            return
        if len(parts) == 1:
            self.on_run(*parts[0])
            return
        ticks = merge_ticks(*(b.ticks for _, b in parts))
        pos = [0] * len(parts)
        first = True
        while True:
            live = [k for k, (_, b) in enumerate(parts) if pos[k] < len(b)]
            if not live:
                break
            # The port whose next element is earliest (lowest port on ties) runs until the
            # next element of another port would come before its next one.
            k = min(live, key=lambda j: (parts[j][1].ts[pos[j]], j))
            port, b = parts[k]
            stop = len(b)
            for j in live:
                if j == k:
                    continue
                nxt = parts[j][1].ts[pos[j]]
                side = "right" if k < j else "left"
                stop = min(stop, pos[k] + int(np.searchsorted(b.ts[pos[k]:], nxt, side=side)))
            stop = max(stop, pos[k] + 1)
            start, pos[k] = pos[k], stop
            # Each run carries the ticks up to its last element; the final run all the rest.
            final = all(pos[j] == len(parts[j][1]) for j in range(len(parts)))
            cut = len(ticks) if final else int(np.searchsorted(ticks, b.ts[stop - 1], side="right"))
            run_ticks, ticks = ticks[:cut], ticks[cut:]
            first = False
            self.on_run(port, b.slice(start, stop).with_ticks(run_ticks))
        if first:  # only ticks
            self.on_run(parts[0][0], parts[0][1].with_ticks(ticks))


def _structure(cls: type) -> frozenset[str]:
    """The union of STRUCTURE over `cls` and its bases."""
    out: set[str] = set()
    for c in cls.__mro__:
        out |= c.__dict__.get("STRUCTURE", frozenset())
    return frozenset(out)
