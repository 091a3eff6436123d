"""The pieces of a backfill's Spark tasks that run without Spark: key buckets, the share of row
groups per task, the archive listing and the replay order (`batch.backfill_tasks`)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
from hypothesis import given, settings
from hypothesis import strategies as st

from cq_service.batch.backfill_tasks import (
    Split,
    assign,
    key_buckets,
    list_splits,
    replay_sorted,
)
from cq_service.batch.engine_in_spark import TableReader
from cq_service.spec.model import FieldSpec, SourceSpec, StreamSpec
from cq_service.types import DataType


def test_equal_keys_share_a_bucket_whatever_their_type_or_chunking() -> None:
    ints = pa.array([0, 1, 2, -7, 2**40, None], pa.int64())
    floats = pa.array([-0.0, 1.0, 2.0, -7.0, float(2**40), None], pa.float64())
    for n in (2, 3, 7):
        assert key_buckets(ints, n).tolist() == key_buckets(floats, n).tolist()
        assert key_buckets(ints, n)[-1] == 0  # NULL
    nans = pa.array([float("nan"), -float("nan"), np.float64(np.nan)], pa.float64())
    assert len(set(key_buckets(nans, 5).tolist())) == 1
    bools = pa.array([True, False, None])
    assert key_buckets(bools, 4).tolist() == key_buckets(pa.array([1, 0, None]), 4).tolist()


@settings(max_examples=60, deadline=None)
@given(words=st.lists(st.text(max_size=12) | st.none(), min_size=1, max_size=40),
       cut=st.integers(0, 40), n=st.integers(1, 9))
def test_string_buckets_depend_on_the_value_only(words, cut, n) -> None:
    whole = key_buckets(pa.array(words, pa.string()), n)
    cut = min(cut, len(words))
    chunked = pa.chunked_array([pa.array(words[:cut], pa.string()),
                                pa.array(words[cut:], pa.string())])
    assert key_buckets(chunked, n).tolist() == whole.tolist()
    sliced = pa.array(["pad", *words], pa.large_string()).slice(1)
    assert key_buckets(sliced, n).tolist() == whole.tolist()
    alone = [int(key_buckets(pa.array([w], pa.string()), n)[0]) for w in words]
    assert alone == whole.tolist()
    assert all(0 <= b < n for b in whole)


def test_buckets_spread_keys_evenly() -> None:
    counts = np.bincount(key_buckets(pa.array(np.arange(100_000)), 4), minlength=4)
    assert counts.min() > 0.9 * 25_000
    words = pa.array([f"user-{i}" for i in range(20_000)])
    counts = np.bincount(key_buckets(words, 3), minlength=3)
    assert counts.min() > 0.9 * 20_000 / 3


def test_tasks_get_balanced_shares_and_big_row_groups_are_sliced() -> None:
    one = [Split(0, "a.parquet", 0, 1_000, 10)]
    shares = assign(one, 2)
    assert [[(p.part, p.parts, p.bounds) for p in s] for s in shares] == [
        [(0, 2, (0, 500))], [(1, 2, (500, 1_000))]]
    many = [Split(0, f"{k}.parquet", 0, rows, 10) for k, rows in enumerate([50, 40, 30, 20, 10])]
    shares = assign(many, 2)
    assert sorted(sum(p.size for p in s) for s in shares) == [70, 80]
    assert sorted((p.path, p.bounds) for s in shares for p in s) == sorted(
        (s.path, (0, s.rows)) for s in many)
    assert assign(many, 1) == [many]
    assert assign([], 3) == [[], [], []]


def _stream() -> StreamSpec:
    return StreamSpec("S", (FieldSpec("k", DataType.INT), FieldSpec("v", DataType.STRING)),
                      SourceSpec("file", "unused", "jsonl"))


def _archive_file(path: Path, ts: list[int], row_group_size: int | None = None) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    n = len(ts)
    pq.write_table(pa.table({
        "k": pa.array(range(n), pa.int64()), "v": pa.array([str(i) for i in range(n)]),
        "_ts": pa.array(ts, pa.int64()), "_partition": pa.array([0] * n, pa.int32()),
        "_offset": pa.array(range(n), pa.int64()),
    }), path, row_group_size=row_group_size)


def test_the_listing_prunes_hidden_files_other_days_and_row_groups_out_of_range(tmp_path) -> None:
    day = 86_400_000
    s = tmp_path / "S"
    _archive_file(s / "date=1970-01-01/hour=00/a.parquet", [1, 2, 3, 4, 5, 6], row_group_size=2)
    _archive_file(s / "date=1970-01-02/hour=00/b.parquet", [day + 1, day + 2])
    _archive_file(s / "_staging/date=1970-01-01/hour=00/c.parquet", [1])
    _archive_file(s / "date=1970-01-01/hour=00/.d.parquet", [1])
    splits = list_splits(tmp_path, "S", 0, "ms", 3, 4)
    assert [(Path(p.path).name, p.row_group, p.rows) for p in splits] == [
        ("a.parquet", 1, 2)]
    everything = list_splits(tmp_path, "S", 1, "ms", None, day + 2)
    assert [(Path(p.path).name, p.row_group) for p in everything] == [
        ("a.parquet", 0), ("a.parquet", 1), ("a.parquet", 2), ("b.parquet", 0)]
    assert {p.stream for p in everything} == {1}
    assert list_splits(tmp_path, "T", 0, "ms", None, day) == []


def test_replay_order_is_restored_only_when_broken() -> None:
    table = pa.table({"_ts": [1, 1, 1, 2], "_partition": pa.array([0, 1, 1, 0], pa.int32()),
                      "_offset": [9, 3, 4, 0]})
    assert replay_sorted(table) is not None and replay_sorted(table).equals(table)
    shuffled = table.take([3, 2, 0, 1])
    assert replay_sorted(shuffled).equals(table)


def test_the_engine_reader_reads_absent_columns_as_nulls() -> None:
    table = pa.table({"k": pa.array([1, 2, 3], pa.int64()), "_ts": [1, 2, 3],
                      "_offset": [0, 1, 2]})
    reader = TableReader(table, _stream(), end=10, batch_rows=2)
    first, second = reader.read(), reader.read()
    assert first.columns[0].to_pylist() == [1, 2] and second.columns[0].to_pylist() == [3]
    assert first.columns[1].to_pylist() == [None, None] and second.columns[1].to_pylist() == [None]
    assert first.columns[1].type == pa.string()
    assert second.ts.tolist() == [3] and second.record.tolist() == [2]
    assert reader.read().heartbeat == 10 and reader.read() is None
