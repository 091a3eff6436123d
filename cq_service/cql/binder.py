"""Binding queries: AST -> logical plan, with names resolved and types checked.

`bind_query(query, catalog, name)` returns a `BoundQuery`: the plan's root, whether the result
is a stream, and the unique output column names (DESIGN §5).

The shape of a bound SELECT block, bottom to top: FROM items (sources, windows, samples, views,
subqueries) with single-item WHERE conjuncts pushed onto them, joined left to right with
equi-join keys taken from the conjuncts; mark joins for subqueries in conditions; the remaining
filter; aggregation and HAVING; the projection; DISTINCT; the relation-to-stream operator.

This module binds query expressions (set operations, Istream/Dstream/Rstream), SELECT blocks,
FROM items, and subqueries in conditions (mark joins, decorrelation). The parts it calls on:
expressions (bind_expr), windows and durations (bind_window), the join of the FROM items
(bind_join), aggregation (bind_aggregate), output names (naming).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from cq_service.cql import ast
from cq_service.cql.bind_aggregate import bind_aggregate, has_aggregate
from cq_service.cql.bind_expr import (
    ExprBinder,
    OuterRef,
    and_all,
    column_refs,
    contains_outer,
    map_columns,
    shift_columns,
    unify,
)
from cq_service.cql.bind_join import FromItem, join_items
from cq_service.cql.bind_window import bind_window
from cq_service.cql.clocks import add_query_clocks
from cq_service.cql.logical import (
    Aggregate,
    BExpr,
    Call,
    CastExpr,
    ColRef,
    Const,
    Distinct,
    Field,
    Filter,
    LogicalOp,
    MarkJoin,
    Project,
    RelToStream,
    Sample,
    SetOperation,
    Source,
    View,
    WindowOp,
    WindowSpec,
)
from cq_service.cql.naming import OutputName, output_name, unique_names
from cq_service.cql.scope import Scope
from cq_service.errors import CQLError, Span
from cq_service.types import DataType

__all__ = ["BoundQuery", "Catalog", "bind_query"]

T = DataType


@dataclass(frozen=True)
class BoundQuery:
    name: str
    plan: LogicalOp
    is_stream: bool
    columns: tuple[str, ...]


@dataclass
class Catalog:
    """What a query may read: base streams and relations, and earlier queries (views).
    Keys are lower-case names."""

    time_unit_ns: int
    sources: dict[str, Source] = field(default_factory=dict)
    views: dict[str, BoundQuery] = field(default_factory=dict)


def bind_query(query: ast.Query, catalog: Catalog, name: str = "query") -> BoundQuery:
    """Bind a parsed query. Raises `CQLError` with the span of the offending text."""
    b = _QueryBinder(catalog)
    res = b.query(query, outer=None, as_relation=False)
    names = unique_names(res.names)
    plan = add_query_clocks(res.op)
    return BoundQuery(name, plan, plan.is_stream, tuple(names))


# ---------------------------------------------------------------------------------------------


@dataclass
class _Result:
    """A bound query expression: its plan, output naming info, and whether the default-Istream
    rule applies to it (for set operations)."""

    op: LogicalOp
    names: list[OutputName]
    wants_istream: bool = False
    correlation: list[BExpr] = field(default_factory=list)  # conjuncts with OuterRefs
    from_op: LogicalOp | None = None  # the FROM+WHERE plan, for correlated subqueries
    value: BExpr | None = None  # the single select expression, for correlated subqueries
    # A decorrelated aggregate subquery: (outer key exprs, right key exprs, value when empty).
    decorrelated: tuple | None = None


def _conjuncts(e: ast.Expr | None) -> list[ast.Expr]:
    if e is None:
        return []
    if isinstance(e, ast.BinaryOp) and e.op == "and":
        return _conjuncts(e.left) + _conjuncts(e.right)
    return [e]


class _QueryBinder:
    def __init__(self, catalog: Catalog):
        self.catalog = catalog
        self._alias_counter = 0

    # -- query expressions --------------------------------------------------------------------

    def query(self, q: ast.Query, outer: Scope | None, as_relation: bool) -> _Result:
        if isinstance(q, ast.Select):
            return self.select(q, outer, as_relation)
        if isinstance(q, ast.SetOp):
            return self.set_op(q, outer, as_relation)
        inner = self.query(q.query, outer, as_relation=True)
        if inner.op.is_stream:
            raise CQLError(f"{q.op.capitalize()} needs a relation, but its query is a stream", q.span)
        if as_relation:
            raise CQLError(f"{q.op.capitalize()}(...) makes a stream; a relation is needed here", q.span)
        return _Result(RelToStream(q.op, inner.op, q.span), inner.names)

    def set_op(self, q: ast.SetOp, outer: Scope | None, as_relation: bool) -> _Result:
        left = self.query(q.left, outer, as_relation=True)
        right = self.query(q.right, outer, as_relation=True)
        for side in (left, right):
            if side.op.is_stream:
                raise CQLError(f"{q.op.upper()} needs relations; a branch is a stream", q.span)
        lt = [f.type for f in left.op.schema]
        rt = [f.type for f in right.op.schema]
        if len(lt) != len(rt):
            raise CQLError(
                f"each {q.op.upper()} query must have the same number of columns "
                f"({len(lt)} and {len(rt)})",
                q.span,
            )
        types = [unify([a, b], q.span, f"{q.op.upper()} column {i + 1}") for i, (a, b) in enumerate(zip(lt, rt))]
        lop = _cast_columns(left.op, types)
        rop = _cast_columns(right.op, types)
        op: LogicalOp = SetOperation(q.op, q.all, lop, rop, q.span)
        wants = left.wants_istream or right.wants_istream
        if wants and not as_relation:
            op = RelToStream("istream", op, q.span)
        return _Result(op, left.names, wants_istream=wants)

    # -- SELECT -------------------------------------------------------------------------------

    def select(self, sel: ast.Select, outer: Scope | None, as_relation: bool) -> _Result:
        scope = Scope(parent=outer)
        items: list[FromItem] = []
        conj_ast: list[ast.Expr] = []
        for fi in sel.from_:
            self._flatten(fi, items, conj_ast)
        for it in items:
            scope.add(it.alias, tuple(Field(f.name, f.type, it.alias) for f in it.op.schema), it.span)
        conj_ast += _conjuncts(sel.where)
        width = scope.width

        # Marks: subqueries in conditions become extra columns after the FROM row.
        marks: list[_Mark] = []

        def on_subquery(node: ast.Expr) -> BExpr:
            m = self._mark(node, scope, width + len(marks), binder)
            marks.append(m)
            return m.ref

        binder = ExprBinder(scope, on_subquery=on_subquery, where="in WHERE")
        bound = [(binder.bind_predicate(c), c) for c in conj_ast]

        # Correlation conjuncts (inside a correlated subquery) are handed to the caller.
        correlation = [b for b, _ in bound if contains_outer(b)]
        local = [(b, c) for b, c in bound if not contains_outer(b)]

        plan = join_items(items, scope, local, width)
        from_op = plan
        for m in marks:
            plan = m.build(plan)
        mark_conds = [b for b, _ in local if any(i >= width for i in column_refs(b))]
        if mark_conds:
            plan = Filter(plan, and_all(mark_conds), sel.span)
            if marks:
                # Drop the mark columns again: nothing after the filter reads them.
                plan = Project(
                    plan,
                    tuple(ColRef(i, f.type, f.name) for i, f in enumerate(scope.fields)),
                    scope.fields,
                    sel.span,
                )
        elif marks:
            plan = Project(
                plan,
                tuple(ColRef(i, f.type, f.name) for i, f in enumerate(scope.fields)),
                scope.fields,
                sel.span,
            )

        is_agg = bool(sel.group_by) or sel.having is not None or any(
            has_aggregate(i.expr) for i in sel.items
        )
        if is_agg and correlation and not marks:
            return self._decorrelated(sel, scope, plan, correlation)
        if is_agg:
            plan, names = bind_aggregate(sel, scope, plan)
        else:
            plan, names = self._project(sel, scope, plan)
        if sel.distinct:
            plan = Distinct(plan, sel.span)

        wants_istream = not is_agg and any(it.unwindowed_stream for it in items)
        if sel.stream_op is not None:
            if as_relation:
                raise CQLError(
                    f"SELECT {sel.stream_op.capitalize()}(...) makes a stream; a relation is needed here",
                    sel.span,
                )
            plan = RelToStream(sel.stream_op, plan, sel.span)
        elif wants_istream and not as_relation:
            plan = RelToStream("istream", plan, sel.span)

        res = _Result(plan, names, wants_istream=wants_istream, correlation=correlation)
        res.from_op = from_op
        if not is_agg and len(sel.items) == 1 and not isinstance(sel.items[0].expr, ast.Star):
            res.value = plan.exprs[0] if isinstance(plan, Project) else None  # type: ignore[union-attr]
        elif not is_agg and len(sel.items) == 1:
            res.value = ColRef(0, scope.fields[0].type) if scope.fields else None
        if correlation and (is_agg or marks):
            raise CQLError(
                "a correlated subquery with aggregation or nested subqueries is not supported; "
                "rewrite it as a join with a grouped subquery",
                sel.span,
            )
        return res

    def _flatten(self, fi: ast.FromItem, items: list[FromItem], conj: list[ast.Expr]) -> None:
        if isinstance(fi, ast.JoinRef):
            self._flatten(fi.left, items, conj)
            self._flatten(fi.right, items, conj)
            conj.extend(_conjuncts(fi.condition))
            return
        items.append(self._from_item(fi))

    def _from_item(self, fi: ast.TableRef | ast.SubqueryRef) -> FromItem:
        if isinstance(fi, ast.TableRef):
            op, alias = self._named(fi.name, fi.span), fi.alias or fi.name
        else:
            res = self.query(fi.query, outer=None, as_relation=False)
            op = res.op
            if res.names:
                fields = tuple(
                    Field(n, f.type) for n, f in zip(unique_names(res.names), op.schema)
                )
                op = _rename(op, fields)
            alias = fi.alias
        if fi.sample is not None:
            if not op.is_stream:
                raise CQLError("Sample(p) needs a stream; this is a relation", fi.span)
            if not 0 <= fi.sample <= 100:
                raise CQLError(f"Sample({fi.sample}) must be between 0 and 100", fi.span)
            op = Sample(op, float(fi.sample), 0, fi.span)
        if op.is_stream:
            unwindowed = fi.window is None
            spec = WindowSpec("unbounded")
            if fi.window:
                spec = bind_window(fi.window, op, alias, fi.span, self.catalog.time_unit_ns)
            names = (alias,) if alias else ()
            if isinstance(fi, ast.TableRef) and fi.name != alias:
                names += (fi.name,)
            window = WindowOp(op, spec, fi.span, names)
            return FromItem(window, alias, unwindowed, fi.span)
        if fi.window is not None:
            raise CQLError(
                f"'{alias or 'subquery'}' is a relation; windows apply to streams only", fi.window.span
            )
        return FromItem(op, alias, False, fi.span)

    def _named(self, name: str, span: Span) -> LogicalOp:
        low = name.lower()
        if low in self.catalog.sources:
            return self.catalog.sources[low]
        if low in self.catalog.views:
            v = self.catalog.views[low]
            fields = tuple(Field(n, f.type) for n, f in zip(v.columns, v.plan.schema))
            return View(v.name, v.plan, fields, span)
        raise CQLError(f"unknown stream, relation or view '{name}'", span)

    # -- subqueries in conditions -------------------------------------------------------------

    def _mark(self, node: ast.Expr, scope: Scope, index: int, binder: ExprBinder) -> _Mark:
        sub = node.query  # type: ignore[union-attr]
        res = self.query(sub, outer=scope, as_relation=True)
        if res.op.is_stream:
            raise CQLError("a subquery used in a condition must be a relation", node.span)
        if res.decorrelated is not None:
            if not isinstance(node, ast.ScalarSubquery):
                raise CQLError(
                    "a correlated subquery with aggregation is supported as a scalar value only",
                    node.span,
                )
            outer_keys, right_keys, default = res.decorrelated
            mtype = res.op.schema[0].type
            mark = Field(f"_mark{index}", mtype)
            right_op = res.op
            lkeys = tuple(_outer_to_col(k) for k in outer_keys)
            return _Mark(
                ColRef(index, mtype, mark.name),
                lambda left: MarkJoin(
                    left, right_op, "scalar", mark, None, None, lkeys, right_keys, None, default, node.span
                ),
            )
        correlated = bool(res.correlation)
        if isinstance(node, ast.Exists):
            mode, probe, op_name, mtype = "exists", None, None, T.BOOL
        elif isinstance(node, ast.ScalarSubquery):
            mode, probe, op_name = "scalar", None, None
            if len(res.op.schema) != 1:
                raise CQLError("a scalar subquery must return one column", node.span)
            mtype = res.op.schema[0].type
        else:
            if len(res.op.schema) != 1:
                raise CQLError("the subquery must return one column", node.query.span)  # type: ignore[union-attr]
            probe = binder.bind(node.operand)  # type: ignore[union-attr]
            if isinstance(node, ast.InSubquery):
                mode, op_name = "any", "="
            else:
                mode, op_name = node.quantifier, node.op  # type: ignore[union-attr]
            unify([probe.type, res.op.schema[0].type], node.span, "subquery comparison")
            mtype = T.BOOL
        mark = Field(f"_mark{index}", mtype)
        ref = ColRef(index, mtype, mark.name)
        if isinstance(node, ast.InSubquery | ast.Exists) and node.negated:
            expr: BExpr = Call("not", (ref,), T.BOOL)
        else:
            expr = ref
        if not correlated:
            right = res.op
            return _Mark(
                expr, lambda left: MarkJoin(left, right, mode, mark, probe, op_name, span=node.span)
            )
        # Correlated: the right side is the subquery's FROM+WHERE row, with its value first.
        if res.from_op is None or (mode != "exists" and res.value is None):
            raise CQLError("this correlated subquery is not supported", node.span)
        inner_fields = res.from_op.schema
        value = res.value if res.value is not None else Const(True, T.BOOL)
        right = Project(
            res.from_op,
            (value, *(ColRef(i, f.type, f.name) for i, f in enumerate(inner_fields))),
            (Field("_value", value.type), *inner_fields),
            node.span,
        )
        lkeys: list[BExpr] = []
        rkeys: list[BExpr] = []
        rest: list[BExpr] = []
        for c in res.correlation:
            pair = _correlation_key(c)
            if pair is not None:
                lkeys.append(pair[0])
                rkeys.append(shift_columns(pair[1], 1))
            else:
                rest.append(c)

        def build(left: LogicalOp) -> LogicalOp:
            lw = len(left.schema)
            corr = None
            if rest:
                corr = and_all([_to_pair_row(c, lw) for c in rest])
            return MarkJoin(
                left, right, mode, mark, probe, op_name, tuple(lkeys), tuple(rkeys), corr, span=node.span
            )

        return _Mark(expr, build)

    # -- correlated aggregates and projection ------------------------------------------------

    def _decorrelated(
        self, sel: ast.Select, scope: Scope, plan: LogicalOp, correlation: list[BExpr]
    ) -> _Result:
        """A correlated aggregate subquery ``(SELECT agg(…) FROM … WHERE inner = outer AND …)``
        as a grouped aggregate keyed by the inner side of the correlation equalities; the mark
        join looks a row's group up by its outer values (an absent group is the aggregate of
        nothing: COUNT 0, the others NULL)."""
        pairs = [_correlation_key(c) for c in correlation]
        if sel.group_by or sel.having is not None or len(sel.items) != 1 or None in pairs:
            raise CQLError(
                "a correlated subquery with aggregation is supported only as a single aggregate "
                "expression, correlated by equalities, without GROUP BY or HAVING",
                sel.span,
            )
        inner = [p[1] for p in pairs]  # type: ignore[index]
        outer = [p[0] for p in pairs]  # type: ignore[index]
        proj, names = bind_aggregate(sel, scope, plan, inner)
        assert isinstance(proj, Project)
        value = proj.exprs[0]
        nkeys = len(inner)
        agg_op = proj.input
        while not isinstance(agg_op, Aggregate):
            agg_op = agg_op.input  # type: ignore[union-attr]
        calls = agg_op.aggs

        def empty(c: BExpr) -> BExpr | None:
            if isinstance(c, ColRef) and c.index >= nkeys:
                call = calls[c.index - nkeys]
                return Const(0 if call.fn == "count" else None, c.type)
            return None

        default = map_columns(value, empty)
        right = Project(
            proj.input,
            (value, *(ColRef(i, k.type) for i, k in enumerate(inner))),
            (Field("_value", value.type), *(Field(f"_k{i}", k.type) for i, k in enumerate(inner))),
            sel.span,
        )
        res = _Result(right, names)
        res.decorrelated = (tuple(outer), tuple(ColRef(1 + i, k.type) for i, k in enumerate(inner)), default)
        return res

    def _project(self, sel: ast.Select, scope: Scope, plan: LogicalOp) -> tuple[LogicalOp, list[OutputName]]:
        marks: list[_Mark] = []
        width = scope.width

        def on_subquery(node: ast.Expr) -> BExpr:
            m = self._mark(node, scope, width + len(marks), binder)
            marks.append(m)
            return m.ref

        binder = ExprBinder(scope, on_subquery=on_subquery, where="in the select list")
        exprs: list[BExpr] = []
        names: list[OutputName] = []
        for item in sel.items:
            if isinstance(item.expr, ast.Star):
                sources = scope.items
                if item.expr.table is not None:
                    it = scope.item(item.expr.table)
                    if it is None:
                        raise CQLError(f"unknown table '{item.expr.table}'", item.span)
                    sources = [it]
                for it in sources:
                    for k, f in enumerate(it.fields):
                        exprs.append(ColRef(it.offset + k, f.type, f.name))
                        names.append(OutputName(f.name, it.alias, True))
                continue
            e = binder.bind(item.expr)
            if contains_outer(e):
                raise CQLError(
                    "a reference to an enclosing query is only supported in the subquery's WHERE",
                    item.span,
                )
            exprs.append(e)
            names.append(output_name(item, scope))
        for m in marks:
            plan = m.build(plan)
        fields = tuple(Field(n.name, e.type, n.table) for n, e in zip(names, exprs))
        return Project(plan, tuple(exprs), fields, sel.span), names


@dataclass(frozen=True)
class _Mark:
    """A subquery in a condition: the expression that stands for it, and how to add its mark
    join on top of the row it is evaluated over."""

    ref: BExpr
    build: Callable[[LogicalOp], LogicalOp]


def _correlation_key(c: BExpr) -> tuple[BExpr, BExpr] | None:
    """(outer expr as a left-row expr, inner expr) when `c` is ``outer = inner``."""
    if not (isinstance(c, Call) and c.fn == "eq"):
        return None
    x, y = c.args
    for a, b in ((x, y), (y, x)):
        if _only_outer(a) and not contains_outer(b) and column_refs(b):
            return _outer_to_col(a), b
    return None


def _only_outer(e: BExpr) -> bool:
    return contains_outer(e) and not column_refs(e) and not _deep_outer(e)


def _deep_outer(e: BExpr) -> bool:
    found = False

    def visit(c: BExpr) -> None:
        nonlocal found
        if isinstance(c, OuterRef) and c.depth > 1:
            found = True

    map_columns(e, lambda c: visit(c))
    return found


def _outer_to_col(e: BExpr) -> BExpr:
    return map_columns(
        e, lambda c: ColRef(c.index, c.type, c.name) if isinstance(c, OuterRef) else None
    )


def _to_pair_row(c: BExpr, left_width: int) -> BExpr:
    """A correlation conjunct over (left row ++ right row), where the right row is
    (value, inner FROM columns...)."""
    if _deep_outer(c):
        raise CQLError("a subquery may only reference the query immediately enclosing it", Span())

    def fn(x: BExpr) -> BExpr | None:
        if isinstance(x, OuterRef):
            return ColRef(x.index, x.type, x.name)
        if isinstance(x, ColRef):
            return ColRef(left_width + 1 + x.index, x.type, x.name)
        return None

    return map_columns(c, fn)


def _cast_columns(op: LogicalOp, types: list[DataType]) -> LogicalOp:
    cur = [f.type for f in op.schema]
    if all(a == b or b == T.NULL for a, b in zip(cur, types)):
        return op
    exprs = []
    fields = []
    for i, (f, t) in enumerate(zip(op.schema, types)):
        ref = ColRef(i, f.type, f.name)
        exprs.append(ref if f.type == t or t == T.NULL else CastExpr(ref, t))
        fields.append(Field(f.name, t if t != T.NULL else f.type, f.table))
    return Project(op, tuple(exprs), tuple(fields))


def _rename(op: LogicalOp, fields: tuple[Field, ...]) -> LogicalOp:
    if tuple(f.name for f in op.schema) == tuple(f.name for f in fields):
        return op
    exprs = tuple(ColRef(i, f.type, f.name) for i, f in enumerate(op.schema))
    if isinstance(op, RelToStream):
        # Keep the stream-ness: rename below the relation-to-stream operator.
        return RelToStream(op.op, Project(op.input, exprs, fields), op.span)
    return Project(op, exprs, fields)
