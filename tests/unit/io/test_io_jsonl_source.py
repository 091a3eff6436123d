"""jsonl sources: one object per line, NULLs, malformed lines, `_op`, chunking."""

from __future__ import annotations

import json
import math

import pytest

from cq_service.io import SourceError, open_source

SCHEMA = {"a": "int", "b": "float", "s": "string", "ok": "bool"}


def _lines(*objs: object) -> str:
    return "".join((o if isinstance(o, str) else json.dumps(o)) + "\n" for o in objs)


def test_objects_become_typed_rows(write, read):
    path = write(
        "s.jsonl",
        _lines(
            {"ok": True, "s": "x", "b": 1.5, "a": 7, "ts": 10, "extra": [1, {"n": 2}]},
            {"ts": 11, "a": 8, "b": 2, "s": "y", "ok": False},
        ),
    )
    r = read(path, SCHEMA)
    assert r.rows == [(7, 1.5, "x", True), (8, 2.0, "y", False)]
    assert r.ts == [10, 11]
    assert r.records == [1, 2]
    assert r.ops == [1, 1]
    assert r.dead == []


def test_missing_key_and_null_are_null(write, read):
    path = write("s.jsonl", _lines({"ts": 1}, {"ts": 2, "a": None, "s": None, "ok": None}))
    assert read(path, SCHEMA).rows == [(None, None, None, None)] * 2


def test_blank_and_whitespace_lines_are_skipped(write, read):
    path = write("s.jsonl", '{"ts":1,"a":1}\n\n   \n\r\n{"ts":2,"a":2}\n')
    r = read(path, {"a": "int"})
    assert r.rows == [(1,), (2,)]
    assert r.records == [1, 5]


def test_no_final_newline_and_crlf(write, read):
    path = write("s.jsonl", b'{"ts":1,"a":1}\r\n{"ts":2,"a":2}')
    assert read(path, {"a": "int"}).rows == [(1,), (2,)]


def test_json_types_convert(write, read):
    path = write(
        "s.jsonl",
        _lines(
            {"ts": 1.0, "a": 3.0, "b": 4, "ok": 1},
            {"ts": "1970-01-01T00:00:00.002Z", "a": "5", "b": "2.5", "ok": "yes"},
            '{"ts": 3, "b": NaN}',
        ),
    )
    r = read(path, SCHEMA)
    assert r.rows[:2] == [(3, 4.0, None, True), (5, 2.5, None, True)]
    assert r.ts == [1, 2, 3]
    assert math.isnan(r.rows[2][1])


def test_iso_timestamps_on_the_fast_path(write, read):
    path = write("s.jsonl", _lines({"ts": "1970-01-01T00:00:01Z"}, {"ts": "1970-01-01T00:00:02Z"}))
    assert read(path, {}).ts == [1000, 2000]


@pytest.mark.parametrize(
    ("line", "reason"),
    [
        ('{"ts": 1, "a": "abc"}', "column 'a': 'abc' is not an int"),
        ('{"ts": 1, "a": 1.5}', "column 'a': 1.5 is not an int"),
        ('{"ts": 1, "a": true}', "column 'a': true is not an int"),
        ('{"ts": 1, "s": 5}', "column 's': 5 is not a string"),
        ('{"ts": 1, "s": {"x": 1}}', "column 's': {\"x\": 1} is not a string"),
        ('{"ts": 1, "ok": 2}', "column 'ok': 2 is not a bool"),
        ('{"ts": 1, "b": [1]}', "column 'b': [1] is not a float"),
        ('{"a": 1}', "timestamp 'ts' is missing"),
        ('{"ts": null}', "timestamp 'ts' is missing"),
        ('{"ts": "later"}', "timestamp 'ts': 'later' is not a timestamp"),
        ('{"ts": 1.5}', "timestamp 'ts': 1.5 is not a timestamp"),
        ('{"ts": 1, "a": 1', "invalid JSON: Expecting ',' delimiter at column 17"),
        ("{bad}", "invalid JSON: Expecting property name enclosed in double quotes at column 2"),
        ('{"ts": 1}{"ts": 2}', "invalid JSON: Extra data at column 10"),
        ("[1, 2]", "not a JSON object: list"),
        ("7", "not a JSON object: int"),
    ],
)
def test_malformed_lines_are_dead_with_reason(write, read, line, reason):
    path = write("s.jsonl", _lines({"ts": 0, "a": 0}, line, {"ts": 2, "a": 2}))
    r = read(path, SCHEMA)
    assert r.rows == [(0, None, None, None), (2, None, None, None)]
    assert r.records == [1, 3]
    assert [(d.record, d.reason, d.raw) for d in r.dead] == [(2, reason, line)]
    assert r.dead[0].file.endswith("s.jsonl")


