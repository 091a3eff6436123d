"""The pipeline files of `cq bench filters`: one selection over S0 whose conjuncts are the
filters, written in a given order.

``SELECT * FROM S0 WHERE v1 IN (…) AND v2 IN (…) AND …``: a stream-to-stream selection, the
thesis' query over S0. F_i is ``v_i IN (<constant set>)``, which the expression compiler turns
into one Arrow hash-set probe per row (`pc.is_in` over a prebuilt value set,
engine/expressions/compare.py), the cost shape of the thesis' ``S0 tuple ∈ Si [Rows 10,000]``
(a probe into a window's hash index). The window probe itself is not used: an IN-subquery over
a window is planned as a mark join, which the orderer does not move relative to the other
conjuncts (docs/adaptive.md, "What is ordered").
"""

from __future__ import annotations

from collections.abc import Sequence

__all__ = ["filter_cql", "pipeline_yaml", "query_cql"]


def filter_cql(i: int, values: Sequence[int]) -> str:
    """F_{i+1}: ``v{i+1} IN (…)``."""
    return f"v{i + 1} IN ({', '.join(str(v) for v in values)})"


def query_cql(sets: Sequence[Sequence[int]], order: Sequence[int] | None = None) -> str:
    """The selection with its conjuncts written in `order` (filter indices; default as
    numbered)."""
    order = range(len(sets)) if order is None else order
    return "SELECT * FROM S0 WHERE " + " AND ".join(filter_cql(f, sets[f]) for f in order)


def pipeline_yaml(
    n: int,
    cql: str,
    *,
    source: str = "S0.parquet",
    out: str = "out/q.jsonl",
    name: str = "filters",
    filter_order: str = "static",
    extra_columns: Sequence[tuple[str, str]] = (),
) -> str:
    """The pipeline: S0 (id, v1 … vn and `extra_columns`, timestamp ts) from a parquet file
    relative to the pipeline, the query `cql`, a jsonl sink at `out`."""
    cols = [
        "id: int",
        *(f"v{i + 1}: int" for i in range(n)),
        *(f"{c}: {t}" for c, t in extra_columns),
    ]
    return (
        "\n".join(
            [
                "version: 1",
                f"name: {name}",
                "time_unit: ms",
                f"resources: {{filter_order: {filter_order}}}",
                "streams:",
                f"  S0: {{schema: {{{', '.join(cols)}}}, timestamp: ts, "
                f"source: {{type: file, path: {source}, format: parquet}}}}",
                "queries:",
                "  q:",
                f'    cql: "{cql}"',
                f"    sink: {{type: file, path: {out}, format: jsonl}}",
            ]
        )
        + "\n"
    )
