"""Name resolution: which FROM item and column a name refers to.

A `Scope` is the row a SELECT block sees: the fields of its FROM items laid end to end. Column
references resolve case-insensitively, qualified (``t.a``) or not (``a``, which must be
unambiguous). A scope may have a parent (the enclosing query, for correlated subqueries).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from cq_service.cql.logical import Field
from cq_service.errors import CQLError, Span

__all__ = ["Resolved", "Scope", "ScopeItem"]


@dataclass(frozen=True)
class ScopeItem:
    """One FROM item: its alias (None for an alias-less subquery), its fields, and where they
    start in the scope's row."""

    alias: str | None
    fields: tuple[Field, ...]
    offset: int


@dataclass(frozen=True)
class Resolved:
    """A resolved column: its index in the scope row and its field; `depth` is 0 for the
    scope itself, 1 for its parent, and so on."""

    index: int
    field: Field
    depth: int


@dataclass
class Scope:
    items: list[ScopeItem] = field(default_factory=list)
    parent: Scope | None = None

    @property
    def width(self) -> int:
        return sum(len(i.fields) for i in self.items)

    @property
    def fields(self) -> tuple[Field, ...]:
        return tuple(f for i in self.items for f in i.fields)

    def add(self, alias: str | None, fields: tuple[Field, ...], span: Span) -> ScopeItem:
        if alias is not None and self.item(alias) is not None:
            raise CQLError(f"table name '{alias}' is used twice in FROM", span)
        item = ScopeItem(alias, fields, self.width)
        self.items.append(item)
        return item

    def item(self, alias: str) -> ScopeItem | None:
        low = alias.lower()
        for it in self.items:
            if it.alias is not None and it.alias.lower() == low:
                return it
        return None

    def item_of(self, index: int) -> int:
        """Position in `items` of the FROM item holding column `index`."""
        for k, it in enumerate(self.items):
            if it.offset <= index < it.offset + len(it.fields):
                return k
        raise IndexError(index)

    def resolve(self, name: str, table: str | None, span: Span) -> Resolved:
        """Find a column here or, failing that, in the enclosing scopes."""
        scope: Scope | None = self
        depth = 0
        while scope is not None:
            found = scope._lookup(name, table, span)
            if found is not None:
                index, fld = found
                return Resolved(index, fld, depth)
            scope = scope.parent
            depth += 1
        shown = f"{table}.{name}" if table else name
        if table is not None and self._has_alias(table) is False:
            raise CQLError(f"unknown table '{table}' in column reference '{shown}'", span)
        raise CQLError(f"unknown column '{shown}'", span)

    def _has_alias(self, table: str) -> bool:
        scope: Scope | None = self
        while scope is not None:
            if scope.item(table) is not None:
                return True
            scope = scope.parent
        return False

    def _lookup(self, name: str, table: str | None, span: Span) -> tuple[int, Field] | None:
        low = name.lower()
        if table is not None:
            it = self.item(table)
            if it is None:
                return None
            for k, f in enumerate(it.fields):
                if f.name.lower() == low:
                    return it.offset + k, f
            raise CQLError(f"table '{table}' has no column '{name}'", span)
        hits = [
            (it.offset + k, f)
            for it in self.items
            for k, f in enumerate(it.fields)
            if f.name.lower() == low
        ]
        if len(hits) > 1:
            raise CQLError(f"column reference '{name}' is ambiguous; qualify it", span)
        return hits[0] if hits else None
