"""The expression compiler: every function and operator, NULLs, edge cases, casts, CASE, and
property tests against DuckDB (arithmetic, comparison, logic) and exact Python references."""

from __future__ import annotations

import math
from decimal import Decimal

import duckdb
import numpy as np
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from cq_service.cql.logical import BExpr, Call, CaseExpr, CastExpr, ColRef, Const
from cq_service.engine.expressions import (
    compile_expr,
    compile_predicate,
    float_to_text,
    fold_constants,
)
from cq_service.errors import EngineError
from cq_service.types import DataType, arrow_type

INT, FLT, STR, BOOL, TS, NUL = (
    DataType.INT,
    DataType.FLOAT,
    DataType.STRING,
    DataType.BOOL,
    DataType.TIMESTAMP,
    DataType.NULL,
)
NAN, INF = float("nan"), float("inf")
I64_MIN, I64_MAX = -(2**63), 2**63 - 1


# -- helpers ----------------------------------------------------------------------------------


def lit(v: object, t: DataType | None = None) -> Const:
    if t is None:
        t = {type(None): NUL, bool: BOOL, int: INT, float: FLT, str: STR}[type(v)]
    return Const(v, t)


def _norm(values: list) -> list:
    """NaN-aware comparison form (NaN == NaN, -0.0 distinct from 0.0)."""
    out = []
    for v in values:
        if isinstance(v, float) and math.isnan(v):
            out.append("NaN")
        elif isinstance(v, float):
            out.append((v, math.copysign(1.0, v)))
        else:
            out.append(v)
    return out


def evaluate(e: BExpr, columns: list[pa.Array], n: int) -> list:
    out = compile_expr(e)(columns, n)
    assert len(out) == n
    assert out.type == arrow_type(e.type)
    return out.to_pylist()


def run(fn: str, rtype: DataType, *args: tuple[DataType, list]) -> list:
    """`fn` over argument columns (type, values); checks that the all-constant form of each
    row (folded at compile time, constant fast paths) gives the same values."""
    n = len(args[0][1])
    cols = [pa.array(vals, type=arrow_type(t)) for t, vals in args]
    refs = tuple(ColRef(i, t) for i, (t, _) in enumerate(args))
    got = evaluate(Call(fn, refs, rtype), cols, n)
    for row in range(n):
        consts = tuple(Const(vals[row], t) for t, vals in args)
        folded = evaluate(Call(fn, consts, rtype), [], 1)
        assert _norm(folded) == _norm([got[row]]), (fn, row, consts)
    return got


def run1(fn: str, rtype: DataType, *args: tuple[DataType, object]) -> object:
    """One row of `run`."""
    return run(fn, rtype, *((t, [v]) for t, v in args))[0]


def cast(values: list, src: DataType, dst: DataType) -> list:
    col = pa.array(values, type=arrow_type(src))
    got = evaluate(CastExpr(ColRef(0, src), dst), [col], len(values))
    consts = [evaluate(CastExpr(Const(v, src), dst), [], 1)[0] for v in values]
    assert _norm(consts) == _norm(got)
    return got


# -- arithmetic -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("fn", "expected"),
    [
        ("add", [-5, 5, -9, 9, None, None]),
        ("sub", [-9, 9, -5, 5, None, None]),
        ("mul", [-14, -14, 14, 14, None, None]),
        ("div", [-3, -3, 3, 3, None, None]),
        ("mod", [-1, 1, -1, 1, None, None]),
    ],
)
def test_int_arithmetic(fn, expected):
    xs = [-7, 7, -7, 7, None, 3]
    ys = [2, -2, -2, 2, 1, None]
    assert run(fn, INT, (INT, xs), (INT, ys)) == expected


def test_int_division_and_modulo_by_zero_are_null():
    assert run("div", INT, (INT, [1, 0, -5]), (INT, [0, 0, 0])) == [None, None, None]
    assert run("mod", INT, (INT, [1, 0, -5]), (INT, [0, 0, 0])) == [None, None, None]


def test_int_overflow_is_null():
    assert run1("add", INT, (INT, I64_MAX), (INT, 1)) is None
    assert run1("sub", INT, (INT, I64_MIN), (INT, 1)) is None
    assert run1("mul", INT, (INT, 2**32), (INT, 2**31)) is None
    assert run1("mul", INT, (INT, -1), (INT, I64_MIN)) is None
    assert run1("mul", INT, (INT, I64_MIN), (INT, -1)) is None
    assert run1("mul", INT, (INT, -(2**62)), (INT, 2)) == I64_MIN
    assert run1("div", INT, (INT, I64_MIN), (INT, -1)) is None
    assert run1("mod", INT, (INT, I64_MIN), (INT, -1)) == 0
    assert run1("neg", INT, (INT, I64_MIN)) is None
    assert run1("abs", INT, (INT, I64_MIN)) is None
    assert run1("add", INT, (INT, I64_MAX), (INT, I64_MIN)) == -1


