"""The CQL parser: text -> `cql.ast` nodes (node equality ignores spans), spans, errors."""

from __future__ import annotations

import pytest

from cq_service.cql import ast
from cq_service.cql.parser import _lark, parse_expression, parse_query
from cq_service.errors import CQLError, Span

# Short constructors for expected trees.
C = ast.Column
L = ast.Literal
B = ast.BinaryOp
F = ast.FuncCall
COUNT_STAR = F("count", star=True)


def T(
    name: str,
    alias: str | None = None,
    window: ast.Window | None = None,
    sample: float | None = None,
) -> ast.TableRef:
    return ast.TableRef(name, alias, window, sample)


def item(expr: ast.Expr, alias: str | None = None) -> ast.SelectItem:
    return ast.SelectItem(expr, alias)


def sel(
    *items: ast.Expr | ast.SelectItem, from_: tuple[ast.FromItem, ...] | ast.FromItem, **kw: object
) -> ast.Select:
    """A Select whose bare-expression items get no alias."""
    its = tuple(i if isinstance(i, ast.SelectItem) else item(i) for i in items)
    froms = from_ if isinstance(from_, tuple) else (from_,)
    return ast.Select(its, froms, **kw)  # type: ignore[arg-type]


def q1(text: str) -> ast.Select:
    """Parse a query that must be a Select."""
    query = parse_query(text)
    assert isinstance(query, ast.Select)
    return query


def window_of(text: str) -> ast.Window | None:
    """The window of the first FROM item of ``SELECT * FROM S <text>``."""
    ref = q1(f"SELECT * FROM S {text}").from_[0]
    assert isinstance(ref, ast.TableRef)
    return ref.window


def error(text: str, *, expression: bool = False) -> CQLError:
    with pytest.raises(CQLError) as info:
        (parse_expression if expression else parse_query)(text)
    return info.value


# ---------------------------------------------------------------------------------------------
# The paper's example queries (brief-stream.md E1-E4) and NEXMark-style queries


def test_e1_range_day_preceding() -> None:
    q = q1(
        "Select Count(*) From Requests S [Range 1 Day Preceding] Where S.domain = 'stanford.edu'"
    )
    assert q == sel(
        COUNT_STAR,
        from_=T("Requests", "S", ast.RangeWindow(ast.Duration(1, "day"))),
        where=B("=", C("domain", "S"), L("stanford.edu")),
    )


def test_e2_partition_window_with_inner_where() -> None:
    q = q1("""Select Count(*) From Requests S
      [Partition By S.client_id Rows 10 Preceding Where S.domain = 'stanford.edu']
    Where S.URL Like 'http://cs.stanford.edu/%'""")
    window = ast.RowsWindow(10, (C("client_id", "S"),), B("=", C("domain", "S"), L("stanford.edu")))
    assert q == sel(
        COUNT_STAR,
        from_=T("Requests", "S", window),
        where=ast.Like(C("URL", "S"), L("http://cs.stanford.edu/%")),
    )


def test_e3_subquery_with_alias_and_sample() -> None:
    q = q1("""Select T.URL From (Select client_id, URL From Requests S, Domains R
      Where S.domain = R.domain And R.type = 'commerce') T Sample(10)
    Where T.client_id Between 1 And 1000""")
    inner = sel(
        C("client_id"),
        C("URL"),
        from_=(T("Requests", "S"), T("Domains", "R")),
        where=B(
            "and", B("=", C("domain", "S"), C("domain", "R")), B("=", C("type", "R"), L("commerce"))
        ),
    )
    assert q == sel(
        C("URL", "T"),
        from_=ast.SubqueryRef(inner, "T", sample=10.0),
        where=ast.Between(C("client_id", "T"), L(1), L(1000)),
    )


def test_e4_select_star() -> None:
    assert parse_query("Select * From S") == sel(ast.Star(), from_=T("S"))


