"""The logical plan: bound (typed, position-resolved) expressions and relational operators.

The binder turns the AST into these nodes. They are frozen dataclasses, so two structurally
equal subtrees compare equal and hash alike: the planner shares them across queries by that.

Every operator node has a `schema` (its output fields) and `is_stream` (True when its output is a
stream of ``+`` elements, False when it is a relation carried as ``+``/``-`` deltas).
Column references inside an operator's expressions are positions into its input's schema (for
a join: the left schema followed by the right schema).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Literal as Lit

from cq_service.errors import Span
from cq_service.types import DataType

__all__ = [
    "AggCall",
    "Aggregate",
    "BExpr",
    "Call",
    "CaseExpr",
    "CastExpr",
    "Clock",
    "ColRef",
    "Const",
    "Distinct",
    "Field",
    "Filter",
    "Join",
    "LogicalOp",
    "MarkJoin",
    "Project",
    "RelToStream",
    "Sample",
    "SetOperation",
    "Source",
    "View",
    "WindowOp",
    "WindowSpec",
    "children",
    "with_children",
]

NO_SPAN = Span()

# ---------------------------------------------------------------------------------------------
# Bound expressions


@dataclass(frozen=True)
class ColRef:
    """The value of input column `index`."""

    index: int
    type: DataType
    name: str = field(default="", compare=False)


@dataclass(frozen=True)
class Const:
    """A constant of `type` (``None`` is NULL)."""

    value: int | float | str | bool | None
    type: DataType


@dataclass(frozen=True)
class Call:
    """A scalar function or operator applied to arguments; `type` is the result type.

    Function names (the expression compiler implements each, with PostgreSQL semantics):
    arithmetic ``add sub mul div mod neg``; comparison ``eq ne lt le gt ge``; logic ``and or
    not`` (three-valued); ``is_null is_not_null``; ``like ilike`` (args: value, pattern);
    ``concat_op`` (``||``, NULL if any NULL); ``in_list`` (args: value, item, item, ...; SQL IN
    semantics with NULLs); ``coalesce nullif greatest least``; math ``abs round floor ceil sqrt
    power exp ln log10 sign``; strings ``upper lower length substr trim ltrim rtrim replace
    strpos concat left right``.
    """

    fn: str
    args: tuple[BExpr, ...]
    type: DataType


@dataclass(frozen=True)
class CaseExpr:
    """Searched CASE: the first `whens` condition that is TRUE picks its result, else `else_`
    (NULL when absent). A simple CASE is bound to this form with ``eq`` conditions."""

    whens: tuple[tuple[BExpr, BExpr], ...]
    else_: BExpr | None
    type: DataType


@dataclass(frozen=True)
class CastExpr:
    """CAST(operand AS type)."""

    operand: BExpr
    type: DataType


BExpr = ColRef | Const | Call | CaseExpr | CastExpr

# ---------------------------------------------------------------------------------------------
# Operators


@dataclass(frozen=True)
class Field:
    """An output column: its name, type, and the table alias it came from (for ``alias.*`` and
    for making duplicate output names unique)."""

    name: str
    type: DataType
    table: str | None = None


@dataclass(frozen=True)
class Source:
    """A base stream or stored relation of the pipeline."""

    name: str
    schema: tuple[Field, ...]
    is_relation: bool = False
    span: Span = field(default=NO_SPAN, compare=False)

    @property
    def is_stream(self) -> bool:
        return not self.is_relation


@dataclass(frozen=True)
class View:
    """A named query read by another query: a query boundary.

    Its output is the view's result (consolidated per instant); the instants the reading query
    sees from it are those at which the view emits elements, not the view's own inputs'."""

    name: str
    input: LogicalOp
    fields: tuple[Field, ...]
    span: Span = field(default=NO_SPAN, compare=False)

    @property
    def schema(self) -> tuple[Field, ...]:
        return self.fields

    @property
    def is_stream(self) -> bool:
        return self.input.is_stream


@dataclass(frozen=True)
class WindowSpec:
    """A bound window. Durations are integers in the pipeline's time_unit.

    kind ``rows``: the last `n` tuples (per partition when `partition_by` is set);
    ``range``: tuples with timestamp in [τ − size, τ], refreshed at multiples of `slide` when
    set; ``unbounded``: everything so far. `where` filters tuples before the window cutoff.

    `granularity` g > 1 (Range only) is the granularity operator Γ(g) on the window's output:
    each tuple's validity interval [s, e) is rounded inward to [⌈s/g⌉·g, ⌊e/g⌋·g) and dropped
    when that is empty, so the relation changes only at multiples of g (docs/resources.md).
    """

    kind: Lit["rows", "range", "unbounded"]
    n: int | None = None
    size: int | None = None
    slide: int | None = None
    partition_by: tuple[int, ...] = ()
    where: BExpr | None = None
    granularity: int = 1


@dataclass(frozen=True)
class WindowOp:
    """Stream -> relation.

    `names` are the FROM item's alias and name (what a query's qos.window may call it).
    `owner` is the query whose QoS lets the resource manager change this window's size and
    granularity at run time; such a window is never shared with another query's plan, since
    adjusting it must not change anyone else's results."""

    input: LogicalOp
    window: WindowSpec
    span: Span = field(default=NO_SPAN, compare=False)
    names: tuple[str, ...] = field(default=(), compare=False)
    owner: str | None = None

    @property
    def schema(self) -> tuple[Field, ...]:
        return self.input.schema

    is_stream = False


