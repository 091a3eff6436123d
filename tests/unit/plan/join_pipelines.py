"""Join queries over four streams A, B, C, D (each `k` and one column of its own, from empty CSV
files) compiled under a chosen `join:` resource (`compile_joins`): shared by the MJoin planning
tests (tests/unit/plan/test_mjoins.py) and `join: auto`'s cost model tests
(tests/unit/adaptive/test_join_choice.py)."""

from __future__ import annotations

from pathlib import Path

from cq_service.compiler import load_and_compile

HEAD = """version: 1
name: mj
time_unit: s
{resources}
streams:
  A:
    schema: {{k: int, x: int}}
    timestamp: ts
    source: {{type: file, path: a.csv, format: csv}}
  B:
    schema: {{k: int, y: int}}
    timestamp: ts
    source: {{type: file, path: b.csv, format: csv}}
  C:
    schema: {{k: int, z: int}}
    timestamp: ts
    source: {{type: file, path: c.csv, format: csv}}
  D:
    schema: {{k: int, w: int}}
    timestamp: ts
    source: {{type: file, path: d.csv, format: csv}}
queries:
"""


def compile_joins(tmp_path: Path, queries: dict[str, str], join: str = "mjoin"):
    """Compile `queries` (name: CQL, each to a blackhole) over streams A-D with `join` as the
    pipeline's join resource; the CSV files A-D read are written empty."""
    text = HEAD.format(resources=f"resources: {{join: {join}}}")
    for name, cql in queries.items():
        text += f"  {name}:\n    cql: {cql}\n    sink: {{type: blackhole}}\n"
    for s in "abcd":
        (tmp_path / f"{s}.csv").write_text("ts,k,v\n")
    path = tmp_path / "p.yaml"
    path.write_text(text)
    return load_and_compile(path)
