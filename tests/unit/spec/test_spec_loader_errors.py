"""Every problem of a pipeline file is reported, each at its line and column."""

from __future__ import annotations

import pytest

from cq_service.errors import SpecError
from cq_service.spec import SpecErrors, load_pipeline_text

HEADER = "version: 1\nname: p\n"
STREAM = (
    "streams:\n  S:\n    schema: {ts: int, a: int}\n    source: {type: file, path: data/s.csv}\n"
)


def test_all_problems_at_once(problems):
    text = """\
version: 2
name: yes
time_unit: sec
streams:
  Requests:
    schema: {a: integer, on: int, 9x: int}
    sorce: {}
    source: {type: file, path: data/s.csv, format: off, delimiter: ";;"}
    max_delay: 1.5
  bad-name:
    schema: {}
    source: {type: http}
queries:
  q:
    cql:
    sink: {type: stdout, path: x.jsonl}
    weight: 0
  r:
    sink: {type: file}
extra: 1
"""
    assert problems(text) == [
        "1:10: version must be 1, got 2",
        "2:7: name: yes was read as a boolean; quote it",
        "3:12: time_unit must be one of ns, us, ms, s, min, h, d, got 'sec'",
        "6:17: type of column 'a' in stream 'Requests' must be one of int, float, string, "
        "bool, timestamp, got 'integer'",
        "6:26: key 'on' was read as a boolean; quote it",
        "6:35: column name '9x' in stream 'Requests' is not an identifier (letters, digits and "
        "'_', not starting with a digit)",
        "7:5: unknown key 'sorce' in stream 'Requests' (expected one of: schema, timestamp, "
        "source, max_delay, late, heartbeat, constraints)",
        "8:52: format of the source of stream 'Requests': off was read as a boolean; quote it "
        "(must be one of csv, jsonl, parquet)",
        "8:68: delimiter of the source of stream 'Requests' must be a single character, got ';;'",
        "9:16: max_delay of stream 'Requests' must be an integer or a duration such as "
        "'5 seconds', got 1.5",
        "10:3: stream name 'bad-name' is not an identifier (letters, digits and '_', not "
        "starting with a digit)",
        "11:13: schema of stream 'bad-name' must list at least one column",
        "12:20: type of the source of stream 'bad-name' must be one of file, generator, catalog, "
        "kafka, got 'http'",
        "15:9: cql of query 'q' is empty",
        "16:26: key 'path' is not allowed in the sink of query 'q': a sink of type 'stdout' "
        "takes no other keys",
        "17:13: weight of query 'q' must be > 0, got 0",
        "18:3: missing key 'cql' in query 'r'",
        "19:5: missing key 'path' in the sink of query 'r'",
        "20:1: unknown key 'extra' (expected one of: version, name, time_unit, streams, "
        "relations, queries, dead_letter, resources, archive)",
    ]


