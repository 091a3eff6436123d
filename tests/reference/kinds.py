"""Which queries are streams: the default-Istream rule of docs/semantics.md, on the AST."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterator

from . import cql_ast as ast

__all__ = [
    "AGGREGATES",
    "children",
    "from_leaves",
    "has_aggregate",
    "output_op",
    "walk",
]

AGGREGATES = frozenset({"count", "sum", "avg", "min", "max"})
QUERY_TYPES = (ast.Select, ast.SetOp, ast.RelToStream)


def children(node: object) -> Iterator[object]:
    """The AST nodes directly inside `node` (tuples flattened)."""
    if not dataclasses.is_dataclass(node):
        return
    for f in dataclasses.fields(node):
        yield from _flatten(getattr(node, f.name))


def _flatten(value: object) -> Iterator[object]:
    if isinstance(value, tuple):
        for v in value:
            yield from _flatten(v)
    elif dataclasses.is_dataclass(value):
        yield value


def walk(node: object, into_queries: bool = False) -> Iterator[object]:
    """`node` and everything below it; subqueries only when `into_queries`."""
    yield node
    for child in children(node):
        if isinstance(child, QUERY_TYPES) and not into_queries:
            continue
        yield from walk(child, into_queries)


def has_aggregate(expr: object) -> bool:
    """Does `expr` call an aggregate (not counting those inside subqueries)?"""
    return any(isinstance(n, ast.FuncCall) and n.name in AGGREGATES for n in walk(expr, False))


def from_leaves(items: tuple[ast.FromItem, ...]) -> Iterator[ast.TableRef | ast.SubqueryRef]:
    """The tables and subqueries of a FROM list, joins flattened, left to right."""
    for item in items:
        if isinstance(item, ast.JoinRef):
            yield from from_leaves((item.left, item.right))
        else:
            yield item


def _is_aggregation(select: ast.Select) -> bool:
    return (
        bool(select.group_by)
        or select.having is not None
        or any(has_aggregate(i.expr) for i in select.items)
    )


def default_istream(query: ast.Query, is_stream_name: Callable[[str], bool]) -> bool:
    """Does `query` (without an explicit Istream/Dstream/Rstream) get Istream by default?"""
    if isinstance(query, ast.SetOp):
        return default_istream(query.left, is_stream_name) or default_istream(
            query.right, is_stream_name
        )
    if isinstance(query, ast.RelToStream) or query.stream_op is not None:
        raise NotImplementedError("Istream/Dstream/Rstream inside a set operation")
    if _is_aggregation(query):
        return False
    for leaf in from_leaves(query.from_):
        if leaf.window is not None:
            continue
        if isinstance(leaf, ast.TableRef) and is_stream_name(leaf.name):
            return True
        if isinstance(leaf, ast.SubqueryRef) and output_op(leaf.query, is_stream_name)[0]:
            return True
    return False


def output_op(
    query: ast.Query, is_stream_name: Callable[[str], bool]
) -> tuple[str | None, ast.Query]:
    """(relation-to-stream operator or None, the query computing the relation it applies to).

    None means the query is relation-valued."""
    if isinstance(query, ast.RelToStream):
        inner = query.query
        if isinstance(inner, ast.RelToStream) or (
            isinstance(inner, ast.Select) and inner.stream_op is not None
        ):
            raise NotImplementedError("a relation-to-stream operator applied to a stream")
        return query.op, inner
    if isinstance(query, ast.Select) and query.stream_op is not None:
        return query.stream_op, dataclasses.replace(query, stream_op=None)
    if default_istream(query, is_stream_name):
        return "istream", query
    return None, query
