"""Sinks: exact output of jsonl and csv, parquet round trip, stdout, blackhole, registry."""

from __future__ import annotations

import json
import math

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from cq_service.io import SinkError, json_lines, open_sink
from cq_service.spec.model import SinkSpec
from cq_service.types import DataType as T

NAMES = ["id", "price", "name", "ok"]
TYPES = [T.INT, T.FLOAT, T.STRING, T.BOOL]


def _example() -> tuple[np.ndarray, np.ndarray, list[pa.Array]]:
    ts = np.array([1, 2, 2, 5], dtype=np.int64)
    ops = np.array([1, -1, 1, 1], dtype=np.int8)
    columns = [
        pa.array([1, None, 3, -4], pa.int64()),
        pa.array([2.5, 3.0, float("nan"), float("-inf")]),
        pa.array(['say "hi"', "back\\slash", "tab\tnew\nline\x01", None]),
        pa.array([True, False, None, True]),
    ]
    return ts, ops, columns


def _write_example(tmp_path, fmt: str, **options):
    path = tmp_path / "out" / "deep" / f"r.{fmt}"
    sink = open_sink(SinkSpec("file", str(path), fmt, options), NAMES, TYPES)
    sink.write(*_example())
    sink.close()
    assert sink.count == 4
    return path


def test_jsonl_exact_bytes(tmp_path):
    path = _write_example(tmp_path, "jsonl")
    assert path.read_bytes() == (
        b'{"_ts":1,"_op":"+","id":1,"price":2.5,"name":"say \\"hi\\"","ok":true}\n'
        b'{"_ts":2,"_op":"-","id":null,"price":3.0,"name":"back\\\\slash","ok":false}\n'
        b'{"_ts":2,"_op":"+","id":3,"price":null,"name":"tab\\tnew\\nline\\u0001","ok":null}\n'
        b'{"_ts":5,"_op":"+","id":-4,"price":null,"name":null,"ok":true}\n'
    )


def test_jsonl_lines_parse_back(tmp_path):
    path = _write_example(tmp_path, "jsonl")
    rows = [json.loads(line) for line in path.read_text().splitlines()]
    assert [list(r) for r in rows] == [["_ts", "_op", *NAMES]] * 4
    assert rows[2]["name"] == "tab\tnew\nline\x01"


def test_csv_exact_bytes(tmp_path):
    path = _write_example(tmp_path, "csv")
    assert path.read_bytes() == (
        b"_ts,_op,id,price,name,ok\n"
        b'1,+,1,2.5,"say ""hi""",true\n'
        b"2,-,,3.0,back\\slash,false\n"
        b'2,+,3,NaN,"tab\tnew\nline\x01",\n'
        b"5,+,-4,-Infinity,,true\n"
    )


def test_csv_quotes_empty_strings_and_commas(tmp_path):
    path = tmp_path / "q.csv"
    sink = open_sink(SinkSpec("file", str(path), "csv"), ["a,b"], [T.STRING])
    sink.write(np.array([0, 0]), np.array([1, 1]), [pa.array(["", "x,y"])])
    sink.close()
    assert path.read_text() == '_ts,_op,"a,b"\n0,+,""\n0,+,"x,y"\n'


def test_parquet_round_trip(tmp_path):
    path = _write_example(tmp_path, "parquet")
    table = pq.read_table(path)
    assert table.schema.names == ["_ts", "_op", *NAMES]
    assert [str(t) for t in table.schema.types] == [
        "int64",
        "string",
        "int64",
        "double",
        "string",
        "bool",
    ]
    d = table.to_pydict()
    assert d["_ts"] == [1, 2, 2, 5]
    assert d["_op"] == ["+", "-", "+", "+"]
    assert d["id"] == [1, None, 3, -4]
    assert math.isnan(d["price"][2])
    assert d["name"][3] is None


def test_parquet_row_groups_follow_writes(tmp_path):
    path = tmp_path / "g.parquet"
    spec = SinkSpec("file", str(path), "parquet", {"row_group_rows": 3})
    sink = open_sink(spec, ["a"], [T.INT])
    for i in range(4):
        sink.write(np.array([i, i]), np.array([1, 1]), [pa.array([i, i])])
    sink.close()
    f = pq.ParquetFile(path)
    assert f.metadata.num_rows == 8
    assert f.metadata.num_row_groups == 2  # written once 3 or more rows are pending


def test_parquet_duplicate_names_are_made_unique(tmp_path):
    path = tmp_path / "d.parquet"
    sink = open_sink(SinkSpec("file", str(path), "parquet"), ["a", "a", "_ts"], [T.INT] * 3)
    sink.write(np.array([1]), np.array([1]), [pa.array([1]), pa.array([2]), pa.array([3])])
    sink.close()
    assert pq.read_table(path).to_pylist() == [{"_ts": 1, "_op": "+", "a": 1, "a_2": 2, "_ts_2": 3}]


def test_empty_parquet_sink_writes_a_valid_file(tmp_path):
    path = tmp_path / "e.parquet"
    open_sink(SinkSpec("file", str(path), "parquet"), ["a"], [T.INT]).close()
    assert pq.read_table(path).num_rows == 0


