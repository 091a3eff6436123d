"""Compiling a pipeline: spec -> CQL -> plan.

`compile_pipeline` checks everything a pipeline file says (the spec, then every query in
dependency order) and returns the physical plan. Errors carry the pipeline file's line and
column. Running it is `runner.run_pipeline`.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from cq_service.adaptive.estimate import Observed
from cq_service.adaptive.join_choice import join_chooser
from cq_service.cql import ast
from cq_service.cql.bind_window import duration_units
from cq_service.cql.binder import BoundQuery, Catalog, bind_query
from cq_service.cql.logical import Field, Source
from cq_service.cql.parser import parse_query
from cq_service.engine.constraint_plan import constraint_errors
from cq_service.errors import CQError, CQLError, Span, SpecError
from cq_service.plan.columns import prune_source_columns
from cq_service.plan.knobs import adjustable_windows
from cq_service.plan.mjoins import multiway_joins
from cq_service.plan.panes import fuse_panes
from cq_service.plan.physical import PhysicalNode, PhysicalPlan
from cq_service.plan.planner import plan_queries
from cq_service.plan.shared_joins import share_window_joins
from cq_service.spec import load_pipeline
from cq_service.spec.exceptions import SpecErrors
from cq_service.spec.model import PipelineSpec, QuerySpec
from cq_service.spec.sys_stream import SYS_STREAM, with_sys_stream

__all__ = ["CompiledPipeline", "compile_pipeline", "load_and_compile", "run_plan", "subset"]


@dataclass
class CompiledPipeline:
    spec: PipelineSpec
    queries: list[BoundQuery]
    plan: PhysicalPlan


def run_plan(compiled: CompiledPipeline, observed: Observed | None = None) -> PhysicalPlan:
    """The plan `cq run` runs: aggregates over sliding windows fused into paned ones
    (plan/panes.py), trees of joins made n-way MJoins (plan/mjoins.py, per `resources.join`;
    under ``auto`` as adaptive/join_choice.py's cost model chooses, from `observed` statistics
    or defaults), then joins that differ only in their windows shared (plan/shared_joins.py,
    per `resources.shared_join`)."""
    resources = compiled.spec.resources
    choose = join_chooser(observed, compiled.spec.time_unit_ns / 1e9)
    plan = multiway_joins(fuse_panes(compiled.plan), resources.join, choose)
    shared = share_window_joins(plan, resources.shared_join)
    return shared if shared is plan else replace(shared, notes=list(plan.notes))


def load_and_compile(path: str | Path) -> CompiledPipeline:
    """Load and check a pipeline file; raises `SpecErrors` listing every problem."""
    return compile_pipeline(load_pipeline(path))


def compile_pipeline(spec: PipelineSpec) -> CompiledPipeline:
    errors: list[CQError] = []
    parsed: dict[str, ast.Query] = {}
    for q in spec.queries.values():
        try:
            parsed[q.name] = parse_query(q.cql)
        except CQLError as e:
            errors.append(_in_file(e, q, spec))
    spec = _with_sys_stream_if_read(spec, parsed)
    order = _dependency_order(spec, parsed, errors)
    catalog = Catalog(spec.time_unit_ns)
    for s in list(spec.streams.values()) + list(spec.relations.values()):
        fields = tuple(Field(f.name, f.type, s.name) for f in s.schema)
        catalog.sources[s.name.lower()] = Source(s.name, fields, s.is_relation, s.span)
    bound: dict[str, BoundQuery] = {}
    for name in order:
        q = spec.queries[name]
        try:
            bq = bind_query(parsed[name], catalog, name)
        except CQLError as e:
            errors.append(_in_file(e, q, spec))
            continue
        qos_errors = _qos_errors(q, parsed[name], spec)
        errors.extend(qos_errors)
        if not qos_errors:
            bq = replace(bq, plan=adjustable_windows(bq.plan, name, q.qos))
        bound[name] = bq
        catalog.views[name.lower()] = bq
    if errors:
        errors.sort(key=lambda e: (e.span.line, e.span.col) if e.span else (0, 0))
        raise SpecErrors(errors, file=spec.path)
    queries = [bound[q] for q in spec.queries if q in bound]
    plan = plan_queries([(bq, spec.queries[bq.name].sink) for bq in queries])
    constraint_problems = constraint_errors(spec, queries, plan.nodes)  # issue 26
    if constraint_problems:
        raise SpecErrors(constraint_problems, file=spec.path)
    _add_unread_sources(plan, catalog)
    # Late elements sent to the dead letter carry every column: read them all.
    dead_lettered = {s.name for s in spec.streams.values() if s.late == "dead_letter"}
    # A stream whose records carry heartbeats reads the heartbeat field.
    heartbeats = {s.name: [s.heartbeat[0]] for s in spec.streams.values() if s.heartbeat}
    plan = prune_source_columns(plan, keep_all=dead_lettered, keep=heartbeats)
    return CompiledPipeline(spec, queries, plan)


def subset(spec: PipelineSpec, names: list[str]) -> PipelineSpec:
    """The pipeline with only the queries `names`, the views they read (transitively) and the
    streams and relations those read: what one of its queries would be as a pipeline of its own.
    Raises `KeyError` for an unknown query and `CQLError` for a query that does not parse."""
    by_lower = {n.lower(): n for n in spec.queries}
    keep: dict[str, None] = {}
    inputs: set[str] = set()
    todo = [by_lower[n.lower()] for n in names]
    while todo:
        name = todo.pop()
        if name in keep:
            continue
        keep[name] = None
        refs: set[str] = set()
        _referenced(parse_query(spec.queries[name].cql), refs)
        todo.extend(by_lower[r] for r in refs if r in by_lower)
        inputs |= refs
    return replace(
        spec,
        streams={n: s for n, s in spec.streams.items() if n.lower() in inputs},
        relations={n: s for n, s in spec.relations.items() if n.lower() in inputs},
        queries={n: q for n, q in spec.queries.items() if n in keep},
    )


def _add_unread_sources(plan: PhysicalPlan, catalog: Catalog) -> None:
    """Every declared input is read, used or not: the end of input is the largest timestamp
    on any of the pipeline's sources (docs/semantics.md)."""
    present = {n.op for n in plan.nodes if isinstance(n.op, Source)}
    for src in catalog.sources.values():
        if src not in present:
            plan.nodes.insert(0, PhysicalNode(-1, src, [], []))
    # Renumber so ids are positions again.
    remap = {id(n): k for k, n in enumerate(plan.nodes)}
    old_ids = {n.id: remap[id(n)] for n in plan.nodes if n.id >= 0}
    for n in plan.nodes:
        n.inputs = [old_ids[i] for i in n.inputs]
    for n in plan.nodes:
        n.id = remap[id(n)]
    for s in plan.sinks:
        s.input = old_ids[s.input]


