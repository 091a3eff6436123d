"""A pipeline of two streams and a relation read from files (`HEADER`) and the plan of given
queries over it (`compile_queries`), shared by the plan tests (test_columns.py, test_panes.py,
test_rewrite.py, test_knobs.py). The files must exist: each of those modules touches them in a
fixture of its own."""

from __future__ import annotations

import textwrap

import yaml

from cq_service.compiler import load_and_compile

HEADER = """\
version: 1
name: t
time_unit: ms
streams:
  S:
    schema: {a: int, b: int, c: string, d: string}
    timestamp: ts
    source: {type: file, path: s.parquet}
  T:
    schema: {k: int, x: int, y: string}
    timestamp: ts
    source: {type: file, path: t.parquet}
relations:
  R:
    schema: {k: int, v: string}
    timestamp: ts
    source: {type: file, path: r.csv}
queries:
"""



def compile_queries(tmp_path, header: str = HEADER, **queries: str):
    """Compile the pipeline with `queries` (name: CQL; a name starting with v is a view)."""
    doc = {
        name: {"cql": cql} if name.startswith("v") else
        {"cql": cql, "sink": {"type": "file", "path": f"out/{name}.jsonl"}}
        for name, cql in queries.items()
    }
    text = header + textwrap.indent(yaml.safe_dump(doc, sort_keys=False, width=1000), "  ")
    path = tmp_path / "p.yaml"
    path.write_text(text, "utf-8")
    return load_and_compile(path).plan
