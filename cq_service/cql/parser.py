"""CQL text -> AST (`cql.ast`): a lark LALR(1) parser over `grammar.lark`.

    >>> parse_query("SELECT Istream(a) FROM S [Range 10 Seconds] WHERE a > 1").stream_op
    'istream'

Every node carries the `Span` of the text it was parsed from (`offset`/`end` are 0-based
character offsets into the query text; `end_col` is one past the last column). Syntax errors
are `CQLError`s naming what was found and what was expected, at the offending token.
"""

from __future__ import annotations

import dataclasses
import functools
from dataclasses import dataclass
from importlib import resources
from typing import Any

from lark import Lark, Token, Transformer_NonRecursive, v_args
from lark.exceptions import UnexpectedCharacters, UnexpectedInput, UnexpectedToken, VisitError
from lark.tree import Meta

from cq_service.cql import ast
from cq_service.errors import CQLError, Span

__all__ = ["parse_expression", "parse_query"]


def parse_query(text: str) -> ast.Query:
    """Parse one CQL query (an optional trailing ``;`` allowed) into a `Select`, `SetOp` or
    `RelToStream`. Raises `CQLError` with the position of the first error."""
    query: ast.Query = _parse(text, "query_start")
    return query


def parse_expression(text: str) -> ast.Expr:
    """Parse a standalone CQL expression (``a + 1 > b``)."""
    expr: ast.Expr = _parse(text, "expr_start")
    return expr


# ---------------------------------------------------------------------------------------------
# Driver


@functools.cache
def _lark() -> Lark:
    grammar = resources.files("cq_service.cql").joinpath("grammar.lark").read_text("utf-8")
    return Lark(
        grammar,
        parser="lalr",
        lexer="contextual",
        start=["query_start", "expr_start"],
        propagate_positions=True,
        maybe_placeholders=False,
        cache=True,  # the LALR tables, pickled in the temp folder: a second start is ~1 s faster
    )


def _parse(text: str, start: str) -> Any:
    try:
        tree = _lark().parse(text, start=start)
    except UnexpectedInput as exc:
        raise _syntax_error(exc, text) from None
    try:
        return _ToAst(visit_tokens=False).transform(tree)
    except VisitError as exc:
        if isinstance(exc.orig_exc, CQLError):
            raise exc.orig_exc from None
        raise


# ---------------------------------------------------------------------------------------------
# Syntax error messages

_PUNCTUATION = {
    "_RPAR": "')'",
    "_RSQB": "']'",
    "_LPAR": "'('",
    "_LSQB": "'['",
    "_COMMA": "','",
    "_DOT": "'.'",
    "_SEMI": "';'",
    "_DCOLON": "'::'",
    "STAR": "'*'",
    "PLUS": "'+'",
    "MINUS": "'-'",
    "SLASH": "'/'",
    "PERCENT": "'%'",
    "CONCAT": "'||'",
}
_PHRASES = {
    "COMP_OP": "a comparison operator",
    "NAME": "a name",
    "QUOTED_NAME": "a name",
    "INT": "an integer",
    "FLOAT": "a number",
    "STRING": "a string",
}
# fmt: off
_EXPR_START = {"NAME", "QUOTED_NAME", "INT", "FLOAT", "STRING", "_TRUE", "_FALSE", "_NULL",
               "_LPAR", "PLUS", "MINUS", "_NOT", "_CASE", "_CAST", "_EXISTS"}
# Dropped from the list when "an expression" is expected: alternatives few users are after.
_EXPR_NOISE = {"STAR", "_DISTINCT", "_ISTREAM", "_DSTREAM", "_RSTREAM", "_ALL", "_ANY", "_SOME",
               "_SELECT"}
_OPERATORS = {"PLUS", "MINUS", "STAR", "SLASH", "PERCENT", "CONCAT", "COMP_OP", "_DCOLON",
              "_AND", "_OR", "_NOT", "_IS", "_LIKE", "_ILIKE", "_BETWEEN", "_IN"}
