"""The reference evaluator's own CQL syntax tree: frozen dataclasses built by `cql_parser`.

Separate from the engine's `cq_service.cql.ast` so that a parser bug in the engine cannot hide
from the property tests. Names are kept as written (resolved case-insensitively later);
keywords are normalised: function names to lower case, ``!=`` to ``<>``, AND/OR/NOT to
``and``/``or``/``not``, set operators and stream operators to lower case, type names to the
schema types (``int``, ``float``, ``string``, ``bool``, ``timestamp``), duration units to
``millisecond`` … ``day`` (None: the pipeline's time_unit). No source positions: the reference
only ever reads queries the engine accepted.
"""

from __future__ import annotations

from dataclasses import dataclass

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

# ------------------------------------------------------------------------------- expressions


@dataclass(frozen=True)
class Column:
    name: str
    table: str | None = None


@dataclass(frozen=True)
class Star:
    """``*`` or ``t.*`` in a select list."""

    table: str | None = None


@dataclass(frozen=True)
class Literal:
    value: int | float | str | bool | None


@dataclass(frozen=True)
class UnaryOp:
    op: str  # "-", "+", "not"
    operand: Expr


@dataclass(frozen=True)
class BinaryOp:
    op: str  # + - * / % || = <> < <= > >= and or
    left: Expr
    right: Expr


@dataclass(frozen=True)
class IsNull:
    operand: Expr
    negated: bool = False


@dataclass(frozen=True)
class Between:
    operand: Expr
    low: Expr
    high: Expr
    negated: bool = False


@dataclass(frozen=True)
class InList:
    operand: Expr
    items: tuple[Expr, ...]
    negated: bool = False


@dataclass(frozen=True)
class InSubquery:
    operand: Expr
    query: Query
    negated: bool = False


@dataclass(frozen=True)
class Exists:
    query: Query
    negated: bool = False


@dataclass(frozen=True)
class Quantified:
    operand: Expr
    op: str  # a comparison operator
    quantifier: str  # "all" or "any" (SOME is ANY)
    query: Query


@dataclass(frozen=True)
class ScalarSubquery:
    query: Query


@dataclass(frozen=True)
class Like:
    operand: Expr
    pattern: Expr
    negated: bool = False
    case_insensitive: bool = False


@dataclass(frozen=True)
class Case:
    operand: Expr | None
    whens: tuple[tuple[Expr, Expr], ...]
    else_: Expr | None = None


@dataclass(frozen=True)
class Cast:
    operand: Expr
    type_name: str


@dataclass(frozen=True)
class FuncCall:
    """`name` lower case; ``COUNT(*)`` has ``star=True`` and no args."""

    name: str
    args: tuple[Expr, ...] = ()
    distinct: bool = False
    star: bool = False


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

# ------------------------------------------------------------------------------- windows


@dataclass(frozen=True)
class Duration:
    amount: int
    unit: str | None = None


@dataclass(frozen=True)
class RowsWindow:
    """``[Rows N]`` (`n` None: Unbounded), ``[Partition By … Rows N]``, inner ``Where``."""

    n: int | None
    partition_by: tuple[Column, ...] = ()
    where: Expr | None = None


@dataclass(frozen=True)
class RangeWindow:
    """``[Range T]`` (`size` None: Unbounded), ``Slide L``, ``[Now]``, inner ``Where``."""

    size: Duration | None
    slide: Duration | None = None
    where: Expr | None = None
    now: bool = False


Window = RowsWindow | RangeWindow

# ------------------------------------------------------------------------------- FROM items


@dataclass(frozen=True)
class TableRef:
    name: str
    alias: str | None = None
    window: Window | None = None
    sample: float | None = None


@dataclass(frozen=True)
class SubqueryRef:
    query: Query
    alias: str | None = None
    window: Window | None = None
    sample: float | None = None


@dataclass(frozen=True)
class JoinRef:
    """An inner join; `condition` None for CROSS JOIN."""

    left: FromItem
    right: FromItem
    condition: Expr | None = None


FromItem = TableRef | SubqueryRef | JoinRef

# ------------------------------------------------------------------------------- queries


@dataclass(frozen=True)
class SelectItem:
    expr: Expr
    alias: str | None = None


@dataclass(frozen=True)
class Select:
    """`stream_op` is the select-list form ``SELECT Istream(a, b) …``."""

    items: tuple[SelectItem, ...]
    from_: tuple[FromItem, ...]
    where: Expr | None = None
    group_by: tuple[Expr, ...] = ()
    having: Expr | None = None
    distinct: bool = False
    stream_op: str | None = None


@dataclass(frozen=True)
class SetOp:
    op: str  # "union", "except", "intersect"
    left: Query
    right: Query
    all: bool = False


@dataclass(frozen=True)
class RelToStream:
    op: str  # "istream", "dstream", "rstream"
    query: Query


Query = Select | SetOp | RelToStream