def test_nexmark_hot_items_alias_less_subquery_and_all() -> None:
    q = q1(
        "SELECT Rstream(auction) FROM (SELECT B1.auction, count(*) AS num "
        "FROM Bid [RANGE 60 MINUTE SLIDE 1 MINUTE] B1 GROUP BY B1.auction) "
        "WHERE num >= ALL (SELECT count(*) FROM Bid [RANGE 60 MINUTE SLIDE 1 MINUTE] B2 "
        "GROUP BY B2.auction)"
    )
    hour_window = ast.RangeWindow(ast.Duration(60, "minute"), ast.Duration(1, "minute"))
    inner = sel(
        C("auction", "B1"),
        item(COUNT_STAR, "num"),
        from_=T("Bid", "B1", hour_window),
        group_by=(C("auction", "B1"),),
    )
    counts = sel(COUNT_STAR, from_=T("Bid", "B2", hour_window), group_by=(C("auction", "B2"),))
    assert q == sel(
        C("auction"),
        from_=ast.SubqueryRef(inner),
        where=ast.Quantified(C("num"), ">=", "all", counts),
        stream_op="rstream",
    )


def test_nexmark_currency_conversion_and_join() -> None:
    q = q1(
        "SELECT Istream(auction, bidder, 0.908 * price AS euro, dateTime, extra) "
        "FROM Bid [Rows Unbounded]"
    )
    assert q.stream_op == "istream"
    assert q.items[2] == item(B("*", L(0.908), C("price")), "euro")
    q = q1(
        "SELECT Istream(P.name, P.city, A.id) FROM Auction A [Range Unbounded], "
        "Person P [Range Unbounded] WHERE A.seller = P.id AND A.category = 10 "
        "AND (P.state = 'OR' OR P.state = 'ID')"
    )
    assert q.from_ == (
        T("Auction", "A", ast.RangeWindow(None)),
        T("Person", "P", ast.RangeWindow(None)),
    )
    assert isinstance(q.where, ast.BinaryOp) and q.where.op == "and"
    assert q.where.right == B(
        "or", B("=", C("state", "P"), L("OR")), B("=", C("state", "P"), L("ID"))
    )


# ---------------------------------------------------------------------------------------------
# SELECT blocks


def test_select_clauses() -> None:
    q = q1(
        "SELECT DISTINCT a, b + 1 AS c, d e, t.*, * FROM S WHERE a > 1 "
        "GROUP BY a, b HAVING count(*) > 2"
    )
    assert q == sel(
        C("a"),
        item(B("+", C("b"), L(1)), "c"),
        item(C("d"), "e"),
        ast.Star("t"),
        ast.Star(),
        from_=T("S"),
        where=B(">", C("a"), L(1)),
        group_by=(C("a"), C("b")),
        having=B(">", COUNT_STAR, L(2)),
        distinct=True,
    )


@pytest.mark.parametrize("op", ["Istream", "Dstream", "Rstream", "ISTREAM", "rstream"])
def test_select_list_stream_op(op: str) -> None:
    q = q1(f"SELECT {op}(a, b AS x, *) FROM S")
    assert q == sel(C("a"), item(C("b"), "x"), ast.Star(), from_=T("S"), stream_op=op.lower())  # type: ignore[arg-type]


def test_select_distinct_stream_op() -> None:
    q = q1("SELECT DISTINCT Dstream(a) FROM S")
    assert q.distinct and q.stream_op == "dstream"


def test_stream_op_is_a_keyword_not_a_function() -> None:
    assert "unexpected '+'" in error("SELECT Istream(a) + 1 FROM S").message


@pytest.mark.parametrize(
    "text",
    [
        "Istream(SELECT * FROM S)",
        "ISTREAM (SELECT * FROM S)",
        "istream((SELECT * FROM S))",
    ],
)
def test_whole_query_rel_to_stream(text: str) -> None:
    assert parse_query(text) == ast.RelToStream("istream", sel(ast.Star(), from_=T("S")))


def test_rel_to_stream_ops_and_nesting() -> None:
    q = parse_query("Dstream(Rstream(SELECT a FROM S) UNION SELECT a FROM T)")
    assert q == ast.RelToStream(
        "dstream",
        ast.SetOp(
            "union",
            ast.RelToStream("rstream", sel(C("a"), from_=T("S"))),
            sel(C("a"), from_=T("T")),
        ),
    )