@dataclass(frozen=True)
class Sample:
    """Bernoulli sample of a stream: each element is kept with probability `percent`/100.

    The decision for an element depends only on (`seed`, the element's position in its input),
    so a run is reproducible.
    """

    input: LogicalOp
    percent: float
    seed: int = 0
    span: Span = field(default=NO_SPAN, compare=False)

    @property
    def schema(self) -> tuple[Field, ...]:
        return self.input.schema

    @property
    def is_stream(self) -> bool:
        return self.input.is_stream


@dataclass(frozen=True)
class Filter:
    """Keep rows whose predicate is TRUE (NULL and FALSE drop)."""

    input: LogicalOp
    predicate: BExpr
    span: Span = field(default=NO_SPAN, compare=False)

    @property
    def schema(self) -> tuple[Field, ...]:
        return self.input.schema

    @property
    def is_stream(self) -> bool:
        return self.input.is_stream


@dataclass(frozen=True)
class Project:
    """Compute `exprs` over each row; output fields are `fields` (same length)."""

    input: LogicalOp
    exprs: tuple[BExpr, ...]
    fields: tuple[Field, ...]
    span: Span = field(default=NO_SPAN, compare=False)

    @property
    def schema(self) -> tuple[Field, ...]:
        return self.fields

    @property
    def is_stream(self) -> bool:
        return self.input.is_stream


@dataclass(frozen=True)
class Join:
    """Inner join of two relations on ``left_keys[i] = right_keys[i]`` (NULL keys never match)
    and a `residual` predicate over the concatenated row (left columns, then right columns).
    No keys and no residual is a cross product."""

    left: LogicalOp
    right: LogicalOp
    left_keys: tuple[BExpr, ...] = ()
    right_keys: tuple[BExpr, ...] = ()
    residual: BExpr | None = None
    span: Span = field(default=NO_SPAN, compare=False)

    @property
    def schema(self) -> tuple[Field, ...]:
        return self.left.schema + self.right.schema

    is_stream = False


@dataclass(frozen=True)
class MarkJoin:
    """Extend each left row with one column computed from the right relation (a subquery).

    For a left row l, the right rows considered are those r with ``left_keys(l) = right_keys(r)``
    and `correlation` TRUE over (l ++ r). Then, by `mode`:
    - ``exists``: TRUE if any such r, else FALSE;
    - ``any`` / ``all``: the three-valued OR / AND of ``compare(probe(l), r[0])`` with `op`
      (``x IN (subq)`` is ``any`` with ``=``; ``NOT IN`` is NOT of that);
    - ``scalar``: r[0] of the single such r; `default` (NULL when absent) when there is none
      (more than one is an error reported at run time and yields NULL).
    The output schema is the left schema plus `mark`.
    """

    left: LogicalOp
    right: LogicalOp
    mode: Lit["exists", "any", "all", "scalar"]
    mark: Field
    probe: BExpr | None = None
    op: str | None = None
    left_keys: tuple[BExpr, ...] = ()
    right_keys: tuple[BExpr, ...] = ()
    correlation: BExpr | None = None
    default: BExpr | None = None
    span: Span = field(default=NO_SPAN, compare=False)

    @property
    def schema(self) -> tuple[Field, ...]:
        return (*self.left.schema, self.mark)

    is_stream = False


