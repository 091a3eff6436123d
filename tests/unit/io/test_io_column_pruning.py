"""Sources given the columns a pipeline uses: which leave the others unread (NULL), and which
must read them anyway so that malformed records stay malformed."""

from __future__ import annotations

import json

import pyarrow as pa
import pyarrow.parquet as pq

from cq_service.io import open_source
from cq_service.spec.model import FieldSpec, SourceSpec, StreamSpec
from cq_service.types import DataType
from tests.unit.io.conftest import collect, make_stream

SCHEMA = {"a": "int", "s": "string", "b": "int"}


def read_used(stream: StreamSpec, columns, batch_rows: int = 65536):
    with open_source(stream, "ms", batch_rows, columns=columns) as reader:
        return collect(list(reader)), reader


def test_parquet_unused_column_of_exact_type_is_not_read(tmp_path):
    path = tmp_path / "s.parquet"
    pq.write_table(
        pa.table({"ts": [1, 2], "a": [10, 20], "s": ["x", "y"], "b": [5, 6]}), path
    )
    r, reader = read_used(make_stream(path, SCHEMA), {"a"})
    assert reader.unread == {"s", "b"}
    assert r.rows == [(10, None, None), (20, None, None)]
    assert r.ts == [1, 2]
    assert [c.type for c in r.chunks[0].columns] == [pa.int64(), pa.string(), pa.int64()]
    full, reader = read_used(make_stream(path, SCHEMA), None)
    assert reader.unread == frozenset()
    assert full.rows == [(10, "x", 5), (20, "y", 6)]


def test_parquet_mismatched_type_is_read_and_still_dead_letters(tmp_path):
    # `b` is stored as strings: converting it can fail, so it is read although unused.
    path = tmp_path / "s.parquet"
    pq.write_table(
        pa.table({"ts": [1, 2], "a": [10, 20], "s": ["x", "y"], "b": ["5", "oops"]}), path
    )
    r, reader = read_used(make_stream(path, SCHEMA), {"a"})
    assert reader.unread == {"s"}
    assert r.rows == [(10, None, 5)]
    assert [d.record for d in r.dead] == [2]
    assert "column 'b'" in r.dead[0].reason
    # The dead record's raw text still shows the whole row, unread columns included.
    assert json.loads(r.dead[0].raw) == {"a": 20, "s": "y", "b": "oops", "ts": 2}


def test_parquet_int32_column_is_not_pruned(tmp_path):
    path = tmp_path / "s.parquet"
    pq.write_table(
        pa.table({"ts": [1], "a": [1], "s": ["x"], "b": pa.array([7], pa.int32())}), path
    )
    r, reader = read_used(make_stream(path, SCHEMA), {"a"})
    assert reader.unread == {"s"}
    assert r.rows == [(1, None, 7)]


def test_parquet_timestamp_field_is_always_read(tmp_path):
    path = tmp_path / "s.parquet"
    pq.write_table(pa.table({"ts": [3, 4], "a": [1, 2]}), path)
    stream = make_stream(path, {"a": "int", "ts": "timestamp"})
    r, reader = read_used(stream, set())
    assert reader.unread == {"a"}
    assert r.rows == [(None, 3), (None, 4)] and r.ts == [3, 4]


def test_parquet_no_column_used_still_reads_every_row(tmp_path):
    path = tmp_path / "s.parquet"
    pq.write_table(pa.table({"a": [1, 2, 3], "s": ["x", "y", "z"]}), path)
    stream = make_stream(path, {"a": "int", "s": "string"}, timestamp=None)
    r, reader = read_used(stream, set(), batch_rows=2)
    assert reader.unread == {"a", "s"}
    assert r.rows == [(None, None)] * 3 and r.ts == [0, 1, 2]


def test_csv_reads_every_column_and_dead_letters_bad_unused_values(tmp_path):
    path = tmp_path / "s.csv"
    path.write_text("ts,a,s,b\n1,10,x,5\n2,20,y,oops\n", encoding="utf-8")
    r, _ = read_used(make_stream(path, SCHEMA), {"a"})
    assert r.rows == [(10, "x", 5)]
    assert [d.record for d in r.dead] == [3]


def test_jsonl_reads_every_column(tmp_path):
    path = tmp_path / "s.jsonl"
    path.write_text(
        '{"ts": 1, "a": 10, "s": "x", "b": 5}\n{"ts": 2, "a": 20, "s": "y", "b": "oops"}\n',
        encoding="utf-8",
    )
    r, _ = read_used(make_stream(path, SCHEMA), {"a"})
    assert r.rows == [(10, "x", 5)]
    assert [d.record for d in r.dead] == [2]


def _bid_stream(schema: dict[str, str]) -> StreamSpec:
    fields = tuple(FieldSpec(n, DataType(t)) for n, t in schema.items())
    options = {"generator": "nexmark", "table": "bid", "events": 500, "seed": 3}
    return StreamSpec("Bid", fields, SourceSpec("generator", None, None, options), "dateTime")


def test_generator_leaves_unused_columns_unconverted():
    schema = {"auction": "int", "price": "int", "url": "string", "extra": "string"}
    pruned, _ = read_used(_bid_stream(schema), {"auction"})
    full, _ = read_used(_bid_stream(schema), None)
    assert len(pruned.rows) == len(full.rows) > 0
    assert pruned.ts == full.ts and pruned.records == full.records
    assert [r[0] for r in pruned.rows] == [r[0] for r in full.rows]
    assert all(r[1:] == (None, None, None) for r in pruned.rows)
    assert all(r[2] is not None for r in full.rows)


def test_generator_converts_unused_column_of_another_type():
    # `url` declared int: every value fails to convert, used or not, so every record is dead.
    schema = {"auction": "int", "url": "int"}
    r, _ = read_used(_bid_stream(schema), {"auction"})
    assert r.rows == [] and len(r.dead) > 0
