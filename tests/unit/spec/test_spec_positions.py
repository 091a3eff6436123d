"""YAML with positions: key/value spans, duplicate and boolean keys, and the file position of
every character of a scalar, for each scalar style."""

from __future__ import annotations

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from cq_service.spec import SpecErrors
from cq_service.spec.positions import parse_yaml


def file_char(text: str, line: int, col: int) -> str:
    lines = text.split("\n")
    row = lines[line - 1]
    return row[col - 1] if col - 1 < len(row) else "\n"


def check_every_char(text: str, path: tuple) -> str:
    """Assert each character of the scalar at `path` sits at its reported file position.

    A line break folded into a space sits on the line break; a double-quoted escape sits on its
    backslash. Positions strictly increase (no fallback to the scalar's start)."""
    doc = parse_yaml(text, "t.yaml")
    value = doc.value
    for part in path:
        value = value[part]
    positions = doc.char_positions(path)
    assert positions is not None and len(positions) == len(value)
    style = doc.node(path).style
    for ch, (line, col) in zip(value, positions):
        at = file_char(text, line, col)
        ok = ch == at or (ch == " " and at == "\n") or (style == '"' and at == "\\")
        assert ok, f"{ch!r} reported at {line}:{col} which holds {at!r}"
    assert list(positions) == sorted(set(positions)), "positions must strictly increase"
    return value


def test_spans_of_keys_and_values():
    doc = parse_yaml("a:\n  bb: [1, 'x']\n  c: {d: e}\n", "t.yaml")
    assert doc.value == {"a": {"bb": [1, "x"], "c": {"d": "e"}}}
    key = doc.key_span(("a", "bb"))
    assert (key.line, key.col, key.file) == (2, 3, "t.yaml")
    item = doc.value_span(("a", "bb", 1))
    assert (item.line, item.col) == (2, 11)
    assert (doc.span(("a", "c", "d")).line, doc.span(("a", "c", "d")).col) == (3, 10)
    assert (doc.span(("a", "c", "d"), key=True).col) == 7
    missing = doc.span(("a", "c", "nope"))  # falls back to the nearest ancestor
    assert (missing.line, missing.col) == (3, 6)
    assert doc.raw(("a", "bb", 0)) == "1"


def test_duplicate_key_is_reported_at_the_duplicate():
    doc = parse_yaml("q:\n  cql: a\n  sink: x\n  cql: b\n", "t.yaml")
    assert doc.value == {"q": {"cql": "a", "sink": "x"}}
    [error] = doc.errors
    assert (error.span.line, error.span.col) == (4, 3)
    assert "duplicate key 'cql' (first defined at line 2, column 3)" in error.message


@pytest.mark.parametrize(
    ("word", "kind"),
    [
        ("yes", "a boolean"),
        ("No", "a boolean"),
        ("on", "a boolean"),
        ("OFF", "a boolean"),
        ("null", "null"),
        ("~", "null"),
    ],
)
def test_boolean_and_null_keys_are_errors(word, kind):
    doc = parse_yaml(f"schema:\n  {word}: int\n", "t.yaml")
    [error] = doc.errors
    assert error.message == f"key '{word}' was read as {kind}; quote it"
    assert (error.span.line, error.span.col) == (2, 3)
    assert doc.value == {"schema": {word: "int"}}  # kept by its text so checks can go on


def test_quoted_boolean_words_are_plain_strings():
    doc = parse_yaml("'yes': 'on'\n")
    assert doc.errors == [] and doc.value == {"yes": "on"}


def test_merge_keys_are_applied():
    doc = parse_yaml("base: &b {x: 1, y: 2}\nuse:\n  <<: *b\n  y: 3\n")
    assert doc.errors == []
    assert doc.value["use"] == {"x": 1, "y": 3}
    assert doc.key_span(("use", "y")).line == 4
    assert doc.key_span(("use", "x")).line == 1


def test_yaml_syntax_error_has_a_position():
    with pytest.raises(SpecErrors) as caught:
        parse_yaml("a: 1\nb: [1, 2\n", "t.yaml")
    [error] = caught.value.errors
    assert error.render().startswith("t.yaml:3:1: invalid YAML")


def test_plain_single_line():
    text = "cql: SELECT a,  b FROM S  # comment\n"
    assert check_every_char(text, ("cql",)) == "SELECT a,  b FROM S"
    assert parse_yaml(text).char_positions(("cql",))[0] == (1, 6)


def test_plain_multi_line_folds_and_keeps_blank_lines():
    text = "q:\n  cql: SELECT a   \n    FROM S\n\n      WHERE x = 1\nnext: 1\n"
    assert check_every_char(text, ("q", "cql")) == "SELECT a FROM S\nWHERE x = 1"
    positions = parse_yaml(text).char_positions(("q", "cql"))
    assert positions[8] == (2, 19)  # the folded space: the line break after "SELECT a   "
    assert positions[9] == (3, 5)  # F
    assert positions[15] == (4, 1)  # the kept newline: the blank line's break
    assert positions[16] == (5, 7)  # W


