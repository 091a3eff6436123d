"""NEXMark with k-constraints (issue 26 item 4; docs/linear-road.md, "NEXMark with
constraints"): each query whose join a promise of the generator's data applies to, run over the
same generated input without and with a `rids` constraint at the input's true k, reporting the
peak state both ways, their ratio, and whether the outputs are identical (they must be: k ≥ the
true k).

The promises (cq_service/io/nexmark.py): an auction's seller registered before it (its person
is the first event of the auction's block or of an earlier one), so RIDS(0) holds on
Auction.seller -> Person.id — q3 and q8 join on it; a bid names an auction already opened, and
its auction's closing (ClosedAuction, timestamped at `expires`) comes within k closings after the
bid or came before it — winning_bids, read by q4 and q6, joins on it. The true k of each is
computed from the generated input (`true_k`), so k is never guessed.

State is the query's operators' synopses (`state_size`, sampled after every scheduling step;
sources' reorder buffers left out: they are input, the same both ways), and the join's own.
"""

from __future__ import annotations

import tempfile
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

from cq_service.bench.cq_nexmark import NEXMARK_PIPELINE
from cq_service.spec.model import ConstraintSpec, PipelineSpec, SinkSpec

__all__ = ["CASES", "QUICK_EVENTS", "Case", "bench", "true_k"]

QUICK_EVENTS = 40_000  # 4 s of event time
FULL_EVENTS = 200_000  # 20 s, the pipeline file's own


@dataclass(frozen=True)
class Case:
    """A query, and the rids constraint its join may use: declared on `stream`.`attribute`,
    referencing `references` (stream, column)."""

    query: str
    stream: str
    attribute: str
    references: tuple[str, str]

    def label(self) -> str:
        return f"{self.stream}.{self.attribute} -> {self.references[0]}.{self.references[1]}"


CASES: tuple[Case, ...] = (
    Case("q3", "Auction", "seller", ("Person", "id")),
    Case("q8", "Auction", "seller", ("Person", "id")),
    Case("q4", "Bid", "auction", ("ClosedAuction", "id")),
    Case("q6", "Bid", "auction", ("ClosedAuction", "id")),
)

# the generator table and the arrival-time column of each stream the cases read
_TABLES = {
    "Person": ("person", "dateTime"),
    "Auction": ("auction", "dateTime"),
    "Bid": ("bid", "dateTime"),
    "ClosedAuction": ("auction", "expires"),
}


def true_k(
    parent_ts: np.ndarray, parent_key: np.ndarray, child_ts: np.ndarray, child_key: np.ndarray
) -> int:
    """The least k for which RIDS(k) holds as the join counts it: for each parent whose child
    (the one-side row with its key; keys unique there) arrives after it, the child arrivals at
    timestamps after the parent's up to and including the child's (ties counted, so never too
    few); 0 when every child came first or never comes."""
    if not len(parent_key) or not len(child_key):
        return 0
    order = np.argsort(child_key, kind="stable")
    keys, ts = child_key[order], child_ts[order]
    pos = np.searchsorted(keys, parent_key)
    pos = np.minimum(pos, len(keys) - 1)
    has = keys[pos] == parent_key
    tc, tp = ts[pos][has], parent_ts[has]
    later = tc > tp
    if not later.any():
        return 0
    sorted_ts = np.sort(child_ts)
    m = np.searchsorted(sorted_ts, tc[later], "right") - np.searchsorted(
        sorted_ts, tp[later], "right"
    )
    return int(m.max())


def _column(stream: str, column: str, events: int, seed: int) -> np.ndarray:
    from cq_service.io.nexmark import generate_kind

    table, _ = _TABLES[stream]
    parts = [t.column(column).to_numpy() for t in generate_kind(table, events, seed=seed)]
    return np.concatenate(parts) if parts else np.empty(0, np.int64)


def case_true_k(case: Case, events: int, seed: int = 0) -> int:
    """The true k of `case`'s constraint over the generated input."""
    ref_stream, ref_column = case.references
    return true_k(
        _column(case.stream, _TABLES[case.stream][1], events, seed),
        _column(case.stream, case.attribute, events, seed),
        _column(ref_stream, _TABLES[ref_stream][1], events, seed),
        _column(ref_stream, ref_column, events, seed),
    )


def _spec(base: PipelineSpec, case: Case, events: int, out: Path, k: int | None) -> PipelineSpec:
    """`case.query` alone (with what it reads) over `events` generated events, its sink a jsonl
    file `out`; with the constraint at `k` unless k is None."""
    from cq_service.compiler import subset

    spec = subset(base, [case.query])
    streams = {}
    for name, s in spec.streams.items():
        src = s.source
        if src.type == "generator":
            src = replace(src, options={**src.options, "events": events})
        s = replace(s, source=src)
        if k is not None and name == case.stream:
            c = ConstraintSpec("rids", case.attribute, k, case.references)
            s = replace(s, constraints=(*s.constraints, c))
        streams[name] = s
    queries = {
        n: replace(q, sink=SinkSpec("file", str(out), "jsonl")) if q.sink else q
        for n, q in spec.queries.items()
    }
    return replace(spec, streams=streams, queries=queries)


