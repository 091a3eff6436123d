"""What a restarted worker replays: horizons of queries, offsets to replay from, and the
filter that drops results delivered before the restart."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa

from cq_service.compiler import compile_pipeline
from cq_service.engine.operators.base import NEVER
from cq_service.io.base import RawChunk
from cq_service.plan.rewrite import simplify
from cq_service.service.checkpoint import (
    OffsetTracker,
    ResumeFilter,
    combine_cuts,
    horizons,
    query_cut,
)
from cq_service.spec.loader import load_pipeline_text


def horizon_of(cql: str, folder: Path) -> dict[str, int | None]:
    for name in ("s.csv", "r.csv"):
        (folder / name).write_text("a,ts\n")
    text = f"""
version: 1
name: h
time_unit: ms
streams:
  S: {{schema: {{a: int, ts: int}}, timestamp: ts, source: {{type: file, path: s.csv}}}}
relations:
  R: {{schema: {{a: int, ts: int}}, timestamp: ts, source: {{type: file, path: r.csv}}}}
queries:
  q: {{cql: "{cql}", sink: {{type: blackhole}}}}
"""
    spec = load_pipeline_text(text, folder / "pipeline.yaml")
    [bq] = compile_pipeline(spec).queries
    return horizons(simplify(bq.plan))


def test_horizons(tmp_path: Path) -> None:
    assert horizon_of("SELECT * FROM S", tmp_path) == {"S": 0}
    assert horizon_of("SELECT Istream(a) FROM S [Range 10]", tmp_path) == {"S": 12}
    assert horizon_of("SELECT COUNT(*) FROM S [Range 10 Slide 5]", tmp_path) == {"S": 16}
    assert horizon_of("SELECT COUNT(*) FROM S [Rows 3]", tmp_path) == {"S": None}
    assert horizon_of("SELECT COUNT(*) FROM S", tmp_path) == {"S": None}
    got = horizon_of("SELECT Istream(S.a) FROM S [Range 10], R WHERE S.a = R.a", tmp_path)
    assert got == {"S": 12, "R": None}


def test_cuts() -> None:
    assert query_cut(100, 10, NEVER, False) == 91
    assert query_cut(100, 10, 95, False) == 96  # nothing before the query's start matters
    assert query_cut(100, None, NEVER, False) is None
    assert query_cut(100, None, 50, False) == 51
    assert query_cut(100, 10, 50, True) is None  # a relation: its whole history
    assert query_cut(NEVER, 10, NEVER, False) is None
    assert combine_cuts([5, 3, 9]) == 3
    assert combine_cuts([5, None]) is None


class _Partitioned:
    """A reader of fixed chunks with positions, like the Kafka source (no broker needed to
    check the bookkeeping)."""

    def __init__(self, chunks: list[RawChunk]):
        self.chunks = chunks
        self.pos = {0: 0, 1: 0}

    def positions(self) -> dict[int, int]:
        return dict(self.pos)

    def read(self) -> RawChunk | None:
        if not self.chunks:
            return None
        c = self.chunks.pop(0)
        for p, o in zip(c.partition.tolist(), c.record.tolist()):
            self.pos[p] = max(self.pos[p], o + 1)
        return c


def chunk(parts: list[int], offsets: list[int], ts: list[int]) -> RawChunk:
    n = len(ts)
    return RawChunk(
        (pa.array(range(n), pa.int64()),),
        np.array(ts, np.int64),
        np.ones(n, np.int8),
        np.array(offsets, np.int64),
        partition=np.array(parts, np.int32),
    )


def test_offset_tracker_replays_every_element_at_or_after_the_cut() -> None:
    reader = _Partitioned([
        chunk([0, 1, 0, 1], [0, 0, 1, 1], [10, 12, 30, 31]),
        chunk([0, 1, 0], [2, 2, 3], [25, 40, 50]),  # 25: out of order in partition 0
    ])
    t = OffsetTracker(reader)
    while t.read() is not None:
        pass
    assert t.offsets(None) == {0: 0, 1: 0}
    assert t.offsets(20) == {0: 1, 1: 1}
    assert t.offsets(26) == {0: 1, 1: 1}  # offset 1 (ts 30) comes before offset 2 (ts 25)
    assert t.offsets(45) == {0: 3, 1: 3}  # partition 1 has nothing ≥ 45: its position
    t.forget_before({0: 1, 1: 1})
    assert t.offsets(None) == {0: 1, 1: 1}


def test_resume_filter_drops_what_was_delivered() -> None:
    got = []

    class W:
        def write(self, ts, ops, columns):
            got.append((ts.tolist(), [c.to_pylist() for c in columns]))

    f = ResumeFilter(W(), frontier=20)
    f.write(np.array([10, 20]), np.array([1, 1]), [pa.array([1, 2])])
    f.write(np.array([20, 21, 22]), np.array([1, 1, -1]), [pa.array([3, 4, 5])])
    f.write(np.array([30]), np.array([1]), [pa.array([6])])
    assert got == [([21, 22], [[4, 5]]), ([30], [[6]])]
    assert f.dropped == 3
