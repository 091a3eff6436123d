"""Joining a SELECT block's FROM items: left to right, each WHERE conjunct pushed as low as it
can go (onto its one FROM item, or onto the first join that sees all its columns), with the
equalities between the two sides of a join taken as its keys.
"""

from __future__ import annotations

from dataclasses import dataclass

from cq_service.cql import ast
from cq_service.cql.bind_expr import and_all, column_refs, shift_columns
from cq_service.cql.logical import BExpr, Call, Filter, Join, LogicalOp
from cq_service.cql.scope import Scope
from cq_service.errors import CQLError, Span

__all__ = ["FromItem", "join_items"]


@dataclass
class FromItem:
    """A bound FROM item: its plan (windowed if a stream), alias, whether it is a stream
    without a window (the default-Istream rule), and its span."""

    op: LogicalOp
    alias: str | None
    unwindowed_stream: bool
    span: Span


def join_items(
    items: list[FromItem],
    scope: Scope,
    conjuncts: list[tuple[BExpr, ast.Expr]],
    width: int,
) -> LogicalOp:
    """Join the FROM items left to right, pushing each conjunct as low as it can go."""
    pending = [b for b, _ in conjuncts if not any(i >= width for i in column_refs(b))]
    per_item: dict[int, list[BExpr]] = {}
    per_step: dict[int, list[BExpr]] = {}
    top: list[BExpr] = []
    for b in pending:
        refs = column_refs(b)
        if not refs:
            top.append(b)
            continue
        owners = {scope.item_of(i) for i in refs}
        if len(owners) == 1:
            per_item.setdefault(owners.pop(), []).append(b)
        else:
            per_step.setdefault(max(owners), []).append(b)
    ops: list[LogicalOp] = []
    for k, it in enumerate(items):
        op = it.op
        if k in per_item:
            off = scope.items[k].offset
            op = Filter(op, and_all([shift_columns(b, -off) for b in per_item[k]]), it.span)
        ops.append(op)
    if not ops:
        raise CQLError("a query needs a FROM list", Span())
    plan = ops[0]
    for k in range(1, len(ops)):
        off = scope.items[k].offset
        lkeys: list[BExpr] = []
        rkeys: list[BExpr] = []
        residual: list[BExpr] = []
        for b in per_step.get(k, []):
            pair = _equi_key(b, off)
            if pair is None:
                residual.append(b)
            else:
                lkeys.append(pair[0])
                rkeys.append(shift_columns(pair[1], -off))
        plan = Join(
            plan,
            ops[k],
            tuple(lkeys),
            tuple(rkeys),
            and_all(residual) if residual else None,
            items[k].span,
        )
    if top:
        plan = Filter(plan, and_all(top), items[0].span)
    return plan


def _equi_key(b: BExpr, off: int) -> tuple[BExpr, BExpr] | None:
    """(left expr, right expr) when `b` is ``l = r`` with l over columns < off and r over
    columns ≥ off (or the other way round)."""
    if not (isinstance(b, Call) and b.fn == "eq"):
        return None
    x, y = b.args
    rx, ry = column_refs(x), column_refs(y)
    if not rx or not ry:
        return None
    if max(rx) < off <= min(ry):
        return x, y
    if max(ry) < off <= min(rx):
        return y, x
    return None
