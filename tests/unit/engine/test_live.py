"""The live engine: a query added while a source runs sees exactly the elements after the
source's heartbeat at that moment (as if its input began there); removing a query leaves the
others' results untouched; a relation joins as it stands."""

from __future__ import annotations

from pathlib import Path

from cq_service.compiler import compile_pipeline
from cq_service.engine.build import SourceOptions
from cq_service.engine.live import LiveEngine
from cq_service.plan.planner import plan_queries
from cq_service.spec.loader import load_pipeline_text
from tests.unit.engine.runs import Collect, ListReader

QUERIES = {
    "total": "SELECT COUNT(*) AS n FROM S [Range 10]",
    "big": "SELECT Istream(a) FROM S [Range 5] WHERE a > 2",
    "joined": "SELECT Istream(S.a) FROM S [Now], R WHERE S.a = R.a",
}


def compiled(tmp_path: Path, names: list[str]):
    (tmp_path / "x.csv").write_text("a,ts\n")
    text = "\n".join([
        "version: 1", "name: live", "time_unit: ms", "streams:",
        "  S: {schema: {a: int, ts: int}, timestamp: ts, source: {type: file, path: x.csv}}",
        "relations:",
        "  R: {schema: {a: int, ts: int}, timestamp: ts, source: {type: file, path: x.csv}}",
        "queries:",
        *[f'  {n}: {{cql: "{QUERIES[n]}", sink: {{type: stdout}}}}' for n in names],
    ])
    return compile_pipeline(load_pipeline_text(text, tmp_path / "p.yaml"))


def start(engine: LiveEngine, c, names: list[str], writers: dict) -> None:
    plan = plan_queries([(bq, c.spec.queries[bq.name].sink) for bq in c.queries if bq.name in names])
    engine.add_queries(plan, {"S": "S", "R": "R"}, writers)


def step(engine: LiveEngine) -> None:
    for s in engine.executor.sources:
        s.run(1000)
    engine.executor.drain()
    engine.executor.follow_clocks()
    engine.executor.drain()


def setup(tmp_path: Path):
    c = compiled(tmp_path, list(QUERIES))
    engine = LiveEngine()
    s_reader, r_reader = ListReader(), ListReader()
    src = {n: next(x for x in c.plan.nodes if getattr(x.op, "name", None) == n).op for n in "SR"}
    engine.add_source("S", src["S"], s_reader, SourceOptions())
    r_reader.follows_clock = True
    engine.add_source("R", src["R"], r_reader, SourceOptions(is_relation=True))
    return c, engine, s_reader, r_reader


def test_a_query_added_later_sees_what_follows(tmp_path: Path) -> None:
    c, engine, s, _r = setup(tmp_path)
    early, late = Collect(), Collect()
    start(engine, c, ["total"], {"total": early})
    s.add([(1, 1), (3, 5), (4, 2), (7, 9)])
    step(engine)  # heartbeat 6: elements ≤ 6 are in, 7 waits
    start(engine, c, ["big"], {"big": late})
    s.add([(9, 4), (12, 1), (20, 3)])
    step(engine)
    # `big` began after heartbeat 6: it sees 7, 9, 12 (20 not yet complete)
    assert late.out == [(7, 1, (9,)), (9, 1, (4,))]
    # the first query's state was untouched by the second's arrival
    ns = [(t, op, row) for t, op, row in early.out]
    assert (1, 1, (1,)) in ns and (3, -1, (1,)) in ns and (3, 1, (2,)) in ns


def test_removing_a_query_leaves_the_others(tmp_path: Path) -> None:
    c, engine, s, _r = setup(tmp_path)
    a, b = Collect(), Collect()
    start(engine, c, ["total", "big"], {"total": a, "big": b})
    s.add([(1, 3), (2, 4)])
    step(engine)
    engine.remove_query("big")
    assert engine.queries == ["total"]
    s.add([(5, 8), (30, 1)])
    step(engine)
    assert b.out == [(1, 1, (3,))]  # nothing after its removal
    assert a.out[-1][0] == 16  # total kept counting: the window emptied at 5 + 10 + 1


def test_a_relation_joins_as_it_stands(tmp_path: Path) -> None:
    c, engine, s, r = setup(tmp_path)
    first = Collect()
    start(engine, c, ["total"], {"total": first})
    r.add([(0, 4), (0, 9)])
    s.add([(2, 1)])
    step(engine)
    joined = Collect()
    start(engine, c, ["joined"], {"joined": joined})
    s.add([(5, 4), (6, 9), (7, 5), (50, 0)])
    step(engine)
    assert joined.out == [(5, 1, (4,)), (6, 1, (9,))]
