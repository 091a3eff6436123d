"""The real case of `cq bench filters`: an expensive string match written first.

S0 is a log of sorts: an id, three integers a, b, c and a message s of `LENGTH` characters.
The selection is an alerting filter, the message mentioning any of three failures, then three
cheap conditions::

    (s LIKE '%read-timeout%' OR s LIKE '%conn-refused%' OR s LIKE '%conn-reset%')
    AND a < 50 AND b < 50 AND c < 50

The match is written where a reader of the query puts "the important condition", first, ahead
of three comparisons that each cost a few nanoseconds a row. It scans every message three
times (about 0.7 µs a row each on 256 characters), where reading the message from the
parquet file costs about 0.5 µs: one phrase alone (`s LIKE '%read-timeout%'`) costs about what
the rest of the pipeline does, and no order of the conjuncts can then double the pipeline's
throughput (the best static order in hindsight is itself under 2x; see docs/adaptive.md).

The verdicts come from the synthetic generator (workload.py) with four filters at the thesis'
defaults (drop probability 0.5, Γ = 2: the match correlated with a < 50, b < 50 with c < 50);
values are picked to match (an integer in [0, 50) passes, [50, 100) fails; a passing message
holds one of the phrases, chosen at random, at a random place; the others are random
lowercase letters, which never hold one: each phrase has a '-').
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from cq_service.bench.filters.workload import Workload, generate

__all__ = ["LENGTH", "PHRASES", "REAL_CONJUNCTS", "real_pipeline", "real_workload", "write_real"]

LENGTH = 256  # characters per message
PHRASES = ("read-timeout", "conn-refused", "conn-reset")
MATCH = "(" + " OR ".join(f"s LIKE '%{p}%'" for p in PHRASES) + ")"
REAL_CONJUNCTS = (MATCH, "a < 50", "b < 50", "c < 50")


def real_workload(tuples: int, seed: int = 7) -> Workload:
    """The verdicts (F1 the match, F2..F4 the comparisons)."""
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
    which = rng.integers(0, len(PHRASES), len(hit))
    for i, phrase in enumerate(PHRASES):
        rows = hit[which == i]
        at = rng.integers(0, LENGTH - len(phrase) + 1, len(rows))
        codes = np.frombuffer(phrase.encode(), dtype=np.uint8)
        for k in range(len(phrase)):
            text[rows, at + k] = codes[k]
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