def test_parenthesised_query_and_trailing_semicolon() -> None:
    assert parse_query("((SELECT a FROM S));") == sel(C("a"), from_=T("S"))
    assert parse_query("SELECT a FROM S ;  -- done") == sel(C("a"), from_=T("S"))


def test_keywords_are_case_insensitive_identifiers_are_kept() -> None:
    assert parse_query("sElEcT MyCol FrOm MyStream wHeRe MyCol iS nOt NuLl") == sel(
        C("MyCol"), from_=T("MyStream"), where=ast.IsNull(C("MyCol"), negated=True)
    )


def test_quoted_identifiers() -> None:
    q = q1('SELECT "select", "Weird ""x""" AS "my alias" FROM "from" "T"')
    assert q == sel(C("select"), item(C('Weird "x"'), "my alias"), from_=T("from", "T"))


def test_comments() -> None:
    q = q1("SELECT a -- the a column\n, /* multi\nline */ b FROM S /* end */")
    assert q == sel(C("a"), C("b"), from_=T("S"))


# ---------------------------------------------------------------------------------------------
# Set operations


def _s(name: str) -> ast.Select:
    return sel(C("a"), from_=T(name))


def test_set_operations_and_all() -> None:
    assert parse_query("SELECT a FROM A UNION SELECT a FROM B") == ast.SetOp(
        "union", _s("A"), _s("B")
    )
    assert parse_query("SELECT a FROM A EXCEPT ALL SELECT a FROM B") == ast.SetOp(
        "except", _s("A"), _s("B"), all=True
    )
    assert parse_query("SELECT a FROM A INTERSECT ALL SELECT a FROM B") == ast.SetOp(
        "intersect", _s("A"), _s("B"), all=True
    )


def test_intersect_binds_tighter_and_left_associativity() -> None:
    q = parse_query(
        "SELECT a FROM A UNION SELECT a FROM B INTERSECT SELECT a FROM C EXCEPT SELECT a FROM D"
    )
    assert q == ast.SetOp(
        "except", ast.SetOp("union", _s("A"), ast.SetOp("intersect", _s("B"), _s("C"))), _s("D")
    )


def test_parentheses_group_set_operations() -> None:
    q = parse_query("SELECT a FROM A EXCEPT (SELECT a FROM B UNION SELECT a FROM C)")
    assert q == ast.SetOp("except", _s("A"), ast.SetOp("union", _s("B"), _s("C")))


# ---------------------------------------------------------------------------------------------
# FROM items


def test_joins() -> None:
    q = q1("SELECT * FROM A JOIN B ON A.x = B.x INNER JOIN C c ON c.y = B.y CROSS JOIN D, E")
    ab = ast.JoinRef(T("A"), T("B"), B("=", C("x", "A"), C("x", "B")))
    abc = ast.JoinRef(ab, T("C", "c"), B("=", C("y", "c"), C("y", "B")))
    assert q.from_ == (ast.JoinRef(abc, T("D")), T("E"))


def test_window_and_alias_in_either_order() -> None:
    w = ast.RangeWindow(ast.Duration(1, "day"))
    assert q1("SELECT * FROM Requests S [Range 1 Day Preceding]").from_ == (T("Requests", "S", w),)
    assert q1("SELECT * FROM Requests [Range 1 Day] AS S").from_ == (T("Requests", "S", w),)
    assert q1("SELECT * FROM Requests AS S [Range 1 Day] Sample(2.5)").from_ == (
        T("Requests", "S", w, 2.5),
    )


def test_sample() -> None:
    assert q1("SELECT * FROM S Sample(10)").from_ == (T("S", sample=10.0),)
    assert q1("SELECT * FROM S [Rows 5] X SAMPLE(0.5)").from_ == (
        T("S", "X", ast.RowsWindow(5), 0.5),
    )
    assert "between 0 and 100" in error("SELECT * FROM S Sample(150)").message


