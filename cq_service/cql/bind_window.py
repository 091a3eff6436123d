"""Binding windows: a stream FROM item's window (ROWS with PARTITION BY, RANGE with SLIDE, NOW,
UNBOUNDED, and the window's own WHERE) to a `WindowSpec`, and CQL durations in the pipeline's
time unit.
"""

from __future__ import annotations

from cq_service.cql import ast
from cq_service.cql.bind_expr import ExprBinder
from cq_service.cql.logical import Field, LogicalOp, WindowSpec
from cq_service.cql.scope import Scope
from cq_service.errors import CQLError, Span

__all__ = ["bind_window", "duration_units"]

UNIT_NS = {
    "millisecond": 1_000_000,
    "second": 1_000_000_000,
    "minute": 60_000_000_000,
    "hour": 3_600_000_000_000,
    "day": 86_400_000_000_000,
}


def duration_units(d: ast.Duration, time_unit_ns: int) -> int:
    """A CQL duration in the pipeline's time unit (a number without a unit is already in it)."""
    if d.unit is None:
        return d.amount
    ns = d.amount * UNIT_NS[d.unit]
    if ns % time_unit_ns:
        raise CQLError(
            f"{d.amount} {d.unit}(s) is not a whole number of the pipeline's time unit", d.span
        )
    return ns // time_unit_ns


def bind_window(
    w: ast.Window, op: LogicalOp, alias: str | None, span: Span, time_unit_ns: int
) -> WindowSpec:
    """The window of a stream FROM item `op` (named `alias`), its sizes in the pipeline's time
    unit."""
    scope = Scope()
    scope.add(alias, tuple(Field(f.name, f.type, alias) for f in op.schema), span)
    where = None
    if w.where is not None:
        where = ExprBinder(scope, where="in a window's WHERE").bind_predicate(w.where)
    if isinstance(w, ast.RowsWindow):
        keys: list[int] = []
        for c in w.partition_by:
            r = scope.resolve(c.name, c.table, c.span)
            keys.append(r.index)
        if w.n is None:
            return WindowSpec("unbounded", where=where)
        if w.n < 1:
            raise CQLError("Rows needs at least 1 row", w.span)
        return WindowSpec("rows", n=w.n, partition_by=tuple(keys), where=where)
    if w.size is None:
        return WindowSpec("unbounded", where=where)
    size = 0 if w.now else duration_units(w.size, time_unit_ns)
    slide = duration_units(w.slide, time_unit_ns) if w.slide is not None else None
    if slide is not None and slide < 1:
        raise CQLError("Slide must be at least one time unit", w.slide.span)  # type: ignore[union-attr]
    if slide == 1:
        slide = None
    return WindowSpec("range", size=size, slide=slide, where=where)
