"""Which backfill path a query takes, and how far back its results reach into history.

`analyze(query)` reads a query's bound logical plan (after `plan.rewrite.simplify`, the plan
the engine runs) and decides whether its state splits by a key, so that Spark can partition
the archive by that key and run the engine once per partition (`KEY`), or whether one engine
must see the whole input (`SINGLE`). The answer is derived from the plan, operator by operator,
never from the query text.

Every subplan gets a *property* describing how its value (a stream, or a relation at every
instant) is spread over the partitions when each base stream is hashed on a chosen column:

- ``keyed(cols)``: the value is the disjoint union of the partitions' values, and every row of
  partition p carries the key (in each output column of `cols`) that hashes to p. Equal rows
  are in the same partition, so bag differences (deltas, Istream, Dstream, DISTINCT, EXCEPT)
  of the whole are the union of the partitions' differences.
- ``split``: the union of the partitions' values, but equal rows may sit in different
  partitions (a stream hashed on no key, or a projection that dropped the key). Only what
  never retracts (`monotone`) can be differenced per partition.
- ``broadcast``: every partition holds all of it (stored relations, and what is computed from
  them alone).

A key assignment maps every base stream to one of its columns (or to none: rows spread
arbitrarily). `analyze` tries the assignments and keeps the first under which the query's
result is keyed, or split and monotone. What is never partitionable: `Sample` (the choice
depends on an element's position in its whole input), global aggregates and their clocks (one
row from the first instant of *any* input), Rows windows without a Partition By on the key,
Rstream over anything but `[Now]` windows (it emits all of R at every instant of any input),
joins and subqueries not on the key, and results computed from stored relations alone.

`history_reach(plan)` is how far back, in time units, the result at an instant depends on its
inputs: the delta at τ needs R(τ) and R(τ−1), so a backfill of [T1, T2] feeds the engine from
T1 − 1 − reach. None means the whole history (Rows and unbounded windows, global aggregates,
samples).
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from typing import Literal

from cq_service.cql.binder import BoundQuery
from cq_service.cql.logical import (
    Aggregate,
    Clock,
    ColRef,
    Distinct,
    Filter,
    Join,
    LogicalOp,
    MarkJoin,
    Project,
    RelToStream,
    Sample,
    SetOperation,
    Source,
    View,
    WindowOp,
    children,
)
from cq_service.plan.rewrite import simplify

__all__ = ["KEY", "SINGLE", "Partitioning", "analyze", "history_reach"]

KEY = "key"
SINGLE = "single"
MAX_ASSIGNMENTS = 20_000  # key assignments tried before giving up on the key path


@dataclass(frozen=True)
class Partitioning:
    """The path a query takes. `keys` maps each base stream the query reads to the column its
    archive is hashed on (None: any spread, the rows' own position); `relations` are broadcast
    to every task. `reach` is `history_reach` of the plan; `reason` says why, in one line."""

    path: Literal["key", "single"]
    reason: str
    keys: dict[str, str | None] = field(default_factory=dict)
    streams: tuple[str, ...] = ()
    relations: tuple[str, ...] = ()
    reach: int | None = None

    def describe(self) -> str:
        if self.path == SINGLE:
            return f"single-partition path: {self.reason}"
        keys = ", ".join(f"{s} by {k or 'position'}" for s, k in self.keys.items())
        return f"key-partitioned path ({keys}): {self.reason}"


class _NotPartitionable(Exception):
    """A subplan whose state does not split under the assignment tried; `args[0]` says why."""


@dataclass(frozen=True)
class _Prop:
    kind: Literal["keyed", "split", "broadcast"]
    cols: frozenset[int] = frozenset()
    monotone: bool = True  # never retracts a row (streams; unbounded windows)
    now_only: bool = False  # a relation non-empty only at its own arrivals' instants


def analyze(query: BoundQuery) -> Partitioning:
    """The backfill path of `query` (see the module docstring)."""
    plan = simplify(query.plan)
    streams: dict[str, Source] = {}
    relations: dict[str, Source] = {}
    _sources(plan, streams, relations)
    reach = history_reach(plan)
    names = sorted(streams)
    if not names:
        return Partitioning(SINGLE, "the query reads no stream, only stored relations",
                            relations=tuple(sorted(relations)), reach=reach)
    choices = [[None, *range(len(streams[n].schema))] for n in names]
    total = 1
    for c in choices:
        total *= len(c)
    if total > MAX_ASSIGNMENTS:
        return Partitioning(SINGLE, f"too many key assignments to try ({total})",
                            streams=tuple(names), relations=tuple(sorted(relations)), reach=reach)
    best = (-1, "no key partitions the query's state")  # (operators passed, reason)
    for combo in itertools.product(*choices):
        keys = dict(zip(names, combo, strict=True))
        passed = [0]
        try:
            _check_result(_prop(plan, keys, passed))
        except _NotPartitionable as e:
            best = max(best, (passed[0], str(e.args[0])), key=lambda b: b[0])
            continue
        named = {n: None if k is None else streams[n].schema[k].name for n, k in keys.items()}
        why = ("stateless per element: any spread of the input gives the same result"
               if all(k is None for k in combo)
               else "every stateful operator is keyed on the partition key")
        return Partitioning(KEY, why, named, tuple(names), tuple(sorted(relations)), reach)
    why = best[1]
    return Partitioning(SINGLE, why,
                        streams=tuple(names), relations=tuple(sorted(relations)), reach=reach)


def history_reach(op: LogicalOp) -> int | None:
    """How far back (time units) the value at τ depends on the inputs; None: all history."""
    if isinstance(op, Source):
        return 0
    if isinstance(op, Sample | Clock):
        return None
    if isinstance(op, Aggregate) and not op.keys:
        return None
    kids = [history_reach(c) for c in children(op)]
    if any(k is None for k in kids):
        return None
    below = max(kids, default=0)
    if isinstance(op, WindowOp):
        w = op.window
        if w.kind != "range" or w.size is None:
            return None
        return below + w.size + ((w.slide - 1) if w.slide else 0)
    if isinstance(op, RelToStream) and op.op in ("istream", "dstream"):
        return below + 1
    return below


def _sources(op: LogicalOp, streams: dict[str, Source], relations: dict[str, Source]) -> None:
    if isinstance(op, Source):
        (relations if op.is_relation else streams)[op.name] = op
    for c in children(op):
        _sources(c, streams, relations)


def _check_result(p: _Prop) -> None:
    if p.kind == "broadcast":
        raise _NotPartitionable("the result is computed from stored relations alone")
    if p.kind == "split" and not p.monotone:
        raise _NotPartitionable("the result retracts rows that do not carry a partition key")


def _key_cols(exprs: tuple, cols: frozenset[int]) -> frozenset[int]:
    """The positions among `exprs` that are bare references to a key column."""
    return frozenset(i for i, e in enumerate(exprs) if isinstance(e, ColRef) and e.index in cols)


def _keyed_pair(lkeys: tuple, rkeys: tuple, left: _Prop, right: _Prop, lop: LogicalOp,
                rop: LogicalOp) -> bool:
    """Whether some equality of the join is key = key (of the same type, so hashes agree)."""
    for a, b in zip(lkeys, rkeys, strict=False):
        if (isinstance(a, ColRef) and isinstance(b, ColRef) and a.index in left.cols
                and b.index in right.cols
                and lop.schema[a.index].type == rop.schema[b.index].type):
            return True
    return False


def _prop(op: LogicalOp, keys: dict[str, int | None], passed: list[int]) -> _Prop:
    """`op`'s property under `keys`; `passed[0]` counts the operators that passed."""
    p = _prop_of(op, keys, passed)
    passed[0] += 1
    return p


def _prop_of(op: LogicalOp, keys: dict[str, int | None], passed: list[int]) -> _Prop:
    if isinstance(op, Source):
        if op.is_relation:
            return _Prop("broadcast", monotone=False)
        k = keys.get(op.name)
        return _Prop("split") if k is None else _Prop("keyed", frozenset({k}))
    if isinstance(op, Sample):
        raise _NotPartitionable("Sample depends on each element's position in its whole input")
    if isinstance(op, Clock):
        raise _NotPartitionable("a global aggregate's clock needs every input's instants")
    if isinstance(op, View | Filter):
        return _prop(op.input, keys, passed)
    if isinstance(op, Project):
        p = _prop(op.input, keys, passed)
        if p.kind != "keyed":
            return p
        cols = _key_cols(op.exprs, p.cols)
        return _Prop("keyed", cols, p.monotone, p.now_only) if cols else _Prop(
            "split", monotone=p.monotone, now_only=p.now_only)
    if isinstance(op, WindowOp):
        return _window(op, _prop(op.input, keys, passed))
    if isinstance(op, Join):
        return _join(op, keys, passed)
    if isinstance(op, MarkJoin):
        left, right = _prop(op.left, keys, passed), _prop(op.right, keys, passed)
        if right.kind == "broadcast" or (
            left.kind == "keyed" and right.kind == "keyed"
            and _keyed_pair(op.left_keys, op.right_keys, left, right, op.left, op.right)
        ):
            return _Prop(left.kind, left.cols, False, left.now_only)
        raise _NotPartitionable("a subquery is not correlated on the partition key")
    if isinstance(op, Aggregate):
        if not op.keys:
            raise _NotPartitionable("a global aggregate has one row from the first instant "
                                    "of any input")
        p = _prop(op.input, keys, passed)
        if p.kind == "broadcast":
            return p
        cols = _key_cols(op.keys, p.cols) if p.kind == "keyed" else frozenset()
        if not cols:
            raise _NotPartitionable("GROUP BY does not cover a key every input is "
                                    "partitioned on")
        return _Prop("keyed", cols, False, p.now_only)
    if isinstance(op, Distinct):
        p = _prop(op.input, keys, passed)
        if p.kind == "split":
            raise _NotPartitionable("DISTINCT over rows that do not carry a partition key")
        return _Prop(p.kind, p.cols, False, p.now_only)
    if isinstance(op, SetOperation):
        return _set_operation(op, keys, passed)
    if isinstance(op, RelToStream):
        return _rel_to_stream(op, _prop(op.input, keys, passed))
    raise _NotPartitionable(f"{type(op).__name__} is not analysed")


def _window(op: WindowOp, p: _Prop) -> _Prop:
    w = op.window
    if w.kind == "unbounded":
        return _Prop(p.kind, p.cols, True)
    if w.kind == "range":
        now = w.size == 0 and w.slide is None and w.granularity == 1
        return _Prop(p.kind, p.cols, False, now)
    if p.kind == "broadcast":
        return _Prop("broadcast", monotone=False)
    if p.kind == "keyed" and set(w.partition_by) & p.cols:
        return _Prop("keyed", p.cols, False)
    if w.partition_by:
        raise _NotPartitionable("a Partition By window is not partitioned on the key")
    raise _NotPartitionable("a Rows window without Partition By needs the whole input's order")


def _join(op: Join, keys: dict[str, int | None], passed: list[int]) -> _Prop:
    left, right = _prop(op.left, keys, passed), _prop(op.right, keys, passed)
    width = len(op.left.schema)
    now = left.now_only or right.now_only
    if left.kind == "broadcast" and right.kind == "broadcast":
        return _Prop("broadcast", monotone=False)
    if left.kind == "broadcast":
        return _Prop(right.kind, frozenset(c + width for c in right.cols), False, now)
    if right.kind == "broadcast":
        return _Prop(left.kind, left.cols, False, now)
    if left.kind == "keyed" and right.kind == "keyed" and _keyed_pair(
        op.left_keys, op.right_keys, left, right, op.left, op.right
    ):
        cols = left.cols | frozenset(c + width for c in right.cols)
        return _Prop("keyed", cols, left.monotone and right.monotone, now)
    raise _NotPartitionable("a join is not an equi-join on the partition key")


def _set_operation(op: SetOperation, keys: dict[str, int | None], passed: list[int]) -> _Prop:
    left, right = _prop(op.left, keys, passed), _prop(op.right, keys, passed)
    if left.kind == "broadcast" and right.kind == "broadcast":
        return _Prop("broadcast", monotone=False)
    if left.kind == "keyed" and right.kind == "keyed" and left.cols & right.cols:
        return _Prop("keyed", left.cols & right.cols, False, left.now_only and right.now_only)
    if op.op == "union" and op.all and left.kind == right.kind == "split":
        return _Prop("split", monotone=left.monotone and right.monotone,
                     now_only=left.now_only and right.now_only)
    raise _NotPartitionable(f"{op.op.upper()} of inputs not keyed on the same columns")


def _rel_to_stream(op: RelToStream, p: _Prop) -> _Prop:
    if p.kind == "broadcast":
        raise _NotPartitionable(f"{op.op.capitalize()} of stored relations alone")
    if op.op == "rstream":
        if not p.now_only:
            raise _NotPartitionable("Rstream emits all of its relation at every instant of "
                                    "any input")
        return _Prop(p.kind, p.cols, True)
    if p.kind == "split" and not p.monotone:
        raise _NotPartitionable(f"{op.op.capitalize()} of a relation that retracts rows "
                                "without a partition key")
    return _Prop(p.kind, p.cols, True)
