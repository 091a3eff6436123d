"""The reference evaluator's own CQL parser (`tests/reference/cql_parser.py`).

- It stays independent: no module of tests/reference imports cq_service at all — above all not
  the engine's parser, planner or engine (checked in the source and in a fresh interpreter).
- Known answers: precedence, windows, FROM items, stream operators, refusals.
- It reads every query the engine's parser reads the same way: every CQL text in the shipped
  pipelines, the golden cases, the engine's and the reference's unit tests, and queries drawn
  from the property tests' strategies — compared tree for tree (spans aside).
"""

from __future__ import annotations

import ast as pyast
import dataclasses
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cq_service.cql import parser as engine_parser
from cq_service.errors import CQLError
from tests.property import strategies as strat
from tests.reference import cql_ast as ast
from tests.reference.cql_parser import CQLSyntaxError, parse_expression, parse_query

ROOT = Path(__file__).resolve().parents[3]
REFERENCE = ROOT / "tests" / "reference"
# The whole package: the reference reads pipeline files with yaml itself (pipeline.py) and needs
# nothing of cq_service; cq_service.cql, .plan and .engine are what must never creep in.
FORBIDDEN = ("cq_service",)

# ------------------------------------------------------------------------------ independence


def _imports(path: Path) -> list[str]:
    """Every module `path` imports (absolute names; lazy imports inside functions too) and
    every string literal naming a cq_service module (importlib.import_module and the like)."""
    tree = pyast.parse(path.read_text(encoding="utf-8"))
    names = []
    for node in pyast.walk(tree):
        if isinstance(node, pyast.Import):
            names += [a.name for a in node.names]
        elif isinstance(node, pyast.ImportFrom) and node.level == 0 and node.module:
            names += [node.module] + [f"{node.module}.{a.name}" for a in node.names]
        elif isinstance(node, pyast.Constant) and str(node.value).startswith("cq_service"):
            names.append(node.value)
    return names


def _forbidden(name: str) -> bool:
    return any(name == f or name.startswith(f + ".") for f in FORBIDDEN)


def test_no_reference_module_imports_cq_service() -> None:
    modules = sorted(REFERENCE.rglob("*.py"))
    assert len(modules) >= 8
    bad = {str(p.relative_to(ROOT)): [n for n in _imports(p) if _forbidden(n)] for p in modules}
    assert {k: v for k, v in bad.items() if v} == {}


def test_the_import_check_sees_every_form_of_import(tmp_path: Path) -> None:
    sample = tmp_path / "m.py"
    sample.write_text(
        "import cq_service.engine.runtime\n"
        "from cq_service.cql import ast\n"
        "def f():\n"
        "    from cq_service.plan.physical import Plan\n"
        "    return __import__('importlib').import_module('cq_service.cql.parser')\n",
        encoding="utf-8",
    )
    assert [n for n in _imports(sample) if _forbidden(n)] == [
        "cq_service.engine.runtime",
        "cq_service.cql",
        "cq_service.cql.ast",
        "cq_service.plan.physical",
        "cq_service.plan.physical.Plan",
        "cq_service.cql.parser",
    ]


def test_evaluating_a_pipeline_loads_no_engine_module() -> None:
    """In a fresh interpreter, the reference parses and evaluates a query without any module
    of cq_service ever imported."""
    code = (
        "import sys\n"
        "from tests.reference import evaluate\n"
        "out = evaluate('s', {'S': ([('a', 'int')], [(0, (1,)), (2, (5,))])}, {},\n"
        "    [('q', 'SELECT a FROM S [Range 1] WHERE a > 0', True)])\n"
        "assert out['q'] == [(0, '+', (1,)), (2, '-', (1,)), (2, '+', (5,))], out\n"
        f"print(sorted(m for m in sys.modules if m.startswith({FORBIDDEN!r})))\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True
    )
    assert proc.stdout.strip() == "[]"


# ------------------------------------------------------------------------------ known answers

A, B, C = ast.Column("a"), ast.Column("b"), ast.Column("c")


def one(n: int) -> ast.Literal:
    return ast.Literal(n)


