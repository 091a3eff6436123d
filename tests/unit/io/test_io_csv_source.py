"""csv sources: columns by header name, NULLs, malformed records, `_op`, chunking, options."""

from __future__ import annotations

import pytest

from cq_service.io import SourceError, open_source

SCHEMA = {"a": "int", "b": "float", "s": "string", "ok": "bool"}


def test_columns_by_header_name_in_schema_order(write, read):
    path = write("s.csv", "extra,s,ts,ok,b,a\nz,x,10,true,1.5,7\nz,y,11,F,-2,8\n")
    r = read(path, SCHEMA)
    assert r.rows == [(7, 1.5, "x", True), (8, -2.0, "y", False)]
    assert r.ts == [10, 11]
    assert r.ops == [1, 1]
    assert r.records == [2, 3]  # the header is line 1
    assert r.dead == []


def test_column_types_are_the_schema_arrow_types(stream, write):
    path = write("s.csv", "ts,a,b,s,ok\n1,2,3,x,yes\n")
    chunk = open_source(stream(path, SCHEMA), "ms").read()
    assert [str(c.type) for c in chunk.columns] == ["int64", "double", "string", "bool"]


def test_timestamp_field_is_in_the_tuple_only_if_listed(write, read):
    path = write("s.csv", "ts,a\n5,1\n6,2\n")
    assert read(path, {"a": "int"}).rows == [(1,), (2,)]
    listed = read(path, {"ts": "timestamp", "a": "int"})
    assert listed.rows == [(5, 1), (6, 2)]
    assert listed.ts == [5, 6]


def test_empty_field_is_null_except_for_strings(write, read):
    path = write("s.csv", "ts,a,b,s,ok\n1,,,,\n")
    assert read(path, SCHEMA).rows == [(None, None, "", None)]


def test_quoted_fields(write, read):
    path = write("s.csv", 'ts,a,b,s,ok\n1,1,1,"x, ""y""",t\n2,2,2,"",f\n')
    assert [row[2] for row in read(path, SCHEMA).rows] == ['x, "y"', ""]


def test_blank_lines_crlf_bom_and_no_final_newline(write, read):
    data = "\ufeffts,a\r\n1,10\r\n\r\n\n2,20\r\n3,30"
    r = read(write("s.csv", data.encode("utf-8")), {"a": "int"})
    assert r.rows == [(10,), (20,), (30,)]
    assert r.records == [2, 5, 6]


def test_wrong_field_count_is_dead_with_line_and_raw_text(write, read):
    path = write("s.csv", "ts,a,s\n1,1,x\n2,2\n3,3,y,extra\n4,4,z\n")
    r = read(path, {"a": "int", "s": "string"})
    assert r.rows == [(1, "x"), (4, "z")]
    assert r.records == [2, 5]
    assert [(d.record, d.reason, d.raw) for d in r.dead] == [
        (3, "expected 3 fields, found 2", "2,2"),
        (4, "expected 3 fields, found 4", "3,3,y,extra"),
    ]
    assert {(d.source, d.file) for d in r.dead} == {("S", str(path))}


@pytest.mark.parametrize(
    ("line", "reason"),
    [
        ("1,abc,1.5,x,t", "column 'a': 'abc' is not an int"),
        ("1,1.5,1.5,x,t", "column 'a': '1.5' is not an int"),
        ("1,99999999999999999999,1,x,t", "column 'a': '99999999999999999999' is not an int"),
        ("1,1,1.5.2,x,t", "column 'b': '1.5.2' is not a float"),
        ("1,1,1_0,x,t", "column 'b': '1_0' is not a float"),
        ("1,1,1,x,maybe", "column 'ok': 'maybe' is not a bool"),
        (",1,1,x,t", "timestamp 'ts' is missing"),
        ("soon,1,1,x,t", "timestamp 'ts': 'soon' is not a timestamp"),
        ("1.5,1,1,x,t", "timestamp 'ts': '1.5' is not a timestamp"),
        ("2024-13-01,1,1,x,t", "timestamp 'ts': '2024-13-01' is not a timestamp"),
    ],
)
def test_bad_values_are_dead_with_reason(write, read, line, reason):
    path = write("s.csv", f"ts,a,b,s,ok\n0,0,0,ok,f\n{line}\n2,2,2,ok,t\n")
    r = read(path, SCHEMA)
    assert r.records == [2, 4]
    assert r.reasons == [(3, reason)]
    assert r.dead[0].raw == line


