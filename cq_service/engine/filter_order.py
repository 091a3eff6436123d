"""The seam between a selection and whatever orders its conjuncts (docs/adaptive.md, "Filter
ordering").

A `Select` splits its predicate into conjuncts F_0..F_{n-1} (the written order) and evaluates
them one after another, each on the rows that survived the ones before it. Which order it uses
is up to a `ConjunctOrderer`, injected from above as an `OrdererFactory` (the engine never
imports `cq_service.adaptive`, which holds A-Greedy and its variants). Per batch the operator:

1. asks `order()` for the current order (a permutation of 0..n-1, filter indices);
2. for the rows dropped at position `i` of that order, asks `sample(i, k)` which of the `k`
   dropped rows to profile and `profile_positions(i)` on which later positions to evaluate them;
3. reports what it saw with `observe(rows, seconds, known, drops)`: rows evaluated and seconds
   spent per filter (without each call's fixed overhead), and the profile tuples completed
   (``known[r, f]``: filter f's verdict on row r is known; ``drops[r, f]``: f drops it). An
   orderer with a `profile_batch` attribute has the selection gather that many profiled rows,
   over as many batches as it takes, and evaluate them together (default 1: every batch). An
   orderer whose `whole_pass` attribute is true lets the selection run the whole predicate in
   one pass instead whenever that measures cheaper than its order (engine/pass_choice.py); such
   batches are shown to its `observe_whole(rows, seconds, passes)`, if it has one (every
   conjunct's verdict on every row and its time), and not to `observe`. Without it, every
   batch is evaluated in the orderer's order.

An orderer that is also a StreaMon `ReOptimizer` (engine/streamon.py: `significant`,
`reoptimize`, every adaptive one) changes its order only in `reoptimize`: `observe` keeps the
statistics and makes a re-optimization due, and the selection flags it for the executor's next
poll (engine/conjunction.py). An orderer that is not one (`StaticOrder`) is not registered.

A factory may also carry `probe_orders`, the factory of the probe orderers of multi-way joins
(engine/probe_order.py): one filter-ordering setting orders both.

Any order gives the same rows: a row passes only if every conjunct is TRUE, and every
expression the engine evaluates is total and row-wise (errors yield NULL, docs/semantics.md),
so evaluating a conjunct on fewer or other rows cannot raise or change a value. `movable`
checks that a conjunct uses only such functions; a selection with one that is not keeps the
written order.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Protocol

import numpy as np

from cq_service.cql.logical import BExpr, Call, CaseExpr, CastExpr, ColRef, Const

__all__ = [
    "ROW_WISE_FUNCTIONS",
    "ConjunctOrderer",
    "OrdererFactory",
    "StaticOrder",
    "movable",
    "split_conjuncts",
]


class ConjunctOrderer(Protocol):
    """Chooses the order of a selection's conjuncts from what the selection observes."""

    name: str

    def order(self) -> Sequence[int]:
        """The current order: filter indices, first evaluated first."""
        ...

    def sample(self, position: int, dropped: int) -> np.ndarray:
        """Indices (into 0..dropped-1) of the rows dropped at `position` to profile."""
        ...

    def profile_positions(self, position: int) -> Sequence[int]:
        """Positions after `position` to evaluate a profiled row on."""
        ...

    def observe(
        self,
        rows: Sequence[int],
        seconds: Sequence[float],
        known: np.ndarray,
        drops: np.ndarray,
    ) -> None:
        """One batch: rows evaluated and seconds spent per filter (index), and its profile
        tuples (two bool arrays of shape (profiled rows, n), by filter index)."""
        ...


OrdererFactory = Callable[[int], ConjunctOrderer]
"""Makes the orderer of a selection with this many conjuncts (n >= 2)."""

_NONE = np.empty(0, np.int64)


class StaticOrder:
    """The written order, never profiled (`filter_order: static`, and the engine's default)."""

    name = "static"

    def __init__(self, n: int):
        self._order = list(range(n))

    def order(self) -> Sequence[int]:
        return self._order

    def sample(self, position: int, dropped: int) -> np.ndarray:
        return _NONE

    def profile_positions(self, position: int) -> Sequence[int]:
        return ()

    def observe(self, rows, seconds, known, drops) -> None:
        pass


def split_conjuncts(e: BExpr) -> list[BExpr]:
    """The conjuncts of `e` in written order (`a AND (b AND c)` -> [a, b, c])."""
    if isinstance(e, Call) and e.fn == "and":
        return [c for a in e.args for c in split_conjuncts(a)]
    return [e]


# Functions whose value at a row depends only on that row and that never raise on data
# (docs/semantics.md: errors yield NULL). A function added to the expression compiler is not
# movable until it is reviewed and listed here.
ROW_WISE_FUNCTIONS = frozenset(
    {
        "abs",
        "add",
        "and",
        "ceil",
        "coalesce",
        "concat",
        "concat_op",
        "div",
        "eq",
        "exp",
        "floor",
        "ge",
        "greatest",
        "gt",
        "ilike",
        "in_list",
        "is_not_null",
        "is_null",
        "le",
        "least",
        "left",
        "length",
        "like",
        "ln",
        "log10",
        "lower",
        "lt",
        "ltrim",
        "mod",
        "mul",
        "ne",
        "neg",
        "not",
        "nullif",
        "or",
        "power",
        "replace",
        "right",
        "round",
        "rtrim",
        "sign",
        "sqrt",
        "strpos",
        "sub",
        "substr",
        "trim",
        "upper",
    }
)


def movable(e: BExpr) -> bool:
    """Whether `e` may be evaluated on any subset of rows, in any order with other conjuncts."""
    if isinstance(e, ColRef | Const):
        return True
    if isinstance(e, Call):
        return e.fn in ROW_WISE_FUNCTIONS and all(movable(a) for a in e.args)
    if isinstance(e, CastExpr):
        return movable(e.operand)
    if isinstance(e, CaseExpr):
        parts = [x for w in e.whens for x in w] + ([e.else_] if e.else_ is not None else [])
        return all(movable(x) for x in parts)
    return False
