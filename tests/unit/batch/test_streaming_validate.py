"""`cq validate` on runner-spark pipelines: per query, supported or why not (no Spark needed)."""

from __future__ import annotations

from pathlib import Path

from typer.testing import CliRunner

from cq_service.cli import app
from tests.unit.batch.spark_pipelines import GLOBAL, PIPELINE


def _validate(tmp_path: Path, text: str):
    path = tmp_path / "p.yaml"
    path.write_text(text)
    return CliRunner().invoke(app, ["validate", str(path)]), path


def test_a_supported_pipeline_is_valid_and_says_how(tmp_path):
    result, path = _validate(tmp_path, PIPELINE.format(extra=""))
    assert result.exit_code == 0, result.output
    assert "per_key: runner spark: key-partitioned path (S by k)" in result.output
    assert f"{path}: ok" in result.output


def test_a_query_that_does_not_split_by_a_key_runs_on_one_key(tmp_path):
    result, _ = _validate(tmp_path, PIPELINE.format(extra=GLOBAL))
    assert result.exit_code == 0, result.output
    line = next(x for x in result.output.splitlines() if "everything" in x)
    assert line.startswith("everything: runner spark: single-partition path: ")
    assert "global aggregate" in line and "single key: one task" in line
    assert "per_key: runner spark: key-partitioned path (S by k)" in result.output


def test_a_file_stream_is_unsupported(tmp_path):
    text = PIPELINE.format(extra="").replace("{type: kafka, topic: s}",
                                             "{type: file, path: s.csv}")
    (tmp_path / "s.csv").write_text("k,v,ts\n")
    result, _ = _validate(tmp_path, text)
    assert result.exit_code == 2 and "stream S is read from file, not Kafka" in result.output


def test_the_embedded_runner_validates_as_before(tmp_path):
    text = PIPELINE.format(extra=GLOBAL).replace("resources: {runner: spark}\n", "")
    result, path = _validate(tmp_path, text)
    assert result.exit_code == 0 and result.output.strip() == f"{path}: ok"
