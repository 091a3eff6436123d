"""Output column names (DESIGN §5, docs/semantics.md "Output"): the name each select item asks
for, and the unique names of a query's columns."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

from cq_service.cql import ast
from cq_service.cql.scope import Scope

__all__ = ["OutputName", "output_name", "unique_names"]


@dataclass(frozen=True)
class OutputName:
    """The name a select item asks for, the table alias it came from, and whether it is a
    table column (only those are qualified with their alias when names collide)."""

    name: str
    table: str | None
    from_column: bool


def output_name(item: ast.SelectItem, scope: Scope) -> OutputName:
    """The name a select item asks for (its alias, column, function, ...)."""
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


def unique_names(names: list[OutputName]) -> list[str]:
    """Make names unique: qualify colliding table columns as ``alias.name``, then suffix any
    remaining collisions with ``_2``, ``_3``, … (the first keeps its name).

    >>> unique_names([OutputName("a", "S", True), OutputName("a", "T", True)])
    ['S.a', 'T.a']
    """
    counts = Counter(n.name for n in names)
    out = [
        f"{n.table}.{n.name}" if counts[n.name] > 1 and n.from_column and n.table else n.name
        for n in names
    ]
    seen: Counter[str] = Counter()
    result = []
    taken = set(out)
    for name in out:
        seen[name] += 1
        if seen[name] == 1:
            result.append(name)
            continue
        k = seen[name]
        candidate = f"{name}_{k}"
        while candidate in taken:
            k += 1
            candidate = f"{name}_{k}"
        taken.add(candidate)
        result.append(candidate)
    return result