def test_subquery_refs() -> None:
    inner = sel(C("a"), from_=T("S"))
    assert q1("SELECT * FROM (SELECT a FROM S) T Sample(10)").from_ == (
        ast.SubqueryRef(inner, "T", sample=10.0),
    )
    assert q1("SELECT * FROM (SELECT a FROM S) AS T [Range 10]").from_ == (
        ast.SubqueryRef(inner, "T", ast.RangeWindow(ast.Duration(10))),
    )
    assert q1("SELECT * FROM (SELECT a FROM S) [Rows 3] T").from_ == (
        ast.SubqueryRef(inner, "T", ast.RowsWindow(3)),
    )
    assert q1("SELECT * FROM (Istream(SELECT a FROM S)) [Now]").from_ == (
        ast.SubqueryRef(
            ast.RelToStream("istream", inner), window=ast.RangeWindow(ast.Duration(0), now=True)
        ),
    )


# ---------------------------------------------------------------------------------------------
# Windows


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("[Rows 50]", ast.RowsWindow(50)),
        ("[Rows 50 Preceding]", ast.RowsWindow(50)),
        ("[ROWS UNBOUNDED]", ast.RowsWindow(None)),
        ("[Rows Unbounded Preceding]", ast.RowsWindow(None)),
        ("[Range 10]", ast.RangeWindow(ast.Duration(10))),
        ("[Range 15 Minutes Preceding]", ast.RangeWindow(ast.Duration(15, "minute"))),
        (
            "[Range 10s Slide 2s]",
            ast.RangeWindow(ast.Duration(10, "second"), ast.Duration(2, "second")),
        ),
        (
            "[Range 1 Hour Preceding Slide 5 Min]",
            ast.RangeWindow(ast.Duration(1, "hour"), ast.Duration(5, "minute")),
        ),
        ("[Range Unbounded]", ast.RangeWindow(None)),
        ("[Now]", ast.RangeWindow(ast.Duration(0), now=True)),
        ("[Partition By a, b.c Rows 3]", ast.RowsWindow(3, (C("a"), C("c", "b")))),
        ("[Partition By a Rows Unbounded]", ast.RowsWindow(None, (C("a"),))),
        ("[Rows 10 Where x > 1]", ast.RowsWindow(10, where=B(">", C("x"), L(1)))),
        (
            "[Range 5 Slide 1 Where x = 'a']",
            ast.RangeWindow(ast.Duration(5), ast.Duration(1), where=B("=", C("x"), L("a"))),
        ),
        ("[Now Where ok]", ast.RangeWindow(ast.Duration(0), where=C("ok"), now=True)),
    ],
)
def test_windows(text: str, expected: ast.Window) -> None:
    assert window_of(text) == expected


@pytest.mark.parametrize(
    ("unit", "normal"),
    [
        *[(u, "millisecond") for u in ["millisecond", "Milliseconds", "ms", "msec"]],
        *[(u, "second") for u in ["second", "seconds", "sec", "secs", "s", "SECONDS"]],
        *[(u, "minute") for u in ["minute", "minutes", "min", "mins"]],
        *[(u, "hour") for u in ["hour", "hours", "h", "hr", "hrs"]],
        *[(u, "day") for u in ["day", "days", "d", "Day"]],
    ],
)
def test_duration_units(unit: str, normal: str) -> None:
    assert window_of(f"[Range 3 {unit}]") == ast.RangeWindow(ast.Duration(3, normal))


def test_unknown_time_unit() -> None:
    err = error("SELECT * FROM S [Range 1 fortnight]")
    assert err.message.startswith("unknown time unit 'fortnight'")
    assert (err.span.line, err.span.col, err.span.offset) == (1, 26, 25)  # type: ignore[union-attr]


# ---------------------------------------------------------------------------------------------
# Keywords usable as names


def test_window_words_are_column_and_table_names() -> None:
    words = [
        "order",
        "limit",
        "day",
        "hour",
        "minute",
        "second",
        "slide",
        "preceding",
        "unbounded",
        "sample",
        "rows",
        "range",
        "now",
        "partition",
        "type",
        "domain",
        "time",
        "date",
        "value",
        "name",
        "count",
        "min",
        "s",
        "ms",
    ]
    q = q1(f"SELECT {', '.join(words)} FROM S WHERE day > hour AND slide = sample")
    assert q.items == tuple(item(C(w)) for w in words)
    assert q.where == B("and", B(">", C("day"), C("hour")), B("=", C("slide"), C("sample")))
    q = q1("SELECT t.range, t.rows FROM rows t [Range 1 day] WHERE t.now = 1")
    assert q.from_ == (T("rows", "t", ast.RangeWindow(ast.Duration(1, "day"))),)
    assert q.items == (item(C("range", "t")), item(C("rows", "t")))


