"""Rewrites of a bound logical plan that keep its meaning and save work.

A relation computed row by row (filters and projections) from a window on a stream, turned
back into a stream, is often that computation applied to the stream itself:

- `Rstream` over a `[Now]` window: R(τ) holds exactly the elements stamped τ, and Rstream
  emits R(τ) at τ (STREAM's `Rstream(S [Now])` ≡ S). The window would insert and then retract
  every element, and the Rstream rebuild them.
- `Istream` over an `[Unbounded]` window: R(τ) − R(τ−1) is exactly the elements stamped τ
  (nothing is ever retracted), so `Istream(S [Unbounded])` ≡ S. This is the shape of every
  `SELECT … FROM S WHERE …` over a stream (DESIGN §4's default Istream); the window and the
  Istream, which buffers each instant until it is complete, are two operators that change
  nothing.

Both rewrites drop the window and the stream operator, and keep the filters and projections.
A projection that returns its input unchanged (`SELECT *`: same names, types and order; the
table aliases only matter while binding) is dropped too.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

from cq_service.cql.logical import (
    ColRef,
    Filter,
    LogicalOp,
    Project,
    RelToStream,
    WindowOp,
    WindowSpec,
    children,
    with_children,
)

__all__ = ["simplify"]


def simplify(op: LogicalOp) -> LogicalOp:
    """`op` with every rewrite applied, bottom-up."""
    kids = children(op)
    new = tuple(simplify(c) for c in kids)
    if new != kids:
        op = with_children(op, new)
    if isinstance(op, Project) and _identity(op):
        return op.input
    if isinstance(op, RelToStream) and op.op in ("rstream", "istream"):
        stream = _without_window(op.input, _now if op.op == "rstream" else _unbounded)
        if stream is not None:
            return stream
    return op


def _identity(op: Project) -> bool:
    same = [(f.name, f.type) for f in op.fields] == [(f.name, f.type) for f in op.input.schema]
    return same and all(
        isinstance(e, ColRef) and e.index == k for k, e in enumerate(op.exprs)
    )


def _now(w: WindowSpec) -> bool:
    return w.kind == "range" and w.size == 0 and w.slide is None and w.where is None


def _unbounded(w: WindowSpec) -> bool:
    return w.kind == "unbounded" and w.where is None


def _without_window(op: LogicalOp, drops: Callable[[WindowSpec], bool]) -> LogicalOp | None:
    """`op` (filters and projections over a window of a stream that `drops` accepts) reading
    the stream directly, or None when `op` has another shape."""
    if isinstance(op, Filter | Project):
        inner = _without_window(op.input, drops)
        return None if inner is None else replace(op, input=inner)
    if isinstance(op, WindowOp) and drops(op.window):
        return op.input if op.input.is_stream else None
    return None
