"""Stored relations under the live engine: rows added to the catalog while queries run
(`cq relation insert`) reach them at their timestamps."""

from __future__ import annotations

import time
from pathlib import Path

from cq_service.catalog import Catalog
from cq_service.compiler import compile_pipeline
from cq_service.engine.build import SourceOptions
from cq_service.engine.live import LiveEngine
from cq_service.io import open_source
from cq_service.plan.planner import plan_queries
from cq_service.spec.loader import load_pipeline_text
from tests.unit.engine.runs import Collect, ListReader


def test_rows_inserted_while_running_are_joined_from_their_instant(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'catalog.db'}"
    catalog = Catalog(url)
    catalog.upgrade()
    catalog.insert_relation_rows("R", [(0, "+", {"a": 1})])
    (tmp_path / "s.csv").write_text("a,ts\n")
    text = "\n".join([
        "version: 1", "name: rel", "time_unit: ms", "streams:",
        "  S: {schema: {a: int, ts: int}, timestamp: ts, source: {type: file, path: s.csv}}",
        "relations:",
        f"  R: {{schema: {{a: int}}, source: {{type: catalog, url: '{url}'}}}}",
        "queries:",
        '  q: {cql: "SELECT Istream(S.a) FROM S [Now], R WHERE S.a = R.a", sink: {type: stdout}}',
    ])
    c = compile_pipeline(load_pipeline_text(text, tmp_path / "p.yaml"))
    engine = LiveEngine()
    stream = ListReader()
    ops = {n.op.name: n.op for n in c.plan.nodes if type(n.op).__name__ == "Source"}
    engine.add_source("S", ops["S"], stream, SourceOptions())
    relation = open_source(c.spec.relations["R"], "ms", live=True)
    engine.add_source("R", ops["R"], relation, SourceOptions(is_relation=True))
    out = Collect()
    plan = plan_queries([(bq, c.spec.queries[bq.name].sink) for bq in c.queries])
    engine.add_queries(plan, {"S": "S", "R": "R"}, {"q": out})

    def step(seconds: float = 0.5) -> None:
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            for s in engine.executor.sources:
                s.run(1000)
            engine.executor.drain()
            engine.executor.follow_clocks()
            engine.executor.drain()

    stream.add([(10, 1), (11, 2)])
    step()
    catalog.insert_relation_rows("R", [(15, "+", {"a": 2})])  # `cq relation insert` does this
    step()
    stream.add([(20, 1), (21, 2), (30, 9)])
    step()
    assert out.out == [(10, 1, (1,)), (20, 1, (1,)), (21, 1, (2,))]