@pytest.mark.parametrize(
    ("text", "tree"),
    [
        ("a OR b AND c", ast.BinaryOp("or", A, ast.BinaryOp("and", B, C))),
        ("NOT a = 1", ast.UnaryOp("not", ast.BinaryOp("=", A, one(1)))),
        ("NOT a IS NULL", ast.UnaryOp("not", ast.IsNull(A))),
        ("a = 1 IS NOT NULL", ast.IsNull(ast.BinaryOp("=", A, one(1)), negated=True)),
        ("a + 1 * 2", ast.BinaryOp("+", A, ast.BinaryOp("*", one(1), one(2)))),
        ("a - 1 - 2", ast.BinaryOp("-", ast.BinaryOp("-", A, one(1)), one(2))),
        ("'x' || a + 1", ast.BinaryOp("||", ast.Literal("x"), ast.BinaryOp("+", A, one(1)))),
        ("-a::int", ast.UnaryOp("-", ast.Cast(A, "int"))),
        ("a != b", ast.BinaryOp("<>", A, B)),
        (
            "a NOT BETWEEN 1 AND 2 AND b",
            ast.BinaryOp("and", ast.Between(A, one(1), one(2), negated=True), B),
        ),
        ("a NOT IN (1, NULL)", ast.InList(A, (one(1), ast.Literal(None)), negated=True)),
        ("a IN ((1), 2)", ast.InList(A, (one(1), one(2)))),
        ("a NOT ILIKE 'x%'", ast.Like(A, ast.Literal("x%"), True, True)),
        ("'it''s'", ast.Literal("it's")),
        ("1.5e1 + .5", ast.BinaryOp("+", ast.Literal(15.0), ast.Literal(0.5))),
        ('"Weird ""x"""', ast.Column('Weird "x"')),
        ("S.a", ast.Column("a", "S")),
        ("CAST(a AS double precision)", ast.Cast(A, "float")),
        ("a::varchar(10)", ast.Cast(A, "string")),
        ("COUNT(*)", ast.FuncCall("count", star=True)),
        ("Sum(DISTINCT a)", ast.FuncCall("sum", (A,), distinct=True)),
        (
            "CASE a WHEN 1 THEN 'x' END",
            ast.Case(A, ((one(1), ast.Literal("x")),)),
        ),
        ("((a + 1) * 2)", ast.BinaryOp("*", ast.BinaryOp("+", A, one(1)), one(2))),
        ("a -- a comment\n /* another */ + 1", ast.BinaryOp("+", A, one(1))),
    ],
)
def test_expressions(text: str, tree: ast.Expr) -> None:
    assert parse_expression(text) == tree


S = ast.Column("a", "S")


def _from(query: str) -> ast.FromItem:
    q = parse_query(query)
    assert isinstance(q, ast.Select)
    return q.from_[0]


@pytest.mark.parametrize(
    ("text", "item"),
    [
        ("S [Rows 3]", ast.TableRef("S", window=ast.RowsWindow(3))),
        ("S [Rows Unbounded Preceding]", ast.TableRef("S", window=ast.RowsWindow(None))),
        ("S [Range Unbounded]", ast.TableRef("S", window=ast.RangeWindow(None))),
        ("S [Now]", ast.TableRef("S", window=ast.RangeWindow(ast.Duration(0), now=True))),
        (
            "S [Range 15 Minutes Preceding]",
            ast.TableRef("S", window=ast.RangeWindow(ast.Duration(15, "minute"))),
        ),
        (
            "S [Range 10 Slide 2 sec]",
            ast.TableRef("S", window=ast.RangeWindow(ast.Duration(10), ast.Duration(2, "second"))),
        ),
        (
            "S [Partition By S.a, b Rows 2 Where b > 1] AS X Sample(50)",
            ast.TableRef(
                "S",
                "X",
                ast.RowsWindow(2, (S, B), ast.BinaryOp(">", B, one(1))),
                50.0,
            ),
        ),
        ("S X [Rows 1]", ast.TableRef("S", "X", ast.RowsWindow(1))),
        ("S rows", ast.TableRef("S", "rows")),
        ("S Sample(0)", ast.TableRef("S", sample=0.0)),
        (
            "(SELECT * FROM S) [Range 2] AS X",
            ast.SubqueryRef(
                ast.Select((ast.SelectItem(ast.Star()),), (ast.TableRef("S"),)),
                "X",
                ast.RangeWindow(ast.Duration(2)),
            ),
        ),
        (
            "S JOIN T ON S.a = T.a CROSS JOIN R",
            ast.JoinRef(
                ast.JoinRef(
                    ast.TableRef("S"), ast.TableRef("T"), ast.BinaryOp("=", S, ast.Column("a", "T"))
                ),
                ast.TableRef("R"),
            ),
        ),
    ],
)
def test_from_items(text: str, item: ast.FromItem) -> None:
    assert _from(f"SELECT * FROM {text}") == item