@dataclass(frozen=True)
class AggCall:
    """An aggregate: `fn` in ``count sum avg min max``; `arg` None for COUNT(*)."""

    fn: Lit["count", "sum", "avg", "min", "max"]
    arg: BExpr | None
    distinct: bool
    type: DataType

    @property
    def keeps_values(self) -> bool:
        """Whether its state holds the values themselves (MIN, MAX, DISTINCT), not a sum."""
        return self.distinct or self.fn in ("min", "max")


@dataclass(frozen=True)
class Aggregate:
    """Group by `keys` and compute `aggs`; output is the key columns, then the aggregates.

    Without keys it is a global aggregate: exactly one row from the first instant the query
    sees (COUNT of nothing is 0, the others NULL). Inside a subquery that instant may come
    from inputs the aggregate does not read: `clock` then delivers those inputs' instants."""

    input: LogicalOp
    keys: tuple[BExpr, ...]
    aggs: tuple[AggCall, ...]
    fields: tuple[Field, ...]
    clock: LogicalOp | None = None
    span: Span = field(default=NO_SPAN, compare=False)

    @property
    def schema(self) -> tuple[Field, ...]:
        return self.fields

    is_stream = False


@dataclass(frozen=True)
class Clock:
    """The instants at which any of `inputs` has an element (no rows; ticks only)."""

    inputs: tuple[LogicalOp, ...]
    span: Span = field(default=NO_SPAN, compare=False)

    schema: tuple[Field, ...] = ()
    is_stream = True


@dataclass(frozen=True)
class Distinct:
    """Set semantics: each distinct row once while its multiplicity is positive."""

    input: LogicalOp
    span: Span = field(default=NO_SPAN, compare=False)

    @property
    def schema(self) -> tuple[Field, ...]:
        return self.input.schema

    is_stream = False


@dataclass(frozen=True)
class SetOperation:
    """UNION / EXCEPT / INTERSECT of two relations with the same column types.

    With `all` (bag semantics) a row's multiplicity is a+b, max(a−b, 0), min(a, b); without,
    the result is a set: present if a+b > 0, a > 0 and b = 0, a > 0 and b > 0.
    Output names come from the left input."""

    op: Lit["union", "except", "intersect"]
    all: bool
    left: LogicalOp
    right: LogicalOp
    span: Span = field(default=NO_SPAN, compare=False)

    @property
    def schema(self) -> tuple[Field, ...]:
        return self.left.schema

    is_stream = False


@dataclass(frozen=True)
class RelToStream:
    """Istream / Dstream / Rstream: relation -> stream."""

    op: Lit["istream", "dstream", "rstream"]
    input: LogicalOp
    span: Span = field(default=NO_SPAN, compare=False)

    @property
    def schema(self) -> tuple[Field, ...]:
        return self.input.schema

    is_stream = True


LogicalOp = (
    Source
    | View
    | WindowOp
    | Sample
    | Filter
    | Project
    | Join
    | MarkJoin
    | Aggregate
    | Clock
    | Distinct
    | SetOperation
    | RelToStream
)


def children(op: LogicalOp) -> tuple[LogicalOp, ...]:
    """The inputs of a logical operator, in port order (a view's input is its query's plan)."""
    if isinstance(op, Source):
        return ()
    if isinstance(op, Join | MarkJoin | SetOperation):
        return (op.left, op.right)
    if isinstance(op, Clock):
        return op.inputs
    if isinstance(op, Aggregate) and op.clock is not None:
        return (op.input, op.clock)
    return (op.input,)  # type: ignore[union-attr]


def with_children(op: LogicalOp, new: tuple[LogicalOp, ...]) -> LogicalOp:
    """`op` reading `new` (in `children` order) instead of its inputs."""
    if isinstance(op, Source):
        return op
    if isinstance(op, Join | MarkJoin | SetOperation):
        return replace(op, left=new[0], right=new[1])
    if isinstance(op, Clock):
        return replace(op, inputs=new)
    if isinstance(op, Aggregate) and op.clock is not None:
        return replace(op, input=new[0], clock=new[1])
    return replace(op, input=new[0])  # type: ignore[call-arg]
