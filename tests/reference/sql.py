"""Translate a CQL query's relational part (its AST) into one DuckDB SQL statement.

Every stream, relation, view and stream-valued subquery the query reads becomes a *leaf*: a
DuckDB table whose content at instant τ the evaluator loads before running the statement.
Relation-valued subqueries (in FROM or in expressions) are translated inline, so DuckDB
evaluates them, correlated or not.

The translation gives PostgreSQL semantics (docs/semantics.md): integer division truncates and
division/modulo by zero is NULL, integer literals and SUM of ints are BIGINT, AVG is double,
LIKE escapes with backslash, casts follow PostgreSQL's rules with NULL for invalid input, a
scalar subquery with more than one row is NULL. It infers each expression's type itself
(``int``, ``float``, ``string``, ``bool``, ``null``) to pick the right translation.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol

from . import cql_ast as ast
from .kinds import AGGREGATES, QUERY_TYPES, output_op, walk

__all__ = [
    "DUCKDB_TYPES",
    "Leaf",
    "LeafFactory",
    "OutCol",
    "Translator",
    "has_subquery",
    "quote",
    "sql_literal",
]

DUCKDB_TYPES = {
    "int": "BIGINT",
    "timestamp": "BIGINT",
    "float": "DOUBLE",
    "string": "VARCHAR",
    "bool": "BOOLEAN",
    "null": "BIGINT",
}


def quote(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def sql_literal(value: object) -> str:
    """A DuckDB literal for a Python value (used to load tables and for CQL literals)."""
    if value is None:
        return "NULL"
    if isinstance(value, bool):
        return "TRUE" if value else "FALSE"
    if isinstance(value, int):
        return f"CAST({value} AS BIGINT)"
    if isinstance(value, float):
        return f"CAST('{value!r}' AS DOUBLE)"
    if isinstance(value, str):
        return "'" + value.replace("'", "''") + "'"
    raise TypeError(f"no SQL literal for {value!r}")


@dataclass
class Leaf:
    """A DuckDB table standing for one FROM item that the evaluator fills at each instant."""

    table: str
    columns: list[tuple[str, str]]  # (name, type)
    content: Callable[[int], list[tuple]]  # rows at instant τ
    instants: set[int] = field(default_factory=set)  # instants that matter it contributes


class LeafFactory(Protocol):
    def is_stream_name(self, name: str) -> bool: ...

    def columns_of(self, name: str) -> list[tuple[str, str]]: ...

    def table_leaf(self, ref: ast.TableRef, alias: str) -> Leaf: ...

    def subquery_leaf(self, ref: ast.SubqueryRef, alias: str) -> Leaf: ...


@dataclass(frozen=True)
class OutCol:
    """An output column: its final name, type, and for naming: whether it is a bare table
    column and the alias of that table."""

    name: str
    type: str
    from_column: bool = False
    table: str | None = None


@dataclass
class ScopeItem:
    alias: str | None  # the name the query uses (None: alias-less subquery)
    sql_alias: str  # the name in the SQL text
    columns: list[tuple[str, str]]


@dataclass
class Scope:
    items: list[ScopeItem] = field(default_factory=list)
    parent: Scope | None = None

    def resolve(self, name: str, table: str | None) -> tuple[ScopeItem, str, str]:
        """(item, column name as in its schema, type); inner scopes first."""
        low = name.lower()
        scope: Scope | None = self
        while scope is not None:
            hits = []
            for it in scope.items:
                if table is not None and (it.alias is None or it.alias.lower() != table.lower()):
                    continue
                hits += [(it, n, t) for n, t in it.columns if n.lower() == low]
            if len(hits) > 1:
                raise ValueError(f"ambiguous column {name!r}")
            if hits:
                return hits[0]
            scope = scope.parent
        raise KeyError(f"unknown column {table + '.' if table else ''}{name}")


def unify(types: list[str]) -> str:
    real = [t for t in types if t != "null"]
    if not real:
        return "null"
    if "float" in real and all(t in ("int", "float") for t in real):
        return "float"
    return real[0]


def dedupe_names(cols: list[OutCol]) -> list[OutCol]:
    """docs/semantics.md "Output": qualify colliding table columns with their alias, then
    suffix any that still collide with _2, _3, … (the first keeps its name)."""
    counts = Counter(c.name for c in cols)
    named = []
    for c in cols:
        name = c.name
        if counts[name] > 1 and c.from_column and c.table is not None:
            name = f"{c.table}.{name}"
        named.append(name)
    seen: Counter[str] = Counter()
    taken = set(named)
    out = []
    for c, name in zip(cols, named):
        seen[name] += 1
        final = name
        if seen[name] > 1:
            k = seen[name]
            while f"{name}_{k}" in taken:  # never reuse a name another column has
                k += 1
            final = f"{name}_{k}"
            taken.add(final)
        out.append(OutCol(final, c.type, c.from_column, c.table))
    return out


_ARITH = {"+", "-", "*", "/", "%"}
_COMPARE = {"=", "<>", "<", "<=", ">", ">="}
_STRING_FNS = {"upper", "lower", "trim", "ltrim", "rtrim", "replace", "left", "right"}
_FLOAT_FNS = {"sqrt": "sqrt", "exp": "exp", "ln": "ln", "log10": "log10"}


class Translator:
    """Translates one query; `leaves` collects the tables it reads."""

    def __init__(self, factory: LeafFactory) -> None:
        self.factory = factory
        self.leaves: list[Leaf] = []
        self._n = 0

    def _fresh(self, prefix: str) -> str:
        self._n += 1
        return f"__{prefix}{self._n}"

    # ----------------------------------------------------------------------------- queries

    def query(self, q: ast.Query, parent: Scope | None = None) -> tuple[str, list[OutCol]]:
        if isinstance(q, ast.Select):
            if q.stream_op is not None:
                raise NotImplementedError("Istream/Dstream/Rstream inside a subquery")
            return self._select(q, parent)
        if isinstance(q, ast.SetOp):
            left, lcols = self.query(q.left, parent)
            right, rcols = self.query(q.right, parent)
            if len(lcols) != len(rcols):
                raise ValueError("set operation sides have different widths")
            op = q.op.upper() + (" ALL" if q.all else "")
            sql = f"SELECT * FROM ({left}) {op} SELECT * FROM ({right})"
            cols = [
                OutCol(lc.name, unify([lc.type, rc.type]), lc.from_column, lc.table)
                for lc, rc in zip(lcols, rcols)
            ]
            return sql, cols
        raise NotImplementedError("Istream/Dstream/Rstream inside a subquery")

    def _select(self, s: ast.Select, parent: Scope | None) -> tuple[str, list[OutCol]]:
        scope = Scope([], parent)
        from_sql = [self._from_item(item, scope) for item in s.from_]
        exprs: list[str] = []
        cols: list[OutCol] = []
        for item in s.items:
            if isinstance(item.expr, ast.Star):
                for it in scope.items:
                    if item.expr.table is not None and (
                        it.alias is None or it.alias.lower() != item.expr.table.lower()
                    ):
                        continue
                    for name, typ in it.columns:
                        exprs.append(f"{quote(it.sql_alias)}.{quote(name)}")
                        cols.append(OutCol(name, typ, True, it.alias))
                continue
            sql, typ = self.expr(item.expr, scope)
            exprs.append(sql)
            cols.append(self._item_name(item, typ, scope))
        cols = dedupe_names(cols)
        text = "SELECT " + ("DISTINCT " if s.distinct else "")
        text += ", ".join(f"{e} AS {quote(c.name)}" for e, c in zip(exprs, cols))
        if from_sql:
            text += " FROM " + ", ".join(from_sql)
        if s.where is not None:
            text += " WHERE " + self.expr(s.where, scope)[0]
        if s.group_by:
            keys = []
            for g in s.group_by:
                if isinstance(g, ast.Literal) and isinstance(g.value, int):
                    keys.append(str(g.value))  # positional, as in PostgreSQL
                else:
                    keys.append(self._group_key(g, s, scope))
            text += " GROUP BY " + ", ".join(keys)
        if s.having is not None:
            text += " HAVING " + self.expr(s.having, scope)[0]
        return text, cols

    def _group_key(self, g: ast.Expr, s: ast.Select, scope: Scope) -> str:
        try:
            return self.expr(g, scope)[0]
        except KeyError:
            # PostgreSQL also accepts an output column name in GROUP BY.
            if isinstance(g, ast.Column) and g.table is None:
                for item in s.items:
                    if item.alias is not None and item.alias.lower() == g.name.lower():
                        return self.expr(item.expr, scope)[0]
            raise

    def _item_name(self, item: ast.SelectItem, typ: str, scope: Scope) -> OutCol:
        e = item.expr
        if item.alias is not None:
            return OutCol(item.alias, typ)
        if isinstance(e, ast.Column):
            it, name, _ = scope.resolve(e.name, e.table)
            return OutCol(name, typ, True, it.alias)
        if isinstance(e, ast.FuncCall):
            return OutCol(e.name.lower(), typ)
        if isinstance(e, ast.Case):
            return OutCol("case", typ)
        if isinstance(e, ast.Cast) and isinstance(e.operand, ast.Column):
            _, name, _ = scope.resolve(e.operand.name, e.operand.table)
            return OutCol(name, typ)
        return OutCol("?column?", typ)

    def _from_item(self, item: ast.FromItem, scope: Scope) -> str:
        if isinstance(item, ast.JoinRef):
            left = self._from_item(item.left, scope)
            right = self._from_item(item.right, scope)
            if item.condition is None:
                return f"({left} CROSS JOIN {right})"
            cond = self.expr(item.condition, scope)[0]
            return f"({left} JOIN {right} ON {cond})"
        if isinstance(item, ast.TableRef):
            alias = item.alias or item.name
            leaf = self.factory.table_leaf(item, alias)
            self.leaves.append(leaf)
            scope.items.append(ScopeItem(alias, alias, list(leaf.columns)))
            return f"{quote(leaf.table)} AS {quote(alias)}"
        # a subquery
        sql_alias = item.alias or self._fresh("sq")
        stream_op = _stream_op_of(item.query, self.factory)
        if stream_op:
            leaf = self.factory.subquery_leaf(item, sql_alias)
            self.leaves.append(leaf)
            scope.items.append(ScopeItem(item.alias, sql_alias, list(leaf.columns)))
            return f"{quote(leaf.table)} AS {quote(sql_alias)}"
        if item.window is not None or item.sample is not None:
            raise ValueError("a window or Sample on a relation-valued subquery")
        sub_sql, cols = self.query(item.query, None)
        scope.items.append(ScopeItem(item.alias, sql_alias, [(c.name, c.type) for c in cols]))
        return f"({sub_sql}) AS {quote(sql_alias)}"

    def subquery_columns(self, q: ast.Query) -> list[OutCol]:
        return self.query(q, None)[1]

    # ----------------------------------------------------------------------------- expressions

    def expr(self, e: ast.Expr, scope: Scope) -> tuple[str, str]:
        """(SQL text, type) of expression `e` in `scope`."""
        method = getattr(self, "_e_" + type(e).__name__, None)
        if method is None:
            raise NotImplementedError(f"expression {type(e).__name__}")
        return method(e, scope)

    def _e_Column(self, e: ast.Column, scope: Scope) -> tuple[str, str]:
        it, name, typ = scope.resolve(e.name, e.table)
        return f"{quote(it.sql_alias)}.{quote(name)}", ("int" if typ == "timestamp" else typ)

    def _e_Star(self, e: ast.Star, scope: Scope) -> tuple[str, str]:
        raise ValueError("* outside a select list or COUNT(*)")

    def _e_Literal(self, e: ast.Literal, scope: Scope) -> tuple[str, str]:
        v = e.value
        if v is None:
            return "NULL", "null"
        if isinstance(v, bool):
            return sql_literal(v), "bool"
        if isinstance(v, int):
            return sql_literal(v), "int"
        if isinstance(v, float):
            return sql_literal(v), "float"
        return sql_literal(v), "string"

    def _e_UnaryOp(self, e: ast.UnaryOp, scope: Scope) -> tuple[str, str]:
        sql, typ = self.expr(e.operand, scope)
        if e.op == "not":
            return f"(NOT {sql})", "bool"
        if e.op == "-":
            return f"(- {sql})", typ
        return sql, typ

    def _e_BinaryOp(self, e: ast.BinaryOp, scope: Scope) -> tuple[str, str]:
        left, lt = self.expr(e.left, scope)
        right, rt = self.expr(e.right, scope)
        op = e.op
        if op in ("and", "or"):
            return f"({left} {op.upper()} {right})", "bool"
        if op in _COMPARE:
            return f"({left} {op} {right})", "bool"
        if op == "||":
            return f"({_text(left, lt)} || {_text(right, rt)})", "string"
        if op in _ARITH:
            typ = unify([lt, rt])
            if typ == "null":
                typ = "int"
            if op == "/":
                sym = "//" if typ == "int" else "/"
                return f"({left} {sym} NULLIF({right}, 0))", typ
            if op == "%":
                return f"({left} % NULLIF({right}, 0))", typ
            return f"({left} {op} {right})", typ
        raise NotImplementedError(f"operator {op}")

    def _e_IsNull(self, e: ast.IsNull, scope: Scope) -> tuple[str, str]:
        sql, _ = self.expr(e.operand, scope)
        return f"({sql} IS {'NOT ' if e.negated else ''}NULL)", "bool"

    def _e_Between(self, e: ast.Between, scope: Scope) -> tuple[str, str]:
        x = self.expr(e.operand, scope)[0]
        lo = self.expr(e.low, scope)[0]
        hi = self.expr(e.high, scope)[0]
        return f"({x} {'NOT ' if e.negated else ''}BETWEEN {lo} AND {hi})", "bool"

    def _e_InList(self, e: ast.InList, scope: Scope) -> tuple[str, str]:
        x = self.expr(e.operand, scope)[0]
        items = ", ".join(self.expr(i, scope)[0] for i in e.items)
        return f"({x} {'NOT ' if e.negated else ''}IN ({items}))", "bool"

    def _e_InSubquery(self, e: ast.InSubquery, scope: Scope) -> tuple[str, str]:
        x = self.expr(e.operand, scope)[0]
        sub, _ = self.query(e.query, scope)
        return f"({x} {'NOT ' if e.negated else ''}IN ({sub}))", "bool"

    def _e_Exists(self, e: ast.Exists, scope: Scope) -> tuple[str, str]:
        sub, _ = self.query(e.query, scope)
        return f"({'NOT ' if e.negated else ''}EXISTS ({sub}))", "bool"

    def _e_Quantified(self, e: ast.Quantified, scope: Scope) -> tuple[str, str]:
        x = self.expr(e.operand, scope)[0]
        sub, _ = self.query(e.query, scope)
        return f"({x} {e.op} {e.quantifier.upper()} ({sub}))", "bool"

    def _e_ScalarSubquery(self, e: ast.ScalarSubquery, scope: Scope) -> tuple[str, str]:
        sub, cols = self.query(e.query, scope)
        if len(cols) != 1:
            raise ValueError("a scalar subquery must have one column")
        # No row -> NULL; more than one row -> NULL (docs/semantics.md).
        alias = self._fresh("ss")
        sql = (
            f"(SELECT CASE WHEN count(*) = 1 THEN any_value({quote(alias)}.v) END "
            f"FROM ({sub}) AS {quote(alias)}(v))"
        )
        return sql, cols[0].type

    def _e_Like(self, e: ast.Like, scope: Scope) -> tuple[str, str]:
        x = self.expr(e.operand, scope)[0]
        p = self.expr(e.pattern, scope)[0]
        op = ("NOT " if e.negated else "") + ("ILIKE" if e.case_insensitive else "LIKE")
        return f"({x} {op} {p} ESCAPE '\\')", "bool"

    def _e_Case(self, e: ast.Case, scope: Scope) -> tuple[str, str]:
        parts = ["CASE"]
        if e.operand is not None:
            parts.append(self.expr(e.operand, scope)[0])
        types = []
        for w, t in e.whens:
            tsql, tt = self.expr(t, scope)
            parts.append(f"WHEN {self.expr(w, scope)[0]} THEN {tsql}")
            types.append(tt)
        if e.else_ is not None:
            esql, et = self.expr(e.else_, scope)
            parts.append(f"ELSE {esql}")
            types.append(et)
        parts.append("END")
        return "(" + " ".join(parts) + ")", unify(types)

    def _e_Cast(self, e: ast.Cast, scope: Scope) -> tuple[str, str]:
        sql, src = self.expr(e.operand, scope)
        target = "int" if e.type_name == "timestamp" else e.type_name
        if src == "null":
            return f"CAST(NULL AS {DUCKDB_TYPES[target]})", target
        if src == target:
            return sql, target
        if target == "int":
            if src == "string":
                return f"pg_str_to_int({sql})", target
            # float -> int rounds half to even (DuckDB's cast does); out of range -> NULL
            return f"TRY_CAST({sql} AS BIGINT)", target
        if target == "float":
            if src == "string":
                return f"pg_str_to_float({sql})", target
            return f"TRY_CAST({sql} AS DOUBLE)", target
        if target == "bool":
            if src == "string":
                return f"pg_str_to_bool({sql})", target
            return f"TRY_CAST({sql} AS BOOLEAN)", target
        if target == "string":
            return _text(sql, src), target
        raise NotImplementedError(f"CAST to {e.type_name}")

    def _e_FuncCall(self, e: ast.FuncCall, scope: Scope) -> tuple[str, str]:
        name = e.name.lower()
        if name in AGGREGATES:
            return self._aggregate(e, scope)
        if e.distinct or e.star:
            raise ValueError(f"DISTINCT or * in a call of {name}")
        args = [self.expr(a, scope) for a in e.args]
        sqls = [a[0] for a in args]
        types = [a[1] for a in args]
        joined = ", ".join(sqls)
        if name in _STRING_FNS:
            return f"{name}({joined})", "string"
        if name == "length":
            return f"CAST(length({joined}) AS BIGINT)", "int"
        if name == "strpos":
            return f"CAST(strpos({joined}) AS BIGINT)", "int"
        if name == "concat":
            return "concat(" + ", ".join(_text(s, t) for s, t in args) + ")", "string"
        if name == "substr":
            return f"pg_substr{len(args)}({joined})", "string"
        if name in ("coalesce", "nullif", "greatest", "least"):
            typ = types[0] if name == "nullif" else unify(types)
            return f"{name}({joined})", typ
        if name == "abs":
            return f"abs({joined})", types[0]
        if name in ("floor", "ceil"):
            if types[0] == "int":
                return sqls[0], "int"
            return f"{name}(CAST({sqls[0]} AS DOUBLE))", "float"
        if name == "sign":
            typ = "int" if types[0] == "int" else "float"
            return f"CAST(sign({sqls[0]}) AS {DUCKDB_TYPES[typ]})", typ
        if name == "round":
            digits = sqls[1] if len(sqls) > 1 else "0"
            if types[0] == "int":
                return f"pg_round_int({sqls[0]}, {digits})", "int"
            return f"pg_round_float(CAST({sqls[0]} AS DOUBLE), {digits})", "float"
        if name in _FLOAT_FNS:
            return f"{_FLOAT_FNS[name]}(CAST({sqls[0]} AS DOUBLE))", "float"
        if name == "power":
            return f"pow(CAST({sqls[0]} AS DOUBLE), CAST({sqls[1]} AS DOUBLE))", "float"
        raise NotImplementedError(f"function {name}")

    def _aggregate(self, e: ast.FuncCall, scope: Scope) -> tuple[str, str]:
        name = e.name.lower()
        if e.star:
            return "count(*)", "int"
        (arg,) = e.args
        sql, typ = self.expr(arg, scope)
        if typ == "null":
            typ = "int"
        d = "DISTINCT " if e.distinct else ""
        if name == "count":
            return f"count({d}{sql})", "int"
        if name == "sum":
            if typ == "int":
                return f"CAST(sum({d}{sql}) AS BIGINT)", "int"
            return f"sum({d}{sql})", typ
        if name == "avg":
            return f"avg({d}CAST({sql} AS DOUBLE))", "float"
        return f"{name}({d}{sql})", typ


def _text(sql: str, typ: str) -> str:
    """PostgreSQL's text form of a value (used by ``||``, concat and CAST to string)."""
    if typ == "float":
        return f"pg_float_text({sql})"
    if typ == "bool":
        return f"(CASE WHEN {sql} THEN 'true' WHEN NOT {sql} THEN 'false' END)"
    if typ == "string":
        return sql
    return f"CAST({sql} AS VARCHAR)"


def _stream_op_of(q: ast.Query, factory: LeafFactory) -> str | None:
    return output_op(q, factory.is_stream_name)[0]


def has_subquery(e: object) -> bool:
    return any(isinstance(n, QUERY_TYPES) for n in walk(e, into_queries=True) if n is not e)