def test_semantic_problems_at_once(problems, pipeline_dir):
    text = """\
version: 1
name: p
streams:
  S:
    schema: {ts: string, a: int, A: int, _op: int}
    timestamp: ts
    source: {type: file, path: data/nope.csv}
    max_delay: 1500 us
  s:
    schema: {a: int}
    source: {type: file, path: data, format: jsonl, header: true}
    max_delay: 3 fortnights
relations:
  R:
    schema: {k: string}
    source: {type: file, path: data/r.txt}
queries:
  r: {cql: SELECT 1, sink: {type: file, path: out.txt}}
  q2: {cql: SELECT 1, sink: {type: file, path: out.txt, format: csv}}
  q3: {cql: SELECT 1, sink: {type: file, path: data/r.txt}}
"""
    (pipeline_dir / "data" / "r.txt").write_text("k\nx\n")
    assert problems(text) == [
        "5:18: timestamp column 'ts' of stream 'S' has type string; it must be int or timestamp",
        "5:34: column 'A' in stream 'S' has the same name as column 'a' (line 5); column names "
        "are case-insensitive",
        "5:42: column name '_op' in stream 'S' is reserved",
        "7:32: source file 'data/nope.csv' of stream 'S' does not exist (looked for "
        f"{pipeline_dir / 'data' / 'nope.csv'})",
        "8:16: max_delay of stream 'S': duration '1500 us' is not a whole number of ms",
        "9:3: stream 's' has the same name (case-insensitively) as stream 'S' (line 4); "
        "streams, relations and queries share one namespace",
        "11:32: source path 'data' of stream 's' is a folder, not a file",
        "11:53: 'header' only applies to csv files, but the source of stream 's' is jsonl",
        "12:16: max_delay of stream 's': unknown unit 'fortnights' in duration '3 fortnights' "
        "(use ns, us, ms, s, min, h, d or their names, e.g. 'seconds')",
        "16:32: cannot tell the format of source file 'data/r.txt' from its extension; add "
        "format: one of csv, jsonl, parquet",
        "18:3: query 'r' has the same name (case-insensitively) as relation 'R' (line 14); "
        "streams, relations and queries share one namespace",
        "18:47: cannot tell the format of sink file 'out.txt' from its extension; add format: "
        "one of csv, jsonl, parquet",
        "19:48: sink file 'out.txt' of query 'q2' is also written by query 'r' (line 18)",
        "20:48: cannot tell the format of sink file 'data/r.txt' from its extension; add "
        "format: one of csv, jsonl, parquet",
        "20:48: sink file 'data/r.txt' of query 'q3' is the source of relation 'R'; writing it "
        "would overwrite the input",
    ]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        pytest.param("", ["1:1: the pipeline file is empty"], id="empty"),
        pytest.param(
            "- a\n",
            ["1:1: a pipeline file must be a mapping of keys (version, name, …), got a list"],
            id="not-a-mapping",
        ),
        pytest.param(
            "version: 1\n",
            ["1:1: missing key 'name'"],
            id="missing-name",
        ),
        pytest.param(
            HEADER + "name: q\n",
            [
                "3:1: duplicate key 'name' (first defined at line 2, column 1); YAML would "
                "silently keep only the last one"
            ],
            id="duplicate-top-level-key",
        ),
        pytest.param(
            HEADER
            + STREAM
            + "  S:\n    schema: {b: int}\n    source: {type: file, path: data/s.csv}\n",
            [
                "7:3: duplicate key 'S' (first defined at line 4, column 3); YAML would silently "
                "keep only the last one"
            ],
            id="duplicate-stream",
        ),
        pytest.param(
            "version: 1\nname: 'my pipeline'\n",
            [
                "2:7: name 'my pipeline' may only contain letters, digits, '_', '.' and '-', and "
                "must start with a letter or digit"
            ],
            id="bad-pipeline-name",
        ),
        pytest.param(
            HEADER + STREAM + "queries:\n  S: {cql: SELECT 1}\n",
            [
                "8:3: query 'S' has the same name as stream 'S' (line 4); streams, relations and "
                "queries share one namespace"
            ],
            id="query-named-like-stream",
        ),
        pytest.param(
            HEADER + STREAM.replace("ts: int", "ts: bool") + "    timestamp: ts\n",
            [
                "5:18: timestamp column 'ts' of stream 'S' has type bool; it must be int or "
                "timestamp"
            ],
            id="timestamp-type",
        ),
        pytest.param(
            HEADER + "streams:\n  S:\n    schema: {a: int}\n",
            ["4:3: missing key 'source' in stream 'S'"],
            id="missing-source",
        ),
        pytest.param(
            HEADER + "streams:\n  S: {max_delay: 1}\n",
            ["4:3: missing key 'schema' in stream 'S'", "4:3: missing key 'source' in stream 'S'"],
            id="two-missing-keys",
        ),
        pytest.param(
            HEADER + "dead_letter: {type: stdout, path: x.jsonl, pth: y}\n",
            [
                "3:29: key 'path' is not allowed in dead_letter: a dead_letter of type 'stdout' "
                "takes no other keys",
                "3:44: unknown key 'pth' in dead_letter (expected one of: type)",
            ],
            id="keys-a-stdout-sink-does-not-take",
        ),
        pytest.param(
            HEADER + "streams:\n  S:\n    schema: {a: int}\n    source: {type: file}\n",
            ["6:5: missing key 'path' in the source of stream 'S'"],
            id="missing-source-path",
        ),
        pytest.param(
            HEADER + "streams:\n",
            ["3:9: streams is empty"],
            id="streams-null",
        ),
        pytest.param(
            HEADER + "queries:\n  q: SELECT 1\n",
            ["4:6: query 'q' must be a mapping, got 'SELECT 1'"],
            id="query-not-a-mapping",
        ),
        pytest.param(
            HEADER + STREAM + "    late: never\n",
            ["7:11: late of stream 'S' must be one of drop, dead_letter, got 'never'"],
            id="late",
        ),
        pytest.param(
            HEADER + STREAM + "    max_delay: -5\n",
            ["7:16: max_delay of stream 'S' must be >= 0, got -5"],
            id="negative-delay",
        ),
        pytest.param(
            HEADER + STREAM + "    max_delay: five seconds\n",
            [
                "7:16: max_delay of stream 'S' 'five seconds' is not a duration such as "
                "'5 seconds' or '500 ms'"
            ],
            id="bad-duration",
        ),
        pytest.param(
            HEADER + "dead_letter: {type: file, path: x.jsonl, fromat: jsonl}\n",
            ["3:42: unknown key 'fromat' in dead_letter (expected one of: type, path, format)"],
            id="unknown-sink-key",
        ),
        pytest.param(
            HEADER + "dead_letter: {type: blackhole, foo: 1}\n",
            ["3:32: unknown key 'foo' in dead_letter (expected one of: type)"],
            id="unknown-key-in-blackhole",
        ),
        pytest.param(
            HEADER + "queries:\n  q:\n    cql: SELECT 1\n    sink: {type: http, url: t}\n",
            [
                "6:18: type of the sink of query 'q' must be one of file, stdout, blackhole, "
                "kafka, got 'http'",
                "6:24: unknown key 'url' in the sink of query 'q' (expected one of: type, "
                "path, format, topic, bootstrap_servers, key, client, producer)",
            ],
            id="unknown-sink-type",
        ),
        pytest.param(
            HEADER + "queries:\n  q: {cql: SELECT 1, weight: heavy}\n",
            ["4:30: weight of query 'q' must be a number, got 'heavy'"],
            id="weight-type",
        ),
        pytest.param(
            HEADER + "relations:\n  R:\n    schema: {k: int}\n    source: {type: file, "
            "path: data/r.csv}\n    max_delay: 5\n",
            [
                "7:5: unknown key 'max_delay' in relation 'R' (expected one of: schema, "
                "timestamp, source)"
            ],
            id="relation-has-no-max-delay",
        ),
    ],
)
def test_single_problem(problems, text, expected):
    assert problems(text) == expected


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        (
            "    timestamp: no\n",
            "7:16: timestamp of stream 'S': no was read as a boolean; quote it",
        ),
        ("    timestamp: null\n", "7:16: timestamp of stream 'S': null was read as null; quote it"),
        (
            "    timestamp: 2024-01-01\n",
            "7:16: timestamp of stream 'S': 2024-01-01 was read as a date; quote it",
        ),
        ("    timestamp: 12\n", "7:16: timestamp of stream 'S': 12 was read as a number; quote it"),
        (
            "    late: off\n",
            "7:11: late of stream 'S': off was read as a boolean; quote it (must be one of drop, "
            "dead_letter)",
        ),
    ],
)
def test_yaml_1_1_pitfalls_in_values(problems, line, expected):
    assert problems(HEADER + STREAM + line) == [expected]


