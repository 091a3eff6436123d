"""Give nested global aggregates the query's clock.

A global aggregate has one row from the first instant the *query* sees (docs/semantics.md).
An aggregate in a subquery reads only the subquery's inputs, so when the enclosing query reads
others, this pass adds a `Clock` over the query's inputs to the aggregate. Views are inputs in
their own right: the pass does not look inside them.

>>> # SELECT * FROM S [Rows 1] WHERE S.a > (SELECT COUNT(*) FROM T [Rows 2])
>>> # the COUNT(*) gets clock=Clock((Source S, Source T)): its row exists from S's first element.
"""

from __future__ import annotations

import dataclasses

from cq_service.cql.logical import (
    Aggregate,
    Clock,
    Join,
    LogicalOp,
    MarkJoin,
    SetOperation,
    Source,
    View,
    children,
)

__all__ = ["add_query_clocks", "query_inputs"]


def query_inputs(op: LogicalOp) -> tuple[LogicalOp, ...]:
    """The base streams, relations and views a plan reads, in first-seen order."""
    seen: list[LogicalOp] = []

    def visit(o: LogicalOp) -> None:
        if isinstance(o, Source | View):
            if o not in seen:
                seen.append(o)
            return
        for c in children(o):
            visit(c)

    visit(op)
    return tuple(seen)


def add_query_clocks(plan: LogicalOp) -> LogicalOp:
    """`plan` with a clock on every global aggregate that does not read all the query's inputs."""
    inputs = query_inputs(plan)

    def rewrite(o: LogicalOp) -> LogicalOp:
        if isinstance(o, Source | View | Clock):
            return o
        if isinstance(o, Join | MarkJoin | SetOperation):
            new = dataclasses.replace(o, left=rewrite(o.left), right=rewrite(o.right))
        else:
            new = dataclasses.replace(o, input=rewrite(o.input))  # type: ignore[union-attr]
        if isinstance(new, Aggregate) and not new.keys and new.clock is None:
            mine = set(query_inputs(new.input))
            if any(i not in mine for i in inputs):
                new = dataclasses.replace(new, clock=Clock(inputs, new.span))
        return new

    return rewrite(plan)