def test_nexmark_columns() -> None:
    cols = [
        "dateTime",
        "extra",
        "channel",
        "url",
        "category",
        "reserve",
        "expires",
        "seller",
        "auction",
        "bidder",
        "price",
    ]
    assert q1(f"SELECT {', '.join(cols)} FROM Bid").items == tuple(item(C(c)) for c in cols)


def test_reserved_words_are_not_names() -> None:
    assert error("SELECT from FROM S").message == "unexpected 'from'; expected an expression"
    assert parse_expression('"from" + 1') == B("+", C("from"), L(1))


def test_unreserved_keyword_wins_where_it_is_expected() -> None:
    # After a table name, SAMPLE is expected, so `sample` is the keyword, not an alias.
    assert "expected '('" in error("SELECT * FROM S sample").message


# ---------------------------------------------------------------------------------------------
# Expressions


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("42", 42),
        ("1.5", 1.5),
        (".5", 0.5),
        ("1e3", 1000.0),
        ("2.5E-1", 0.25),
        ("7.", 7.0),
        ("'it''s'", "it's"),
        ("''", ""),
        ("TRUE", True),
        ("false", False),
        ("NULL", None),
    ],
)
def test_literals(text: str, value: object) -> None:
    lit = parse_expression(text)
    assert lit == L(value)  # type: ignore[arg-type]
    assert type(lit.value) is type(value)  # type: ignore[union-attr]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("a OR b AND c", B("or", C("a"), B("and", C("b"), C("c")))),
        ("a AND b OR c", B("or", B("and", C("a"), C("b")), C("c"))),
        ("NOT a AND b", B("and", ast.UnaryOp("not", C("a")), C("b"))),
        ("NOT a = b", ast.UnaryOp("not", B("=", C("a"), C("b")))),
        ("a = b IS NULL", ast.IsNull(B("=", C("a"), C("b")))),
        ("a + b * c", B("+", C("a"), B("*", C("b"), C("c")))),
        ("a - b - c", B("-", B("-", C("a"), C("b")), C("c"))),
        ("a / b % c", B("%", B("/", C("a"), C("b")), C("c"))),
        ("a || b || c", B("||", B("||", C("a"), C("b")), C("c"))),
        ("a || b + c", B("||", C("a"), B("+", C("b"), C("c")))),
        ("a + b = c || d", B("=", B("+", C("a"), C("b")), B("||", C("c"), C("d")))),
        ("-a * b", B("*", ast.UnaryOp("-", C("a")), C("b"))),
        ("- -a", ast.UnaryOp("-", ast.UnaryOp("-", C("a")))),
        ("+a", ast.UnaryOp("+", C("a"))),
        ("-a::int", ast.UnaryOp("-", ast.Cast(C("a"), "int"))),
        ("(a + b) * c", B("*", B("+", C("a"), C("b")), C("c"))),
        ("a LIKE 'x' = TRUE", B("=", ast.Like(C("a"), L("x")), L(True))),
        ("a < b + 1 AND c", B("and", B("<", C("a"), B("+", C("b"), L(1))), C("c"))),
        ("a BETWEEN 1 AND 2 AND b", B("and", ast.Between(C("a"), L(1), L(2)), C("b"))),
        (
            "a BETWEEN b + 1 AND c * 2",
            ast.Between(C("a"), B("+", C("b"), L(1)), B("*", C("c"), L(2))),
        ),
    ],
)
def test_precedence(text: str, expected: ast.Expr) -> None:
    assert parse_expression(text) == expected


@pytest.mark.parametrize(
    ("op", "normal"),
    [
        ("=", "="),
        ("<>", "<>"),
        ("!=", "<>"),
        ("<", "<"),
        ("<=", "<="),
        (">", ">"),
        (">=", ">="),
    ],
)
def test_comparison_operators(op: str, normal: str) -> None:
    assert parse_expression(f"a {op} 1") == B(normal, C("a"), L(1))  # type: ignore[arg-type]


