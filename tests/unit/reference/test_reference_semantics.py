"""Relation-to-stream operators, global aggregates, views, NULLs, arithmetic and output names;
expected outputs worked out by hand from docs/semantics.md."""

import math

from tests.reference import evaluate, evaluate_outputs

A = [("a", "int")]


def run(query, s, schema=A, relations=None, views=()):
    queries = [(name, text, False) for name, text in views] + [("q", query, True)]
    return evaluate("s", {"S": (schema, s)}, relations or {}, queries)["q"]


def test_istream_and_dstream_of_a_range_window():
    s = [(1, (1,)), (2, (2,)), (5, (9,))]
    assert run("SELECT Istream(a) FROM S [Range 2]", s) == [
        (1, "+", (1,)),
        (2, "+", (2,)),
        (5, "+", (9,)),
    ]
    # 1 leaves at 4, 2 at 5
    assert run("SELECT Dstream(a) FROM S [Range 2]", s) == [(4, "+", (1,)), (5, "+", (2,))]


def test_rstream_only_at_instants_that_matter():
    s = [(1, (1,)), (4, (3,))]
    rel = {"R": ([("k", "int")], [(2, "+", (7,))])}  # not read by the query
    # instants: 1 (arrival), 2 (1 leaves: Range 0 = Now), 4 (arrival); the window is empty at 2
    assert run("SELECT Rstream(a) FROM S [Now]", s, relations=rel) == [
        (1, "+", (1,)),
        (4, "+", (3,)),
    ]
    # [Range 1]: 1 is in the window at 1 and 2, but only 1 (arrival), 3 (expiry) and 4
    # (arrival) matter; R(3) is empty
    assert run("SELECT Rstream(a) FROM S [Range 1]", s, relations=rel) == [
        (1, "+", (1,)),
        (4, "+", (3,)),
    ]


def test_rstream_emits_the_whole_relation_at_each_instant():
    s = [(1, (1,)), (2, (2,)), (4, (3,))]
    assert run("SELECT Rstream(a) FROM S [Rows 2]", s) == [
        (1, "+", (1,)),
        (2, "+", (1,)),
        (2, "+", (2,)),
        (4, "+", (2,)),
        (4, "+", (3,)),
    ]


def test_global_aggregate_first_row_at_first_instant_of_its_inputs():
    s = [(3, (1,))]
    rel = {"R": ([("k", "int")], [(0, "+", (5,)), (7, "+", (6,))])}  # pipeline runs 0..7
    assert run("SELECT COUNT(*) FROM S [Range 2]", s, relations=rel) == [
        (3, "+", (1,)),  # no row at 0..2: nothing has reached the query yet
        (6, "-", (1,)),
        (6, "+", (0,)),
    ]


def test_global_aggregate_over_a_relation():
    rel = {"R": ([("k", "int")], [(2, "+", (5,)), (4, "+", (6,)), (6, "-", (5,))])}
    out = evaluate(
        "s", {"S": (A, [(0, (1,))])}, rel, [("q", "SELECT COUNT(*), SUM(k) FROM R", True)]
    )
    assert out["q"] == [
        (2, "+", (1, 5)),
        (4, "-", (1, 5)),
        (4, "+", (2, 11)),
        (6, "-", (2, 11)),
        (6, "+", (1, 6)),
    ]


def test_stream_view_is_a_separate_query():
    # v emits only (2,) at 2; the aggregate's first instant is 2, not S's first element at 1.
    s = [(1, (1,)), (2, (2,)), (4, (0,))]
    assert run(
        "SELECT COUNT(*) FROM v [Range 1]", s, views=[("v", "SELECT a FROM S WHERE a > 1")]
    ) == [(2, "+", (1,)), (4, "-", (1,)), (4, "+", (0,))]


def test_relation_view_read_as_a_relation():
    schema = [("b", "string")]
    s = [(1, ("x",)), (2, ("y",)), (3, ("x",)), (5, ("x",))]
    view = ("w", "SELECT b, COUNT(*) AS n FROM S GROUP BY b")
    assert run("SELECT b, n FROM w WHERE n >= 2", s, schema, views=[view]) == [
        (3, "+", ("x", 2)),
        (5, "-", ("x", 2)),
        (5, "+", ("x", 3)),
    ]
    assert run("SELECT Istream(b) FROM w WHERE n >= 2", s, schema, views=[view]) == [
        (3, "+", ("x",))
    ]


def test_stream_valued_subquery_windowed():
    s = [(1, (1,)), (2, (5,)), (3, (6,))]
    q = "SELECT COUNT(*) FROM (SELECT a FROM S WHERE a > 2) T [Rows 1]"
    # the subquery belongs to the query: S's arrival at 1 is its first instant
    assert run(q, s) == [(1, "+", (0,)), (2, "-", (0,)), (2, "+", (1,))]


def test_null_semantics():
    s = [(1, (None,)), (2, (1,)), (3, (3,))]
    q = (
        "SELECT a, a > 1, NOT (a > 1) OR a IS NULL, a IN (1, NULL), a NOT IN (2, NULL), "
        "COALESCE(a, 0), a + NULL FROM S"
    )
    assert run(q, s) == [
        (1, "+", (None, None, True, None, None, 0, None)),
        (2, "+", (1, False, True, True, None, 1, None)),
        (3, "+", (3, True, False, None, None, 3, None)),
    ]
    assert run("SELECT a FROM S WHERE a > 1 OR a IS NULL", s) == [
        (1, "+", (None,)),
        (3, "+", (3,)),
    ]


