"""parquet sources: columns by name, casts to the schema types, bad values, chunking."""

from __future__ import annotations

import datetime as dt
import json

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from cq_service.io import SourceError, open_source


@pytest.fixture
def parquet(tmp_path):
    def _write(table: pa.Table, name: str = "s.parquet", **kwargs):
        path = tmp_path / name
        pq.write_table(table, path, **kwargs)
        return path

    return _write


def test_columns_by_name_cast_to_schema_types(parquet, read):
    table = pa.table(
        {
            "s": ["x", None, "z"],
            "a": pa.array([1, 2, None], pa.int32()),
            "ts": pa.array([10, 11, 12], pa.int64()),
            "b": pa.array([1.5, 2.0, 3.5], pa.float32()),
            "ok": [True, False, None],
            "extra": [1, 2, 3],
        }
    )
    r = read(parquet(table), {"a": "int", "b": "float", "s": "string", "ok": "bool"})
    assert r.rows == [(1, 1.5, "x", True), (2, 2.0, None, False), (None, 3.5, "z", None)]
    assert r.ts == [10, 11, 12]
    assert r.records == [1, 2, 3]
    assert r.ops == [1, 1, 1]
    assert [str(c.type) for c in r.chunks[0].columns] == ["int64", "double", "string", "bool"]


def test_timestamp_typed_column_converts_to_time_unit(parquet, read):
    stamps = [dt.datetime(1970, 1, 1, 0, 0, 1, 500_000), dt.datetime(1970, 1, 1, 0, 1)]
    table = pa.table(
        {
            "ts": pa.array(stamps, pa.timestamp("us", tz="UTC")),
            "at": pa.array(stamps, pa.timestamp("ms")),
        }
    )
    path = parquet(table)
    assert read(path, {"at": "timestamp"}, time_unit="s").rows == [(1,), (60,)]
    assert read(path, {"at": "timestamp"}, time_unit="ms").ts == [1500, 60_000]
    assert read(path, {}, time_unit="ns").ts == [1_500_000_000, 60_000_000_000]


def test_dictionary_and_large_string_columns(parquet, read):
    table = pa.table(
        {
            "ts": [1, 2],
            "d": pa.array(["a", "b"]).dictionary_encode(),
            "l": pa.array(["x", "y"], pa.large_string()),
        }
    )
    assert read(parquet(table), {"d": "string", "l": "string"}).rows == [("a", "x"), ("b", "y")]


def test_bad_values_are_dead_with_the_row_as_json(parquet, read):
    table = pa.table({"ts": [1, 2, 3, None], "a": [1.0, 1.5, 3.0, 4.0], "s": ["x", "y", "z", "w"]})
    r = read(parquet(table), {"a": "int", "s": "string"})
    assert r.rows == [(1, "x"), (3, "z")]
    assert r.records == [1, 3]
    assert [(d.record, d.reason) for d in r.dead] == [
        (2, "column 'a': 1.5 is not an int"),
        (4, "timestamp 'ts' is missing"),
    ]
    assert json.loads(r.dead[0].raw) == {"a": 1.5, "s": "y", "ts": 2}


def test_string_column_read_as_int(parquet, read):
    table = pa.table({"ts": [1, 2], "a": ["7", "seven"]})
    r = read(parquet(table), {"a": "int"})
    assert r.rows == [(7,)]
    assert r.reasons == [(2, "column 'a': 'seven' is not an int")]


def test_relation_op_column(parquet, read):
    table = pa.table({"ts": [1, 2, 3, 4], "k": ["x", "x", "y", "z"], "_op": ["+", "-", None, "?"]})
    r = read(parquet(table), {"k": "string"}, relation=True)
    assert r.rows == [("x",), ("x",), ("y",)]
    assert r.ops == [1, -1, 1]
    assert r.reasons == [(4, "_op: '?' is not '+' or '-'")]


def test_ordinal_timestamps_and_chunks(parquet, read):
    table = pa.table({"a": list(range(10))})
    path = parquet(table, row_group_size=4)
    r = read(path, {"a": "int"}, timestamp=None, batch_rows=3)
    assert r.ts == list(range(10))
    assert r.records == list(range(1, 11))
    assert len(r.chunks) >= 4
    assert all(len(c) <= 3 for c in r.chunks)


def test_missing_column_is_an_error(parquet, stream):
    path = parquet(pa.table({"ts": [1], "a": [1]}))
    with pytest.raises(SourceError, match=r"missing column\(s\) 'b' \(the file has: ts, a\)"):
        open_source(stream(path, {"a": "int", "b": "int"}), "ms")


def test_not_a_parquet_file_is_an_error(write, stream):
    path = write("s.parquet", "ts,a\n1,2\n")
    with pytest.raises(SourceError, match="not a parquet file"):
        open_source(stream(path, {"a": "int"}), "ms")


def test_progress_counts_rows_read_of_the_file(parquet, stream):
    path = parquet(pa.table({"a": list(range(10)), "ts": list(range(10))}))
    with open_source(stream(path, {"a": "int"}), "ms", 4) as reader:
        seen = [reader.progress()]
        while reader.read() is not None:
            seen.append(reader.progress())
    assert seen == [(0, 10), (4, 10), (8, 10), (10, 10)]