def test_comparisons_do_not_chain() -> None:
    assert error("a < b < c", expression=True).message.startswith("unexpected '<'")


def test_predicates() -> None:
    assert parse_expression("a IS NULL") == ast.IsNull(C("a"))
    assert parse_expression("a IS NOT NULL") == ast.IsNull(C("a"), negated=True)
    assert parse_expression("a NOT LIKE 'x%'") == ast.Like(C("a"), L("x%"), negated=True)
    assert parse_expression("a ILIKE 'x%'") == ast.Like(C("a"), L("x%"), case_insensitive=True)
    assert parse_expression("a NOT ILIKE b") == ast.Like(C("a"), C("b"), True, True)
    assert parse_expression("a NOT BETWEEN 1 AND 2") == ast.Between(C("a"), L(1), L(2), True)
    assert parse_expression("a IN (1, 'b', c)") == ast.InList(C("a"), (L(1), L("b"), C("c")))
    assert parse_expression("a NOT IN (1)") == ast.InList(C("a"), (L(1),), negated=True)


def test_subquery_predicates() -> None:
    sub = sel(C("x"), from_=T("R"))
    assert parse_expression("a IN (SELECT x FROM R)") == ast.InSubquery(C("a"), sub)
    assert parse_expression("a NOT IN (SELECT x FROM R)") == ast.InSubquery(C("a"), sub, True)
    assert parse_expression("a IN ((SELECT x FROM R))") == ast.InSubquery(C("a"), sub)
    assert parse_expression("a IN ((SELECT x FROM R), 2)") == ast.InList(
        C("a"), (ast.ScalarSubquery(sub), L(2))
    )
    assert parse_expression("EXISTS (SELECT x FROM R)") == ast.Exists(sub)
    assert parse_expression("NOT EXISTS (SELECT x FROM R)") == ast.Exists(sub, negated=True)
    assert parse_expression("a > ALL (SELECT x FROM R)") == ast.Quantified(C("a"), ">", "all", sub)
    assert parse_expression("a = ANY (SELECT x FROM R)") == ast.Quantified(C("a"), "=", "any", sub)
    assert parse_expression("a != SOME (SELECT x FROM R)") == ast.Quantified(
        C("a"), "<>", "any", sub
    )


def test_scalar_subqueries() -> None:
    sub = sel(F("max", (C("x"),)), from_=T("R"))
    assert parse_expression("(SELECT max(x) FROM R)") == ast.ScalarSubquery(sub)
    assert parse_expression("((SELECT max(x) FROM R)) + 1") == B("+", ast.ScalarSubquery(sub), L(1))
    assert parse_expression("(SELECT a FROM A UNION SELECT a FROM B)") == ast.ScalarSubquery(
        ast.SetOp("union", _s("A"), _s("B"))
    )


def test_function_calls() -> None:
    assert parse_expression("COUNT(*)") == F("count", star=True)
    assert parse_expression("Count(DISTINCT x)") == F("count", (C("x"),), distinct=True)
    assert parse_expression("COALESCE(a, NULLIF(b, 0), 1)") == F(
        "coalesce", (C("a"), F("nullif", (C("b"), L(0))), L(1))
    )
    assert parse_expression("now()") == F("now")
    assert parse_expression("upper(t.name) || 'x'") == B(
        "||", F("upper", (C("name", "t"),)), L("x")
    )


def test_case() -> None:
    assert parse_expression(
        "CASE WHEN a > 1 THEN 'big' WHEN a > 0 THEN 'small' ELSE 'none' END"
    ) == ast.Case(
        None, ((B(">", C("a"), L(1)), L("big")), (B(">", C("a"), L(0)), L("small"))), L("none")
    )
    assert parse_expression("case a when 1 then 2 end") == ast.Case(C("a"), ((L(1), L(2)),))


