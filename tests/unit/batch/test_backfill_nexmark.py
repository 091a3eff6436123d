"""Backfill equals `cq run` on every NEXMark query: byte for byte over the whole archive, and
from a T1 inside the data (windows reaching back before T1), on both paths."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

from cq_service.batch.backfill import plan_backfill, run_backfill
from cq_service.bench.cq_nexmark import NEXMARK_PIPELINE, one_query
from cq_service.compiler import compile_pipeline
from cq_service.io import nexmark
from cq_service.runner import run_pipeline
from cq_service.spec import load_pipeline
from tests.unit.batch.archive_fixture import write_archive

QUERIES = [f"q{i}" for i in range(9)]
EVENTS = 6_000
RATE = 0.2  # events per second of event time: 500 minutes, longer than most windows


@pytest.fixture(scope="module")
def nexmark_data(tmp_path_factory) -> Path:
    d = tmp_path_factory.mktemp("nexmark")
    nexmark.write(d / "data", EVENTS, rate=RATE)
    return d


def _run_and_archive(d: Path, query: str):
    spec = load_pipeline(NEXMARK_PIPELINE)
    one = one_query(spec, query, d / f"{query}.parquet", data=d / "data")
    run_pipeline(compile_pipeline(one))
    end = write_archive(one, d / f"archive-{query}", files_per_hour=2)
    return one, pq.read_table(d / f"{query}.parquet"), end


def _restricted(table: pa.Table, start: int) -> pa.Table:
    return table.filter(pc.greater_equal(table.column("_ts"), start))


# How the key path's streams reach the tasks: the default (small archives: each task filters
# its keys), and both spreads forced on three tasks (uneven buckets, the shuffle).
SPREADS = [(None, None), ("filter", 3), ("shuffle", 3)]
KEY_PATH = ("q0", "q1", "q2", "q3", "q8")


@pytest.mark.parametrize(("query", "spread", "partitions"), [
    (q, spread, parts) for q in QUERIES for spread, parts in SPREADS
    if q in KEY_PATH or spread is None
])
def test_backfill_equals_cq_run(spark, nexmark_data: Path, query: str, spread: str | None,
                                partitions: int | None) -> None:
    one, expected, end = _run_and_archive(nexmark_data, query)
    assert expected.num_rows > 0
    root = nexmark_data / f"archive-{query}"
    plan = plan_backfill(one, query, end=end, root=root)
    out = nexmark_data / f"bf-{query}-{spread}"
    report = run_backfill(plan, spark, out=out, spread=spread, partitions=partitions)
    got = pq.read_table(out / "part-0.parquet")
    assert got.equals(expected), plan.describe()
    archived = {s: pq.read_table(root / s).num_rows for s in plan.partitioning.streams}
    assert report.inputs == archived

    # From the middle of the data: state from before T1 counts, output before it does not.
    ts = expected.column("_ts").to_numpy()
    start = int(ts[3 * len(ts) // 4])
    plan = plan_backfill(one, query, start=start, end=end, root=root)
    run_backfill(plan, spark, out=out / "mid", spread=spread, partitions=partitions)
    got = pq.read_table(out / "mid" / "part-0.parquet")
    assert got.equals(_restricted(expected, start)), plan.describe()


def test_paths_are_the_expected_ones(nexmark_data: Path) -> None:
    spec = load_pipeline(NEXMARK_PIPELINE)
    paths = {}
    for q in QUERIES:
        one = one_query(spec, q, nexmark_data / "unused.parquet", data=nexmark_data / "data")
        paths[q] = plan_backfill(one, q, end=0, root=nexmark_data).partitioning
    assert {q for q, p in paths.items() if p.path == "key"} == {"q0", "q1", "q2", "q3", "q8"}
    assert paths["q8"].keys == {"Auction": "seller", "Person": "id"}
    assert paths["q0"].keys == {"Bid": None}
    assert "global aggregate" in paths["q7"].reason