def test_unary_minus_and_nulls():
    assert run("neg", INT, (INT, [3, -3, 0, None])) == [-3, 3, 0, None]
    assert run("neg", FLT, (FLT, [1.5, -0.0, None])) == [-1.5, 0.0, None]


def test_mixed_int_float_is_float():
    assert run("add", FLT, (INT, [1, None]), (FLT, [0.5, 1.0])) == [1.5, None]
    assert run("div", FLT, (INT, [7, -7]), (FLT, [2.0, 2.0])) == [3.5, -3.5]
    assert run("mul", FLT, (FLT, [0.1]), (INT, [3])) == [0.1 * 3]


def test_float_division_and_modulo():
    assert (
        run("div", FLT, (FLT, [1.0, -1.0, 0.0, NAN]), (FLT, [0.0, -0.0, 0.0, 0.0]))[:3]
        == [None] * 3
    )
    assert math.isnan(run1("div", FLT, (FLT, NAN), (FLT, 0.0)))  # PostgreSQL: NaN / 0 is NaN
    assert run("mod", FLT, (FLT, [5.5, -5.5, 1.0]), (FLT, [2.0, 2.0, 0.0])) == [1.5, -1.5, None]


def test_float_overflow_and_underflow_are_null():
    assert run1("mul", FLT, (FLT, 1e308), (FLT, 10.0)) is None
    assert run1("add", FLT, (FLT, 1.7e308), (FLT, 1.7e308)) is None
    assert run1("mul", FLT, (FLT, 1e-300), (FLT, 1e-300)) is None
    assert run1("div", FLT, (FLT, 1e-300), (FLT, 1e300)) is None
    assert run1("add", FLT, (FLT, INF), (FLT, 1.0)) == INF  # infinite inputs are fine
    assert math.isnan(run1("sub", FLT, (FLT, INF), (FLT, INF)))


def test_timestamp_arithmetic_is_int():
    assert run("add", TS, (TS, [1000, None]), (INT, [5, 5])) == [1005, None]
    assert run("sub", INT, (TS, [1000]), (TS, [400])) == [600]


def test_arithmetic_with_null_constant():
    assert (
        evaluate(Call("add", (ColRef(0, INT), lit(None)), INT), [pa.array([1, 2])], 2) == [None] * 2
    )


# -- math -------------------------------------------------------------------------------------


def test_abs_floor_ceil_keep_the_argument_kind():
    assert run("abs", INT, (INT, [-3, 3, None])) == [3, 3, None]
    assert run("abs", FLT, (FLT, [-2.5, -0.0])) == [2.5, 0.0]
    assert run("floor", FLT, (FLT, [-1.5, 1.5, None])) == [-2.0, 1.0, None]
    assert run("ceil", FLT, (FLT, [-1.5, 1.5])) == [-1.0, 2.0]
    assert run("floor", INT, (INT, [-7])) == [-7]
    assert run("ceil", INT, (INT, [7])) == [7]


def test_round_half_away_from_zero():
    xs = [0.5, -0.5, 1.5, 2.5, -2.5, 0.49999999999999994, 2.4, None, 1e300]
    assert run("round", FLT, (FLT, xs)) == [1.0, -1.0, 2.0, 3.0, -3.0, 0.0, 2.0, None, 1e300]
    assert run("round", INT, (INT, [5, -5])) == [5, -5]


def test_round_to_digits():
    xs = [2.675, 0.285, -1.005, 1.234567, 1.5, None, 1e300, 1234.5]
    ds = [2, 2, 2, 3, 0, 1, 2, -2]
    want = [2.68, 0.29, -1.01, 1.235, 2.0, None, 1e300, 1200.0]
    assert run("round", FLT, (FLT, xs), (INT, ds)) == want
    xs, ds = [15, -15, 14, -25, 1234, 7, None], [-1, -1, -1, -1, -2, 2, -1]
    assert run("round", INT, (INT, xs), (INT, ds)) == [20, -20, 10, -30, 1200, 7, None]
    assert run("round", INT, (INT, [I64_MAX, 4 * 10**18]), (INT, [-1, -19])) == [None, 0]


def test_sqrt_power_exp_logs_with_invalid_domains_null():
    assert run("sqrt", FLT, (FLT, [4.0, -1.0, None])) == [2.0, None, None]
    assert run("sqrt", FLT, (INT, [9])) == [3.0]
    xs, ys = [2.0, 0.0, -8.0, -8.0, 10.0, 2.0], [10.0, -1.0, 1 / 3, 2.0, 400.0, -0.5]
    assert run("power", FLT, (FLT, xs), (FLT, ys)) == [1024.0, None, None, 64.0, None, 2**-0.5]
    assert run("power", FLT, (INT, [2]), (INT, [3])) == [8.0]
    assert run("exp", FLT, (FLT, [0.0, 1000.0, -1000.0, None])) == [1.0, None, None, None]
    assert run("ln", FLT, (FLT, [1.0, 0.0, -1.0, math.e])) == [0.0, None, None, 1.0]
    assert run("log10", FLT, (FLT, [1000.0, 0.0, -5.0])) == [3.0, None, None]