def _named(word: str) -> str:
    return (
        HEADER
        + f"streams:\n  {word}:\n    schema: {{a: int}}\n"
        + ("    source: {type: file, path: data/s.csv}\n")
    )


@pytest.mark.parametrize("word", ["yes", "No", "ON", "off", "true", "False"])
def test_yaml_1_1_pitfalls_in_names(problems, word):
    assert problems(_named(word)) == [f"4:3: key '{word}' was read as a boolean; quote it"]


@pytest.mark.parametrize("word", ["y", "n", "Y"])
def test_single_letters_are_names(load, word):
    # YAML 1.1 lists y/n as booleans, but PyYAML (like most parsers) reads them as strings
    assert list(load(_named(word)).streams) == [word]


def test_quoted_words_are_fine(load):
    spec = load(
        HEADER + "streams:\n  'on':\n    schema: {'yes': string, 'null': int}\n"
        "    timestamp: 'null'\n    source: {type: file, path: data/s.csv}\n"
    )
    assert [f.name for f in spec.streams["on"].schema] == ["yes", "null"]


def test_errors_render_file_line_col(pipeline_dir):
    path = pipeline_dir / "p.yaml"
    with pytest.raises(SpecErrors) as caught:
        load_pipeline_text("version: 1\nname: p\ntime_unit: sec\nextra: 1\n", path)
    exc = caught.value
    assert isinstance(exc, SpecError) and len(exc.errors) == 2
    assert str(exc).splitlines() == [
        f"{path}:3:12: time_unit must be one of ns, us, ms, s, min, h, d, got 'sec'",
        f"{path}:4:1: unknown key 'extra' (expected one of: version, name, time_unit, streams, "
        "relations, queries, dead_letter, resources, archive)",
    ]
    assert (exc.span.line, exc.span.col) == (3, 12)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            "version: 1\nname: [p\n",
            "3:1: invalid YAML: expected ',' or ']', but got '<stream end>' (while parsing a flow "
            "sequence at line 2)",
        ),
        ("version: 1\nname: a: b\n", "2:8: invalid YAML: mapping values are not allowed here"),
        (
            "version: 1\n\tname: p\n",
            "2:1: invalid YAML: while scanning for the next token: found character '\\t' that "
            "cannot start any token (indent with spaces, not tabs)",
        ),
        ("version: 1\nname: *p\n", "2:7: invalid YAML: found undefined alias 'p'"),
        (
            "version: 1\n---\nname: p\n",
            "2:1: invalid YAML: but found another document (expected a single document in the "
            "stream at line 1)",
        ),
    ],
)
def test_yaml_syntax_errors(problems, text, expected):
    assert problems(text) == [expected]