def test_first_problem_wins_timestamp_then_op_then_columns(write, read):
    path = write("s.csv", "ts,a,ok,_op\nx,y,z,*\n1,y,z,*\n1,y,z,+\n1,1,z,+\n")
    r = read(path, {"a": "int", "ok": "bool"}, relation=True)
    assert [reason for _, reason in r.reasons] == [
        "timestamp 'ts': 'x' is not a timestamp",
        "_op: '*' is not '+' or '-'",
        "column 'a': 'y' is not an int",
        "column 'ok': 'z' is not a bool",
    ]


def test_good_values_convert_the_same_on_the_slow_path(write, read):
    # One bad value sends the block's column to per-value parsing; the others must not change.
    good = "ts,a,b\n1,0x10,1e3\n2,-7,inf\n3,+4,NaN\n"
    bad = good + "4,oops,1\n"
    fast = read(write("fast.csv", good), {"a": "int", "b": "float"})
    slow = read(write("slow.csv", bad), {"a": "int", "b": "float"})
    assert repr(fast.rows) == repr(slow.rows)  # NaN != NaN, but its repr is stable
    assert fast.rows[0] == (16, 1000.0)
    assert slow.rows[:2] == [(16, 1000.0), (-7, float("inf"))]
    assert slow.reasons == [(5, "column 'a': 'oops' is not an int")]


def test_slow_path_accepts_surrounding_spaces_and_integral_floats(write, read):
    path = write("s.csv", "ts,a\n1, 12 \n2,3.0\n3,1e2\n")
    assert read(path, {"a": "int"}).rows == [(12,), (3,), (100,)]


def test_relation_op_column(write, read):
    path = write("r.csv", "ts,k,_op\n1,x,+\n2,x,-\n3,y,\n4,z,*\n")
    r = read(path, {"k": "string"}, relation=True)
    assert r.rows == [("x",), ("x",), ("y",)]
    assert r.ops == [1, -1, 1]
    assert r.reasons == [(5, "_op: '*' is not '+' or '-'")]


def test_relation_without_op_column_inserts(write, read):
    r = read(write("r.csv", "ts,k\n1,x\n"), {"k": "string"}, relation=True)
    assert r.ops == [1]


def test_stream_ignores_an_op_column(write, read):
    r = read(write("s.csv", "ts,k,_op\n1,x,-\n2,y,junk\n"), {"k": "string"})
    assert r.ops == [1, 1]
    assert r.dead == []


def test_ordinal_timestamps_count_every_record(write, read):
    path = write("s.csv", "a\n10\n\nbad\n30\n40\n")
    r = read(path, {"a": "int"}, timestamp=None)
    assert r.rows == [(10,), (30,), (40,)]
    assert r.ts == [0, 2, 3]  # the blank line is no record; the malformed one is
    assert r.reasons == [(4, "column 'a': 'bad' is not an int")]


@pytest.mark.parametrize("batch_rows", [1, 2, 3, 5])
def test_chunked_reading_gives_the_same_elements(write, read, batch_rows):
    lines = ["ts,a"]
    for i in range(20):
        lines.append("" if i % 7 == 3 else f"{i},{'x' if i % 5 == 4 else i}")
    path = write("s.csv", "\n".join(lines) + "\n")
    whole = read(path, {"a": "int"}, batch_rows=1000)
    parts = read(path, {"a": "int"}, batch_rows=batch_rows)
    assert len(whole.chunks) == 1
    assert all(len(c) + len(c.dead) <= batch_rows for c in parts.chunks)
    assert len(parts.chunks) > 1
    for attr in ("rows", "ts", "ops", "records", "dead"):
        assert getattr(parts, attr) == getattr(whole, attr)
    assert [d.record for d in whole.dead] == [6, 11, 16, 21]