def test_sign():
    assert run("sign", FLT, (FLT, [-2.5, 0.0, 3.0, None])) == [-1.0, 0.0, 1.0, None]
    assert run("sign", INT, (INT, [-9, 0, 9])) == [-1, 0, 1]


def test_math_result_converted_to_the_call_type():
    # e.g. a binder typing power(int, int) as int: computed in float, cast half-to-even.
    assert run("power", INT, (INT, [2, 3]), (INT, [3, -1])) == [8, 0]


# -- comparisons ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("fn", "expected"),
    [
        ("eq", [False, True, False, None, None]),
        ("ne", [True, False, True, None, None]),
        ("lt", [True, False, False, None, None]),
        ("le", [True, True, False, None, None]),
        ("gt", [False, False, True, None, None]),
        ("ge", [False, True, True, None, None]),
    ],
)
def test_comparisons(fn, expected):
    assert run(fn, BOOL, (INT, [1, 2, 3, None, 1]), (INT, [2, 2, 2, 1, None])) == expected
    assert run(fn, BOOL, (FLT, [1.0, 2.0, 3.0, None, 1.0]), (INT, [2, 2, 2, 1, None])) == expected
    assert (
        run(fn, BOOL, (STR, ["a", "b", "c", None, "a"]), (STR, ["b", "b", "b", "a", None]))
        == expected
    )
    assert (
        run(
            fn,
            BOOL,
            (BOOL, [False, True, True, None, True]),
            (BOOL, [True, True, False, True, None]),
        )
        == expected
    )


def test_int_float_compare_numerically():
    assert run("lt", BOOL, (INT, [1, 2]), (FLT, [1.5, 1.5])) == [True, False]
    assert run("eq", BOOL, (INT, [3]), (FLT, [3.0])) == [True]


def test_strings_compare_by_code_point():
    assert run("lt", BOOL, (STR, ["Z", "z", "a", ""]), (STR, ["a", "é", "ab", "a"])) == [True] * 4


def test_nan_is_equal_to_itself_and_greatest():
    xs = [NAN, NAN, 1.0, INF]
    ys = [NAN, INF, NAN, NAN]
    assert run("eq", BOOL, (FLT, xs), (FLT, ys)) == [True, False, False, False]
    assert run("gt", BOOL, (FLT, xs), (FLT, ys)) == [False, True, False, False]
    assert run("lt", BOOL, (FLT, xs), (FLT, ys)) == [False, False, True, True]
    assert run("ge", BOOL, (FLT, xs), (FLT, ys)) == [True, True, False, False]
    assert run("le", BOOL, (FLT, xs), (FLT, ys)) == [True, False, True, True]
    assert run("ne", BOOL, (FLT, xs), (FLT, ys)) == [False, True, True, True]
    assert run("eq", BOOL, (FLT, [-0.0]), (FLT, [0.0])) == [True]


def test_comparison_with_null_constant_is_null():
    e = Call("eq", (ColRef(0, INT), lit(None)), BOOL)
    assert evaluate(e, [pa.array([1, None])], 2) == [None, None]


# -- logic ------------------------------------------------------------------------------------

TV = [True, False, None]


def test_three_valued_and_or_not():
    xs = [a for a in TV for _ in TV]
    ys = [b for _ in TV for b in TV]
    and_ = run("and", BOOL, (BOOL, xs), (BOOL, ys))
    or_ = run("or", BOOL, (BOOL, xs), (BOOL, ys))
    for x, y, a, o in zip(xs, ys, and_, or_):
        exp_and = False if False in (x, y) else (None if None in (x, y) else True)
        exp_or = True if True in (x, y) else (None if None in (x, y) else False)
        assert (a, o) == (exp_and, exp_or), (x, y)
    assert run("not", BOOL, (BOOL, TV)) == [False, True, None]


def test_n_ary_and_or():
    args = (BOOL, [True, True]), (BOOL, [None, True]), (BOOL, [False, True])
    assert run("and", BOOL, *args) == [False, True]
    args = (BOOL, [False, False]), (BOOL, [None, False]), (BOOL, [False, False])
    assert run("or", BOOL, *args) == [None, False]


def test_is_null_and_is_not_null():
    assert run("is_null", BOOL, (INT, [1, None])) == [False, True]
    assert run("is_not_null", BOOL, (STR, ["a", None])) == [True, False]
    assert run("is_null", BOOL, (FLT, [NAN])) == [False]
    assert evaluate(Call("is_null", (lit(None),), BOOL), [], 3) == [True] * 3


