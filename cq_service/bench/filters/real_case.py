"""The real case of `cq bench filters`: an expensive string match written first.

S0 has an id, three integers a, b, c and a string s of `LENGTH` characters. The selection is
``s LIKE '%cq-match%' AND a < 50 AND b < 50 AND c < 50``: a substring search over every
string, written where a reader of the query would put "the important condition", first, ahead
of three comparisons that each cost a few nanoseconds a row. The verdicts come from the
synthetic generator (workload.py) with four filters at the thesis' defaults (drop probability
0.5, Γ = 2: the LIKE correlated with a < 50, b < 50 with c < 50); values are picked to match
(an integer in [0, 50) passes, [50, 100) fails; a passing string holds the needle at a random
place, the others are random lowercase letters, which never contain it).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from cq_service.bench.filters.workload import Workload, generate

__all__ = ["LENGTH", "NEEDLE", "REAL_CONJUNCTS", "real_pipeline", "real_workload", "write_real"]

LENGTH = 256  # characters per string
NEEDLE = "cq-match"
REAL_CONJUNCTS = (f"s LIKE '%{NEEDLE}%'", "a < 50", "b < 50", "c < 50")


def real_workload(tuples: int, seed: int = 7) -> Workload:
    """The verdicts (F1 the LIKE, F2..F4 the comparisons)."""
    return generate(4, tuples, seed=seed)


def write_real(w: Workload, path: Path, seed: int = 7) -> Path:
    """The parquet input of `w`: id, a, b, c, s, ts."""
    rng = np.random.default_rng(seed + 1)
    t = w.tuples
    ints = {}
    for i, col in enumerate("abc", start=1):
        low = rng.integers(0, 50, t)
        ints[col] = np.where(w.drops[:, i], low + 50, low)
    text = rng.integers(ord("a"), ord("z") + 1, size=(t, LENGTH), dtype=np.uint8)
    hit = np.flatnonzero(~w.drops[:, 0])
    at = rng.integers(0, LENGTH - len(NEEDLE) + 1, len(hit))
    needle = np.frombuffer(NEEDLE.encode(), dtype=np.uint8)
    for k in range(len(NEEDLE)):
        text[hit, at + k] = needle[k]
    offsets = pa.py_buffer(np.arange(0, t * LENGTH + 1, LENGTH, dtype=np.int32).tobytes())
    s = pa.StringArray.from_buffers(t, offsets, pa.py_buffer(text.tobytes()))
    ids = np.arange(t, dtype=np.int64)
    table = pa.table(
        {
            "id": ids,
            "a": ints["a"],
            "b": ints["b"],
            "c": ints["c"],
            "s": s,
            "ts": ids // w.rows_per_instant,
        }
    )
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(table, path)
    return path


def real_pipeline(
    order: tuple[int, ...] = (0, 1, 2, 3),
    *,
    source: str = "R.parquet",
    out: str = "out/q.jsonl",
    filter_order: str = "static",
) -> str:
    """The pipeline with the conjuncts written in `order` (indices into REAL_CONJUNCTS)."""
    where = " AND ".join(REAL_CONJUNCTS[i] for i in order)
    cql = f"SELECT id, a, b, c FROM S0 WHERE {where}"
    return (
        "\n".join(
            [
                "version: 1",
                "name: filters-real",
                "time_unit: ms",
                f"resources: {{filter_order: {filter_order}}}",
                "streams:",
                "  S0: {schema: {id: int, a: int, b: int, c: int, s: string}, timestamp: ts, "
                f"source: {{type: file, path: {source}, format: parquet}}}}",
                "queries:",
                "  q:",
                f'    cql: "{cql}"',
                f"    sink: {{type: file, path: {out}, format: jsonl}}",
            ]
        )
        + "\n"
    )
