"""`constraints:` of streams and views (issue 26): parsed, and refused with their positions."""

from __future__ import annotations

from cq_service.spec.model import ConstraintSpec

HEAD = """\
version: 1
name: p
streams:
  S:
    schema: {ts: int, a: int}
    source: {type: file, path: data/s.csv}
"""


def test_stream_constraints_parse(load):
    spec = load(
        HEAD
        + """\
    constraints:
      - {kind: ca, attribute: A, k: 3}
      - {kind: oa, attribute: ts, k: auto}
  T:
    schema: {ts: int, id: int}
    source: {type: file, path: data/s.csv}
    constraints:
      - {kind: rids, attribute: id, references: S.a, k: 0}
"""
    )
    ca, oa = spec.streams["S"].constraints
    assert ca == ConstraintSpec("ca", "a", 3)  # the schema's spelling
    assert oa.k is None and oa.describe() == "OA(k=auto) on ts"
    (rids,) = spec.streams["T"].constraints
    assert rids.references == ("S", "a") and rids.span.line == 14
    assert rids.describe() == "RIDS(k=0) on id -> S.a"


def test_view_constraints_parse(load):
    spec = load(
        HEAD
        + """\
queries:
  v:
    cql: SELECT a FROM S
    constraints: [{kind: ca, attribute: a, k: 10}]
"""
    )
    assert spec.queries["v"].constraints[0].kind == "ca"


def test_constraint_errors_have_positions(problems):
    text = (
        HEAD
        + """\
    constraints:
      - {kind: ca, attribute: b, k: 3}
      - {kind: oa, attribute: a, k: -1}
      - {kind: rids, attribute: a, k: 1}
      - {kind: ca, attribute: a, k: 1, references: S.a}
      - {kind: rids, attribute: a, references: S.a, k: 1}
      - {kind: rids, attribute: ts, references: Nope.x, k: 1}
      - {kind: xx, attribute: a, k: 1}
      - {kind: ca, attribute: a, k: many}
"""
    )
    got = problems(text)
    assert len(got) == 1 and got[0].startswith("14:16: kind of"), got
    # the schema's errors come first; fix them to see the builder's
    text = text.replace("      - {kind: xx, attribute: a, k: 1}\n", "")
    assert problems(text) == [
        "8:31: stream 'S': constraint on 'b', which is not in its schema (ts, a)",
        "9:37: stream 'S': k must be an integer >= 0 or auto, got -1",
        "10:9: stream 'S': a rids constraint needs references: Stream.column",
        "11:40: stream 'S': references applies to rids only, not ca",
        "12:9: S: rids references its own stream (S.a)",
        "13:9: S: rids references Nope.x: no stream, relation or query named 'Nope'",
        "14:37: stream 'S': k must be an integer >= 0 or auto, got 'many'",
    ]