# -- LIKE -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "pattern", "expected"),
    [
        ("hello", "h%", True),
        ("hello", "h_llo", True),
        ("hello", "H%", False),
        ("héllo", "h_llo", True),
        ("a\nb", "a_b", True),
        ("a%b", "a\\%b", True),
        ("axb", "a\\%b", False),
        ("a_b", "a\\_b", True),
        ("axb", "a\\_b", False),
        ("a\\b", "a\\\\b", True),
        ("ab", "a\\b", True),
        ("a.b", "a.b", True),
        ("axb", "a.b", False),
        ("a(b)*", "a(b)*", True),
        ("", "%", True),
        ("", "_", False),
        ("a", "a\\", None),
        (None, "a", None),
        ("a", None, None),
    ],
)
def test_like(value, pattern, expected):
    assert run1("like", BOOL, (STR, value), (STR, pattern)) is expected


def test_ilike_ignores_case():
    got = run("ilike", BOOL, (STR, ["HeLLo", "world", None]), (STR, ["h%O", "W_RLD", "x"]))
    assert got == [True, True, None]


def test_like_with_a_pattern_column():
    got = run("like", BOOL, (STR, ["abc", "abd", "abc", "x"]), (STR, ["a%", "%c", "%c", None]))
    assert got == [True, False, True, None]


def in_list(x: tuple[DataType, list], *items: Const) -> list:
    xs = pa.array(x[1], type=arrow_type(x[0]))
    e = Call("in_list", (ColRef(0, x[0]), *items), BOOL)
    got = evaluate(e, [xs], len(xs))
    # Same through the general path (items as columns).
    cols = [xs, *(pa.array([i.value] * len(xs), type=arrow_type(i.type)) for i in items)]
    refs = tuple(ColRef(k + 1, i.type) for k, i in enumerate(items))
    assert evaluate(Call("in_list", (ColRef(0, x[0]), *refs), BOOL), cols, len(xs)) == got
    return got


def test_in_list_three_valued():
    assert in_list((INT, [1, 2, None]), lit(1), lit(3)) == [True, False, None]
    assert in_list((INT, [1, 2, None]), lit(1), lit(None)) == [True, None, None]
    assert in_list((STR, ["a", "b"]), lit("a")) == [True, False]
    assert in_list((INT, [1, 2]), lit(1.0), lit(2.5)) == [True, False]
    assert in_list((FLT, [NAN, -0.0, 1.0]), lit(NAN), lit(0.0)) == [True, True, False]
    assert in_list((BOOL, [True, None]), lit(False)) == [False, None]


# -- NULL-handling functions ------------------------------------------------------------------


def test_coalesce():
    assert run("coalesce", INT, (INT, [None, 1, None]), (INT, [2, 3, None])) == [2, 1, None]
    assert run("coalesce", FLT, (INT, [None, 1]), (FLT, [2.5, 3.5])) == [2.5, 1.0]
    e = Call("coalesce", (ColRef(0, STR), lit(None), lit("z")), STR)
    assert evaluate(e, [pa.array(["a", None])], 2) == ["a", "z"]


def test_nullif():
    assert run("nullif", INT, (INT, [1, 2, None]), (INT, [1, 3, 1])) == [None, 2, None]
    got = run("nullif", FLT, (FLT, [1.0, NAN, NAN]), (FLT, [1.0, 0.0, NAN]))
    assert _norm(got) == _norm([None, NAN, None])
    assert run("nullif", STR, (STR, ["a", "b"]), (STR, ["a", None])) == [None, "b"]


def test_greatest_and_least_ignore_nulls():
    assert run("greatest", INT, (INT, [1, None, None]), (INT, [3, 2, None])) == [3, 2, None]
    assert run("least", INT, (INT, [1, None, None]), (INT, [3, 2, None])) == [1, 2, None]
    assert run("greatest", FLT, (INT, [1, 5]), (FLT, [1.5, 2.5])) == [1.5, 5.0]
    assert run("greatest", STR, (STR, ["a", "b"]), (STR, ["B", None])) == ["a", "b"]
    assert run("least", BOOL, (BOOL, [True, True]), (BOOL, [False, None])) == [False, True]


def test_greatest_and_least_treat_nan_as_largest():
    got = run("greatest", FLT, (FLT, [1.0, NAN, None]), (FLT, [NAN, None, None]))
    assert _norm(got) == _norm([NAN, NAN, None])
    got = run("least", FLT, (FLT, [1.0, NAN, NAN]), (FLT, [NAN, None, 2.0]))
    assert _norm(got) == _norm([1.0, NAN, 2.0])


# -- strings ----------------------------------------------------------------------------------


def test_concat_op_is_null_if_any_operand_is():
    got = run("concat_op", STR, (STR, ["a", None, "x"]), (STR, ["b", "b", None]))
    assert got == ["ab", None, None]
    assert run("concat_op", STR, (STR, ["v", "v"]), (INT, [-3, None])) == ["v-3", None]
    assert run("concat_op", STR, (FLT, [2.5, 3.0]), (BOOL, [True, False])) == ["2.5true", "3false"]


