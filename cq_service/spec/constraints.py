"""The `constraints:` of streams and views (issue 26): k-constraints, checked with positions.

Each entry is ``{kind: rids | ca | oa, attribute: COLUMN, k: N | auto}``, and for ``rids``
``references: Stream.column`` (the one side of the many-one join). The schema checks the shape;
here: `attribute` is a column of the stream (of a view: checked once its query is bound, by
engine/join_constraints.py), ``references`` exactly with ``rids``, naming another stream,
relation or view and, for a stream or relation, one of its columns; one constraint of a kind
per column.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from cq_service.errors import Span
from cq_service.spec.model import ConstraintSpec, FieldSpec, StreamSpec
from cq_service.spec.positions import Path, YamlDocument

__all__ = ["build_constraints", "check_references"]

ErrorSink = Callable[[str, Span], None]


def build_constraints(
    doc: YamlDocument,
    raw: Sequence[Mapping[str, Any]],
    path: Path,
    what: str,
    schema: tuple[FieldSpec, ...] | None,
    error: ErrorSink,
) -> tuple[ConstraintSpec, ...]:
    """The constraints at `path` of `what` (a stream's, or a view's when `schema` is None)."""
    out = []
    seen: set[tuple[str, str]] = set()
    columns = None if schema is None else {f.name.lower(): f.name for f in schema}
    for i, entry in enumerate(raw):
        at: Path = (*path, i)
        kind, on = entry["kind"], entry["attribute"]
        if columns is not None and on.lower() not in columns:
            error(
                f"{what}: constraint on {on!r}, which is not in its schema "
                f"({', '.join(columns.values()) or 'no columns'})",
                doc.span((*at, "attribute")),
            )
            continue
        ref = entry.get("references")
        if kind == "rids" and ref is None:
            error(f"{what}: a rids constraint needs references: Stream.column", doc.span(at))
            continue
        if kind != "rids" and ref is not None:
            error(
                f"{what}: references applies to rids only, not {kind}",
                doc.span((*at, "references"), key=True),
            )
            continue
        if (kind, on.lower()) in seen:
            error(f"{what}: a second {kind} constraint on {on!r}", doc.span(at))
            continue
        seen.add((kind, on.lower()))
        k = entry["k"]
        if k != "auto" and (isinstance(k, str) or k < 0):
            error(f"{what}: k must be an integer >= 0 or auto, got {k!r}", doc.span((*at, "k")))
            continue
        out.append(
            ConstraintSpec(
                kind=kind,
                attribute=columns[on.lower()] if columns is not None else on,
                k=None if k == "auto" else int(k),
                references=tuple(ref.split(".", 1)) if ref is not None else None,  # type: ignore[arg-type]
                span=doc.span(at),
            )
        )
    return tuple(out)


def check_references(
    owners: Mapping[str, tuple[ConstraintSpec, ...]],
    inputs: Mapping[str, StreamSpec],
    views: Sequence[str],
    error: ErrorSink,
) -> None:
    """Each rids constraint of `owners` (stream or view name → its constraints) names another
    input or view, and a column of an input's schema."""
    by_lower = {n.lower(): s for n, s in inputs.items()}
    view_names = {v.lower() for v in views}
    for owner, constraints in owners.items():
        for c in constraints:
            if c.references is None:
                continue
            target, column = c.references
            if target.lower() == owner.lower():
                error(f"{owner}: rids references its own stream ({target}.{column})", c.span)
            elif target.lower() in by_lower:
                names = [f.name.lower() for f in by_lower[target.lower()].schema]
                if column.lower() not in names:
                    error(f"{owner}: rids references {target}.{column}: no such column", c.span)
            elif target.lower() not in view_names:
                error(
                    f"{owner}: rids references {target}.{column}: no stream, relation or "
                    f"query named {target!r}",
                    c.span,
                )
