"""Queries as the resource manager sees them (`managed`): one query over streams S and T with
its QoS ranges, compiled and given fixed observed statistics; `JOIN` and `GROUP` are the two
kinds of query. Shared by tests/unit/adaptive/test_manager.py and test_drain.py."""

from __future__ import annotations

from cq_service.adaptive.estimate import Observed
from cq_service.adaptive.manager import ManagedQuery, window_knobs
from cq_service.compiler import compile_pipeline
from cq_service.cql import logical as L
from cq_service.spec import load_pipeline_text

PIPELINE = """
version: 1
name: rm
time_unit: ms
streams:
  S: {{schema: {{a: int}}, timestamp: ts, source: {{type: file, path: {folder}/s.jsonl, format: jsonl}}}}
  T: {{schema: {{a: int}}, timestamp: ts, source: {{type: file, path: {folder}/t.jsonl, format: jsonl}}}}
queries:
  q:
    cql: "{cql}"
    sink: {{type: blackhole}}
    qos: {qos}
"""

JOIN = "SELECT * FROM S [Range 10000], T [Range 10000] WHERE S.a = T.a"
GROUP = "SELECT a, COUNT(*) AS n FROM S [Range 60000] GROUP BY a"


def managed(tmp_path, cql=JOIN, qos="{window: [1000, 10000]}", key="q", weight=1.0, d=10.0):
    """A `ManagedQuery` for the query `cql` with `qos`, observed with `d` time units between
    elements of each stream (24 bytes each), a join selectivity of 0.02 and 50 groups."""
    folder = tmp_path / key
    folder.mkdir(exist_ok=True)
    for name in ("s", "t"):
        (folder / f"{name}.jsonl").write_text("")
    text = PIPELINE.format(cql=cql, folder=folder, qos=qos)
    compiled = compile_pipeline(load_pipeline_text(text, str(folder / "p.yaml")))
    spec = compiled.spec.queries["q"].qos
    plan = compiled.plan
    low_high = {r.stream: (r.low, r.high) for r in spec.windows}

    def ranges(names):
        for n in names:
            if n in low_high:
                return low_high[n]
        return low_high.get(None)

    join = next((n.id for n in plan.nodes if isinstance(n.op, L.Join)), None)
    group = next((n.id for n in plan.nodes if isinstance(n.op, L.Aggregate)), None)
    obs = Observed(
        {"S": d, "T": d},
        {"S": 24.0, "T": 24.0},
        selectivity={join: 0.02} if join is not None else {},
        groups={group: 50.0} if group is not None else {},
    )
    return ManagedQuery(
        key, plan, obs, weight, window_knobs(plan, "q", ranges), tuple(spec.granularity)
    )