def test_queries() -> None:
    sel = ast.Select((ast.SelectItem(A, "x"),), (ast.TableRef("S"),))
    assert parse_query("SELECT a x FROM S;") == sel
    assert parse_query("select Rstream(a AS x) from S") == dataclasses.replace(
        sel, stream_op="rstream"
    )
    assert parse_query("Dstream((SELECT a AS x FROM S))") == ast.RelToStream("dstream", sel)
    u = parse_query("SELECT a x FROM S UNION ALL SELECT a x FROM S INTERSECT SELECT a x FROM S")
    assert u == ast.SetOp("union", sel, ast.SetOp("intersect", sel, sel), all=True)
    e = parse_query("SELECT a x FROM S EXCEPT SELECT a x FROM S EXCEPT (SELECT a x FROM S)")
    assert e == ast.SetOp("except", ast.SetOp("except", sel, sel), sel)
    q = parse_query(
        "SELECT a FROM S WHERE NOT EXISTS (SELECT * FROM T) AND a > ANY (SELECT b FROM T)"
    )
    assert isinstance(q, ast.Select) and isinstance(q.where, ast.BinaryOp)
    assert isinstance(q.where.left, ast.Exists) and q.where.left.negated
    assert isinstance(q.where.right, ast.Quantified) and q.where.right.quantifier == "any"
    g = parse_query("SELECT DISTINCT b, COUNT(*) FROM S GROUP BY b, 1 HAVING COUNT(*) > 1")
    assert isinstance(g, ast.Select) and g.distinct and g.group_by == (B, one(1))


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("SELECT a FROM S ORDER BY a", "ORDER BY is not supported"),
        ("SELECT a FROM S LIMIT 1", "LIMIT is not supported"),
        ("SELECT a FROM S [Range 1.5]", "whole number"),
        ("SELECT a FROM S [Range 1 fortnight]", "unknown time unit"),
        ("SELECT a FROM S Sample(101)", "not within 0–100"),
        ("SELECT a FROM S WHERE a = b = c", "expected end of query, found '='"),
        ("SELECT a FROM S /* open", "unterminated comment"),
        ("SELECT CAST(a AS money) FROM S", "unknown type"),
        ("SELECT a\nFROM", "line 2, column 5: expected a name, found end of query"),
    ],
)
def test_refusals(text: str, message: str) -> None:
    with pytest.raises(CQLSyntaxError, match=message):
        parse_query(text)


# ------------------------------------------------------------------------------ same reading


def _plain(node: object) -> object:
    """A tree as nested tuples: class name and fields, spans left out (both ASTs); values
    carry their type (1, 1.0 and True are equal in Python)."""
    if dataclasses.is_dataclass(node) and not isinstance(node, type):
        fields = dataclasses.fields(node)
        return (
            type(node).__name__,
            *((f.name, _plain(getattr(node, f.name))) for f in fields if f.name != "span"),
        )
    if isinstance(node, tuple):
        return tuple(_plain(v) for v in node)
    return (type(node).__name__, node)


def assert_same_reading(text: str) -> None:
    """A query the engine's parser accepts, the reference's parser reads the same way (the
    reference only ever sees queries the engine accepted; it may accept more)."""
    try:
        engine_tree = engine_parser.parse_query(text)
    except CQLError:
        return
    assert _plain(parse_query(text)) == _plain(engine_tree), text


def _pipeline_queries() -> list[str]:
    out = []
    for path in sorted(ROOT.glob("pipelines/**/*.yaml")) + sorted(
        ROOT.glob("tests/golden/cases/*/pipeline.yaml")
    ):
        doc = yaml.safe_load(path.read_text(encoding="utf-8"))
        out += [q["cql"] for q in (doc.get("queries") or {}).values() if "cql" in q]
    return out


QUERY_START = ("select", "istream", "dstream", "rstream", "(select")


def _test_queries() -> list[str]:
    """String literals that look like queries in the parsers' and the reference's unit tests."""
    out = []
    files = [
        ROOT / "tests/unit/cql/test_parser.py",
        *sorted(ROOT.glob("tests/unit/reference/*.py")),
    ]
    for path in files:
        for node in pyast.walk(pyast.parse(path.read_text(encoding="utf-8"))):
            value = node.value if isinstance(node, pyast.Constant) else None
            if isinstance(value, str) and value.strip().lower().startswith(QUERY_START):
                out.append(value)
    return out


PIPELINE_QUERIES = _pipeline_queries()
TEST_QUERIES = _test_queries()


def test_the_corpora_are_there() -> None:
    assert len(PIPELINE_QUERIES) >= 20
    assert len(TEST_QUERIES) >= 100


@pytest.mark.parametrize("text", PIPELINE_QUERIES)
def test_pipeline_queries_read_the_same(text: str) -> None:
    assert_same_reading(text)


def test_unit_test_queries_read_the_same() -> None:
    for text in TEST_QUERIES:
        assert_same_reading(text)


GENERATED = st.one_of(
    strat.window_query(),
    strat.join_query(),
    strat.aggregate_query(),
    strat.setop_query(),
    strat.subquery_query(),
    strat.subquery_query(corr_agg=True),
    strat.r2s_query(),
    strat.sized_window_query(),
).map(lambda q: q.cql)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(GENERATED)
def test_generated_queries_read_the_same(text: str) -> None:
    assert_same_reading(text)


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(strat.view_pipelines())
def test_generated_view_pipelines_read_the_same(queries: list[tuple]) -> None:
    for _, text, _, _ in queries:
        assert_same_reading(text)
