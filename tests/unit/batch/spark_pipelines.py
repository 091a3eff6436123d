"""A runner-spark pipeline reading Kafka (`PIPELINE`: a keyed query, with room for `{extra}`
queries before its resources) and a global query to add to it (`GLOBAL`). Shared by
tests/unit/batch/test_streaming_validate.py and test_streaming_checkpoint.py."""

from __future__ import annotations

PIPELINE = """\
version: 1
name: p
time_unit: ms
streams:
  S:
    schema: {{k: int, v: int, ts: int}}
    timestamp: ts
    source: {{type: kafka, topic: s}}
queries:
  per_key:
    cql: SELECT k, SUM(v) AS total FROM S [Range 10] GROUP BY k
    sink: {{type: kafka, topic: out}}
{extra}resources: {{runner: spark}}
"""

GLOBAL = """\
  everything:
    cql: SELECT COUNT(*) AS n FROM S [Range 10]
    sink: {type: kafka, topic: out2}
"""