# fmt: on
_PHRASE_ORDER = [
    "a name",
    "an integer",
    "a number",
    "a string",
    "a comparison operator",
    "an expression",
    "an operator",
    "end of query",
]


def _describe_expected(names: set[str]) -> str:
    """Readable words for a set of lark terminal names, most specific first."""
    names = set(names)
    phrases: set[str] = set()
    if {"NAME", "INT", "STRING"} <= names:
        phrases.add("an expression")
        names -= _EXPR_START | _EXPR_NOISE
    operators = names & _OPERATORS
    if "_OR" not in names:
        operators.discard("_AND")  # BETWEEN x AND y: the AND is the thing to say
    if len(operators) >= 3:
        phrases.add("an operator")
        names -= operators
    if {"INT", "FLOAT"} <= names:
        names.discard("INT")
    if "$END" in names:
        phrases.add("end of query")
        names.discard("$END")
    punct = [text for name, text in _PUNCTUATION.items() if name in names]
    keywords = sorted(n.lstrip("_") for n in names if n.startswith("_") and n not in _PUNCTUATION)
    phrases |= {_PHRASES[n] for n in names if n in _PHRASES}
    words = punct + keywords + [p for p in _PHRASE_ORDER if p in phrases]
    if not words:
        return "something else"
    return words[0] if len(words) == 1 else ", ".join(words[:-1]) + " or " + words[-1]


def _describe_token(token: Token) -> str:
    if token.type == "$END":
        return "end of query"
    value = str(token.value)
    if len(value) > 40:
        value = value[:37] + "..."
    return f"string {value}" if token.type == "STRING" else f"'{value}'"


def _syntax_error(exc: UnexpectedInput, text: str) -> CQLError:
    if isinstance(exc, UnexpectedToken):
        token = exc.token
        comment = _unterminated_comment(text, token.start_pos)
        if comment is not None:
            return CQLError("unterminated comment", _span_at(text, comment))
        # `accepts` replays the parser (exact); `expected` is the state's LALR lookahead set.
        expected = set(exc.accepts or exc.expected)
        message = f"unexpected {_describe_token(token)}; expected {_describe_expected(expected)}"
        if token.type == "$END":
            # lark places end of input on the last token; point just after it instead.
            offset = token.end_pos if token.end_pos is not None else len(text)
            return CQLError(message, _span_at(text, offset))
        return CQLError(message, _token_span(token))
    if not isinstance(exc, UnexpectedCharacters):  # UnexpectedEOF: not raised by LALR
        return CQLError("unexpected end of query", _span_at(text, len(text)))
    pos = exc.pos_in_stream
    rest = text[pos:]
    if rest.startswith("'"):
        message = "unterminated string literal"
    elif rest.startswith('""'):
        message = "empty quoted name"
    elif rest.startswith('"'):
        message = "unterminated quoted name"
    elif rest.startswith("/*"):
        message = "unterminated comment"
    else:
        message = f"unexpected character '{exc.char}'"
    return CQLError(message, Span(exc.line, exc.column, exc.line, exc.column + 1, pos, pos + 1))


def _unterminated_comment(text: str, pos: int | None) -> int | None:
    """The offset of a ``/*`` with no ``*/`` that lexed as ``/`` and ``*`` at `pos`, if any."""
    if pos is None:
        return None
    for start in (pos, pos - 1):
        if start >= 0 and text.startswith("/*", start) and "*/" not in text[start + 2 :]:
            return start
    return None


def _span_at(text: str, offset: int) -> Span:
    line = text.count("\n", 0, offset) + 1
    col = offset - (text.rfind("\n", 0, offset) + 1) + 1
    return Span(line, col, line, col, offset, offset)


# ---------------------------------------------------------------------------------------------
# Tree -> AST


def _span(meta: Meta) -> Span:
    return Span(
        meta.line, meta.column, meta.end_line, meta.end_column, meta.start_pos, meta.end_pos
    )


