"""A pipeline's k-constraints against its plan (issue 26): the checks that need the bound
queries, and the lines `cq explain` shows.

Checks, each at the constraint's FILE:LINE:COL: a view's constraints need the view to be a
stream and `attribute` (and a referenced view's column) to be one of its columns; a ``rids``
constraint must apply to a two-way join of some query (its column joined by equality to the
referenced one, each side reading its stream through windows, selections and projections that
keep the column), else it is refused as applying to no join.
"""

from __future__ import annotations

from collections.abc import Sequence

from cq_service.cql import logical as L
from cq_service.engine.cluster_constraints import partition_constraint
from cq_service.engine.join_constraints import declared, join_constraint
from cq_service.errors import SpecError
from cq_service.spec.model import ConstraintSpec, PipelineSpec

__all__ = ["constraint_errors", "explain_constraints"]


def constraint_errors(
    spec: PipelineSpec, views: Sequence[object], nodes: Sequence[object]
) -> list[SpecError]:
    """The problems of the pipeline's constraints; `views` are the bound queries (name, plan,
    is_stream, columns), `nodes` the plan's nodes (each with an `op`)."""
    errors: list[SpecError] = []
    bound = {v.name.lower(): v for v in views}
    for name, q in spec.queries.items():
        v = bound.get(name.lower())
        if not q.constraints or v is None:
            continue
        columns = [c.lower() for c in v.columns]
        if not v.is_stream:
            errors.append(
                SpecError(
                    f"query '{name}': constraints are promises of a stream, but its result is "
                    "a relation",
                    q.constraints[0].span,
                )
            )
            continue
        for c in q.constraints:
            if c.attribute.lower() not in columns:
                errors.append(
                    SpecError(
                        f"query '{name}': constraint on {c.attribute!r}, which is not one of its "
                        f"columns ({', '.join(v.columns)})",
                        c.span,
                    )
                )
    for owner, constraints in declared(spec.streams, spec.queries).items():
        for c in constraints:
            if c.references is None:
                continue
            target = bound.get(c.references[0].lower())
            if target is not None and c.references[1].lower() not in [
                x.lower() for x in target.columns
            ]:
                errors.append(
                    SpecError(
                        f"{owner}: rids references {c.references[0]}.{c.references[1]}: "
                        "no such column",
                        c.span,
                    )
                )
    if errors:
        return errors
    used = {id(found[1]) for found in _uses(spec, nodes)}
    for constraints in declared(spec.streams, spec.queries).values():
        for c in constraints:
            if c.kind == "rids" and id(c) not in used:
                ref = f"{c.references[0]}.{c.references[1]}" if c.references else "?"
                errors.append(
                    SpecError(
                        f"rids on {c.attribute} -> {ref} applies to no join: no query joins "
                        f"{c.attribute} = {ref} reading both streams (through windows, selections "
                        "and projections that keep the columns)",
                        c.span,
                    )
                )
    return errors


def _uses(spec: PipelineSpec, nodes: Sequence[object]) -> list[tuple[int, ConstraintSpec, str]]:
    """(node id, constraint, description) for each join or partitioned window that uses a
    declared constraint."""
    d = declared(spec.streams, spec.queries)
    out = []
    for n in nodes:
        op = n.op
        if isinstance(op, L.Join):
            found = join_constraint(op, d)
            if found is not None:
                out.append((n.id, found[1], "join drops state by " + found[0].describe()))
        elif isinstance(op, L.WindowOp):
            part = partition_constraint(op, d)
            if part is not None:
                desc = "partitioned window forgets closed partitions by " + part[0].describe()
                out.append((n.id, part[1], desc))
    return out


def explain_constraints(spec: PipelineSpec, nodes: Sequence[object]) -> list[str]:
    """`cq explain`'s constraint lines: each join that uses one, and each declaration."""
    d = declared(spec.streams, spec.queries)
    if not d:
        return []
    lines = ["k-constraints:"]
    for owner, entity in [*spec.streams.items(), *spec.queries.items()]:
        for c in entity.constraints:
            lines.append(f"  {owner}: {c.describe()}")
    for node_id, _, desc in _uses(spec, nodes):
        lines.append(f"  #{node_id} {desc}")
    kinds = {c.kind for cs in d.values() for c in cs}
    if "oa" in kinds:
        lines.append("  (oa is declared only: no operator reduces state by it yet)")
    return lines
