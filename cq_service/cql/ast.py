"""The CQL abstract syntax tree: frozen dataclasses, each carrying the `Span` it was parsed from.

The parser (`cql.parser.parse_query`) produces these nodes; the binder turns them into a logical
plan. Nodes are plain data: passes build new nodes instead of changing old ones.

Identifiers are kept as written (the binder resolves them case-insensitively); keywords and
function names are normalised: function names to lower case, operators to the spellings below.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal as Lit

from cq_service.errors import Span

__all__ = [
    "Between",
    "BinaryOp",
    "Case",
    "Cast",
    "Column",
    "Duration",
    "Exists",
    "Expr",
    "FromItem",
    "FuncCall",
    "InList",
    "InSubquery",
    "IsNull",
    "JoinRef",
    "Like",
    "Literal",
    "Quantified",
    "Query",
    "RangeWindow",
    "RelToStream",
    "RowsWindow",
    "ScalarSubquery",
    "Select",
    "SelectItem",
    "SetOp",
    "Star",
    "SubqueryRef",
    "TableRef",
    "UnaryOp",
    "Window",
]

NO_SPAN = Span()

# ---------------------------------------------------------------------------------------------
# Expressions


@dataclass(frozen=True)
class Column:
    """A column reference: ``name`` or ``table.name``."""

    name: str
    table: str | None = None
    span: Span = field(default=NO_SPAN, compare=False)


@dataclass(frozen=True)
class Star:
    """``*`` or ``alias.*`` in a select list (also the argument of ``COUNT(*)``)."""

    table: str | None = None
    span: Span = field(default=NO_SPAN, compare=False)


@dataclass(frozen=True)
class Literal:
    """A constant. `value` is an int, float, str, bool or None (NULL)."""

    value: int | float | str | bool | None
    span: Span = field(default=NO_SPAN, compare=False)


@dataclass(frozen=True)
class UnaryOp:
    """``-x``, ``+x`` or ``NOT x``; `op` is ``"-"``, ``"+"`` or ``"not"``."""

    op: Lit["-", "+", "not"]
    operand: Expr
    span: Span = field(default=NO_SPAN, compare=False)


BinaryOperator = Lit[
    "+", "-", "*", "/", "%", "||", "=", "<>", "<", "<=", ">", ">=", "and", "or"
]


@dataclass(frozen=True)
class BinaryOp:
    """A binary operator. ``!=`` is normalised to ``<>``; AND/OR to ``and``/``or``."""

    op: BinaryOperator
    left: Expr
    right: Expr
    span: Span = field(default=NO_SPAN, compare=False)


@dataclass(frozen=True)
class IsNull:
    """``x IS NULL`` / ``x IS NOT NULL``."""

    operand: Expr
    negated: bool = False
    span: Span = field(default=NO_SPAN, compare=False)


@dataclass(frozen=True)
class Between:
    """``x [NOT] BETWEEN low AND high``."""

    operand: Expr
    low: Expr
    high: Expr
    negated: bool = False
    span: Span = field(default=NO_SPAN, compare=False)


@dataclass(frozen=True)
class InList:
    """``x [NOT] IN (a, b, ...)``."""

    operand: Expr
    items: tuple[Expr, ...]
    negated: bool = False
    span: Span = field(default=NO_SPAN, compare=False)


@dataclass(frozen=True)
class InSubquery:
    """``x [NOT] IN (SELECT ...)``."""

    operand: Expr
    query: Query
    negated: bool = False
    span: Span = field(default=NO_SPAN, compare=False)


@dataclass(frozen=True)
class Exists:
    """``[NOT] EXISTS (SELECT ...)``."""

    query: Query
    negated: bool = False
    span: Span = field(default=NO_SPAN, compare=False)


@dataclass(frozen=True)
class Quantified:
    """``x op ALL (SELECT ...)`` / ``x op ANY|SOME (SELECT ...)``; `quantifier` is ``all``/``any``."""

    operand: Expr
    op: Lit["=", "<>", "<", "<=", ">", ">="]
    quantifier: Lit["all", "any"]
    query: Query
    span: Span = field(default=NO_SPAN, compare=False)


@dataclass(frozen=True)
class ScalarSubquery:
    """``(SELECT ...)`` used as a value."""

    query: Query
    span: Span = field(default=NO_SPAN, compare=False)


@dataclass(frozen=True)
class Like:
    """``x [NOT] LIKE pattern`` (``ILIKE`` sets `case_insensitive`)."""

    operand: Expr
    pattern: Expr
    negated: bool = False
    case_insensitive: bool = False
    span: Span = field(default=NO_SPAN, compare=False)


@dataclass(frozen=True)
class Case:
    """``CASE [operand] WHEN w THEN t ... [ELSE e] END``."""

    operand: Expr | None
    whens: tuple[tuple[Expr, Expr], ...]
    else_: Expr | None = None
    span: Span = field(default=NO_SPAN, compare=False)


@dataclass(frozen=True)
class Cast:
    """``CAST(x AS type)`` or ``x::type``; `type_name` is normalised to a schema type name
    (``int``, ``float``, ``string``, ``bool``, ``timestamp``) by the parser."""

    operand: Expr
    type_name: str
    span: Span = field(default=NO_SPAN, compare=False)


@dataclass(frozen=True)
class FuncCall:
    """A function or aggregate call. `name` is lower case. ``COUNT(*)`` has ``star=True`` and no
    args. ``COALESCE``, ``NULLIF`` and the scalar functions arrive here too."""

    name: str
    args: tuple[Expr, ...] = ()
    distinct: bool = False
    star: bool = False
    span: Span = field(default=NO_SPAN, compare=False)


Expr = (
    Column
    | Star
    | Literal
    | UnaryOp
    | BinaryOp
    | IsNull
    | Between
    | InList
    | InSubquery
    | Exists
    | Quantified
    | ScalarSubquery
    | Like
    | Case
    | Cast
    | FuncCall
)

# ---------------------------------------------------------------------------------------------
# Windows


@dataclass(frozen=True)
class Duration:
    """A time length as written: `amount` in `unit` (``None`` = the pipeline's time_unit).

    Units are normalised to ``millisecond``, ``second``, ``minute``, ``hour``, ``day`` (plural
    and abbreviations accepted by the parser).
    """

    amount: int
    unit: str | None = None
    span: Span = field(default=NO_SPAN, compare=False)


@dataclass(frozen=True)
class RowsWindow:
    """``[Rows N]``, ``[Rows Unbounded]`` (`n` is None), ``[Partition By a, b Rows N]``, with an
    optional inner ``Where`` (applied before the window cutoff)."""

    n: int | None
    partition_by: tuple[Column, ...] = ()
    where: Expr | None = None
    span: Span = field(default=NO_SPAN, compare=False)


@dataclass(frozen=True)
class RangeWindow:
    """``[Range T]``, ``[Range T Slide L]``, ``[Now]`` (T = 0), ``[Range Unbounded]`` (`size` is
    None), with an optional inner ``Where``."""

    size: Duration | None
    slide: Duration | None = None
    where: Expr | None = None
    now: bool = False
    span: Span = field(default=NO_SPAN, compare=False)


Window = RowsWindow | RangeWindow

# ---------------------------------------------------------------------------------------------
# FROM items


@dataclass(frozen=True)
class TableRef:
    """A stream, relation or view named in FROM, with optional window, alias and Sample(p)."""

    name: str
    alias: str | None = None
    window: Window | None = None
    sample: float | None = None
    span: Span = field(default=NO_SPAN, compare=False)


@dataclass(frozen=True)
class SubqueryRef:
    """``(query) [window] alias [Sample(p)]`` in FROM."""

    query: Query
    alias: str | None = None
    window: Window | None = None
    sample: float | None = None
    span: Span = field(default=NO_SPAN, compare=False)


@dataclass(frozen=True)
class JoinRef:
    """``left [INNER] JOIN right ON condition`` or ``left CROSS JOIN right`` (`condition` None)."""

    left: FromItem
    right: FromItem
    condition: Expr | None = None
    span: Span = field(default=NO_SPAN, compare=False)


FromItem = TableRef | SubqueryRef | JoinRef

# ---------------------------------------------------------------------------------------------
# Queries


@dataclass(frozen=True)
class SelectItem:
    """One select-list entry; `expr` may be a `Star`."""

    expr: Expr
    alias: str | None = None
    span: Span = field(default=NO_SPAN, compare=False)


@dataclass(frozen=True)
class Select:
    """A SELECT block. `stream_op` holds the select-list form ``SELECT Istream(a, b) ...``
    (``istream``/``dstream``/``rstream``), None otherwise."""

    items: tuple[SelectItem, ...]
    from_: tuple[FromItem, ...]
    where: Expr | None = None
    group_by: tuple[Expr, ...] = ()
    having: Expr | None = None
    distinct: bool = False
    stream_op: Lit["istream", "dstream", "rstream"] | None = None
    span: Span = field(default=NO_SPAN, compare=False)


@dataclass(frozen=True)
class SetOp:
    """``left UNION|EXCEPT|INTERSECT [ALL] right``; `op` is lower case."""

    op: Lit["union", "except", "intersect"]
    left: Query
    right: Query
    all: bool = False
    span: Span = field(default=NO_SPAN, compare=False)


@dataclass(frozen=True)
class RelToStream:
    """``Istream(query)``, ``Dstream(query)``, ``Rstream(query)`` around a whole query."""

    op: Lit["istream", "dstream", "rstream"]
    query: Query
    span: Span = field(default=NO_SPAN, compare=False)


Query = Select | SetOp | RelToStream