def test_concat_skips_nulls():
    got = run(
        "concat", STR, (STR, ["a", None, None]), (INT, [1, 2, None]), (BOOL, [True, None, None])
    )
    assert got == ["a1t", "2", ""]
    e = Call("concat", (lit(None), lit(None)), STR)
    assert evaluate(e, [], 2) == ["", ""]


def test_upper_lower_length():
    assert run("upper", STR, (STR, ["héllo", None])) == ["HÉLLO", None]
    assert run("lower", STR, (STR, ["HÉLLO"])) == ["héllo"]
    assert run("length", INT, (STR, ["héllo", "", None])) == [5, 0, None]


@pytest.mark.parametrize(
    ("s", "start", "count", "expected"),
    [
        ("hello", 1, 3, "hel"),
        ("hello", 0, 3, "he"),
        ("hello", -1, 3, "h"),
        ("hello", -5, 3, ""),
        ("hello", 2, 100, "ello"),
        ("hello", 3, 0, ""),
        ("hello", 6, 2, ""),
        ("héllo", 2, 2, "él"),
        ("hello", 2, -1, None),
        ("hello", None, 2, None),
        (None, 1, 2, None),
    ],
)
def test_substr_with_length(s, start, count, expected):
    assert run1("substr", STR, (STR, s), (INT, start), (INT, count)) == expected


def test_substr_without_length():
    assert run("substr", STR, (STR, ["hello"] * 5), (INT, [2, 0, -3, 9, None])) == [
        "ello",
        "hello",
        "hello",
        "",
        None,
    ]


def test_trims_strip_spaces_only():
    assert run("trim", STR, (STR, ["  a b  ", "\ta\t", None])) == ["a b", "\ta\t", None]
    assert run("ltrim", STR, (STR, ["  a  "])) == ["a  "]
    assert run("rtrim", STR, (STR, ["  a  "])) == ["  a"]
    assert run("trim", STR, (STR, ["xxaxyx", "yy"]), (STR, ["xy", "y"])) == ["a", ""]


def test_replace():
    args = (STR, ["banana", "abc", None]), (STR, ["an", "", "a"]), (STR, ["AN", "x", "b"])
    assert run("replace", STR, *args) == ["bANANa", "abc", None]


def test_strpos_counts_characters():
    got = run(
        "strpos",
        INT,
        (STR, ["héllo", "hello", "abc", "", None, "a"]),
        (STR, ["l", "z", "", "", "a", None]),
    )
    assert got == [3, 0, 1, 1, None, None]
    assert run("strpos", INT, (STR, ["ééx", "x"]), (STR, ["x", "x"])) == [3, 1]


def test_left_and_right():
    s = (STR, ["hello"] * 5 + [None])
    n = (INT, [2, -2, 0, 10, -10, 1])
    assert run("left", STR, s, n) == ["he", "hel", "", "hello", "", None]
    assert run("right", STR, s, n) == ["lo", "llo", "", "hello", "", None]
    assert run("left", STR, (STR, ["héllo"]), (INT, [2])) == ["hé"]


# -- CAST -------------------------------------------------------------------------------------


def test_cast_int_float():
    assert cast([1, -2, None, 2**53 + 1], INT, FLT) == [1.0, -2.0, None, float(2**53)]
    xs = [0.5, 1.5, 2.5, -2.5, -0.5, 2.4999, NAN, INF, -INF, 9.3e18, -9.223372036854775808e18, None]
    assert cast(xs, FLT, INT) == [0, 2, 2, -2, 0, 2, None, None, None, None, I64_MIN, None]


def test_cast_numbers_to_text():
    assert cast([0, -12, None, I64_MIN], INT, STR) == ["0", "-12", None, str(I64_MIN)]
    assert cast([True, False, None], BOOL, STR) == ["true", "false", None]


@pytest.mark.parametrize(
    ("x", "text"),
    [
        (3.0, "3"),
        (2.5, "2.5"),
        (-2.5, "-2.5"),
        (0.1, "0.1"),
        (1 / 3, "0.3333333333333333"),
        (100.0, "100"),
        (1e14, "100000000000000"),
        (999999999999999.9, "999999999999999.9"),
        (1e15, "1e+15"),
        (1e20, "1e+20"),
        (1.5e300, "1.5e+300"),
        (0.0001, "0.0001"),
        (0.00012345, "0.00012345"),
        (1e-05, "1e-05"),
        (-1.5e-7, "-1.5e-07"),
        (5e-324, "5e-324"),
        (0.0, "0"),
        (-0.0, "-0"),
        (NAN, "NaN"),
        (INF, "Infinity"),
        (-INF, "-Infinity"),
        (None, None),
    ],
)
def test_cast_float_to_text(x, text):
    assert cast([x], FLT, STR) == [text]


