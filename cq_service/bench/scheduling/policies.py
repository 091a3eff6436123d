"""Scheduling policies for the simulator: each unit of time, pick the operator to run.

A policy sees, per operator, the key ``(arrival, path, seq)`` of the oldest tuple at that
operator (None when it has none) and returns an operator index, or None to idle; the simulator
then gives that tuple one unit of processing. Operators are numbered path-major.

- ``fifo``: the oldest tuple in the system (ties: lower path, then arrival order).
- ``chain``: the highest Chain priority (slope of the operator's lower-envelope segment);
  ties to the oldest tuple.
- ``greedy``: per-operator greedy, priority (1 − σ)/c, the slope of the operator's own chart
  segment; ties to the oldest tuple. (Not paper 002's "Greedy".)
- ``round_robin``: the first ready operator after the last one run, for up to `quantum` units
  or until its queue empties.
- ``chain_bounded``: Chain, except that once the oldest tuple has waited more than `bound`
  units it is advanced instead (a FIFO step) — our bounded-latency extension.
- ``chain_share``: Chain, except that a share f of the units goes to the oldest tuple (unit n
  when ⌊n·f⌋ > ⌊(n−1)·f⌋); f = 0 is Chain, f = 1 FIFO (the engine's ChainShare).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction

__all__ = [
    "POLICIES",
    "Chain",
    "ChainBounded",
    "ChainShare",
    "Fifo",
    "Greedy",
    "Heads",
    "Operator",
    "Policy",
    "RoundRobin",
    "TupleKey",
    "make_policy",
]

TupleKey = tuple[int, int, int]  # (arrival time, path, arrival order)
Heads = Sequence[TupleKey | None]


@dataclass(frozen=True)
class Operator:
    path: int
    index: int  # position in its path
    chain: Fraction
    greedy: Fraction


class Policy(ABC):
    """Chooses the operator to run for the next unit of time."""

    name: str = ""

    def start(self, operators: Sequence[Operator]) -> None:
        """Called once before a run with every operator, path-major."""
        self.operators = tuple(operators)

    @abstractmethod
    def choose(self, heads: Heads, now: int) -> int | None:
        """The operator to run at `now`, or None to idle."""

    def ran(self, op: int, emptied: bool) -> None:  # noqa: B027 - optional hook
        """Told after each unit: operator `op` ran; `emptied` if its queue is now empty."""


def oldest(heads: Heads) -> int | None:
    """The operator holding the oldest tuple in the system."""
    best: int | None = None
    best_key: TupleKey | None = None
    for i, h in enumerate(heads):
        if h is not None and (best_key is None or h < best_key):
            best, best_key = i, h
    return best


class Fifo(Policy):
    name = "fifo"

    def choose(self, heads: Heads, now: int) -> int | None:
        return oldest(heads)


class _Static(Policy):
    """Highest static priority first, ties to the oldest tuple."""

    def priorities(self) -> list[Fraction]:
        raise NotImplementedError

    def start(self, operators: Sequence[Operator]) -> None:
        super().start(operators)
        self._prio = self.priorities()

    def choose(self, heads: Heads, now: int) -> int | None:
        best: int | None = None
        best_key: tuple[Fraction, TupleKey] | None = None
        for i, h in enumerate(heads):
            if h is not None:
                key = (-self._prio[i], h)
                if best_key is None or key < best_key:
                    best, best_key = i, key
        return best


class Chain(_Static):
    name = "chain"

    def priorities(self) -> list[Fraction]:
        return [op.chain for op in self.operators]


class Greedy(_Static):
    name = "greedy"

    def priorities(self) -> list[Fraction]:
        return [op.greedy for op in self.operators]


class RoundRobin(Policy):
    name = "round_robin"

    def __init__(self, quantum: int = 1) -> None:
        if quantum < 1:
            raise ValueError("the round-robin quantum is at least one unit")
        self.quantum = quantum

    def start(self, operators: Sequence[Operator]) -> None:
        super().start(operators)
        self._current, self._used, self._turn_over = -1, 0, True

    def choose(self, heads: Heads, now: int) -> int | None:
        if not self._turn_over and heads[self._current] is not None:
            return self._current
        n = len(heads)
        for step in range(1, n + 1):
            i = (self._current + step) % n
            if heads[i] is not None:
                self._current, self._used, self._turn_over = i, 0, False
                return i
        return None

    def ran(self, op: int, emptied: bool) -> None:
        self._used += 1
        self._turn_over = emptied or self._used >= self.quantum


class ChainBounded(Chain):
    name = "chain_bounded"

    def __init__(self, bound: int) -> None:
        if bound < 0:
            raise ValueError("the latency bound is at least 0")
        self.bound = bound

    def choose(self, heads: Heads, now: int) -> int | None:
        first = oldest(heads)
        key = heads[first] if first is not None else None
        if key is not None and now - key[0] > self.bound:
            return first
        return super().choose(heads, now)


class ChainShare(Chain):
    name = "chain_share"

    def __init__(self, share: Fraction) -> None:
        if not 0 <= share <= 1:
            raise ValueError("the share of FIFO units is between 0 and 1")
        self.share = Fraction(share)

    def start(self, operators: Sequence[Operator]) -> None:
        super().start(operators)
        self._units = 0

    def choose(self, heads: Heads, now: int) -> int | None:
        if all(h is None for h in heads):
            return None
        self._units += 1
        n, f = self._units, self.share
        if (n * f.numerator) // f.denominator > ((n - 1) * f.numerator) // f.denominator:
            return oldest(heads)
        return super().choose(heads, now)


POLICIES: dict[str, type[Policy]] = {
    p.name: p for p in (Fifo, RoundRobin, Greedy, Chain, ChainBounded, ChainShare)
}


def make_policy(
    name: str, *, quantum: int = 1, bound: int | None = None, share: Fraction | None = None
) -> Policy:
    """A fresh policy by name (`bound` is required for chain_bounded, `share` for
    chain_share)."""
    if name == "round_robin":
        return RoundRobin(quantum)
    if name == "chain_share":
        if share is None:
            raise ValueError("chain_share needs a share of FIFO units")
        return ChainShare(share)
    if name == "chain_bounded":
        if bound is None:
            raise ValueError("chain_bounded needs a latency bound")
        return ChainBounded(bound)
    try:
        return POLICIES[name]()
    except KeyError:
        raise ValueError(f"unknown policy {name!r} (known: {', '.join(POLICIES)})") from None
