"""Binding queries: AST -> logical plan, with names resolved and types checked.

`bind_query(query, catalog, name)` returns a `BoundQuery`: the plan's root, whether the result
is a stream, and the unique output column names (DESIGN §5).

The shape of a bound SELECT block, bottom to top: FROM items (sources, windows, samples, views,
subqueries) with single-item WHERE conjuncts pushed onto them, joined left to right with
equi-join keys taken from the conjuncts; mark joins for subqueries in conditions; the remaining
filter; aggregation and HAVING; the projection; DISTINCT; the relation-to-stream operator.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from cq_service.cql import ast
from cq_service.cql.bind_expr import (
    AGGREGATES,
    ExprBinder,
    OuterRef,
    column_refs,
    contains_outer,
    map_columns,
    unify,
)
from cq_service.cql.clocks import add_query_clocks
from cq_service.cql.logical import (
    AggCall,
    Aggregate,
    BExpr,
    Call,
    CastExpr,
    ColRef,
    Const,
    Distinct,
    Field,
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
    WindowSpec,
)
from cq_service.cql.naming import OutputName, unique_names
from cq_service.cql.scope import Scope
from cq_service.errors import CQLError, Span
from cq_service.types import DataType

__all__ = ["BoundQuery", "Catalog", "bind_query", "duration_units"]

T = DataType

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


@dataclass
class _FromItem:
    op: LogicalOp
    alias: str | None
    unwindowed_stream: bool
    span: Span


def _conjuncts(e: ast.Expr | None) -> list[ast.Expr]:
    if e is None:
        return []
    if isinstance(e, ast.BinaryOp) and e.op == "and":
        return _conjuncts(e.left) + _conjuncts(e.right)
    return [e]


def _shift(e: BExpr, delta: int) -> BExpr:
    if delta == 0:
        return e
    return map_columns(
        e, lambda c: ColRef(c.index + delta, c.type, c.name) if isinstance(c, ColRef) else None
    )


def _is_aggregate_call(e: ast.Expr) -> bool:
    return isinstance(e, ast.FuncCall) and e.name in AGGREGATES


def _has_aggregate(e: ast.Expr | None) -> bool:
    """Whether `e` calls an aggregate outside any subquery."""
    if e is None:
        return False
    if _is_aggregate_call(e):
        return True
    if isinstance(e, ast.InSubquery | ast.Exists | ast.Quantified | ast.ScalarSubquery):
        return isinstance(e, ast.InSubquery | ast.Quantified) and _has_aggregate(e.operand)
    for name in getattr(e, "__dataclass_fields__", {}):
        if name in ("span", "query"):
            continue
        v = getattr(e, name)
        items = v if isinstance(v, tuple) else (v,)
        for x in items:
            if isinstance(x, tuple):
                if any(_has_aggregate(y) for y in x if not isinstance(y, str)):
                    return True
            elif x is not None and not isinstance(x, str | bool | int | float) and _has_aggregate(x):
                return True
    return False


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
        items: list[_FromItem] = []
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

        plan = self._join(items, scope, local, width)
        from_op = plan
        for m in marks:
            plan = m.build(plan)
        mark_conds = [b for b, _ in local if any(i >= width for i in column_refs(b))]
        if mark_conds:
            plan = Filter(plan, _and_all(mark_conds), sel.span)
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
            _has_aggregate(i.expr) for i in sel.items
        )
        if is_agg and correlation and not marks:
            return self._decorrelated(sel, scope, plan, correlation)
        if is_agg:
            plan, names = self._aggregate(sel, scope, plan)
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

    def _flatten(self, fi: ast.FromItem, items: list[_FromItem], conj: list[ast.Expr]) -> None:
        if isinstance(fi, ast.JoinRef):
            self._flatten(fi.left, items, conj)
            self._flatten(fi.right, items, conj)
            conj.extend(_conjuncts(fi.condition))
            return
        items.append(self._from_item(fi))

    def _from_item(self, fi: ast.TableRef | ast.SubqueryRef) -> _FromItem:
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
            spec = self._window(fi.window, op, alias, fi.span) if fi.window else WindowSpec("unbounded")
            names = (alias,) if alias else ()
            if isinstance(fi, ast.TableRef) and fi.name != alias:
                names += (fi.name,)
            window = WindowOp(op, spec, fi.span, names)
            return _FromItem(window, alias, unwindowed, fi.span)
        if fi.window is not None:
            raise CQLError(
                f"'{alias or 'subquery'}' is a relation; windows apply to streams only", fi.window.span
            )
        return _FromItem(op, alias, False, fi.span)

    def _named(self, name: str, span: Span) -> LogicalOp:
        low = name.lower()
        if low in self.catalog.sources:
            return self.catalog.sources[low]
        if low in self.catalog.views:
            v = self.catalog.views[low]
            fields = tuple(Field(n, f.type) for n, f in zip(v.columns, v.plan.schema))
            return View(v.name, v.plan, fields, span)
        raise CQLError(f"unknown stream, relation or view '{name}'", span)

    # -- windows ------------------------------------------------------------------------------

    def _window(self, w: ast.Window, op: LogicalOp, alias: str | None, span: Span) -> WindowSpec:
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
        size = 0 if w.now else self._duration(w.size)
        slide = self._duration(w.slide) if w.slide is not None else None
        if slide is not None and slide < 1:
            raise CQLError("Slide must be at least one time unit", w.slide.span)  # type: ignore[union-attr]
        if slide == 1:
            slide = None
        return WindowSpec("range", size=size, slide=slide, where=where)

    def _duration(self, d: ast.Duration) -> int:
        return duration_units(d, self.catalog.time_unit_ns)

    # -- joins --------------------------------------------------------------------------------

    def _join(
        self,
        items: list[_FromItem],
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
                op = Filter(op, _and_all([_shift(b, -off) for b in per_item[k]]), it.span)
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
                    rkeys.append(_shift(pair[1], -off))
            plan = Join(
                plan,
                ops[k],
                tuple(lkeys),
                tuple(rkeys),
                _and_all(residual) if residual else None,
                items[k].span,
            )
        if top:
            plan = Filter(plan, _and_all(top), items[0].span)
        return plan

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
                rkeys.append(_shift(pair[1], 1))
            else:
                rest.append(c)

        def build(left: LogicalOp) -> LogicalOp:
            lw = len(left.schema)
            corr = None
            if rest:
                corr = _and_all([_to_pair_row(c, lw) for c in rest])
            return MarkJoin(
                left, right, mode, mark, probe, op_name, tuple(lkeys), tuple(rkeys), corr, span=node.span
            )

        return _Mark(expr, build)

    # -- aggregation and projection ----------------------------------------------------------

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
        proj, names = self._aggregate(sel, scope, plan, inner)
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

    def _aggregate(
        self,
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
            if _is_aggregate_call(node) or isinstance(node, ast.Literal):
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
            names.append(self._name_of(item, scope))
        having = post.bind_predicate(sel.having) if sel.having is not None else None
        key_fields = tuple(Field(f"_k{i}", k.type) for i, k in enumerate(keys))
        agg_fields = tuple(Field(f"_a{i}", a.type) for i, a in enumerate(aggs))
        op: LogicalOp = Aggregate(plan, tuple(keys), tuple(aggs), key_fields + agg_fields, span=sel.span)
        if having is not None:
            op = Filter(op, having, sel.having.span)  # type: ignore[union-attr]
        fields = tuple(Field(n.name, e.type, n.table) for n, e in zip(names, exprs))
        return Project(op, tuple(exprs), fields, sel.span), names

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
            names.append(self._name_of(item, scope))
        for m in marks:
            plan = m.build(plan)
        fields = tuple(Field(n.name, e.type, n.table) for n, e in zip(names, exprs))
        return Project(plan, tuple(exprs), fields, sel.span), names

    def _name_of(self, item: ast.SelectItem, scope: Scope) -> OutputName:
        if item.alias is not None:
            return OutputName(item.alias, None, False)
        e = item.expr
        if isinstance(e, ast.Column):
            r = scope.resolve(e.name, e.table, e.span)
            table = None
            if r.depth == 0:
                table = scope.items[scope.item_of(r.index)].alias
            return OutputName(r.field.name, table, True)
        if isinstance(e, ast.FuncCall):
            return OutputName(e.name, None, False)
        if isinstance(e, ast.Case):
            return OutputName("case", None, False)
        if isinstance(e, ast.Cast) and isinstance(e.operand, ast.Column):
            r = scope.resolve(e.operand.name, e.operand.table, e.operand.span)
            return OutputName(r.field.name, None, False)
        return OutputName("?column?", None, False)


@dataclass(frozen=True)
class _Mark:
    """A subquery in a condition: the expression that stands for it, and how to add its mark
    join on top of the row it is evaluated over."""

    ref: BExpr
    build: Callable[[LogicalOp], LogicalOp]


def _and_all(preds: list[BExpr]) -> BExpr:
    out = preds[0]
    for p in preds[1:]:
        out = Call("and", (out, p), T.BOOL)
    return out


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
