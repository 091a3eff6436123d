"""A runner checkpoint holds each query's engine state: a job refuses a checkpoint whose query
changed (its state is the old query's) or that an earlier runner wrote, and takes a new query
on with state of its own (no Spark needed: the job's state is read when it is made)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cq_service.batch.streaming import StreamingError, StreamingJob
from cq_service.spec import load_pipeline_text

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
    cql: {cql}
    sink: {{type: file, path: out.jsonl}}
{extra}"""

EXTRA = """\
  total:
    cql: SELECT COUNT(*) AS n FROM S [Range 10]
    sink: {type: file, path: total.jsonl}
"""


def _job(tmp_path: Path, cql: str, extra: str = "") -> StreamingJob:
    spec = load_pipeline_text(PIPELINE.format(cql=cql, extra=extra), tmp_path / "p.yaml")
    return StreamingJob(spec, None, tmp_path / "ckpt", partitions=3)


def test_a_changed_query_is_refused_and_a_new_one_starts_fresh(tmp_path):
    first = _job(tmp_path, "SELECT k, SUM(v) AS t FROM S [Range 10] GROUP BY k")
    assert first.state["queries"]["per_key"]["buckets"] == 3
    first.state["queries"]["per_key"]["version"] = 4
    first._commit()
    with pytest.raises(StreamingError, match=r"query per_key .* changed"):
        _job(tmp_path, "SELECT k, SUM(v) AS t FROM S [Range 20] GROUP BY k")
    again = _job(tmp_path, "SELECT k, SUM(v) AS t FROM S [Range 10] GROUP BY k", EXTRA)
    assert again.state["queries"]["per_key"]["version"] == 4
    total = again.state["queries"]["total"]
    assert (total["version"], total["token"], total["buckets"]) == (-1, "", 1)  # single key


def test_a_checkpoint_of_the_replaying_runner_is_refused(tmp_path):
    (tmp_path / "ckpt").mkdir()
    (tmp_path / "ckpt" / "cq-state.json").write_text(json.dumps(
        {"batch": 3, "streams": {}, "queries": {"per_key": {"emitted": 5, "state": "x"}}}))
    with pytest.raises(StreamingError, match="earlier runner"):
        _job(tmp_path, "SELECT k, SUM(v) AS t FROM S [Range 10] GROUP BY k")
