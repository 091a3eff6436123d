"""Binding expressions: AST expressions -> typed `BExpr` over a scope's row.

`ExprBinder.bind` resolves names, checks types (PostgreSQL rules, see docs/semantics.md) and
desugars (BETWEEN, simple CASE, NOT IN, ...). Subqueries and aggregates are not handled here:
the query binder passes hooks that turn them into columns of the row being bound.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from cq_service.cql import ast
from cq_service.cql.logical import BExpr, Call, CaseExpr, CastExpr, ColRef, Const
from cq_service.cql.scope import Scope
from cq_service.errors import CQLError, Span
from cq_service.types import DataType, common_numeric

__all__ = [
    "AGGREGATES",
    "ExprBinder",
    "OuterRef",
    "and_all",
    "column_refs",
    "contains_outer",
    "map_columns",
    "shift_columns",
    "unify",
]

AGGREGATES = frozenset({"count", "sum", "avg", "min", "max"})

T = DataType

_ARITH = {"+": "add", "-": "sub", "*": "mul", "/": "div", "%": "mod"}
_COMPARE = {"=": "eq", "<>": "ne", "<": "lt", "<=": "le", ">": "gt", ">=": "ge"}

# name -> (canonical name, min args, max args); result type rules are in `_function_type`.
_FUNCTIONS: dict[str, tuple[str, int, int | None]] = {
    "abs": ("abs", 1, 1),
    "round": ("round", 1, 2),
    "floor": ("floor", 1, 1),
    "ceil": ("ceil", 1, 1),
    "ceiling": ("ceil", 1, 1),
    "sqrt": ("sqrt", 1, 1),
    "power": ("power", 2, 2),
    "pow": ("power", 2, 2),
    "exp": ("exp", 1, 1),
    "ln": ("ln", 1, 1),
    "log": ("log10", 1, 1),
    "log10": ("log10", 1, 1),
    "sign": ("sign", 1, 1),
    "mod": ("mod", 2, 2),
    "upper": ("upper", 1, 1),
    "lower": ("lower", 1, 1),
    "length": ("length", 1, 1),
    "char_length": ("length", 1, 1),
    "character_length": ("length", 1, 1),
    "substr": ("substr", 2, 3),
    "substring": ("substr", 2, 3),
    "trim": ("trim", 1, 1),
    "btrim": ("trim", 1, 1),
    "ltrim": ("ltrim", 1, 1),
    "rtrim": ("rtrim", 1, 1),
    "replace": ("replace", 3, 3),
    "strpos": ("strpos", 2, 2),
    "concat": ("concat", 1, None),
    "left": ("left", 2, 2),
    "right": ("right", 2, 2),
    "coalesce": ("coalesce", 1, None),
    "nullif": ("nullif", 2, 2),
    "greatest": ("greatest", 1, None),
    "least": ("least", 1, None),
}


@dataclass(frozen=True)
class OuterRef:
    """A column of an enclosing query, seen from inside a correlated subquery (binder-internal:
    never reaches a finished plan). `depth` 1 is the immediately enclosing scope."""

    index: int
    type: DataType
    depth: int = 1
    name: str = ""


def unify(types: list[DataType], span: Span, what: str) -> DataType:
    """The common type of `types` (NULL unifies with anything; int and float give float)."""
    known = [t for t in types if t != T.NULL]
    if not known:
        return T.NULL
    result = known[0]
    for t in known[1:]:
        if t == result:
            continue
        if t.is_numeric and result.is_numeric:
            result = common_numeric(_num(result), _num(t))
        else:
            raise CQLError(f"{what} mixes types {result} and {t}", span)
    return result


def _num(t: DataType) -> DataType:
    return T.INT if t == T.TIMESTAMP else t


def _coerce(e: BExpr, t: DataType) -> BExpr:
    """`e` converted to `t` when it is a different numeric type (int -> float)."""
    et = _type(e)
    if et == t or t == T.NULL:
        return e
    if et == T.NULL:
        return Const(None, t) if isinstance(e, Const) else e
    if et.is_numeric and t.is_numeric and _num(et) != _num(t):
        return CastExpr(e, t)
    return e


def _type(e: BExpr | OuterRef) -> DataType:
    return e.type


class ExprBinder:
    """Binds expressions over `scope`.

    `on_subquery(node)` is called for a subquery expression and returns the bound expression
    that replaces it (a column of a mark join). `on_aggregate(node)` is called for an aggregate
    call; when it is None aggregates are an error here. `on_other(node)` may return a bound
    expression for any node before normal binding (used after GROUP BY to map grouped
    expressions to key columns); returning None means "bind normally".
    """

    def __init__(
        self,
        scope: Scope,
        *,
        on_subquery: Callable[[ast.Expr], BExpr] | None = None,
        on_aggregate: Callable[[ast.FuncCall], BExpr] | None = None,
        on_other: Callable[[ast.Expr], BExpr | None] | None = None,
        where: str = "here",
    ):
        self.scope = scope
        self.on_subquery = on_subquery
        self.on_aggregate = on_aggregate
        self.on_other = on_other
        self.where = where

    # -- entry --------------------------------------------------------------------------------

    def bind(self, e: ast.Expr) -> BExpr:
        if self.on_other is not None:
            hit = self.on_other(e)
            if hit is not None:
                return hit
        method = getattr(self, "_bind_" + type(e).__name__)
        return method(e)

    def bind_predicate(self, e: ast.Expr) -> BExpr:
        b = self.bind(e)
        if _type(b) not in (T.BOOL, T.NULL):
            raise CQLError(f"condition must be a boolean, not {_type(b)}", e.span)
        return b

    # -- leaves -------------------------------------------------------------------------------

    def _bind_Column(self, e: ast.Column) -> BExpr:
        r = self.scope.resolve(e.name, e.table, e.span)
        if r.depth == 0:
            return ColRef(r.index, r.field.type, r.field.name)
        return OuterRef(r.index, r.field.type, r.depth, r.field.name)  # type: ignore[return-value]

    def _bind_Literal(self, e: ast.Literal) -> BExpr:
        v = e.value
        if v is None:
            return Const(None, T.NULL)
        if isinstance(v, bool):
            return Const(v, T.BOOL)
        if isinstance(v, int):
            return Const(v, T.INT)
        if isinstance(v, float):
            return Const(v, T.FLOAT)
        return Const(v, T.STRING)

    def _bind_Star(self, e: ast.Star) -> BExpr:
        raise CQLError("'*' is only allowed in a select list or COUNT(*)", e.span)

    # -- operators ----------------------------------------------------------------------------

    def _bind_UnaryOp(self, e: ast.UnaryOp) -> BExpr:
        x = self.bind(e.operand)
        if e.op == "not":
            self._want(x, (T.BOOL,), e.operand.span, "NOT")
            return Call("not", (x,), T.BOOL)
        self._want(x, (T.INT, T.FLOAT, T.TIMESTAMP), e.operand.span, f"unary {e.op}")
        if e.op == "+":
            return x
        if isinstance(x, Const) and x.value is not None:
            return Const(-x.value, x.type)  # type: ignore[operator]
        return Call("neg", (x,), _num(_type(x)) if _type(x) != T.NULL else T.INT)

    def _bind_BinaryOp(self, e: ast.BinaryOp) -> BExpr:
        a, b = self.bind(e.left), self.bind(e.right)
        if e.op in _ARITH:
            self._want(a, (T.INT, T.FLOAT, T.TIMESTAMP), e.left.span, f"operator {e.op}")
            self._want(b, (T.INT, T.FLOAT, T.TIMESTAMP), e.right.span, f"operator {e.op}")
            t = common_numeric(_num(_type(a)), _num(_type(b)))
            if t == T.NULL:
                t = T.INT
            return Call(_ARITH[e.op], (_coerce(a, t), _coerce(b, t)), t)
        if e.op == "||":
            return Call("concat_op", (a, b), T.STRING)
        if e.op in ("and", "or"):
            self._want(a, (T.BOOL,), e.left.span, e.op.upper())
            self._want(b, (T.BOOL,), e.right.span, e.op.upper())
            return Call(e.op, (a, b), T.BOOL)
        return self.compare(e.op, a, b, e.span)

    def compare(self, op: str, a: BExpr, b: BExpr, span: Span) -> BExpr:
        """A type-checked comparison `a op b` (op in = <> < <= > >=)."""
        t = unify([_type(a), _type(b)], span, f"comparison '{op}'")
        return Call(_COMPARE[op], (_coerce(a, t), _coerce(b, t)), T.BOOL)

    def _bind_IsNull(self, e: ast.IsNull) -> BExpr:
        x = self.bind(e.operand)
        return Call("is_not_null" if e.negated else "is_null", (x,), T.BOOL)

    def _bind_Between(self, e: ast.Between) -> BExpr:
        x, lo, hi = self.bind(e.operand), self.bind(e.low), self.bind(e.high)
        both = Call("and", (self.compare(">=", x, lo, e.span), self.compare("<=", x, hi, e.span)), T.BOOL)
        return Call("not", (both,), T.BOOL) if e.negated else both

    def _bind_InList(self, e: ast.InList) -> BExpr:
        x = self.bind(e.operand)
        items = [self.bind(i) for i in e.items]
        t = unify([_type(x)] + [_type(i) for i in items], e.span, "IN list")
        call = Call("in_list", (_coerce(x, t), *(_coerce(i, t) for i in items)), T.BOOL)
        return Call("not", (call,), T.BOOL) if e.negated else call

    def _bind_Like(self, e: ast.Like) -> BExpr:
        x, p = self.bind(e.operand), self.bind(e.pattern)
        self._want(x, (T.STRING,), e.operand.span, "LIKE")
        self._want(p, (T.STRING,), e.pattern.span, "LIKE pattern")
        call = Call("ilike" if e.case_insensitive else "like", (x, p), T.BOOL)
        return Call("not", (call,), T.BOOL) if e.negated else call

    def _bind_Case(self, e: ast.Case) -> BExpr:
        conds: list[BExpr] = []
        results: list[BExpr] = []
        operand = self.bind(e.operand) if e.operand is not None else None
        for when, then in e.whens:
            if operand is not None:
                conds.append(self.compare("=", operand, self.bind(when), when.span))
            else:
                conds.append(self.bind_predicate(when))
            results.append(self.bind(then))
        else_ = self.bind(e.else_) if e.else_ is not None else None
        t = unify([_type(r) for r in results] + ([_type(else_)] if else_ else []), e.span, "CASE")
        whens = tuple((c, _coerce(r, t)) for c, r in zip(conds, results))
        return CaseExpr(whens, _coerce(else_, t) if else_ is not None else None, t)

    def _bind_Cast(self, e: ast.Cast) -> BExpr:
        x = self.bind(e.operand)
        try:
            t = DataType(e.type_name)
        except ValueError:
            raise CQLError(f"unknown type '{e.type_name}'", e.span) from None
        if _type(x) == t:
            return x
        return CastExpr(x, t)

    def _bind_FuncCall(self, e: ast.FuncCall) -> BExpr:
        if e.name in AGGREGATES:
            if self.on_aggregate is None:
                raise CQLError(f"aggregate function {e.name.upper()} is not allowed {self.where}", e.span)
            return self.on_aggregate(e)
        if e.name not in _FUNCTIONS:
            raise CQLError(f"unknown function '{e.name}'", e.span)
        if e.star or e.distinct:
            raise CQLError(f"{e.name}() takes no '*' or DISTINCT", e.span)
        fn, lo, hi = _FUNCTIONS[e.name]
        if len(e.args) < lo or (hi is not None and len(e.args) > hi):
            want = str(lo) if lo == hi else (f"{lo} to {hi}" if hi else f"at least {lo}")
            raise CQLError(f"{e.name}() takes {want} argument(s), got {len(e.args)}", e.span)
        args = [self.bind(a) for a in e.args]
        return self._function(fn, args, e)

    def _function(self, fn: str, args: list[BExpr], e: ast.FuncCall) -> BExpr:
        num = (T.INT, T.FLOAT, T.TIMESTAMP)
        types = [_type(a) for a in args]
        if fn in ("abs", "floor", "ceil", "sign", "round"):
            self._want(args[0], num, e.args[0].span, f"{fn}()")
            if fn == "round" and len(args) == 2:
                self._want(args[1], (T.INT,), e.args[1].span, "round() precision")
            t = _num(types[0]) if types[0] != T.NULL else T.FLOAT
            return Call(fn, tuple(args), t)
        if fn in ("sqrt", "exp", "ln", "log10", "power"):
            for a, sub in zip(args, e.args):
                self._want(a, num, sub.span, f"{fn}()")
            return Call(fn, tuple(_coerce(a, T.FLOAT) for a in args), T.FLOAT)
        if fn == "mod":
            for a, sub in zip(args, e.args):
                self._want(a, num, sub.span, "mod()")
            t = common_numeric(_num(types[0]), _num(types[1]))
            return Call("mod", (_coerce(args[0], t), _coerce(args[1], t)), t)
        if fn in ("upper", "lower", "trim", "ltrim", "rtrim", "length"):
            self._want(args[0], (T.STRING,), e.args[0].span, f"{fn}()")
            return Call(fn, tuple(args), T.INT if fn == "length" else T.STRING)
        if fn == "substr":
            self._want(args[0], (T.STRING,), e.args[0].span, "substr()")
            for a, sub in zip(args[1:], e.args[1:]):
                self._want(a, (T.INT,), sub.span, "substr() position")
            return Call(fn, tuple(args), T.STRING)
        if fn in ("left", "right"):
            self._want(args[0], (T.STRING,), e.args[0].span, f"{fn}()")
            self._want(args[1], (T.INT,), e.args[1].span, f"{fn}() length")
            return Call(fn, tuple(args), T.STRING)
        if fn in ("replace", "strpos"):
            for a, sub in zip(args, e.args):
                self._want(a, (T.STRING,), sub.span, f"{fn}()")
            return Call(fn, tuple(args), T.INT if fn == "strpos" else T.STRING)
        if fn == "concat":
            return Call(fn, tuple(args), T.STRING)
        if fn == "nullif":
            t = unify(types, e.span, "NULLIF")
            return Call(fn, tuple(_coerce(a, t) for a in args), types[0] if types[0] != T.NULL else t)
        # coalesce, greatest, least
        t = unify(types, e.span, fn.upper())
        return Call(fn, tuple(_coerce(a, t) for a in args), t)

    # -- subqueries ---------------------------------------------------------------------------

    def _subquery(self, e: ast.Expr) -> BExpr:
        if self.on_subquery is None:
            raise CQLError(f"a subquery is not allowed {self.where}", e.span)
        return self.on_subquery(e)

    _bind_InSubquery = _subquery
    _bind_Exists = _subquery
    _bind_Quantified = _subquery
    _bind_ScalarSubquery = _subquery

    # -- helpers ------------------------------------------------------------------------------

    def _want(self, x: BExpr, types: tuple[DataType, ...], span: Span, what: str) -> None:
        t = _type(x)
        if t != T.NULL and t not in types:
            wanted = " or ".join(str(w) for w in types if w != T.TIMESTAMP)
            raise CQLError(f"{what} needs {wanted}, not {t}", span)


# ---------------------------------------------------------------------------------------------
# Walking bound expressions


def _children(e: BExpr) -> tuple:
    if isinstance(e, Call):
        return e.args
    if isinstance(e, CaseExpr):
        kids = [x for w in e.whens for x in w]
        if e.else_ is not None:
            kids.append(e.else_)
        return tuple(kids)
    if isinstance(e, CastExpr):
        return (e.operand,)
    return ()


def column_refs(e: BExpr) -> set[int]:
    """Indices of the columns `e` reads (outer references excluded)."""
    if isinstance(e, ColRef):
        return {e.index}
    out: set[int] = set()
    for c in _children(e):
        out |= column_refs(c)
    return out


def contains_outer(e: BExpr) -> bool:
    if isinstance(e, OuterRef):
        return True
    return any(contains_outer(c) for c in _children(e))


def map_columns(e: BExpr, fn: Callable[[BExpr], BExpr | None]) -> BExpr:
    """A copy of `e` with every `ColRef`/`OuterRef` x replaced by fn(x) (None keeps x)."""
    if isinstance(e, ColRef | OuterRef):
        r = fn(e)
        return e if r is None else r
    if isinstance(e, Call):
        return Call(e.fn, tuple(map_columns(a, fn) for a in e.args), e.type)
    if isinstance(e, CaseExpr):
        return CaseExpr(
            tuple((map_columns(c, fn), map_columns(r, fn)) for c, r in e.whens),
            None if e.else_ is None else map_columns(e.else_, fn),
            e.type,
        )
    if isinstance(e, CastExpr):
        return CastExpr(map_columns(e.operand, fn), e.type)
    return e


def and_all(preds: list[BExpr]) -> BExpr:
    """The conjunction of one or more predicates."""
    out = preds[0]
    for p in preds[1:]:
        out = Call("and", (out, p), T.BOOL)
    return out


def shift_columns(e: BExpr, delta: int) -> BExpr:
    """A copy of `e` with every `ColRef` index moved by `delta`."""
    if delta == 0:
        return e
    return map_columns(
        e, lambda c: ColRef(c.index + delta, c.type, c.name) if isinstance(c, ColRef) else None
    )