def pg_float_text(x: float) -> str:
    """Reference: PostgreSQL's float8out (shortest digits; exponent form outside [-4, 15))."""
    if math.isnan(x):
        return "NaN"
    if math.isinf(x):
        return "Infinity" if x > 0 else "-Infinity"
    if x == 0:
        return "-0" if math.copysign(1, x) < 0 else "0"
    d = Decimal(repr(x)).normalize()
    sign, digits, exp = d.as_tuple()
    e10 = len(digits) - 1 + exp
    if -4 <= e10 < 15:
        return format(d, "f")
    mant = "".join(map(str, digits))
    body = mant[0] + ("." + mant[1:] if len(mant) > 1 else "")
    return ("-" if sign else "") + body + ("e-" if e10 < 0 else "e+") + f"{abs(e10):02d}"


@settings(max_examples=300, deadline=None)
@given(st.lists(st.floats(allow_nan=True, allow_infinity=True), min_size=1, max_size=20))
def test_float_to_text_matches_reference(xs):
    got = float_to_text(pa.array(xs, type=pa.float64())).to_pylist()
    assert got == [pg_float_text(x) for x in xs]
    assert all(float(t) == x for t, x in zip(got, xs) if not math.isnan(x) and "Inf" not in t)


def test_cast_text_to_int():
    xs = [" 12 ", "+5", "-0", "007", str(I64_MIN), str(I64_MAX), "9223372036854775808"]
    assert cast(xs, STR, INT) == [12, 5, 0, 7, I64_MIN, I64_MAX, None]
    xs = ["-9223372036854775809", "1.5", "x", "", "--1", "1 2", "\t3\n", None]
    assert cast(xs, STR, INT) == [None] * 5 + [None, 3, None]


def test_cast_text_to_float():
    xs = [" 1.5 ", "-2", ".5", "5.", "1e3", "-1E-3", "Infinity", "-inf", "NaN", "0e-400"]
    assert _norm(cast(xs, STR, FLT)) == _norm(
        [1.5, -2.0, 0.5, 5.0, 1e3, -1e-3, INF, -INF, NAN, 0.0]
    )
    xs = ["1e400", "1e-400", "abc", "", ".", "1e", None]  # out of range or not a number
    assert cast(xs, STR, FLT) == [None] * len(xs)


def test_cast_text_to_bool():
    xs = [
        "t",
        "TRUE",
        " yes ",
        "on",
        "1",
        "tr",
        "f",
        "False",
        "n",
        "no",
        "off",
        "of",
        "0",
        "o",
        "2",
        "",
        "truex",
        None,
    ]
    assert cast(xs, STR, BOOL) == [True] * 6 + [False] * 7 + [None] * 5


def test_cast_bool_int_and_timestamp():
    assert cast([True, False, None], BOOL, INT) == [1, 0, None]
    assert cast([0, 5, -1, None], INT, BOOL) == [False, True, True, None]
    assert cast([5, None], TS, INT) == [5, None]
    assert cast(["42"], STR, TS) == [42]
    assert cast([7], TS, STR) == ["7"]


def test_cast_null_constant_has_the_target_type():
    assert evaluate(CastExpr(lit(None), INT), [], 2) == [None, None]
    assert evaluate(lit(None), [], 2) == [None, None]


# -- CASE -------------------------------------------------------------------------------------


def test_case_first_true_condition_wins():
    x = ColRef(0, INT)
    e = CaseExpr(
        (
            (Call("gt", (x, lit(0)), BOOL), lit("pos")),
            (Call("gt", (x, lit(-10)), BOOL), lit("small")),
        ),
        lit("other"),
        STR,
    )
    assert evaluate(e, [pa.array([5, -3, -20, None])], 4) == ["pos", "small", "other", "other"]


def test_case_without_else_and_with_null_condition():
    x = ColRef(0, BOOL)
    e = CaseExpr(((x, lit(1)),), None, INT)
    assert evaluate(e, [pa.array([True, False, None])], 3) == [1, None, None]


def test_case_converts_results_to_its_type():
    x = ColRef(0, INT)
    e = CaseExpr(((Call("gt", (x, lit(0)), BOOL), x), (lit(None), lit(1))), lit(0.5), FLT)
    assert evaluate(e, [pa.array([3, -1])], 2) == [3.0, 0.5]


def test_case_may_divide_by_zero_in_an_unchosen_branch():
    x = ColRef(0, INT)
    guarded = Call("div", (lit(10), x), INT)
    e = CaseExpr(((Call("ne", (x, lit(0)), BOOL), guarded),), lit(-1), INT)
    assert evaluate(e, [pa.array([2, 0])], 2) == [5, -1]


# -- compile_predicate, folding, errors -------------------------------------------------------


def test_predicate_is_true_only():
    x = ColRef(0, INT)
    p = compile_predicate(Call("gt", (x, lit(1)), BOOL))
    mask = p([pa.array([0, 2, None])], 3)
    assert mask.dtype == np.bool_
    assert mask.tolist() == [False, True, False]
    assert compile_predicate(lit(None))([], 2).tolist() == [False, False]
    assert compile_predicate(lit(True))([], 2).tolist() == [True, True]