def _token_span(token: Token) -> Span:
    return Span(
        token.line or 1,
        token.column or 1,
        token.end_line,
        token.end_column,
        token.start_pos,
        token.end_pos,
    )


@dataclass(frozen=True)
class _Part:
    """An optional clause on its way into its parent node (``where``, ``alias``, ...)."""

    kind: str
    value: Any


_DISTINCT = _Part("distinct", True)

_UNITS = {
    **dict.fromkeys(["millisecond", "milliseconds", "ms", "msec", "msecs"], "millisecond"),
    **dict.fromkeys(["second", "seconds", "sec", "secs", "s"], "second"),
    **dict.fromkeys(["minute", "minutes", "min", "mins"], "minute"),
    **dict.fromkeys(["hour", "hours", "h", "hr", "hrs"], "hour"),
    **dict.fromkeys(["day", "days", "d"], "day"),
}

_TYPES = {
    **dict.fromkeys(["int", "integer", "bigint", "smallint", "int2", "int4", "int8"], "int"),
    **dict.fromkeys(["float", "float4", "float8", "real", "numeric", "decimal"], "float"),
    **dict.fromkeys(["varchar", "text", "string", "char"], "string"),
    **dict.fromkeys(["bool", "boolean"], "bool"),
    "timestamp": "timestamp",
}


def _parts(children: list[Any]) -> dict[str, Any]:
    return {c.kind: c.value for c in children if isinstance(c, _Part)}


