"""Rewrites of a bound logical plan that keep its meaning and save work.

`Rstream` over a relation computed row by row (filters and projections) from a `[Now]` window
is that computation applied to the stream itself: R(τ) holds exactly the elements stamped τ, and
Rstream emits R(τ) at τ (STREAM's `Rstream(S [Now])` ≡ S). The rewrite drops the window, which
would insert and then retract every element, and the Rstream, which would rebuild them.
"""

from __future__ import annotations

from dataclasses import replace

from cq_service.cql.logical import (
    Aggregate,
    Clock,
    Filter,
    Join,
    LogicalOp,
    MarkJoin,
    Project,
    RelToStream,
    SetOperation,
    Source,
    WindowOp,
    children,
)

__all__ = ["simplify"]


def simplify(op: LogicalOp) -> LogicalOp:
    """`op` with every rewrite applied, bottom-up."""
    kids = children(op)
    new = tuple(simplify(c) for c in kids)
    if new != kids:
        op = _with_children(op, new)
    if isinstance(op, RelToStream) and op.op == "rstream":
        stream = _without_now_window(op.input)
        if stream is not None:
            return stream
    return op


def _without_now_window(op: LogicalOp) -> LogicalOp | None:
    """`op` (filters and projections over a `[Now]` window of a stream) reading the stream
    directly, or None when `op` has another shape."""
    if isinstance(op, Filter | Project):
        inner = _without_now_window(op.input)
        return None if inner is None else replace(op, input=inner)
    if isinstance(op, WindowOp):
        w = op.window
        if w.kind == "range" and w.size == 0 and w.slide is None and w.where is None:
            return op.input if op.input.is_stream else None
    return None


def _with_children(op: LogicalOp, new: tuple[LogicalOp, ...]) -> LogicalOp:
    if isinstance(op, Source):
        return op
    if isinstance(op, Join | MarkJoin | SetOperation):
        return replace(op, left=new[0], right=new[1])
    if isinstance(op, Clock):
        return replace(op, inputs=new)
    if isinstance(op, Aggregate) and op.clock is not None:
        return replace(op, input=new[0], clock=new[1])
    return replace(op, input=new[0])  # type: ignore[call-arg]
