"""What the Spark runner's tests share (tests/integration/test_spark_runner.py,
test_spark_cluster.py): `MULTI`, a two-query pipeline over a Kafka topic (three partitions in
the tests), a spec's sinks redirected to JSON-lines files (`with_file_sinks`), and those files
read back (`lines`) and compared per instant (`assert_same`)."""

from __future__ import annotations

import dataclasses
import json
from collections import Counter
from pathlib import Path

from cq_service.spec.model import SinkSpec

MULTI = """\
version: 1
name: multi
time_unit: ms
streams:
  S:
    schema: {{k: int, v: int, ts: int}}
    timestamp: ts
    max_delay: 20
    late: dead_letter
    source: {{type: kafka, topic: {topic}, bootstrap_servers: '{bootstrap}'}}
queries:
  counts:
    cql: SELECT k, COUNT(*) AS n, SUM(v) AS total FROM S [Range 100 Slide 50] GROUP BY k
    sink: {{type: file, path: out/counts.jsonl}}
  pairs:
    cql: >
      SELECT Istream(a.k, a.v, b.v) FROM S a [Range 30], S b [Range 30]
      WHERE a.k = b.k AND a.v < b.v
    sink: {{type: file, path: out/pairs.jsonl}}
"""


def with_file_sinks(spec, out: Path):
    queries = {
        n: dataclasses.replace(q, sink=SinkSpec("file", str(out / f"{n}.jsonl"), "jsonl"))
        if q.sink else q
        for n, q in spec.queries.items()
    }
    dead = SinkSpec("file", str(out / "dead.jsonl"), "jsonl")
    return dataclasses.replace(spec, queries=queries, dead_letter=dead)


def lines(path: Path) -> list[str]:
    return path.read_text().splitlines() if path.exists() else []


def assert_same(expected: list[str], got: list[str]) -> None:
    """Per-_ts bags equal, lines in non-decreasing _ts."""
    ts = [json.loads(line)["_ts"] for line in got]
    assert ts == sorted(ts)
    def bags(ls):
        out: dict[int, Counter] = {}
        for line in ls:
            out.setdefault(json.loads(line)["_ts"], Counter())[line] += 1
        return out
    assert bags(got) == bags(expected)
