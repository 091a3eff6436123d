"""Value conversion per type, the same for csv fields and JSON strings."""

from __future__ import annotations

import json
import math

import pytest

VALID = {
    "int": [
        ("42", 42),
        ("-7", -7),
        ("+3", 3),
        (" 12 ", 12),
        ("3.0", 3),
        ("1e3", 1000),
        ("0x1F", 31),
        ("9223372036854775807", 2**63 - 1),
        ("", None),
    ],
    "float": [
        ("1.5", 1.5),
        ("-2e-3", -0.002),
        ("7", 7.0),
        ("inf", math.inf),
        ("-Infinity", -math.inf),
        ("", None),
    ],
    "bool": [
        ("true", True),
        ("FALSE", False),
        ("t", True),
        ("F", False),
        ("1", True),
        ("0", False),
        ("Yes", True),
        ("no", False),
        ("", None),
    ],
    "timestamp": [
        ("5", 5),
        ("-5", -5),
        ("5.0", 5),
        ("1970-01-01T00:00:01Z", 1000),
        ("1970-01-01 00:00:01", 1000),
        ("1970-01-01T00:00:01.2509Z", 1250),
        ("1970-01-01T01:00:01+01:00", 1000),
        ("1970-01-01T00:00:01-0030", 1000 + 30 * 60_000),
        ("1970-01-02", 86_400_000),
        ("1969-12-31T23:59:59.9995Z", -1),
        ("", None),
    ],
    "string": [("x", "x"), ("", ""), (" padded ", " padded "), ("ünï", "ünï")],
}

INVALID = {
    "int": ["abc", "1.5", "1_000", "9223372036854775808", "nan", "0x"],
    "float": ["abc", "1,5", "1_0", "--1"],
    "bool": ["maybe", "2", "on", "y"],
    "timestamp": ["soon", "1.5", "2024-02-30", "2024-01-01T25:00", "01/02/2024"],
}


def _csv(value: str) -> str:
    return '"' + value.replace('"', '""') + '"'


@pytest.mark.parametrize("fmt", ["csv", "jsonl"])
@pytest.mark.parametrize("type_", sorted(VALID))
def test_valid_text_values(write, read, fmt, type_):
    cases = VALID[type_]
    if fmt == "csv":
        body = "".join(f"{i},{_csv(text)}\n" for i, (text, _) in enumerate(cases))
        path = write("v.csv", "ts,v\n" + body)
    else:
        body = "".join(json.dumps({"ts": i, "v": text}) + "\n" for i, (text, _) in enumerate(cases))
        path = write("v.jsonl", body)
    r = read(path, {"v": type_})
    assert r.dead == []
    got = [row[0] for row in r.rows]
    assert got == [want for _, want in cases]


@pytest.mark.parametrize("fmt", ["csv", "jsonl"])
@pytest.mark.parametrize("type_", sorted(INVALID))
def test_invalid_text_values(write, read, fmt, type_):
    cases = INVALID[type_]
    if fmt == "csv":
        body = "".join(f"{i},{_csv(text)}\n" for i, text in enumerate(cases))
        path = write("v.csv", "ts,v\n0,\n" + body.replace("\n", "\n", 1))
        first_line = 3
    else:
        body = "".join(json.dumps({"ts": i, "v": text}) + "\n" for i, text in enumerate(cases))
        path = write("v.jsonl", '{"ts": 0}\n' + body)
        first_line = 2
    r = read(path, {"v": type_})
    assert r.rows == [(None,)]
    article = "an" if type_ == "int" else "a"
    assert r.reasons == [
        (first_line + i, f"column 'v': {text!r} is not {article} {type_}")
        for i, text in enumerate(cases)
    ]


def test_nan_text_is_a_float(write, read):
    r = read(write("v.csv", "ts,v\n1,nan\n2,NaN\n"), {"v": "float"})
    assert all(math.isnan(row[0]) for row in r.rows)


@pytest.mark.parametrize(
    ("unit", "text", "want"),
    [
        ("s", "2024-01-01T00:00:00Z", 1_704_067_200),
        ("ms", "2024-01-01T00:00:00.123Z", 1_704_067_200_123),
        ("us", "2024-01-01T00:00:00.123456Z", 1_704_067_200_123_456),
        ("ns", "2024-01-01T00:00:00.123456789Z", 1_704_067_200_123_456_789),
        ("min", "2024-01-01T00:01:59Z", 28_401_121),
        ("h", "1970-01-01T05:59:59Z", 5),
        ("d", "1970-01-03T12:00:00Z", 2),
        ("s", "1969-12-31T23:59:59.5Z", -1),
    ],
)
def test_iso_timestamps_in_each_time_unit(write, read, unit, text, want):
    # The fast path (a whole block of ISO strings) and the slow path (mixed with an int) agree.
    fast = read(write("f.csv", f"ts\n{text}\n"), {}, time_unit=unit)
    slow = read(write("s.csv", f"ts\n{text}\n7\n"), {}, time_unit=unit)
    assert fast.ts == [want]
    assert slow.ts == [want, 7]


def test_timestamp_typed_column_converts_like_the_timestamp(write, read):
    path = write("s.csv", "ts,at\n1,1970-01-01T00:00:02Z\n2,3\n")
    r = read(path, {"at": "timestamp"})
    assert r.rows == [(2000,), (3,)]
