"""Stored relations: changes (ts, op, row) appended to table ``relation_rows`` and read back
in arrival order or in time order. A row with no pipeline is shared with every pipeline; one
with a pipeline is seen by that pipeline only."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from sqlalchemy import and_, func, or_, select

from cq_service.catalog import models as m
from cq_service.catalog.exceptions import CatalogInputError
from cq_service.catalog.records import RelationRowRecord
from cq_service.catalog.statements import Transactions
from cq_service.catalog.validation import int64_or_none, json_value

__all__ = ["StoredRelations"]


class StoredRelations:
    """The catalog's methods for stored relations (mixed into `Catalog`)."""

    def insert_relation_rows(
        self: Transactions,
        relation: str,
        rows: Sequence[tuple[int, str | int, Mapping[str, Any]]],
        pipeline: str | None = None,
    ) -> int:
        """Append changes (ts, op, row) to a stored relation; op is ``+``/``-`` (or +1/-1).
        `pipeline` None shares them with every pipeline. Returns how many were stored."""
        values = [_relation_value(relation, pipeline, i, r) for i, r in enumerate(rows)]
        if not values:
            return 0
        with self._tx() as s:
            s.execute(m.RelationRow.__table__.insert(), values)
        return len(values)

    def relation_rows(
        self: Transactions,
        relation: str,
        after_id: int = 0,
        limit: int = 10_000,
        *,
        pipeline: str | None = None,
    ) -> list[RelationRowRecord]:
        """The changes with id > `after_id`, in id (arrival) order: page by passing the last id.

        `pipeline` None: every row of the relation; a name: what that pipeline sees (the shared
        rows and its own)."""
        stmt = (
            _rows_select(relation, pipeline)
            .where(m.RelationRow.id > after_id)
            .order_by(m.RelationRow.id)
            .limit(limit)
        )
        with self._tx() as s:
            return [_row(r) for r in s.execute(stmt)]

    def relation_rows_by_time(
        self: Transactions,
        relation: str,
        *,
        after_id: int = 0,
        up_to_id: int | None = None,
        after: tuple[int, int] | None = None,
        limit: int = 10_000,
        pipeline: str | None = None,
    ) -> list[RelationRowRecord]:
        """The changes with `after_id` < id <= `up_to_id`, ordered by (ts, id), starting after
        the (ts, id) key `after`: page by passing the last row's (ts, id)."""
        stmt = _rows_select(relation, pipeline).where(m.RelationRow.id > after_id)
        if up_to_id is not None:
            stmt = stmt.where(m.RelationRow.id <= up_to_id)
        if after is not None:
            ts, row_id = after
            stmt = stmt.where(
                or_(
                    m.RelationRow.ts > ts,
                    and_(m.RelationRow.ts == ts, m.RelationRow.id > row_id),
                )
            )
        stmt = stmt.order_by(m.RelationRow.ts, m.RelationRow.id).limit(limit)
        with self._tx() as s:
            return [_row(r) for r in s.execute(stmt)]

    def last_relation_row_id(
        self: Transactions, relation: str, *, pipeline: str | None = None
    ) -> int:
        """The largest row id of the relation (as `pipeline` sees it), 0 if it has none."""
        stmt = select(func.max(m.RelationRow.id)).where(m.RelationRow.relation == relation)
        if pipeline is not None:
            stmt = stmt.where(_visible_to(pipeline))
        with self._tx() as s:
            return int(s.scalar(stmt) or 0)


def _relation_value(
    relation: str, pipeline: str | None, index: int, change: tuple[int, Any, Mapping[str, Any]]
) -> dict[str, Any]:
    try:
        ts, op, row = change
    except (TypeError, ValueError):
        raise CatalogInputError(f"row {index}: expected (ts, op, row), got {change!r}") from None
    op_text = {"+": "+", "-": "-", 1: "+", -1: "-"}.get(op) if not isinstance(op, bool) else None
    if op_text is None:
        raise CatalogInputError(f"row {index}: op must be '+' or '-', not {op!r}")
    if not isinstance(row, Mapping):
        raise CatalogInputError(f"row {index}: the row must be a JSON object, not {row!r}")
    return {
        "relation": relation,
        "pipeline": pipeline,
        "ts": int64_or_none(f"row {index}: ts", ts),
        "op": op_text,
        "row": json_value(f"row {index}", dict(row)),
    }


def _visible_to(pipeline: str) -> Any:
    return or_(m.RelationRow.pipeline.is_(None), m.RelationRow.pipeline == pipeline)


def _rows_select(relation: str, pipeline: str | None) -> Any:
    stmt = select(m.RelationRow.id, m.RelationRow.ts, m.RelationRow.op, m.RelationRow.row).where(
        m.RelationRow.relation == relation
    )
    return stmt if pipeline is None else stmt.where(_visible_to(pipeline))


def _row(r: Any) -> RelationRowRecord:
    return RelationRowRecord(int(r.id), int(r.ts), str(r.op), dict(r.row))