@v_args(meta=True)
class _ToAst(Transformer_NonRecursive[Token, Any]):
    """One method per (aliased) grammar rule; `?rules` with one child never get here."""

    # -- queries -------------------------------------------------------------------------------

    def query_start(self, meta: Meta, c: list[Any]) -> ast.Query:
        return c[0]

    def expr_start(self, meta: Meta, c: list[Any]) -> ast.Expr:
        return c[0]

    def _set_op(self, op: Any, meta: Meta, c: list[Any], all_: bool) -> ast.SetOp:
        return ast.SetOp(op, c[0], c[1], all=all_, span=_span(meta))

    def union(self, meta: Meta, c: list[Any]) -> ast.SetOp:
        return self._set_op("union", meta, c, False)

    def union_all(self, meta: Meta, c: list[Any]) -> ast.SetOp:
        return self._set_op("union", meta, c, True)

    def except_(self, meta: Meta, c: list[Any]) -> ast.SetOp:
        return self._set_op("except", meta, c, False)

    def except_all(self, meta: Meta, c: list[Any]) -> ast.SetOp:
        return self._set_op("except", meta, c, True)

    def intersect(self, meta: Meta, c: list[Any]) -> ast.SetOp:
        return self._set_op("intersect", meta, c, False)

    def intersect_all(self, meta: Meta, c: list[Any]) -> ast.SetOp:
        return self._set_op("intersect", meta, c, True)

    def paren_query(self, meta: Meta, c: list[Any]) -> ast.Query:
        return c[0]

    def rel_to_stream(self, meta: Meta, c: list[Any]) -> ast.RelToStream:
        return ast.RelToStream(c[0], c[1], span=_span(meta))

    def istream(self, meta: Meta, c: list[Any]) -> str:
        return "istream"

    def dstream(self, meta: Meta, c: list[Any]) -> str:
        return "dstream"

    def rstream(self, meta: Meta, c: list[Any]) -> str:
        return "rstream"

    def select(self, meta: Meta, c: list[Any]) -> ast.Select:
        parts = _parts(c)
        stream_op, items = parts["select_list"]
        return ast.Select(
            items=items,
            from_=parts["from"],
            where=parts.get("where"),
            group_by=parts.get("group_by", ()),
            having=parts.get("having"),
            distinct=parts.get("distinct", False),
            stream_op=stream_op,
            span=_span(meta),
        )

    def distinct(self, meta: Meta, c: list[Any]) -> _Part:
        return _DISTINCT

    def select_list(self, meta: Meta, c: list[Any]) -> _Part:
        return _Part("select_list", (None, c[0]))

    def stream_select_list(self, meta: Meta, c: list[Any]) -> _Part:
        return _Part("select_list", (c[0], c[1]))

    def select_items(self, meta: Meta, c: list[Any]) -> tuple[ast.SelectItem, ...]:
        return tuple(c)

    def item(self, meta: Meta, c: list[Any]) -> ast.SelectItem:
        alias = str(c[1]) if len(c) > 1 else None
        return ast.SelectItem(c[0], alias, span=_span(meta))

    def item_star(self, meta: Meta, c: list[Any]) -> ast.SelectItem:
        table = str(c[0]) if len(c) > 1 else None
        return ast.SelectItem(ast.Star(table, span=_span(meta)), span=_span(meta))

    def where(self, meta: Meta, c: list[Any]) -> _Part:
        return _Part("where", c[0])

    def group_by(self, meta: Meta, c: list[Any]) -> _Part:
        return _Part("group_by", tuple(c))

    def having(self, meta: Meta, c: list[Any]) -> _Part:
        return _Part("having", c[0])

    def order_by(self, meta: Meta, c: list[Any]) -> _Part:
        raise CQLError(
            "ORDER BY is not supported: the result of a continuous query has no order", _span(meta)
        )

    def limit(self, meta: Meta, c: list[Any]) -> _Part:
        raise CQLError("LIMIT is not supported in a continuous query", _span(meta))

    # -- FROM ----------------------------------------------------------------------------------

    def from_list(self, meta: Meta, c: list[Any]) -> _Part:
        return _Part("from", tuple(c))

    def join(self, meta: Meta, c: list[Any]) -> ast.JoinRef:
        return ast.JoinRef(c[0], c[1], c[2], span=_span(meta))

    def cross_join(self, meta: Meta, c: list[Any]) -> ast.JoinRef:
        return ast.JoinRef(c[0], c[1], None, span=_span(meta))

    def table_ref(self, meta: Meta, c: list[Any]) -> ast.TableRef:
        parts = _parts(c)
        return ast.TableRef(
            str(c[0]),
            parts.get("alias"),
            parts.get("window"),
            parts.get("sample"),
            span=_span(meta),
        )

    def subquery_ref(self, meta: Meta, c: list[Any]) -> ast.SubqueryRef:
        parts = _parts(c)
        return ast.SubqueryRef(
            c[0], parts.get("alias"), parts.get("window"), parts.get("sample"), span=_span(meta)
        )

    def alias(self, meta: Meta, c: list[Any]) -> _Part:
        return _Part("alias", str(c[0]))

    def sample(self, meta: Meta, c: list[Any]) -> _Part:
        percent = float(c[0])
        if not 0 <= percent <= 100:
            raise CQLError(
                f"sample percentage must be between 0 and 100, not {c[0]}", _token_span(c[0])
            )
        return _Part("sample", percent)

    # -- windows -------------------------------------------------------------------------------

    def window(self, meta: Meta, c: list[Any]) -> _Part:
        where = _parts(c).get("where")
        return _Part("window", dataclasses.replace(c[0], where=where, span=_span(meta)))

    def rows(self, meta: Meta, c: list[Any]) -> ast.RowsWindow:
        partition = next((x for x in c if isinstance(x, tuple)), ())
        n = next((int(x) for x in c if isinstance(x, Token)), None)
        return ast.RowsWindow(n, partition_by=partition, span=_span(meta))

    def partition_list(self, meta: Meta, c: list[Any]) -> tuple[ast.Column, ...]:
        return tuple(c)

    def range(self, meta: Meta, c: list[Any]) -> ast.RangeWindow:
        size = c[0] if c and isinstance(c[0], ast.Duration) else None
        return ast.RangeWindow(size, slide=_parts(c).get("slide"), span=_span(meta))

    def now(self, meta: Meta, c: list[Any]) -> ast.RangeWindow:
        return ast.RangeWindow(ast.Duration(0, span=_span(meta)), now=True, span=_span(meta))

    def slide(self, meta: Meta, c: list[Any]) -> _Part:
        return _Part("slide", c[0])

    def duration(self, meta: Meta, c: list[Any]) -> ast.Duration:
        unit = None
        if len(c) > 1:
            unit = _UNITS.get(c[1].lower())
            if unit is None:
                raise CQLError(
                    f"unknown time unit '{c[1]}'; expected milliseconds, seconds, minutes, "
                    "hours or days",
                    _token_span(c[1]),
                )
        if c[0].type == "FLOAT":
            raise CQLError(
                f"a duration must be a whole number, not {c[0]} (use a smaller unit)",
                _token_span(c[0]),
            )
        return ast.Duration(int(c[0]), unit, span=_span(meta))

    # -- expressions ---------------------------------------------------------------------------

    def or_(self, meta: Meta, c: list[Any]) -> ast.BinaryOp:
        return ast.BinaryOp("or", c[0], c[1], span=_span(meta))

    def and_(self, meta: Meta, c: list[Any]) -> ast.BinaryOp:
        return ast.BinaryOp("and", c[0], c[1], span=_span(meta))

    def not_(self, meta: Meta, c: list[Any]) -> ast.Expr:
        operand = c[0]
        if isinstance(operand, ast.Exists) and not operand.negated:
            return ast.Exists(operand.query, negated=True, span=_span(meta))
        return ast.UnaryOp("not", operand, span=_span(meta))

    def is_null(self, meta: Meta, c: list[Any]) -> ast.IsNull:
        return ast.IsNull(c[0], span=_span(meta))

    def is_not_null(self, meta: Meta, c: list[Any]) -> ast.IsNull:
        return ast.IsNull(c[0], negated=True, span=_span(meta))

    def compare(self, meta: Meta, c: list[Any]) -> ast.BinaryOp:
        return ast.BinaryOp(_comp_op(c[1]), c[0], c[2], span=_span(meta))

    def quantified_all(self, meta: Meta, c: list[Any]) -> ast.Quantified:
        return ast.Quantified(c[0], _comp_op(c[1]), "all", c[2], span=_span(meta))

    def quantified_any(self, meta: Meta, c: list[Any]) -> ast.Quantified:
        return ast.Quantified(c[0], _comp_op(c[1]), "any", c[2], span=_span(meta))

    def like(self, meta: Meta, c: list[Any]) -> ast.Like:
        return ast.Like(c[0], c[1], span=_span(meta))

    def not_like(self, meta: Meta, c: list[Any]) -> ast.Like:
        return ast.Like(c[0], c[1], negated=True, span=_span(meta))

    def ilike(self, meta: Meta, c: list[Any]) -> ast.Like:
        return ast.Like(c[0], c[1], case_insensitive=True, span=_span(meta))

    def not_ilike(self, meta: Meta, c: list[Any]) -> ast.Like:
        return ast.Like(c[0], c[1], negated=True, case_insensitive=True, span=_span(meta))

    def between(self, meta: Meta, c: list[Any]) -> ast.Between:
        return ast.Between(c[0], c[1], c[2], span=_span(meta))

    def not_between(self, meta: Meta, c: list[Any]) -> ast.Between:
        return ast.Between(c[0], c[1], c[2], negated=True, span=_span(meta))

    def in_list(self, meta: Meta, c: list[Any]) -> ast.InList:
        return ast.InList(c[0], c[1], span=_span(meta))

    def not_in_list(self, meta: Meta, c: list[Any]) -> ast.InList:
        return ast.InList(c[0], c[1], negated=True, span=_span(meta))

    def in_subquery(self, meta: Meta, c: list[Any]) -> ast.InSubquery:
        return ast.InSubquery(c[0], c[1], span=_span(meta))

    def not_in_subquery(self, meta: Meta, c: list[Any]) -> ast.InSubquery:
        return ast.InSubquery(c[0], c[1], negated=True, span=_span(meta))

    def binop(self, meta: Meta, c: list[Any]) -> ast.BinaryOp:
        return ast.BinaryOp(str(c[1]), c[0], c[2], span=_span(meta))  # type: ignore[arg-type]

    def unary(self, meta: Meta, c: list[Any]) -> ast.UnaryOp:
        return ast.UnaryOp(str(c[0]), c[1], span=_span(meta))  # type: ignore[arg-type]

    def cast(self, meta: Meta, c: list[Any]) -> ast.Cast:
        return ast.Cast(c[0], c[1], span=_span(meta))

    def scalar_subquery(self, meta: Meta, c: list[Any]) -> ast.ScalarSubquery:
        return ast.ScalarSubquery(c[0], span=_span(meta))

    def exists(self, meta: Meta, c: list[Any]) -> ast.Exists:
        return ast.Exists(c[0], span=_span(meta))

    def int_lit(self, meta: Meta, c: list[Any]) -> ast.Literal:
        return ast.Literal(int(c[0]), span=_span(meta))

    def float_lit(self, meta: Meta, c: list[Any]) -> ast.Literal:
        return ast.Literal(float(c[0]), span=_span(meta))

    def str_lit(self, meta: Meta, c: list[Any]) -> ast.Literal:
        return ast.Literal(c[0][1:-1].replace("''", "'"), span=_span(meta))

    def true_lit(self, meta: Meta, c: list[Any]) -> ast.Literal:
        return ast.Literal(True, span=_span(meta))

    def false_lit(self, meta: Meta, c: list[Any]) -> ast.Literal:
        return ast.Literal(False, span=_span(meta))

    def null_lit(self, meta: Meta, c: list[Any]) -> ast.Literal:
        return ast.Literal(None, span=_span(meta))

    def column_ref(self, meta: Meta, c: list[Any]) -> ast.Column:
        if len(c) == 1:
            return ast.Column(str(c[0]), span=_span(meta))
        return ast.Column(str(c[1]), str(c[0]), span=_span(meta))

    def func(self, meta: Meta, c: list[Any]) -> ast.FuncCall:
        args = next((x for x in c[1:] if isinstance(x, tuple)), ())
        return ast.FuncCall(c[0].lower(), args, distinct=_DISTINCT in c, span=_span(meta))

    def func_star(self, meta: Meta, c: list[Any]) -> ast.FuncCall:
        return ast.FuncCall(c[0].lower(), star=True, span=_span(meta))

    def expr_list(self, meta: Meta, c: list[Any]) -> tuple[ast.Expr, ...]:
        return tuple(c)

    def case(self, meta: Meta, c: list[Any]) -> ast.Case:
        return self._case(None, c, meta)

    def case_operand(self, meta: Meta, c: list[Any]) -> ast.Case:
        return self._case(c[0], c[1:], meta)

    def _case(self, operand: ast.Expr | None, c: list[Any], meta: Meta) -> ast.Case:
        whens = tuple(x.value for x in c if isinstance(x, _Part) and x.kind == "when")
        return ast.Case(operand, whens, _parts(c).get("else"), span=_span(meta))

    def when(self, meta: Meta, c: list[Any]) -> _Part:
        return _Part("when", (c[0], c[1]))

    def else_(self, meta: Meta, c: list[Any]) -> _Part:
        return _Part("else", c[0])

    def type_name(self, meta: Meta, c: list[Any]) -> str:
        name = _TYPES.get(c[0].lower())
        if name is None:
            raise CQLError(
                f"unknown type '{c[0]}'; expected int, float, string, bool or timestamp",
                _token_span(c[0]),
            )
        return name

    def type_double(self, meta: Meta, c: list[Any]) -> str:
        return "float"

    def type_character(self, meta: Meta, c: list[Any]) -> str:
        return "string"

    def type_size(self, meta: Meta, c: list[Any]) -> None:
        return None

    def name(self, meta: Meta, c: list[Any]) -> Token:
        token: Token = c[0]
        if token.type == "QUOTED_NAME":
            return token.update(value=token[1:-1].replace('""', '"'))
        return token


def _comp_op(token: Token) -> str:
    return "<>" if token == "!=" else str(token)
