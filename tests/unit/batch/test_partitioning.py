"""The backfill path of a query and its window reach, read from the logical plan (fixture
pairs: query -> path, keys, reach)."""

from __future__ import annotations

import pytest

from cq_service.batch.partitioning import analyze, history_reach
from cq_service.compiler import compile_pipeline
from cq_service.plan.rewrite import simplify
from cq_service.spec.loader import load_pipeline_text

PIPELINE = """
version: 1
name: p
time_unit: ms
streams:
  S: {schema: {k: int, v: int}, source: {type: file, path: s.csv}}
  T: {schema: {k: int, w: int}, source: {type: file, path: t.csv}}
relations:
  R: {schema: {k: int, name: string}, source: {type: file, path: r.csv}}
queries:
  q: {cql: "%s", sink: {type: blackhole}}
"""

CASES = [
    # (query, path, keys or None, reach)
    ("SELECT * FROM S WHERE v > 1", "key", {"S": None}, 0),
    ("SELECT k, COUNT(*) FROM S [Range 10] GROUP BY k", "key", {"S": "k"}, 10),
    ("SELECT COUNT(*) FROM S [Range 10] GROUP BY k", "single", None, 10),
    ("SELECT k, SUM(v) FROM S [Range 10 Slide 5] GROUP BY k", "key", {"S": "k"}, 14),
    ("SELECT COUNT(*) FROM S [Range 10]", "single", None, None),
    ("SELECT * FROM S [Rows 3]", "single", None, None),
    ("SELECT * FROM S [Partition By k Rows 3]", "key", {"S": "k"}, None),
    ("SELECT * FROM S [Partition By v Rows 3]", "key", {"S": "v"}, None),
    ("SELECT Istream(S.k, v, w) FROM S [Range 5], T [Range 7] WHERE S.k = T.k",
     "key", {"S": "k", "T": "k"}, 8),
    ("SELECT Rstream(*) FROM S [Range 5]", "single", None, 5),
    ("SELECT Rstream(*) FROM S [Now]", "key", {"S": None}, 0),
    ("SELECT Istream(v) FROM S [Range 5]", "key", {"S": "v"}, 6),  # equal rows, equal keys
    ("SELECT Istream(v + 1) FROM S [Range 5]", "single", None, 6),
    ("SELECT S.k, R.name FROM S [Range 5], R WHERE S.k = R.k", "key", {"S": "k"}, 5),
    ("SELECT R.name, COUNT(*) FROM S [Range 5], R WHERE S.k = R.k GROUP BY R.name",
     "single", None, 5),
    ("SELECT * FROM R", "single", None, 0),
    ("SELECT * FROM S Sample(50)", "single", None, None),
]


@pytest.mark.parametrize(("cql", "path", "keys", "reach"), CASES)
def test_path_and_reach(tmp_path, cql, path, keys, reach) -> None:
    for f in ("s.csv", "t.csv", "r.csv"):
        (tmp_path / f).write_text("k\n")
    spec = load_pipeline_text(PIPELINE % cql, str(tmp_path / "p.yaml"))
    bq = compile_pipeline(spec).queries[0]
    part = analyze(bq)
    assert part.path == path, part.describe()
    if keys is not None:
        assert part.keys == keys
    assert history_reach(simplify(bq.plan)) == reach
    assert part.reason
