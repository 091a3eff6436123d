"""A runner checkpoint holds each query's engine state: a job refuses a checkpoint whose query
changed (its state is the old query's) or that an earlier runner wrote, and takes a new query
on with state of its own (no Spark needed: the job's state is read when it is made)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cq_service.batch.streaming import StreamingError, StreamingJob
from cq_service.spec import load_pipeline_text
from tests.unit.batch.spark_pipelines import GLOBAL, PIPELINE

ORIGINAL = PIPELINE.format(extra="")  # per_key: SUM(v) over [Range 10] grouped by k


def _job(tmp_path: Path, text: str) -> StreamingJob:
    spec = load_pipeline_text(text, tmp_path / "p.yaml")
    return StreamingJob(spec, None, tmp_path / "ckpt", partitions=3)


def test_a_changed_query_is_refused_and_a_new_one_starts_fresh(tmp_path):
    first = _job(tmp_path, ORIGINAL)
    assert first.state["queries"]["per_key"]["buckets"] == 3
    first.state["queries"]["per_key"]["version"] = 4
    first._commit()
    with pytest.raises(StreamingError, match=r"query per_key .* changed"):
        _job(tmp_path, ORIGINAL.replace("[Range 10]", "[Range 20]"))
    again = _job(tmp_path, PIPELINE.format(extra=GLOBAL))
    assert again.state["queries"]["per_key"]["version"] == 4
    added = again.state["queries"]["everything"]
    assert (added["version"], added["token"], added["buckets"]) == (-1, "", 1)  # single key


def test_a_checkpoint_of_the_replaying_runner_is_refused(tmp_path):
    (tmp_path / "ckpt").mkdir()
    (tmp_path / "ckpt" / "cq-state.json").write_text(json.dumps(
        {"batch": 3, "streams": {}, "queries": {"per_key": {"emitted": 5, "state": "x"}}}))
    with pytest.raises(StreamingError, match="earlier runner"):
        _job(tmp_path, ORIGINAL)
