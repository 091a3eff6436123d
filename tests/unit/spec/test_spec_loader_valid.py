"""Valid pipeline files become typed, resolved `PipelineSpec`s."""

from __future__ import annotations

from pathlib import Path

import pytest

from cq_service.spec import SinkSpec, SpecErrors, load_pipeline, parse_duration
from cq_service.types import DataType

FIXTURES = Path(__file__).parent / "fixtures"


def test_design_example():
    spec = load_pipeline(FIXTURES / "web_proxy.yaml")
    assert (spec.version, spec.name, spec.time_unit, spec.time_unit_ns) == (
        1,
        "web-proxy",
        "ms",
        1_000_000,
    )
    assert spec.path == str((FIXTURES / "web_proxy.yaml").resolve())
    assert spec.base_dir == str(FIXTURES.resolve())

    requests = spec.streams["Requests"]
    assert [(f.name, f.type) for f in requests.schema] == [
        ("client_id", DataType.INT),
        ("domain", DataType.STRING),
        ("url", DataType.STRING),
    ]
    assert requests.timestamp == "ts" and not requests.is_relation
    assert (requests.max_delay, requests.late) == (0, "drop")
    assert requests.source.path == str((FIXTURES / "data" / "requests.csv").resolve())
    assert requests.source.format == "csv"
    assert requests.source.options == {"delimiter": ",", "header": True}
    assert (requests.span.line, requests.span.col) == (5, 3)
    assert (requests.schema[1].span.line, requests.schema[1].span.col) == (6, 30)

    domains = spec.relations["Domains"]
    assert domains.is_relation and (domains.span.line, domains.span.col) == (12, 3)

    query = spec.queries["commerce_urls"]
    assert query.cql == (
        "SELECT Istream(S.url) FROM Requests S [Range 1 Minute], Domains R"
        " WHERE S.domain = R.domain AND R.type = 'commerce'\n"
    )
    assert (query.span.line, query.span.col) == (17, 3)
    assert query.position_of(0) == (19, 7)
    assert query.position_of(query.cql.index("WHERE")) == (20, 7)
    assert query.sink == SinkSpec(
        type="file", path=str((FIXTURES / "out" / "commerce.jsonl").resolve()), format="jsonl"
    )
    assert query.weight == 1.0
    assert spec.dead_letter == SinkSpec(
        type="file",
        path=str((FIXTURES / "out" / "web-proxy.dead-letter.jsonl").resolve()),
        format="jsonl",
    )


def test_defaults_formats_and_file_order(load, pipeline_dir):
    spec = load(
        """\
version: 1
name: p.v2_x
streams:
  S:
    schema: {ts: timestamp, a: int}
    source: {type: file, path: data/s.csv, delimiter: ";", header: false}
    max_delay: 5 seconds
    late: dead_letter
  E:
    schema: {x: float, ok: bool}
    source: {type: file, path: data/e.jsonl}
    max_delay: 7
queries:
  zeta: {cql: SELECT * FROM S, weight: 2.5}
  alpha:
    cql: SELECT * FROM zeta
    sink: {type: stdout}
  mid:
    cql: SELECT * FROM E
    sink: {type: blackhole}
  last:
    cql: SELECT * FROM E
    sink: {type: file, path: /abs/out.parquet}
dead_letter: {type: file, path: dl/bad.csv}
"""
    )
    assert spec.time_unit == "ms"
    assert spec.relations == {}
    s, e = spec.streams["S"], spec.streams["E"]
    assert s.timestamp is None and s.max_delay == 5000 and s.late == "dead_letter"
    assert s.source.format == "csv" and s.source.options == {"delimiter": ";", "header": False}
    assert e.source.format == "jsonl" and e.source.options == {} and e.max_delay == 7
    assert list(spec.queries) == ["zeta", "alpha", "mid", "last"]
    assert spec.queries["zeta"].sink is None and spec.queries["zeta"].weight == 2.5
    assert spec.queries["alpha"].sink.type == "stdout"
    assert spec.queries["mid"].sink == SinkSpec(type="blackhole")
    assert spec.queries["last"].sink == SinkSpec("file", "/abs/out.parquet", "parquet")
    assert spec.dead_letter == SinkSpec("file", str(pipeline_dir / "dl" / "bad.csv"), "csv")


def test_time_unit_converts_durations(load):
    spec = load(
        """\
version: 1
name: p
time_unit: s
streams:
  S:
    schema: {a: int}
    source: {type: file, path: data/s.csv}
    max_delay: 2 Minutes
queries: {}
"""
    )
    assert spec.time_unit_ns == 1_000_000_000 and spec.streams["S"].max_delay == 120


@pytest.mark.parametrize(
    ("text", "unit", "expected"),
    [
        ("5 seconds", "ms", 5000),
        ("500 ms", "ms", 500),
        ("1.5 s", "ms", 1500),
        ("1 minute", "s", 60),
        ("2h", "min", 120),
        ("1 day", "h", 24),
        ("3 us", "ns", 3000),
        ("0 ms", "d", 0),
    ],
)
def test_parse_duration(text, unit, expected):
    assert parse_duration(text, unit) == expected


@pytest.mark.parametrize(
    ("text", "unit", "reason"),
    [
        ("500 ms", "s", "not a whole number of s"),
        ("5 parsecs", "ms", "unknown unit 'parsecs'"),
        ("soon", "ms", "not a duration"),
    ],
)
def test_parse_duration_rejects(text, unit, reason):
    with pytest.raises(ValueError, match=reason):
        parse_duration(text, unit)


def test_anchors_and_merge_keys_share_definitions(load):
    spec = load(
        """\
version: 1
name: p
streams:
  A: &stream
    schema: {ts: int, a: int}
    timestamp: ts
    source: {type: file, path: data/s.csv}
  B:
    <<: *stream
    max_delay: 3
queries: {}
"""
    )
    assert spec.streams["B"].schema == spec.streams["A"].schema
    assert spec.streams["B"].max_delay == 3 and spec.streams["B"].timestamp == "ts"


def test_unreadable_file_is_a_spec_error(tmp_path):
    with pytest.raises(SpecErrors) as caught:
        load_pipeline(tmp_path / "missing.yaml")
    assert str(caught.value).startswith(f"{tmp_path / 'missing.yaml'}: cannot read pipeline file")


def test_heartbeat_field_and_offset_in_time_units(load):
    spec = load("""\
version: 1
name: p
time_unit: ms
streams:
  Closed:
    schema: {id: int, opened: timestamp, expires: timestamp}
    timestamp: expires
    max_delay: 10 minutes
    heartbeat: {field: opened, offset: 10 seconds}
    source: {type: file, path: data/s.csv}
  Plain:
    schema: {ts: int}
    timestamp: ts
    heartbeat: {field: ts}
    source: {type: file, path: data/s.csv}
""")
    assert spec.streams["Closed"].heartbeat == ("opened", 10_000)
    assert spec.streams["Closed"].max_delay == 600_000
    assert spec.streams["Plain"].heartbeat == ("ts", 0)
