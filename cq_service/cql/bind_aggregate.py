"""Binding aggregate queries: GROUP BY keys, the aggregate calls, HAVING, and the select list
over the groups (an `Aggregate` under a `Project`).
"""

from __future__ import annotations

from cq_service.cql import ast
from cq_service.cql.bind_expr import AGGREGATES, ExprBinder, contains_outer
from cq_service.cql.logical import (
    AggCall,
    Aggregate,
    BExpr,
    ColRef,
    Field,
    Filter,
    LogicalOp,
    Project,
)
from cq_service.cql.naming import OutputName, output_name
from cq_service.cql.scope import Scope
from cq_service.errors import CQLError
from cq_service.types import DataType

__all__ = ["bind_aggregate", "has_aggregate", "is_aggregate_call"]

T = DataType


def is_aggregate_call(e: ast.Expr) -> bool:
    return isinstance(e, ast.FuncCall) and e.name in AGGREGATES


def has_aggregate(e: ast.Expr | None) -> bool:
    """Whether `e` calls an aggregate outside any subquery."""
    if e is None:
        return False
    if is_aggregate_call(e):
        return True
    if isinstance(e, ast.InSubquery | ast.Exists | ast.Quantified | ast.ScalarSubquery):
        return isinstance(e, ast.InSubquery | ast.Quantified) and has_aggregate(e.operand)
    for name in getattr(e, "__dataclass_fields__", {}):
        if name in ("span", "query"):
            continue
        v = getattr(e, name)
        items = v if isinstance(v, tuple) else (v,)
        for x in items:
            if isinstance(x, tuple):
                if any(has_aggregate(y) for y in x if not isinstance(y, str)):
                    return True
            elif x is not None and not isinstance(x, str | bool | int | float) and has_aggregate(x):
                return True
    return False


def bind_aggregate(
    sel: ast.Select,
    scope: Scope,
    plan: LogicalOp,
    extra_keys: list[BExpr] | None = None,
) -> tuple[LogicalOp, list[OutputName]]:
    base = ExprBinder(scope, where="in GROUP BY")
    keys = list(extra_keys or []) + [base.bind(g) for g in sel.group_by]
    for k, g in zip(keys, sel.group_by):
        if contains_outer(k):
            raise CQLError("GROUP BY may not reference an enclosing query", g.span)
    aggs: list[AggCall] = []
    arg_binder = ExprBinder(scope, where="inside an aggregate")

    def on_aggregate(fc: ast.FuncCall) -> BExpr:
        if fc.star:
            if fc.name != "count":
                raise CQLError(f"{fc.name.upper()}(*) is not allowed; only COUNT(*)", fc.span)
            arg = None
        else:
            if len(fc.args) != 1:
                raise CQLError(f"{fc.name.upper()} takes one argument", fc.span)
            arg = arg_binder.bind(fc.args[0])
            if contains_outer(arg):
                raise CQLError("an aggregate may not reference an enclosing query", fc.span)
            if fc.name in ("sum", "avg") and arg.type not in (T.INT, T.FLOAT, T.TIMESTAMP, T.NULL):
                raise CQLError(f"{fc.name.upper()} needs a number, not {arg.type}", fc.args[0].span)
        if fc.name == "count":
            t = T.INT
        elif fc.name == "avg":
            t = T.FLOAT
        elif arg is not None and arg.type == T.TIMESTAMP and fc.name == "sum":
            t = T.INT
        else:
            t = arg.type if arg is not None and arg.type != T.NULL else T.INT
        call = AggCall(fc.name, arg, fc.distinct and arg is not None, t)  # type: ignore[arg-type]
        if call not in aggs:
            aggs.append(call)
        return ColRef(len(keys) + aggs.index(call), t, fc.name)

    def on_other(node: ast.Expr) -> BExpr | None:
        if is_aggregate_call(node) or isinstance(node, ast.Literal):
            return None
        if isinstance(node, ast.InSubquery | ast.Exists | ast.Quantified | ast.ScalarSubquery):
            raise CQLError(
                "a subquery in the select list or HAVING of an aggregate query is not supported",
                node.span,
            )
        try:
            b = base.bind(node)
        except CQLError:
            if isinstance(node, ast.Column):
                raise
            return None
        for i, k in enumerate(keys):
            if b == k:
                return ColRef(i, k.type, getattr(k, "name", ""))
        if isinstance(node, ast.Column):
            raise CQLError(
                f"column '{node.name}' must appear in GROUP BY or be used in an aggregate function",
                node.span,
            )
        return None

    post = ExprBinder(scope, on_aggregate=on_aggregate, on_other=on_other, where="here")
    # Bind select items and HAVING first: that registers every aggregate.
    exprs: list[BExpr] = []
    names: list[OutputName] = []
    for item in sel.items:
        if isinstance(item.expr, ast.Star):
            raise CQLError("'*' is not allowed in an aggregate query", item.span)
        exprs.append(post.bind(item.expr))
        names.append(output_name(item, scope))
    having = post.bind_predicate(sel.having) if sel.having is not None else None
    key_fields = tuple(Field(f"_k{i}", k.type) for i, k in enumerate(keys))
    agg_fields = tuple(Field(f"_a{i}", a.type) for i, a in enumerate(aggs))
    op: LogicalOp = Aggregate(plan, tuple(keys), tuple(aggs), key_fields + agg_fields, span=sel.span)
    if having is not None:
        op = Filter(op, having, sel.having.span)  # type: ignore[union-attr]
    fields = tuple(Field(n.name, e.type, n.table) for n, e in zip(names, exprs))
    return Project(op, tuple(exprs), fields, sel.span), names
