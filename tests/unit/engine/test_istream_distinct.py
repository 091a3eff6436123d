"""Istream and Dstream pass an aggregate's changes at once (`input_distinct`) only when no two
of its rows at an instant can be equal: every column of a grouped aggregate of the group table's
types kept. Where a projection drops a column, equal rows do occur (−old, +new of a group whose
kept columns did not change) and must cancel: the results there match the reference."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from cq_service.compiler import compile_pipeline, load_and_compile
from cq_service.engine.build import build_executor
from cq_service.engine.operators.istream import RelationToStream
from cq_service.runner import run_pipeline
from cq_service.spec import load_pipeline
from tests.property.harness import read_sink
from tests.reference import element_key, pipeline_outputs

CASES = {
    "SELECT Istream(g, COUNT(*) AS n, SUM(v) AS s) FROM E [Range 3 Slide 2] GROUP BY g": True,
    "SELECT Dstream(s, g) FROM (SELECT g, SUM(v) AS s FROM E [Range 3] GROUP BY g) AS a": True,
    "SELECT Istream(g, n) FROM (SELECT g, COUNT(*) AS n FROM E [Range 3] GROUP BY g) AS a "
    "WHERE n > 1": True,
    "SELECT Istream(g) FROM E [Range 3] GROUP BY g": True,
    # a column dropped: two groups' rows, or one group's old and new, may be equal
    "SELECT Istream(COUNT(*) AS n) FROM E [Range 3] GROUP BY g": False,
    "SELECT Istream(g, MIN(v) AS lo) FROM E [Range 3] GROUP BY g HAVING SUM(v) > 2": False,
    # not the group table's types (AVG of floats may be NaN), or no group key
    "SELECT Istream(g, AVG(f) AS a) FROM E [Range 3] GROUP BY g": False,
    "SELECT Istream(COUNT(*) AS n) FROM E [Range 3]": False,
}


def _pipeline(tmp_path: Path, cql: str) -> Path:
    rows = [(t, (t * 7) % 3, (t * 5) % 4, t / 2) for t in range(40)]
    rows += [(t, t % 2, 1, 0.5) for t in range(10, 30, 3)]  # instants with several rows
    lines = ["ts,g,v,f"] + [",".join(map(str, r)) for r in sorted(rows, key=lambda r: r[0])]
    (tmp_path / "e.csv").write_text("\n".join(lines) + "\n")
    path = tmp_path / "pipeline.yaml"
    path.write_text(textwrap.dedent(f"""\
        version: 1
        name: istream-distinct
        time_unit: s
        streams:
          E:
            schema: {{g: int, v: int, f: float}}
            timestamp: ts
            source: {{type: file, path: e.csv, format: csv}}
        queries:
          q:
            cql: "{cql}"
            sink: {{type: file, path: out.jsonl, format: jsonl}}
        """))
    return path


@pytest.mark.parametrize("cql", list(CASES))
def test_fast_path_only_where_rows_cannot_repeat(tmp_path: Path, cql: str) -> None:
    path = _pipeline(tmp_path, cql)
    plan = compile_pipeline(load_pipeline(path)).plan
    ex = build_executor(plan, readers={}, writers={"q": None})  # type: ignore[dict-item]
    flags = [op.input_distinct for op in ex.operators if isinstance(op, RelationToStream)]
    assert flags == [CASES[cql]]
    run_pipeline(load_and_compile(path))
    reference = pipeline_outputs(path)["q"]
    got, _, problem = read_sink(tmp_path / "out.jsonl", reference.columns)
    assert not problem, problem
    assert reference.elements
    assert sorted(got, key=element_key) == sorted(reference.elements, key=element_key)