def test_unknown_tag_is_reported_with_the_rest(problems):
    assert problems("version: 1\nname: !foo p\nextra: 1\n") == [
        "2:7: invalid YAML: could not determine a constructor for the tag '!foo'",
        "3:1: unknown key 'extra' (expected one of: version, name, time_unit, streams, "
        "relations, queries, dead_letter, resources, archive)",
    ]


def test_heartbeat_field_must_be_an_int_or_timestamp_column(problems):
    text = HEADER + """\
streams:
  S:
    schema: {ts: int, a: string}
    timestamp: ts
    heartbeat: {field: a, offset: 1 second}
    source: {type: file, path: data/s.csv}
  T:
    schema: {ts: int}
    timestamp: ts
    heartbeat: {field: b}
    source: {type: file, path: data/s.csv}
"""
    assert problems(text) == [
        "7:24: stream 'S': heartbeat field 'a' must be an int or timestamp column, not string",
        "12:24: stream 'T': heartbeat field 'b' is not in its schema (ts)",
    ]
    missing = HEADER + """\
streams:
  U:
    schema: {ts: int}
    timestamp: ts
    heartbeat: {offset: 3}
    source: {type: file, path: data/s.csv}
"""
    assert problems(missing) == ["7:5: missing key 'field' in the heartbeat of stream 'U'"]
