"""Each window kind on tiny inputs; expected outputs worked out by hand from
docs/semantics.md "Windows"."""

from tests.reference import cql_ast as ast
from tests.reference import evaluate

A = [("a", "int")]


def run(query: str | ast.Query, elements, schema=A, relations=None, unit="s"):
    return evaluate(unit, {"S": (schema, elements)}, relations or {}, [("q", query, True)])["q"]


def test_rows_ties_keep_arrival_order():
    s = [(1, (1,)), (2, (2,)), (2, (3,)), (4, (4,))]
    assert run("SELECT a FROM S [Rows 1]", s) == [
        (1, "+", (1,)),
        (2, "-", (1,)),
        (2, "+", (3,)),  # (2,) and (3,) tie at 2; (3,) arrived last
        (4, "-", (3,)),
        (4, "+", (4,)),
    ]


def test_rows_two():
    s = [(1, (1,)), (2, (2,)), (2, (3,)), (4, (4,))]
    assert run("SELECT a FROM S [Rows 2]", s) == [
        (1, "+", (1,)),
        (2, "-", (1,)),
        (2, "+", (2,)),
        (2, "+", (3,)),
        (4, "-", (2,)),
        (4, "+", (4,)),
    ]


def test_range_expiry_at_t_plus_size_plus_one_and_end_of_input():
    s = [(1, (1,)), (2, (2,)), (8, (3,))]
    assert run("SELECT a FROM S [Range 3]", s) == [
        (1, "+", (1,)),
        (2, "+", (2,)),
        (5, "-", (1,)),
        (6, "-", (2,)),
        (8, "+", (3,)),  # its expiry at 12 is after the end of input (8): not emitted
    ]


def test_range_with_units():
    # time_unit ms: Range 1 second = 1000
    s = [(0, (1,)), (1000, (2,)), (1002, (3,))]
    assert run("SELECT COUNT(*) FROM S [Range 1 Second]", s, unit="ms") == [
        (0, "+", (1,)),
        (1000, "-", (1,)),
        (1000, "+", (2,)),
        (1001, "-", (2,)),  # the first tuple leaves at 0 + 1000 + 1
        (1001, "+", (1,)),
        (1002, "-", (1,)),
        (1002, "+", (2,)),
    ]


def test_now_window_is_range_zero():
    s = [(1, (1,)), (1, (2,)), (3, (3,))]
    assert run("SELECT a FROM S [Now]", s) == [
        (1, "+", (1,)),
        (1, "+", (2,)),
        (2, "-", (1,)),
        (2, "-", (2,)),
        (3, "+", (3,)),
    ]


def test_range_slide_boundaries():
    # [Range 4 Slide 3]: window [t0 - 4, t0], t0 = floor(τ/3)·3.
    # 1 enters at 3, leaves at 6; 4 and 5 enter at 6; 4 leaves at 9 (first multiple > 8);
    # 5 would leave at 12 and 10 enter at 12: after the end of input (10).
    s = [(1, (1,)), (4, (4,)), (5, (5,)), (10, (10,))]
    assert run("SELECT a FROM S [Range 4 Slide 3]", s) == [
        (3, "+", (1,)),
        (6, "-", (1,)),
        (6, "+", (4,)),
        (6, "+", (5,)),
        (9, "-", (4,)),
    ]


def test_partition_by_rows():
    schema = [("k", "string"), ("v", "int")]
    s = [(1, ("a", 1)), (2, ("b", 2)), (3, ("a", 3)), (3, ("a", 4))]
    assert run("SELECT k, v FROM S [Partition By k Rows 1]", s, schema) == [
        (1, "+", ("a", 1)),
        (2, "+", ("b", 2)),
        (3, "-", ("a", 1)),
        (3, "+", ("a", 4)),
    ]


def test_partition_by_null_is_one_partition():
    schema = [("k", "string"), ("v", "int")]
    s = [(1, (None, 1)), (2, (None, 2))]
    assert run("SELECT v FROM S [Partition By k Rows 1]", s, schema) == [
        (1, "+", (1,)),
        (2, "-", (1,)),
        (2, "+", (2,)),
    ]


def test_unbounded_windows_and_no_window():
    s = [(1, (1,)), (3, (2,))]
    expected = [(1, "+", (1,)), (3, "-", (1,)), (3, "+", (2,))]
    for window in ("[Rows Unbounded]", "[Range Unbounded]", ""):
        assert run(f"SELECT COUNT(*) FROM S {window}", s) == expected, window


def test_inner_where_on_a_range_window():
    s = [(1, (1,)), (2, (5,)), (3, (0,))]
    assert run("SELECT a FROM S [Range 1 Where a > 0]", s) == [
        (1, "+", (1,)),
        (2, "+", (5,)),
        (3, "-", (1,)),
    ]


def test_inner_where_before_the_rows_cutoff():
    # last 1 tuple with a > 0, not "the last tuple, if a > 0"
    s = [(1, (1,)), (2, (5,)), (3, (0,))]
    assert run("SELECT a FROM S [Rows 1 Where a > 0]", s) == [
        (1, "+", (1,)),
        (2, "-", (1,)),
        (2, "+", (5,)),
    ]


def test_empty_window_gives_empty_relation_and_zero_count():
    s = [(0, (1,)), (5, (2,))]
    assert run("SELECT a FROM S [Range 1]", s) == [
        (0, "+", (1,)),
        (2, "-", (1,)),
        (5, "+", (2,)),
    ]
    assert run("SELECT COUNT(*), SUM(a) FROM S [Range 1]", s) == [
        (0, "+", (1, 1)),
        (2, "-", (1, 1)),
        (2, "+", (0, None)),
        (5, "-", (0, None)),
        (5, "+", (1, 2)),
    ]


def test_hand_built_ast():
    q = ast.Select(
        items=(ast.SelectItem(ast.Column("a", "S")),),
        from_=(ast.TableRef("S", window=ast.RowsWindow(n=1)),),
    )
    assert run(q, [(0, (1,)), (1, (2,))]) == [(0, "+", (1,)), (1, "-", (1,)), (1, "+", (2,))]