@dataclass
class _Run:
    seconds: float
    peak_bytes: int
    peak_rows: int
    join_peak_bytes: int
    lines: list[str]
    reduction: dict[str, Any] | None


def _run(spec: PipelineSpec, out: Path) -> _Run:
    from cq_service.compiler import compile_pipeline
    from cq_service.engine.operators.join import Join
    from cq_service.engine.operators.source import SourceOperator
    from cq_service.runner import run_pipeline

    compiled = compile_pipeline(spec)
    peak = {"bytes": 0, "rows": 0, "join": 0}

    def sample(executor: Any) -> None:
        rows = nbytes = join = 0
        for op in executor.operators:
            if isinstance(op, SourceOperator):
                continue
            r, b = op.state_size()
            rows, nbytes = rows + r, nbytes + b
            if isinstance(op, Join) and op.reduction is not None:
                join += b
            elif isinstance(op, Join) and not join:
                join = b
        peak["bytes"], peak["rows"] = max(peak["bytes"], nbytes), max(peak["rows"], rows)
        peak["join"] = max(peak["join"], join)

    start = time.perf_counter()
    report = run_pipeline(compiled, after_step=sample)
    seconds = time.perf_counter() - start
    reduction = None
    for op in report.executor.operators:
        st = op.constraint_status()
        if st is not None:
            reduction = {
                "operator": op.name,
                "k": st.k,
                "dropped": st.dropped,
                "violations": st.violations,
                "missed": st.missed,
            }
    lines = sorted(out.read_text().splitlines()) if out.exists() else []
    return _Run(seconds, peak["bytes"], peak["rows"], peak["join"], lines, reduction)


def _ratio(a: int, b: int) -> float | None:
    return round(b / a, 3) if a else None


def bench_case(case: Case, events: int, workdir: Path, seed: int = 0) -> dict[str, Any]:
    """One query without and with its constraint at the input's true k."""
    from cq_service.spec import load_pipeline

    base = load_pipeline(NEXMARK_PIPELINE)
    k = case_true_k(case, events, seed)
    plain = _run(
        _spec(base, case, events, workdir / f"{case.query}-plain.jsonl", None),
        workdir / f"{case.query}-plain.jsonl",
    )
    constrained = _run(
        _spec(base, case, events, workdir / f"{case.query}-k.jsonl", k),
        workdir / f"{case.query}-k.jsonl",
    )
    return {
        "query": case.query,
        "constraint": f"rids {case.label()}, k: {k}",
        "true_k": k,
        "bytes_without": plain.peak_bytes,
        "bytes_with": constrained.peak_bytes,
        "ratio": _ratio(plain.peak_bytes, constrained.peak_bytes),
        "rows_without": plain.peak_rows,
        "rows_with": constrained.peak_rows,
        "join_bytes_without": plain.join_peak_bytes,
        "join_bytes_with": constrained.join_peak_bytes,
        "join_ratio": _ratio(plain.join_peak_bytes, constrained.join_peak_bytes),
        "results": len(plain.lines),
        "identical": plain.lines == constrained.lines,
        "reduction": constrained.reduction,
        "seconds": {"without": round(plain.seconds, 2), "with": round(constrained.seconds, 2)},
    }


def bench(
    queries: Iterable[str] | None = None, events: int = FULL_EVENTS, seed: int = 0
) -> dict[str, Any]:
    """Every case (or those of `queries`) over `events` generated events: the JSON report."""
    wanted = None if queries is None else {q.lower() for q in queries}
    cases: Sequence[Case] = [c for c in CASES if wanted is None or c.query in wanted]
    if wanted is not None and len(cases) != len(wanted):
        known = ", ".join(c.query for c in CASES)
        raise ValueError(
            f"no constraint case for {sorted(wanted - {c.query for c in cases})}; known: {known}"
        )
    start = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="cq-nexmark-k-") as tmp:
        rows = [bench_case(c, events, Path(tmp), seed) for c in cases]
    return {
        "benchmark": "nexmark-constraints",
        "events": events,
        "seed": seed,
        "queries": rows,
        "all_identical": all(r["identical"] for r in rows),
        "seconds": round(time.perf_counter() - start, 2),
    }


def render(report: dict[str, Any]) -> str:
    """The report as a table."""
    lines = [
        f"NEXMark with constraints: {report['events']:,} events (seed {report['seed']}), "
        "peak state of the query's operators without and with the constraint at the true k",
        f"{'query':<6} {'constraint':<46} {'without':>12} {'with':>12} {'ratio':>6} "
        f"{'join ratio':>10} {'identical':>9}",
    ]
    for r in report["queries"]:
        lines.append(
            f"{r['query']:<6} {r['constraint']:<46} {r['bytes_without']:>12,} "
            f"{r['bytes_with']:>12,} {r['ratio']!s:>6} {r['join_ratio']!s:>10} "
            f"{'yes' if r['identical'] else 'NO':>9}"
        )
    return "\n".join(lines)