def test_constant_subtrees_are_folded():
    e = Call("add", (ColRef(0, INT), Call("mul", (lit(2), lit(3)), INT)), INT)
    folded = fold_constants(e)
    assert folded.args[1] == Const(6, INT)
    assert fold_constants(Call("upper", (lit("a"),), STR)) == Const("A", STR)
    ev = compile_expr(Call("mul", (lit(2), lit(3)), INT))
    assert ev([], 4).to_pylist() == [6] * 4
    assert ev([], 1).to_pylist() == [6]


def test_unknown_function_is_an_engine_error():
    with pytest.raises(EngineError, match="unsupported function"):
        compile_expr(Call("frobnicate", (ColRef(0, INT),), INT))
    with pytest.raises(EngineError, match="compare"):
        compile_expr(Call("eq", (ColRef(0, INT), ColRef(1, STR)), BOOL))


def test_empty_batch():
    e = Call("like", (ColRef(0, STR), ColRef(1, STR)), BOOL)
    assert evaluate(e, [pa.array([], pa.string()), pa.array([], pa.string())], 0) == []
    e = CastExpr(ColRef(0, FLT), STR)
    assert evaluate(e, [pa.array([], pa.float64())], 0) == []


# -- property: exact int64 arithmetic against Python integers ---------------------------------


def _pg_int(fn: str, a: int, b: int) -> int | None:
    if fn in ("div", "mod") and b == 0:
        return None
    if fn == "div":
        r = abs(a) // abs(b) * (1 if (a < 0) == (b < 0) else -1)
    elif fn == "mod":
        r = abs(a) % abs(b) * (1 if a >= 0 else -1)
    else:
        r = {"add": a + b, "sub": a - b, "mul": a * b}[fn]
    return r if I64_MIN <= r <= I64_MAX else None


int64s = st.one_of(
    st.integers(I64_MIN, I64_MAX),
    st.integers(-20, 20),
    st.sampled_from([I64_MIN, I64_MAX, -1, 0, 1, 2**32, -(2**31)]),
)


@settings(max_examples=200, deadline=None)
@given(
    st.sampled_from(["add", "sub", "mul", "div", "mod"]),
    st.lists(st.tuples(int64s, int64s), min_size=1, max_size=30),
)
def test_int_arithmetic_matches_python(fn, pairs):
    xs, ys = [p[0] for p in pairs], [p[1] for p in pairs]
    cols = [pa.array(xs, pa.int64()), pa.array(ys, pa.int64())]
    got = evaluate(Call(fn, (ColRef(0, INT), ColRef(1, INT)), INT), cols, len(xs))
    assert got == [_pg_int(fn, a, b) for a, b in zip(xs, ys)]


# -- property: random expressions against DuckDB ----------------------------------------------
#
# Columns a, b: INT; c, d: FLOAT; e: BOOL. Values are small (no overflow anywhere in a tree of
# depth 3) and floats are dyadic or not tiny (no underflow); every divisor is wrapped in
# NULLIF(·, 0) on both sides, so division by zero never happens. INT / INT is DuckDB's `//`
# (truncating, like PostgreSQL); INT % INT and DOUBLE % DOUBLE are C's fmod on both sides.

COLUMNS = {"a": INT, "b": INT, "c": FLT, "d": FLT, "e": BOOL}
_ARITH = {"add": "+", "sub": "-", "mul": "*"}
_CMP = {"eq": "=", "ne": "<>", "lt": "<", "le": "<=", "gt": ">", "ge": ">="}


def _num(t: DataType):
    return (
        st.integers(-50, 50)
        if t == INT
        else st.one_of(
            st.integers(-800, 800).map(lambda k: k / 16),
            st.floats(-100, 100).filter(lambda v: v == 0 or abs(v) > 1e-3),
        )
    )


def _leaf_num(with_floats: bool):
    types = (INT, FLT) if with_floats else (INT,)
    cols = [
        st.just((ColRef(i, t), name)) for i, (name, t) in enumerate(COLUMNS.items()) if t in types
    ]
    ints = st.integers(-9, 9).map(lambda v: (Const(v, INT), f"CAST({v} AS BIGINT)"))
    floats = _num(FLT).map(lambda v: (Const(v, FLT), f"CAST('{v!r}' AS DOUBLE)"))
    nulls = st.sampled_from(types).map(
        lambda t: (Const(None, t), f"CAST(NULL AS {'BIGINT' if t == INT else 'DOUBLE'})")
    )
    return st.one_of(*cols, ints, *([floats] if with_floats else []), nulls)


def _ty(a: BExpr, b: BExpr) -> DataType:
    return FLT if FLT in (a.type, b.type) else INT