def test_single_quoted_with_doubled_quote_and_folding():
    text = "cql: 'SELECT ''it''s''\n  FROM S\n\n  WHERE a = ''x'''\n"
    value = check_every_char(text, ("cql",))
    assert value == "SELECT 'it's' FROM S\nWHERE a = 'x'"
    positions = parse_yaml(text).char_positions(("cql",))
    assert positions[7] == (1, 14)  # the first quote of ''it
    assert positions[value.index("F")] == (2, 3)


def test_double_quoted_escapes_map_to_their_backslash():
    text = 'cql: "a\\tb \\"q\\" \\u00e9\\x41\\U0001F600 \\\\ end"\n'
    value = check_every_char(text, ("cql",))
    assert value == 'a\tb "q" éA😀 \\ end'
    positions = parse_yaml(text).char_positions(("cql",))
    assert positions[1] == (1, 8)  # \t
    assert positions[value.index("é")] == (1, 18)
    assert positions[value.index("A")] == (1, 24)
    assert positions[value.index("😀")] == (1, 28)
    assert positions[value.index("e", 12)] == (1, 42)


def test_double_quoted_multi_line_and_escaped_line_break():
    text = 'cql: "SELECT *\n    FROM S \\\n  WHERE\n\n  x = \\\n  \\ 1"\n'
    value = check_every_char(text, ("cql",))
    assert value == "SELECT * FROM S WHERE\nx =  1"
    positions = parse_yaml(text).char_positions(("cql",))
    assert positions[8] == (1, 15)  # folded break
    assert positions[value.index("W")] == (3, 3)  # after an escaped break, no space added
    assert positions[value.index("\n")] == (4, 1)
    assert positions[-2] == (6, 3)  # "\ " is a space, at its backslash


@pytest.mark.parametrize("chomp", ["", "-", "+"])
def test_literal_block(chomp):
    text = (
        f"queries:\n  q:\n    cql: |{chomp}  # a comment\n      SELECT *\n        FROM S\n\n"
        "      WHERE 1\n\n    weight: 2\n"
    )
    value = check_every_char(text, ("queries", "q", "cql"))
    body = "SELECT *\n  FROM S\n\nWHERE 1"
    assert value == {"": body + "\n", "-": body, "+": body + "\n\n"}[chomp]
    positions = parse_yaml(text).char_positions(("queries", "q", "cql"))
    assert positions[0] == (4, 7)
    assert positions[value.index("F")] == (5, 9)
    assert positions[value.index("  F")] == (5, 7)  # indentation beyond the block's is content


def test_literal_block_with_indentation_indicator():
    text = "q:\n  cql: |2\n      indented\n    base\n"
    assert check_every_char(text, ("q", "cql")) == "  indented\nbase\n"


def test_folded_block_multi_line():
    text = (
        "cql: >\n  SELECT Istream(S.url)\n  FROM Requests S [Range 1 Minute]\n"
        "    more indented\n  back\n\n  WHERE x = 'y'\n"
    )
    value = check_every_char(text, ("cql",))
    assert value == (
        "SELECT Istream(S.url) FROM Requests S [Range 1 Minute]\n  more indented\nback\n"
        "WHERE x = 'y'\n"
    )
    positions = parse_yaml(text).char_positions(("cql",))
    assert positions[21] == (2, 24)  # folded space = the line break after "Istream(S.url)"
    assert positions[value.index("FROM")] == (3, 3)
    assert positions[value.index("WHERE")] == (7, 3)


def test_folded_block_strip_and_tag():
    text = "a:\n- !!str >-\n   x\n   y\n- z\n"
    assert check_every_char(text, ("a", 0)) == "x y"
    assert parse_yaml(text).char_positions(("a", 0))[0] == (3, 4)


def test_flow_mapping_values():
    text = "q: {cql: SELECT 1, sink: \"a\\nb\", w: 'c d'}\n"
    assert check_every_char(text, ("q", "cql")) == "SELECT 1"
    assert check_every_char(text, ("q", "sink")) == "a\nb"
    assert check_every_char(text, ("q", "w")) == "c d"


def test_crlf_line_endings():
    text = "q:\r\n  cql: >\r\n    SELECT 1\r\n    FROM S\r\n"
    doc = parse_yaml(text)
    assert doc.value["q"]["cql"] == "SELECT 1 FROM S\n"
    positions = doc.char_positions(("q", "cql"))
    assert positions[0] == (3, 5) and positions[9] == (4, 5)


_TEXT = st.text(alphabet="ab ' \"\\\t\né#:-", max_size=40)


@settings(max_examples=150, deadline=None)
@given(value=_TEXT, style=st.sampled_from([None, "'", '"', "|", ">"]), nested=st.booleans())
def test_positions_for_any_string_pyyaml_writes(value, style, nested):
    data = {"q": {"cql": value}} if nested else {"cql": value}
    text = yaml.dump(data, default_style=style, allow_unicode=True, width=20)
    path = ("q", "cql") if nested else ("cql",)
    assert check_every_char(text, path) == value
