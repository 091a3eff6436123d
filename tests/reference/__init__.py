"""The reference evaluator: brute-force CQL semantics (docs/semantics.md) over DuckDB.

- `evaluate_pipeline(path)`: {query with a sink: [(ts, op, row), ...]} in output order.
- `output_columns(path)`: {query with a sink: [column name, ...]}.
- `evaluate(time_unit, streams, relations, queries, max_delay=None)`: the same from in-memory
  data; `evaluate_outputs(...)` also gives columns, types and R(τ) per query.
- `element_key`: the sort key of output elements (ts, "-" before "+", row order tolerating
  NULL and NaN), for comparing the engine's output.

Queries are read by the reference's own parser (`cql_parser`, building `cql_ast` trees);
nothing here imports cq_service (tests/unit/reference/test_reference_parser.py checks).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from .evaluator import Knobs, QueryOutput, evaluate, evaluate_outputs
from .ordering import element_key, row_key
from .pipeline import read_pipeline, read_qos

__all__ = [
    "Knobs",
    "QueryOutput",
    "element_key",
    "evaluate",
    "evaluate_outputs",
    "evaluate_pipeline",
    "output_columns",
    "pipeline_outputs",
    "row_key",
]


def pipeline_outputs(
    path: str | Path, adjustments: Sequence[dict] = ()
) -> dict[str, QueryOutput]:
    """Every query with a sink, evaluated; `adjustments` is a window-adjustment log (the
    engine's records as dicts) replayed on the queries' qos-owned windows."""
    time_unit, streams, relations, queries, delays = read_pipeline(path)
    log = sorted(adjustments, key=lambda a: a["since"])
    knobs = {
        name: Knobs(windows, finest, tuple(a for a in log if a["query"] == name))
        for name, (windows, finest) in read_qos(path).items()
    }
    return evaluate_outputs(time_unit, streams, relations, queries, delays, knobs)


def evaluate_pipeline(path: str | Path) -> dict[str, list[tuple[int, str, tuple]]]:
    """For every query with a sink, its output elements (ts, op, row) in output order."""
    return {name: out.elements for name, out in pipeline_outputs(path).items()}


def output_columns(path: str | Path) -> dict[str, list[str]]:
    """For every query with a sink, its output column names (docs/semantics.md "Output")."""
    return {name: list(out.columns) for name, out in pipeline_outputs(path).items()}