def _extend_num(children):
    def binary(fn, pair):
        (x, sx), (y, sy) = pair
        t = _ty(x, y)
        if fn in ("div", "mod"):
            y = Call("nullif", (y, Const(0, INT)), y.type)
            op = "//" if fn == "div" and t == INT else ("/" if fn == "div" else "%")
            return Call(fn, (x, y), t), f"({sx} {op} NULLIF({sy}, 0))"
        return Call(fn, (x, y), t), f"({sx} {_ARITH[fn]} {sy})"

    pair = st.tuples(children, children)
    return st.one_of(
        st.tuples(st.sampled_from(["add", "sub", "mul", "div", "mod"]), pair).map(
            lambda p: binary(*p)
        ),
        children.map(lambda c: (Call("neg", (c[0],), c[0].type), f"(- {c[1]})")),
        pair.map(
            lambda p: (
                Call("coalesce", (p[0][0], p[1][0]), _ty(p[0][0], p[1][0])),
                f"coalesce({p[0][1]}, {p[1][1]})",
            )
        ),
    )


int_exprs = st.recursive(_leaf_num(with_floats=False), _extend_num, max_leaves=6)
numeric_exprs = st.one_of(
    int_exprs, st.recursive(_leaf_num(with_floats=True), _extend_num, max_leaves=6)
)


def _leaf_bool():
    comparisons = st.tuples(st.sampled_from(list(_CMP)), numeric_exprs, numeric_exprs).map(
        lambda p: (Call(p[0], (p[1][0], p[2][0]), BOOL), f"({p[1][1]} {_CMP[p[0]]} {p[2][1]})")
    )
    col = st.just((ColRef(4, BOOL), "e"))
    null_test = numeric_exprs.map(lambda c: (Call("is_null", (c[0],), BOOL), f"({c[1]} IS NULL)"))
    in_list = st.tuples(numeric_exprs, st.lists(numeric_exprs, min_size=1, max_size=3)).map(
        lambda p: (
            Call("in_list", (p[0][0], *(i[0] for i in p[1])), BOOL),
            f"({p[0][1]} IN ({', '.join(i[1] for i in p[1])}))",
        )
    )
    return st.one_of(comparisons, col, null_test, in_list)


def _extend_bool(children):
    pair = st.tuples(st.sampled_from(["and", "or"]), children, children)
    return st.one_of(
        pair.map(
            lambda p: (
                Call(p[0], (p[1][0], p[2][0]), BOOL),
                f"({p[1][1]} {p[0].upper()} {p[2][1]})",
            )
        ),
        children.map(lambda c: (Call("not", (c[0],), BOOL), f"(NOT {c[1]})")),
    )


bool_exprs = st.recursive(_leaf_bool(), _extend_bool, max_leaves=4)


@st.composite
def tables(draw):
    n = draw(st.integers(1, 12))
    cols = {}
    for name, t in COLUMNS.items():
        vals = st.booleans() if t == BOOL else _num(t)
        values_or_null = st.one_of(st.none(), vals, vals, vals)  # NULL about 1 in 4
        cols[name] = draw(st.lists(values_or_null, min_size=n, max_size=n))
    return n, cols


_DUCK = duckdb.connect()


def _duckdb_eval(sql: str, n: int, cols: dict) -> list | None:
    table = pa.table(
        {"i": pa.array(range(n), pa.int64())}
        | {name: pa.array(v, type=arrow_type(COLUMNS[name])) for name, v in cols.items()}
    )
    _DUCK.register("t", table)
    try:
        rows = _DUCK.execute(f"SELECT {sql} FROM t ORDER BY i").fetchall()
    except duckdb.OutOfRangeException:
        return None
    finally:
        _DUCK.unregister("t")
    return [r[0] for r in rows]


def _same(got: list, want: list) -> bool:
    for g, w in zip(got, want, strict=True):
        if g is None or w is None:
            if g is not w:
                return False
        elif isinstance(g, float) or isinstance(w, float):
            if not math.isclose(g, w, rel_tol=1e-12, abs_tol=1e-300):
                return False
        elif g != w:
            return False
    return True


def _check_against_duckdb(expr: BExpr, sql: str, data) -> None:
    n, cols = data
    want = _duckdb_eval(sql, n, cols)
    assume(want is not None)
    arrays = [pa.array(cols[name], type=arrow_type(t)) for name, t in COLUMNS.items()]
    got = evaluate(expr, arrays, n)
    assert _same(got, want), (sql, got, want)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(int_exprs, tables())
def test_int_expressions_match_duckdb(expr_sql, data):
    _check_against_duckdb(*expr_sql, data)


@settings(max_examples=250, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(numeric_exprs, tables())
def test_numeric_expressions_match_duckdb(expr_sql, data):
    _check_against_duckdb(*expr_sql, data)


@settings(max_examples=250, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(bool_exprs, tables())
def test_boolean_expressions_match_duckdb(expr_sql, data):
    _check_against_duckdb(*expr_sql, data)
