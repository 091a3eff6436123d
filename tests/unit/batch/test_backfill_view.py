"""A view (a query with no sink) is backfilled like any query: `--out` gets exactly what `cq run`
would write had the view a sink."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pyarrow.parquet as pq

from cq_service.batch.backfill import plan_backfill, run_backfill
from cq_service.compiler import compile_pipeline, subset
from cq_service.runner import run_pipeline
from cq_service.spec import load_pipeline
from cq_service.spec.model import SinkSpec
from tests.unit.batch.archive_fixture import write_archive

WEB_PROXY = Path(__file__).resolve().parents[3] / "pipelines/examples/web-proxy/pipeline.yaml"


def test_a_view_backfills_to_what_cq_run_gives_it(spark, tmp_path: Path) -> None:
    spec = load_pipeline(WEB_PROXY)
    assert spec.queries["recent"].sink is None
    end = write_archive(spec, tmp_path / "archive")
    plan = plan_backfill(spec, "recent", end=end, root=tmp_path / "archive")
    run_backfill(plan, spark, out=tmp_path / "bf")
    got = pq.read_table(tmp_path / "bf" / "part-0.parquet")

    sink = SinkSpec("file", str(tmp_path / "recent.parquet"), "parquet")
    with_sink = replace(spec, queries={**spec.queries,
                                       "recent": replace(spec.queries["recent"], sink=sink)})
    run_pipeline(compile_pipeline(subset(with_sink, ["recent"])))
    expected = pq.read_table(tmp_path / "recent.parquet")
    assert expected.num_rows > 0
    assert got.equals(expected)