@pytest.mark.parametrize(
    ("type_text", "normal"),
    [
        *[(t, "int") for t in ["int", "INTEGER", "bigint", "smallint", "int4", "int8"]],
        *[
            (t, "float")
            for t in [
                "float",
                "double",
                "double precision",
                "Real",
                "numeric",
                "decimal(10, 2)",
                "float8",
            ]
        ],
        *[
            (t, "string")
            for t in [
                "varchar",
                "varchar(20)",
                "text",
                "string",
                "char",
                "character varying",
                "character varying(5)",
                "character",
            ]
        ],
        *[(t, "bool") for t in ["bool", "boolean"]],
        ("timestamp", "timestamp"),
    ],
)
def test_casts(type_text: str, normal: str) -> None:
    assert parse_expression(f"CAST(a AS {type_text})") == ast.Cast(C("a"), normal)
    assert parse_expression(f"a::{type_text}") == ast.Cast(C("a"), normal)


def test_cast_then_alias() -> None:
    assert q1("SELECT a::int b, a::double precision c FROM S").items == (
        item(ast.Cast(C("a"), "int"), "b"),
        item(ast.Cast(C("a"), "float"), "c"),
    )


def test_unknown_type() -> None:
    err = error("SELECT a::blob FROM S")
    assert err.message.startswith("unknown type 'blob'")
    assert (err.span.col, err.span.offset) == (11, 10)  # type: ignore[union-attr]


# ---------------------------------------------------------------------------------------------
# Spans


def _at(span: Span) -> tuple[int, int, int | None, int | None, int | None, int | None]:
    return (span.line, span.col, span.end_line, span.end_col, span.offset, span.end)


def test_spans_single_line() -> None:
    text = "SELECT a + 1 AS b FROM S [Rows 5] WHERE c"
    q = q1(text)
    assert _at(q.span) == (1, 1, 1, 42, 0, 41)
    it = q.items[0]
    assert text[it.span.offset : it.span.end] == "a + 1 AS b"  # type: ignore[misc]
    assert text[it.expr.span.offset : it.expr.span.end] == "a + 1"  # type: ignore[misc]
    ref = q.from_[0]
    assert text[ref.span.offset : ref.span.end] == "S [Rows 5]"  # type: ignore[misc]
    assert isinstance(ref, ast.TableRef) and ref.window is not None
    assert _at(ref.window.span) == (1, 26, 1, 34, 25, 33)
    assert q.where is not None and _at(q.where.span) == (1, 41, 1, 42, 40, 41)


def test_spans_multi_line() -> None:
    text = "SELECT x\n  FROM S [Range 10 Minutes]\n  WHERE S.y =\n    'z'"
    q = q1(text)
    assert _at(q.span) == (1, 1, 4, 8, 0, len(text))
    ref = q.from_[0]
    assert isinstance(ref, ast.TableRef) and isinstance(ref.window, ast.RangeWindow)
    size = ref.window.size
    assert size is not None and _at(size.span) == (2, 17, 2, 27, 25, 35)
    assert isinstance(q.where, ast.BinaryOp)
    assert _at(q.where.span) == (3, 9, 4, 8, 45, len(text))
    assert _at(q.where.right.span) == (4, 5, 4, 8, len(text) - 3, len(text))


def test_spans_of_parenthesised_and_nested_nodes() -> None:
    text = "SELECT (a + b) * c FROM (SELECT a FROM S) T"
    q = q1(text)
    expr = q.items[0].expr
    assert isinstance(expr, ast.BinaryOp)
    assert text[expr.span.offset : expr.span.end] == "(a + b) * c"  # type: ignore[misc]
    assert text[expr.left.span.offset : expr.left.span.end] == "a + b"  # type: ignore[misc]
    ref = q.from_[0]
    assert isinstance(ref, ast.SubqueryRef)
    assert text[ref.span.offset : ref.span.end] == "(SELECT a FROM S) T"  # type: ignore[misc]
    assert text[ref.query.span.offset : ref.query.span.end] == "SELECT a FROM S"  # type: ignore[misc]


def test_quoted_name_span_covers_the_quotes() -> None:
    text = 'SELECT "a b" FROM S'
    col = q1(text).items[0].expr
    assert _at(col.span) == (1, 8, 1, 13, 7, 12)