def _in_file(e: CQLError, q: QuerySpec, spec: PipelineSpec) -> CQError:
    """A CQL error re-positioned at the query text's place in the pipeline file."""
    if e.span is not None and e.span.offset is not None:
        line, col = q.position_of(e.span.offset)
    elif e.span is not None and e.span != Span():
        line, col = q.position_of(0)
    else:
        line, col = q.span.line, q.span.col
    shown = q.span.file or spec.path
    return CQLError(f"query '{q.name}': {e.message}", Span(line, col, file=shown), file=shown)


def _qos_errors(q: QuerySpec, query: ast.Query, spec: PipelineSpec) -> list[CQError]:
    """A query's window ranges against its Range windows: each range names windows the
    query has, and each window as written lies in its range."""
    if not q.qos.windows:
        return []
    refs: list[ast.TableRef | ast.SubqueryRef] = []
    _table_refs(query, refs, subqueries=True)
    windows: list[tuple[str, int]] = []  # (FROM item as written, size in time_unit)
    sized: dict[str, tuple[str, int]] = {}  # FROM name or alias (lower case) -> its window
    for ref in refs:
        w = ref.window
        if isinstance(w, ast.RangeWindow) and w.size is not None and not w.now:
            names = [ref.alias] if isinstance(ref, ast.SubqueryRef) else [ref.name, ref.alias]
            shown = next((n for n in reversed(names) if n), "a subquery")
            windows.append((shown, duration_units(w.size, spec.time_unit_ns)))
            for name in names:
                if name:
                    sized[name.lower()] = windows[-1]
    out: list[CQError] = []
    where, unit = q.qos.span, spec.time_unit
    for r in q.qos.windows:
        if r.stream is None:
            targets = windows
            if not targets:
                out.append(SpecError(f"query '{q.name}': qos.window needs a Range window of a "
                                     "given size in the query to adjust", where))
        elif r.stream.lower() in sized:
            targets = [sized[r.stream.lower()]]
        else:
            out.append(SpecError(f"query '{q.name}': qos.window names '{r.stream}', which is not "
                                 "a FROM item of the query with a Range window of a given size",
                                 where))
            continue
        for shown, size in targets:
            if not r.low <= size <= r.high:
                out.append(SpecError(f"query '{q.name}': the window of {shown} is {size} {unit}, "
                                     f"outside its qos range [{r.low}, {r.high}] {unit}", where))
    return out


