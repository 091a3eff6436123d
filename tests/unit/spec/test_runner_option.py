"""`resources.runner`: which engine runs the pipeline (embedded or Spark; docs/spark-runner.md)."""

from __future__ import annotations

from cq_service.spec import pipeline_schema
from cq_service.spec.model import DEFAULT_RUNNER, RUNNERS, ResourcesSpec

HEADER = "version: 1\nname: p\n"


def test_schema_enum_and_default_are_the_model_s():
    prop = pipeline_schema()["$defs"]["resources"]["properties"]["runner"]
    assert tuple(prop["enum"]) == RUNNERS
    assert prop["default"] == DEFAULT_RUNNER == ResourcesSpec().runner == "embedded"


def test_runner_spark_is_read(load):
    assert load(HEADER + "resources: {runner: spark}\n").resources.runner == "spark"


def test_an_unknown_runner_is_reported_with_its_position(problems):
    found = problems(HEADER + "resources:\n  runner: flink\n")
    assert len(found) == 1 and found[0].startswith("4:11: ") and "embedded, spark" in found[0]