def test_ordinal_timestamps_are_stable_across_chunks(write, read):
    path = write("s.csv", "a\n" + "\n".join(str(i) for i in range(10)) + "\n")
    assert read(path, {"a": "int"}, timestamp=None, batch_rows=3).ts == list(range(10))


def test_quoted_line_break_makes_the_lines_malformed(write, read):
    path = write("s.csv", 'ts,a,s\n1,1,"x\ny"\n2,2,z\n')
    r = read(path, {"a": "int", "s": "string"})
    assert r.rows[-1] == (2, "z")
    assert r.dead and r.dead[0].record == 2


def test_missing_schema_column_is_an_error_for_the_file(stream, write):
    path = write("s.csv", "ts,a\n1,2\n")
    with pytest.raises(SourceError, match=r"missing column\(s\) 'b' \(the header has: ts, a\)"):
        open_source(stream(path, {"a": "int", "b": "int"}), "ms")


def test_missing_timestamp_column_is_an_error(stream, write):
    path = write("s.csv", "a\n1\n")
    with pytest.raises(SourceError, match="missing column"):
        open_source(stream(path, {"a": "int"}), "ms")


def test_empty_file_is_an_error_but_header_only_is_empty(stream, write, read):
    with pytest.raises(SourceError, match="no columns"):
        open_source(stream(write("e.csv", ""), {"a": "int"}), "ms")
    assert read(write("h.csv", "ts,a\n"), {"a": "int"}).chunks == []


def test_missing_file_is_an_error(stream, tmp_path):
    with pytest.raises(SourceError, match="cannot open"):
        open_source(stream(tmp_path / "nope.csv", {"a": "int"}), "ms")


def test_delimiter_option(write, read):
    path = write("s.csv", "ts;a;s\n1;2;x,y\n")
    r = read(path, {"a": "int", "s": "string"}, options={"delimiter": ";"})
    assert r.rows == [(2, "x,y")]


def test_headerless_file_with_columns_option(write, read):
    path = write("s.csv", "1,x\n2,y\n")
    r = read(path, {"s": "string"}, options={"header": False, "columns": ["ts", "s"]})
    assert r.rows == [("x",), ("y",)]
    assert r.records == [1, 2]


def test_unknown_option_is_an_error(stream, write):
    path = write("s.csv", "ts,a\n")
    with pytest.raises(SourceError, match="unknown csv source option"):
        open_source(stream(path, {"a": "int"}, options={"delimeter": ";"}), "ms")


def test_many_rows_in_one_block(write, read):
    n = 5000
    body = "".join(f"{i},{i * 2},s{i}\n" for i in range(n))
    r = read(write("s.csv", "ts,a,s\n" + body), {"a": "int", "s": "string"})
    assert len(r.rows) == n
    assert r.rows[-1] == (2 * (n - 1), f"s{n - 1}")
    assert r.records[-1] == n + 1


def test_invalid_utf8_line_is_dead(write, read):
    path = write("s.csv", b"ts,s,x\n1,a,b\n2,\xff,b\n3,c,\xfe\n")
    r = read(path, {"s": "string"})
    assert r.rows == [("a",)]
    assert r.reasons == [(3, "not valid UTF-8"), (4, "not valid UTF-8")]
    assert r.dead[0].raw == "2,\ufffd,b"


def test_ordinal_stream_with_no_columns(write, read):
    r = read(write("s.csv", "x,y\n1,a\n2,b\n"), {}, timestamp=None)
    assert r.rows == [(), ()]
    assert r.ts == [0, 1]