def _table_refs(node: Any, out: list, subqueries: bool = False) -> None:
    """The TableRefs in `node` (and, with `subqueries`, the SubqueryRefs), in text order."""
    if isinstance(node, ast.TableRef) or (subqueries and isinstance(node, ast.SubqueryRef)):
        out.append(node)
    if isinstance(node, tuple):
        for x in node:
            _table_refs(x, out, subqueries)
        return
    for name in getattr(node, "__dataclass_fields__", None) or ():
        if name != "span":
            _table_refs(getattr(node, name), out, subqueries)


def _with_sys_stream_if_read(spec: PipelineSpec, parsed: dict[str, ast.Query]) -> PipelineSpec:
    """`spec` with the reserved stream SysStream among its streams when a query reads it."""
    refs: set[str] = set()
    for query in parsed.values():
        _referenced(query, refs)
    return with_sys_stream(spec) if SYS_STREAM.lower() in refs else spec


def _referenced(node: Any, out: set[str]) -> None:
    """The names (lower case) of the streams, relations and views `node` reads."""
    refs: list[ast.TableRef] = []
    _table_refs(node, refs)
    out.update(r.name.lower() for r in refs)


def _dependency_order(
    spec: PipelineSpec, parsed: dict[str, ast.Query], errors: list[CQError]
) -> list[str]:
    """Queries ordered so that every view comes before its readers; cycles are errors."""
    by_lower = {n.lower(): n for n in spec.queries}
    deps: dict[str, list[str]] = {}
    for name, q in parsed.items():
        refs: set[str] = set()
        _referenced(q, refs)
        deps[name] = [by_lower[r] for r in sorted(refs) if r in by_lower]
    order: list[str] = []
    state: dict[str, int] = {}  # 1 visiting, 2 done

    def visit(n: str, path: list[str]) -> None:
        if state.get(n) == 2:
            return
        if state.get(n) == 1:
            cycle = [*path[path.index(n) :], n]
            q = spec.queries[n]
            errors.append(
                CQLError(
                    f"views form a cycle: {' -> '.join(cycle)}",
                    Span(q.span.line, q.span.col, file=q.span.file or spec.path),
                    file=q.span.file or spec.path,
                )
            )
            return
        state[n] = 1
        for d in deps.get(n, []):
            if d in parsed:
                visit(d, [*path, n])
        state[n] = 2
        order.append(n)

    for n in spec.queries:
        if n in parsed:
            visit(n, [])
    return [n for n in order if n in parsed and not _in_cycle(n, deps)]


def _in_cycle(n: str, deps: dict[str, list[str]]) -> bool:
    seen: set[str] = set()
    stack = list(deps.get(n, []))
    while stack:
        d = stack.pop()
        if d == n:
            return True
        if d not in seen:
            seen.add(d)
            stack.extend(deps.get(d, []))
    return False