def test_invalid_utf8_is_dead(write, read):
    path = write("s.jsonl", b'{"ts":1}\n{"ts":2,"s":"\xff"}\n')
    r = read(path, {"s": "string"})
    assert r.ts == [1]
    assert r.reasons == [(2, "not valid UTF-8")]


def test_relation_op(write, read):
    path = write(
        "r.jsonl",
        _lines(
            {"ts": 1, "k": "x", "_op": "+"},
            {"ts": 2, "k": "x", "_op": "-"},
            {"ts": 3, "k": "y"},
            {"ts": 4, "k": "z", "_op": "delete"},
            {"ts": 5, "k": "z", "_op": 1},
        ),
    )
    r = read(path, {"k": "string"}, relation=True)
    assert r.rows == [("x",), ("x",), ("y",)]
    assert r.ops == [1, -1, 1]
    assert r.reasons == [(4, "_op: 'delete' is not '+' or '-'"), (5, "_op: 1 is not '+' or '-'")]


def test_ordinal_timestamps_count_malformed_lines_but_not_blank_ones(write, read):
    path = write("s.jsonl", '{"a":1}\n\n{oops\n{"a":3}\n   \n{"a":4}\n')
    r = read(path, {"a": "int"}, timestamp=None)
    assert r.rows == [(1,), (3,), (4,)]
    assert r.ts == [0, 2, 3]


@pytest.mark.parametrize("batch_rows", [1, 2, 4])
def test_chunked_reading_gives_the_same_elements(write, read, batch_rows):
    objs: list[object] = []
    for i in range(15):
        if i % 6 == 2:
            objs.append("{broken")
        elif i % 4 == 3:
            objs.append({"ts": i, "a": "x"})
        else:
            objs.append({"ts": i, "a": i})
    path = write("s.jsonl", _lines(*objs))
    whole = read(path, {"a": "int"})
    parts = read(path, {"a": "int"}, batch_rows=batch_rows)
    assert len(whole.chunks) == 1
    assert len(parts.chunks) > 1
    assert all(len(c) + len(c.dead) <= batch_rows for c in parts.chunks)
    for attr in ("rows", "ts", "ops", "records", "dead"):
        assert getattr(parts, attr) == getattr(whole, attr)
    assert [d.record for d in whole.dead] == [3, 4, 8, 9, 12, 15]


def test_unknown_option_is_an_error(stream, write):
    path = write("s.jsonl", "")
    with pytest.raises(SourceError, match="unknown jsonl source option"):
        open_source(stream(path, {}, options={"delimiter": ","}), "ms")


def test_empty_file_has_no_chunks(write, read):
    assert read(write("s.jsonl", ""), {"a": "int"}).chunks == []
    assert read(write("b.jsonl", "\n\n"), {"a": "int"}).chunks == []


def test_progress_counts_bytes_read_of_the_file(tmp_path, stream):
    path = tmp_path / "s.jsonl"
    path.write_text("".join(f'{{"a": {i}, "ts": {i}}}\n' for i in range(5)))
    with open_source(stream(path, {"a": "int"}), "ms", 2) as reader:
        assert reader.progress() == (0, path.stat().st_size)
        while reader.read() is not None:
            pass
        assert reader.progress() == (path.stat().st_size, path.stat().st_size)
    assert reader.progress() == (path.stat().st_size, path.stat().st_size)  # closed