def test_duplicate_names_do_not_crash_text_sinks(tmp_path):
    for fmt in ("jsonl", "csv"):
        path = tmp_path / f"d.{fmt}"
        sink = open_sink(SinkSpec("file", str(path), fmt), ["a", "a"], [T.INT, T.INT])
        sink.write(np.array([1]), np.array([1]), [pa.array([1]), pa.array([2])])
        sink.close()
    assert (tmp_path / "d.jsonl").read_text() == '{"_ts":1,"_op":"+","a":1,"a":2}\n'


def test_file_sinks_truncate_at_open(tmp_path):
    path = tmp_path / "t.jsonl"
    path.write_text("old content\n")
    sink = open_sink(SinkSpec("file", str(path), "jsonl"), [], [])
    sink.close()
    assert path.read_text() == ""


def test_format_from_the_path_suffix(tmp_path):
    path = tmp_path / "x.csv"
    open_sink(SinkSpec("file", str(path)), ["a"], [T.INT]).close()
    assert path.read_text() == "_ts,_op,a\n"


def test_stdout_sink(capsys):
    sink = open_sink(SinkSpec("stdout"), ["s"], [T.STRING])
    sink.write(np.array([3]), np.array([-1]), [pa.array(["é"])])
    sink.flush()
    sink.close()
    assert capsys.readouterr().out == '{"_ts":3,"_op":"-","s":"é"}\n'
    assert sink.count == 1


def test_blackhole_only_counts():
    sink = open_sink(SinkSpec("blackhole"), NAMES, TYPES)
    sink.write(*_example())
    sink.write(*_example())
    sink.close()
    assert sink.count == 8


def test_empty_write_and_closed_sink(tmp_path):
    sink = open_sink(SinkSpec("file", str(tmp_path / "e.jsonl"), "jsonl"), ["a"], [T.INT])
    sink.write(np.empty(0, np.int64), np.empty(0, np.int8), [pa.array([], pa.int64())])
    assert sink.count == 0
    sink.close()
    sink.close()  # idempotent
    with pytest.raises(SinkError, match="closed"):
        sink.write(np.array([1]), np.array([1]), [pa.array([1])])


def test_mismatched_lengths_are_rejected(tmp_path):
    sink = open_sink(SinkSpec("blackhole"), ["a"], [T.INT])
    with pytest.raises(ValueError):
        sink.write(np.array([1, 2]), np.array([1, 1]), [pa.array([1])])


def test_unknown_sink_is_an_error(tmp_path):
    with pytest.raises(SinkError, match="unsupported sink 'file:xml'"):
        open_sink(SinkSpec("file", str(tmp_path / "x.xml"), "xml"), [], [])
    with pytest.raises(SinkError, match="unsupported sink 'kafkaa'"):
        open_sink(SinkSpec("kafkaa"), [], [])


def test_null_typed_and_chunked_columns(tmp_path):
    path = tmp_path / "n.jsonl"
    sink = open_sink(SinkSpec("file", str(path), "jsonl"), ["n", "c"], [T.NULL, T.INT])
    chunked = pa.chunked_array([[1], [2]])
    sink.write(np.array([0, 1]), np.array([1, 1]), [pa.nulls(2), chunked])
    sink.close()
    assert (
        path.read_text()
        == '{"_ts":0,"_op":"+","n":null,"c":1}\n{"_ts":1,"_op":"+","n":null,"c":2}\n'
    )


def test_json_lines_match_json_dumps_on_many_values():
    rng = np.random.default_rng(7)
    n = 70_000  # more than one encoding slice
    floats = rng.standard_normal(n) * 10.0 ** rng.integers(-30, 30, n)
    floats[::1000] = np.round(floats[::1000])
    strings = ["".join(chr(c) for c in rng.integers(0, 0x2FF, 5)) for _ in range(n)]
    ts = np.arange(n, dtype=np.int64)
    ops = np.where(rng.random(n) < 0.5, -1, 1).astype(np.int8)
    cols = [pa.array(floats), pa.array(strings)]
    lines = json_lines(ts, ops, cols, ["f", "s"]).to_pylist()
    for i in range(0, n, 97):
        obj = json.loads(lines[i])
        assert obj == {
            "_ts": i,
            "_op": "+" if ops[i] > 0 else "-",
            "f": float(floats[i]),
            "s": strings[i],
        }
        assert json.dumps(strings[i], ensure_ascii=False) in lines[i]
        assert isinstance(obj["f"], float)


def test_large_write_is_complete(tmp_path):
    path = tmp_path / "big.jsonl"
    n = 150_000
    sink = open_sink(SinkSpec("file", str(path), "jsonl"), ["a"], [T.INT])
    sink.write(np.arange(n), np.ones(n, np.int8), [pa.array(np.arange(n) * 2)])
    sink.close()
    lines = path.read_text().splitlines()
    assert len(lines) == n
    assert lines[-1] == f'{{"_ts":{n - 1},"_op":"+","a":{2 * (n - 1)}}}'