def test_aggregates_skip_nulls():
    s = [(1, (None,)), (2, (None,)), (3, (4,))]
    q = "SELECT COUNT(*), COUNT(a), SUM(a), MIN(a), AVG(a) FROM S [Rows 2]"
    assert run(q, s) == [
        (1, "+", (1, 0, None, None, None)),
        (2, "-", (1, 0, None, None, None)),
        (2, "+", (2, 0, None, None, None)),
        (3, "-", (2, 0, None, None, None)),
        (3, "+", (2, 1, 4, 4, 4.0)),
    ]


def test_integer_division_modulo_and_casts():
    schema = [("a", "int"), ("b", "int")]
    s = [(0, (7, 2)), (1, (-7, 2)), (2, (7, -2)), (3, (7, 0))]
    q = "SELECT a / b, a % b, a / 2.0, a / 0.0 FROM S"
    assert run(q, s, schema) == [
        (0, "+", (3, 1, 3.5, None)),
        (1, "+", (-3, -1, -3.5, None)),  # truncates toward zero; % takes the dividend's sign
        (2, "+", (-3, 1, 3.5, None)),
        (3, "+", (None, None, 3.5, None)),  # division by zero is NULL
    ]
    q = (
        "SELECT CAST(2.5 AS int), CAST(3.5 AS int), round(2.5), round(-2.5), round(2.345, 2), "
        "CAST('12' AS int), CAST('1.5' AS int), CAST('x' AS float), CAST(2.0 AS string), "
        "'v' || 0.5 || NULL, 'v' || 0.5, concat('v', NULL, 1e20) FROM S"
    )
    (row,) = {r for _, _, r in run(q, s[:1], schema)}
    assert row == (2, 4, 3.0, -3.0, 2.35, 12, None, None, "2", None, "v0.5", "v1e+20")


def test_strings_and_like():
    schema = [("s", "string")]
    s = [(0, ("a%b",)), (1, ("axb",)), (2, ("hello",))]
    q = (
        "SELECT s, s LIKE 'a\\%b', s LIKE 'a_b', substr(s, 0, 3), substr(s, 2), "
        "upper(s), length(s), strpos(s, 'l') FROM S"
    )
    assert run(q, s, schema) == [
        (0, "+", ("a%b", True, True, "a%", "%b", "A%B", 3, 0)),
        (1, "+", ("axb", False, True, "ax", "xb", "AXB", 3, 0)),
        (2, "+", ("hello", False, False, "he", "ello", "HELLO", 5, 3)),
    ]


def test_float_nan_rows_and_sum_of_floats():
    schema = [("x", "float")]
    s = [(0, (math.nan,)), (1, (1.5,))]
    out = run("SELECT x FROM S [Rows 1]", s, schema)
    assert [(t, op) for t, op, _ in out] == [(0, "+"), (1, "-"), (1, "+")]
    assert math.isnan(out[0][2][0]) and math.isnan(out[1][2][0]) and out[2][2] == (1.5,)


def test_output_column_names():
    schema = [("a", "int"), ("b", "string")]
    q = (
        "SELECT S.a, T.a, S.a + 1, T.a + 1, upper(S.b) AS a, CASE WHEN S.a > 0 THEN 1 END, "
        "CAST(S.b AS int), S.b, S.b FROM S [Now], S AS T [Now] WHERE S.a = T.a"
    )
    outs = evaluate_outputs("s", {"S": (schema, [(0, (1, "2"))])}, {}, [("q", q, True)])
    assert outs["q"].columns == [
        "S.a",
        "T.a",
        "?column?",
        "?column?_2",
        "a",
        "case",
        "b",
        "S.b",
        "S.b_2",
    ]
    assert outs["q"].elements == [(0, "+", (1, 1, 2, 2, "2", 1, 2, "2", "2"))]


def test_set_operation_gets_istream_when_a_block_would():
    schema = [("a", "int")]
    streams = {"S": (schema, [(1, (1,)), (2, (2,))]), "T": (schema, [(1, (2,)), (3, (5,))])}
    q = "SELECT a FROM S UNION SELECT a FROM T [Now]"
    outs = evaluate_outputs("s", streams, {}, [("q", q, True)])
    assert outs["q"].is_stream
    # the union (a set) over relations: {1,2} at 1, {1,2} at 2, {1,2,5} at 3
    assert outs["q"].elements == [(1, "+", (1,)), (1, "+", (2,)), (3, "+", (5,))]


def test_correlated_and_uncorrelated_subqueries():
    schema = [("a", "int")]
    streams = {"S": (schema, [(1, (1,)), (2, (3,))])}
    rel = {"R": ([("k", "int")], [(0, "+", (1,)), (0, "+", (3,)), (0, "+", (3,))])}
    q = (
        "SELECT a, (SELECT COUNT(*) FROM R WHERE R.k = S.a), "
        "(SELECT k FROM R WHERE R.k = S.a), a = ANY (SELECT k FROM R), "
        "EXISTS (SELECT * FROM R WHERE k > S.a) FROM S"
    )
    assert evaluate("s", streams, rel, [("q", q, True)])["q"] == [
        (1, "+", (1, 1, 1, True, True)),
        (2, "+", (3, 2, None, True, False)),  # two rows for a scalar subquery: NULL
    ]