# ---------------------------------------------------------------------------------------------
# Syntax errors


@pytest.mark.parametrize(
    ("text", "message", "line", "col", "offset"),
    [
        ("SELECT FROM S", "unexpected 'FROM'; expected an expression", 1, 8, 7),
        ("SELECT a FROM S WHERE", "unexpected end of query; expected an expression", 1, 22, 21),
        ("(SELECT a FROM S", "unexpected end of query; expected ')'", 1, 17, 16),
        ("SELECT a FROM S WHERE (a + b", "unexpected end of query; expected ')'", 1, 29, 28),
        ("SELECT count(* FROM S", "unexpected 'FROM'; expected ')'", 1, 16, 15),
        ("SELECT a FROM S GROUP a", "unexpected 'a'; expected BY", 1, 23, 22),
        ("SELECT a FROM S JOIN T", "unexpected end of query; expected ON", 1, 23, 22),
        ("SELECT a FROM S [Rows]", "unexpected ']'; expected UNBOUNDED or an integer", 1, 22, 21),
        ("SELECT a\nFROM S\nWHERE a = = 2", "unexpected '='; expected an expression", 3, 11, 26),
        ("SELECT a\n  FROM", "unexpected end of query; expected '(' or a name", 2, 7, 15),
        (
            "SELECT a FROM S WHERE a BETWEEN 1 2",
            "unexpected '2'; expected AND or an operator",
            1,
            35,
            34,
        ),
        (
            "SELECT a FROM S WHERE a = 1 )",
            "unexpected ')'; expected ';' or end of query",
            1,
            29,
            28,
        ),
        (
            "SELECT CASE WHEN a THEN b FROM S",
            "unexpected 'FROM'; expected ELSE, END or WHEN",
            1,
            27,
            26,
        ),
        ("SELECT a b c FROM S", "unexpected 'c'; expected ',' or FROM", 1, 12, 11),
        ("", "unexpected end of query; expected '(', DSTREAM, ISTREAM, RSTREAM or SELECT", 1, 1, 0),
        ("SELECT 'abc FROM S", "unterminated string literal", 1, 8, 7),
        ('SELECT "abc FROM S', "unterminated quoted name", 1, 8, 7),
        ('SELECT "" FROM S', "empty quoted name", 1, 8, 7),
        ("SELECT a /* oops", "unterminated comment", 1, 10, 9),
        ("SELECT a\n  # FROM S", "unexpected character '#'", 2, 3, 11),
        ("SELECT a FROM S /* x", "unterminated comment", 1, 17, 16),
        (
            "SELECT a FROM S WHERE x = 'it''s' FOO",
            "unexpected 'FOO'; expected ';', EXCEPT, "
            "GROUP, HAVING, INTERSECT, LIMIT, ORDER, UNION or end of query",
            1,
            35,
            34,
        ),
        (
            "SELECT * FROM S [Range 1.5 hours]",
            "a duration must be a whole number, not 1.5 (use a smaller unit)",
            1,
            24,
            23,
        ),
        (
            "SELECT a FROM S\nORDER BY a",
            "ORDER BY is not supported: the result of a continuous query has no order",
            2,
            1,
            16,
        ),
        ("SELECT a FROM S LIMIT 3", "LIMIT is not supported in a continuous query", 1, 17, 16),
    ],
)
def test_syntax_errors(text: str, message: str, line: int, col: int, offset: int) -> None:
    err = error(text)
    assert err.message == message
    assert err.span is not None
    assert (err.span.line, err.span.col, err.span.offset) == (line, col, offset)
    assert "\n" not in err.message
    assert str(err) == f"{line}:{col}: {message}"


def test_error_spans_cover_the_offending_token() -> None:
    err = error("SELECT a FROM S WHERE a = = 2")
    assert _at(err.span) == (1, 27, 1, 28, 26, 27)  # type: ignore[arg-type]


def test_expression_errors() -> None:
    assert error("a +", expression=True).message == (
        "unexpected end of query; expected an expression"
    )
    assert error("a b", expression=True).message.startswith("unexpected 'b'")


def test_grammar_is_loaded_once() -> None:
    assert _lark() is _lark()
