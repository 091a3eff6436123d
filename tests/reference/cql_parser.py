"""CQL text -> the reference's own syntax tree (`cql_ast`): a recursive-descent parser.

Written for the reference evaluator independently of the engine's lark grammar
(`cq_service/cql/`), from DESIGN §4 and docs/semantics.md, so that the property tests compare
two readings of every query: a query the engine's parser gets wrong no longer gets the same
wrong tree on both sides.

    >>> parse_query("SELECT Istream(a) FROM S [Range 10 Seconds] WHERE a > 1").stream_op
    'istream'

The language: SELECT [DISTINCT] items FROM items [WHERE] [GROUP BY] [HAVING]; UNION, EXCEPT
(looser) and INTERSECT (tighter), each with ALL, left-associative; Istream/Dstream/Rstream
around a query or a select list; FROM items with a window and an alias in either order and
``Sample(p)`` last, joined by commas, ``[INNER] JOIN … ON`` and ``CROSS JOIN``; subqueries in
FROM, IN, EXISTS, ANY/SOME/ALL and as scalars. Windows: ``[Rows N]``, ``[Rows Unbounded]``,
``[Partition By a, … Rows N]``, ``[Range T]``, ``[Range T Slide L]``, ``[Range Unbounded]``,
``[Now]``, each with an optional ``Preceding`` after the size and an inner ``Where``.
Expressions with PostgreSQL's precedence, loosest first: OR; AND; NOT; IS [NOT] NULL; one
comparison (non-associative); [NOT] LIKE/ILIKE/BETWEEN/IN; ``||``; ``+ -``; ``* / %``; unary
``+ -``; ``::``. ORDER BY and LIMIT are refused (a continuous query has no order).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from . import cql_ast as ast

__all__ = ["CQLSyntaxError", "parse_expression", "parse_query"]


class CQLSyntaxError(ValueError):
    """A query the reference cannot read, with the line and column of the offending token."""


# --------------------------------------------------------------------------------- tokens

# Words that are never names (a bare alias, a column, a function). The window words (rows,
# range, now, slide, partition, preceding, unbounded) and sample are keywords only in place.
# fmt: off
RESERVED = frozenset({
    "all", "and", "any", "as", "between", "by", "case", "cast", "cross", "distinct", "dstream",
    "else", "end", "except", "exists", "false", "from", "group", "having", "ilike", "in",
    "inner", "intersect", "is", "istream", "join", "like", "not", "null", "on", "or", "rstream",
    "select", "some", "then", "true", "union", "when", "where",
})
# fmt: on
STREAM_OPS = ("istream", "dstream", "rstream")
COMPARISONS = ("=", "<>", "!=", "<", "<=", ">", ">=")

UNITS = {
    **dict.fromkeys(("millisecond", "milliseconds", "ms", "msec", "msecs"), "millisecond"),
    **dict.fromkeys(("second", "seconds", "sec", "secs", "s"), "second"),
    **dict.fromkeys(("minute", "minutes", "min", "mins"), "minute"),
    **dict.fromkeys(("hour", "hours", "h", "hr", "hrs"), "hour"),
    **dict.fromkeys(("day", "days", "d"), "day"),
}
TYPES = {
    **dict.fromkeys(("int", "integer", "bigint", "smallint", "int2", "int4", "int8"), "int"),
    **dict.fromkeys(("float", "float4", "float8", "real", "numeric", "decimal"), "float"),
    **dict.fromkeys(("text", "varchar", "char", "string"), "string"),
    **dict.fromkeys(("bool", "boolean"), "bool"),
    "timestamp": "timestamp",
}

_TOKEN = re.compile(
    r"""
    (?P<space>\s+|--[^\n]*|/\*.*?\*/)
  | (?P<float>(?:\d+\.\d*|\.\d+)(?:[eE][+-]?\d+)?|\d+[eE][+-]?\d+)
  | (?P<int>\d+)
  | (?P<word>[^\W\d][\w$]*)
  | (?P<qname>"(?:[^"]|"")+")
  | (?P<string>'(?:[^']|'')*')
  | (?P<op><>|!=|<=|>=|\|\||::|[=<>()\[\],.;*+\-/%])
    """,
    re.VERBOSE | re.DOTALL,
)


@dataclass(frozen=True)
class Token:
    kind: str  # word, qname, int, float, string, op, eof
    text: str
    pos: int

    def is_kw(self, *words: str) -> bool:
        return self.kind == "word" and self.text.lower() in words


def tokenize(text: str) -> list[Token]:
    out = []
    pos = 0
    while pos < len(text):
        if text.startswith("/*", pos) and "*/" not in text[pos + 2 :]:
            raise _error(text, pos, "unterminated comment")
        m = _TOKEN.match(text, pos)
        if m is None:
            raise _error(text, pos, f"unexpected character {text[pos]!r}")
        kind = m.lastgroup or ""
        if kind != "space":
            out.append(Token(kind, m.group(), pos))
        pos = m.end()
    out.append(Token("eof", "", len(text)))
    return out


def _error(text: str, pos: int, message: str) -> CQLSyntaxError:
    line = text.count("\n", 0, pos) + 1
    col = pos - (text.rfind("\n", 0, pos) + 1) + 1
    return CQLSyntaxError(f"line {line}, column {col}: {message}")


# --------------------------------------------------------------------------------- entry points


def parse_query(text: str) -> ast.Query:
    """One query, an optional trailing ``;`` allowed."""
    p = _Parser(text)
    q = p.query()
    p.accept_op(";")
    p.expect_eof()
    return q


def parse_expression(text: str) -> ast.Expr:
    p = _Parser(text)
    e = p.expr()
    p.expect_eof()
    return e


# --------------------------------------------------------------------------------- the parser


class _Parser:
    def __init__(self, text: str) -> None:
        self.text = text
        self.tokens = tokenize(text)
        self.i = 0

    # -- token helpers -----------------------------------------------------------------------

    def peek(self, k: int = 0) -> Token:
        return self.tokens[min(self.i + k, len(self.tokens) - 1)]

    def next(self) -> Token:
        tok = self.peek()
        self.i += 1
        return tok

    def fail(self, expected: str) -> CQLSyntaxError:
        tok = self.peek()
        found = "end of query" if tok.kind == "eof" else repr(tok.text)
        return _error(self.text, tok.pos, f"expected {expected}, found {found}")

    def at_kw(self, *words: str) -> bool:
        return self.peek().is_kw(*words)

    def accept_kw(self, *words: str) -> str | None:
        if self.at_kw(*words):
            return self.next().text.lower()
        return None

    def expect_kw(self, word: str) -> None:
        if not self.accept_kw(word):
            raise self.fail(word.upper())

    def at_op(self, *ops: str, k: int = 0) -> bool:
        tok = self.peek(k)
        return tok.kind == "op" and tok.text in ops

    def accept_op(self, *ops: str) -> str | None:
        if self.at_op(*ops):
            return self.next().text
        return None

    def expect_op(self, op: str) -> None:
        if not self.accept_op(op):
            raise self.fail(f"'{op}'")

    def expect_eof(self) -> None:
        if self.peek().kind != "eof":
            raise self.fail("end of query")

    def at_name(self, k: int = 0) -> bool:
        tok = self.peek(k)
        return tok.kind == "qname" or (tok.kind == "word" and tok.text.lower() not in RESERVED)

    def name(self) -> str:
        if not self.at_name():
            raise self.fail("a name")
        tok = self.next()
        return tok.text[1:-1].replace('""', '"') if tok.kind == "qname" else tok.text

    def integer(self) -> int:
        if self.peek().kind != "int":
            raise self.fail("an integer")
        return int(self.next().text)

    def starts_query(self, k: int = 0) -> bool:
        """Does a query (not a parenthesised one) begin at token k ahead?"""
        tok = self.peek(k)
        return tok.is_kw("select") or (tok.is_kw(*STREAM_OPS) and self.at_op("(", k=k + 1))

    def paren_query(self) -> ast.Query | None:
        """``( query )`` at the current '(' if that is what it is; else None, nothing consumed.
        A '(' followed by another '(' is tried as a query first and re-read as an expression
        if that fails (``((SELECT …) UNION (SELECT …))`` against ``((a + 1) * 2)``)."""
        if not self.at_op("("):
            return None
        if self.starts_query(1):
            self.next()
            q = self.query()
            self.expect_op(")")
            return q
        if not self.at_op("(", k=1):
            return None
        start = self.i
        try:
            self.next()
            q = self.query()
            self.expect_op(")")
            return q
        except CQLSyntaxError:
            self.i = start
            return None

    # -- queries -----------------------------------------------------------------------------

    def query(self) -> ast.Query:
        left = self.set_term()
        while op := self.accept_kw("union", "except"):
            all_ = self.accept_kw("all") is not None
            left = ast.SetOp(op, left, self.set_term(), all_)
        return left

    def set_term(self) -> ast.Query:
        left = self.set_primary()
        while self.accept_kw("intersect"):
            all_ = self.accept_kw("all") is not None
            left = ast.SetOp("intersect", left, self.set_primary(), all_)
        return left

    def set_primary(self) -> ast.Query:
        if self.at_kw("select"):
            return self.select()
        if self.at_kw(*STREAM_OPS) and self.at_op("(", k=1):
            op = self.next().text.lower()
            self.expect_op("(")
            q = self.query()
            self.expect_op(")")
            return ast.RelToStream(op, q)
        if self.accept_op("("):
            q = self.query()
            self.expect_op(")")
            return q
        raise self.fail("SELECT, Istream, Dstream, Rstream or '('")

    def select(self) -> ast.Select:
        self.expect_kw("select")
        distinct = self.accept_kw("distinct") is not None
        stream_op = None
        if self.at_kw(*STREAM_OPS) and self.at_op("(", k=1):
            stream_op = self.next().text.lower()
            self.expect_op("(")
            items = self.select_items()
            self.expect_op(")")
        else:
            items = self.select_items()
        self.expect_kw("from")
        from_ = [self.from_item()]
        while self.accept_op(","):
            from_.append(self.from_item())
        where = self.expr() if self.accept_kw("where") else None
        group_by: list[ast.Expr] = []
        if self.accept_kw("group"):
            self.expect_kw("by")
            group_by.append(self.expr())
            while self.accept_op(","):
                group_by.append(self.expr())
        having = self.expr() if self.accept_kw("having") else None
        if self.at_kw("order") and self.peek(1).is_kw("by"):
            raise self.fail_at("ORDER BY is not supported: a continuous query has no order")
        if self.at_kw("limit"):
            raise self.fail_at("LIMIT is not supported in a continuous query")
        return ast.Select(
            tuple(items), tuple(from_), where, tuple(group_by), having, distinct, stream_op
        )

    def fail_at(self, message: str) -> CQLSyntaxError:
        return _error(self.text, self.peek().pos, message)

    def select_items(self) -> list[ast.SelectItem]:
        items = [self.select_item()]
        while self.accept_op(","):
            items.append(self.select_item())
        return items

    def select_item(self) -> ast.SelectItem:
        if self.accept_op("*"):
            return ast.SelectItem(ast.Star())
        if self.at_name() and self.at_op(".", k=1) and self.at_op("*", k=2):
            table = self.name()
            self.next()
            self.next()
            return ast.SelectItem(ast.Star(table))
        e = self.expr()
        if self.accept_kw("as"):
            return ast.SelectItem(e, self.name())
        if self.at_name():
            return ast.SelectItem(e, self.name())
        return ast.SelectItem(e)

    # -- FROM --------------------------------------------------------------------------------

    def from_item(self) -> ast.FromItem:
        left = self.from_primary()
        while True:
            if self.accept_kw("cross"):
                self.expect_kw("join")
                left = ast.JoinRef(left, self.from_primary(), None)
            elif self.at_kw("join", "inner"):
                if self.accept_kw("inner"):
                    self.expect_kw("join")
                else:
                    self.next()
                right = self.from_primary()
                self.expect_kw("on")
                left = ast.JoinRef(left, right, self.expr())
            else:
                return left

    def from_primary(self) -> ast.TableRef | ast.SubqueryRef:
        if self.at_op("("):
            q = self.paren_query()
            if q is None:
                raise self.fail("a subquery")
            alias, window, sample = self.from_tail()
            return ast.SubqueryRef(q, alias, window, sample)
        name = self.name()
        alias, window, sample = self.from_tail()
        return ast.TableRef(name, alias, window, sample)

    def from_tail(self) -> tuple[str | None, ast.Window | None, float | None]:
        """[window] [alias] [Sample(p)], or alias window [Sample(p)]."""
        window = self.window() if self.at_op("[") else None
        alias = self.alias()
        if window is None and alias is not None and self.at_op("["):
            window = self.window()
        sample = None
        if self.at_kw("sample") and self.at_op("(", k=1):
            self.next()
            self.next()
            tok = self.next()
            if tok.kind not in ("int", "float"):
                self.i -= 1
                raise self.fail("a percentage")
            sample = float(tok.text)
            if not 0 <= sample <= 100:
                raise _error(self.text, tok.pos, f"Sample({tok.text}): not within 0–100")
            self.expect_op(")")
        return alias, window, sample

    def alias(self) -> str | None:
        if self.accept_kw("as"):
            return self.name()
        if not self.at_name():
            return None
        if self.at_kw("sample") and self.at_op("(", k=1):
            return None
        if self.at_kw("order", "limit"):
            return None
        return self.name()

    # -- windows -----------------------------------------------------------------------------

    def window(self) -> ast.Window:
        self.expect_op("[")
        window: ast.Window
        if self.accept_kw("now"):
            window = ast.RangeWindow(ast.Duration(0), now=True)
        elif self.accept_kw("range"):
            if self.accept_kw("unbounded"):
                self.accept_kw("preceding")
                window = ast.RangeWindow(None)
            else:
                size = self.duration()
                self.accept_kw("preceding")
                slide = self.duration() if self.accept_kw("slide") else None
                window = ast.RangeWindow(size, slide)
        elif self.at_kw("rows", "partition"):
            keys: list[ast.Column] = []
            if self.accept_kw("partition"):
                self.expect_kw("by")
                keys.append(self.column())
                while self.accept_op(","):
                    keys.append(self.column())
            self.expect_kw("rows")
            n = None if self.accept_kw("unbounded") else self.integer()
            self.accept_kw("preceding")
            window = ast.RowsWindow(n, tuple(keys))
        else:
            raise self.fail("Rows, Range, Partition or Now")
        if self.accept_kw("where"):
            where = self.expr()
            window = (
                ast.RowsWindow(window.n, window.partition_by, where)
                if isinstance(window, ast.RowsWindow)
                else ast.RangeWindow(window.size, window.slide, where, window.now)
            )
        self.expect_op("]")
        return window

    def duration(self) -> ast.Duration:
        tok = self.peek()
        if tok.kind == "float":
            raise _error(self.text, tok.pos, f"a duration must be a whole number, not {tok.text}")
        amount = self.integer()
        unit = None
        if self.peek().kind == "word" and not self.at_kw("preceding", "slide", "where"):
            word = self.next()
            unit = UNITS.get(word.text.lower())
            if unit is None:
                raise _error(self.text, word.pos, f"unknown time unit {word.text!r}")
        return ast.Duration(amount, unit)

    def column(self) -> ast.Column:
        first = self.name()
        if self.accept_op("."):
            return ast.Column(self.name(), first)
        return ast.Column(first)

    # -- expressions, loosest first ----------------------------------------------------------

    def expr(self) -> ast.Expr:
        left = self.and_expr()
        while self.accept_kw("or"):
            left = ast.BinaryOp("or", left, self.and_expr())
        return left

    def and_expr(self) -> ast.Expr:
        left = self.not_expr()
        while self.accept_kw("and"):
            left = ast.BinaryOp("and", left, self.not_expr())
        return left

    def not_expr(self) -> ast.Expr:
        if self.accept_kw("not"):
            operand = self.not_expr()
            if isinstance(operand, ast.Exists) and not operand.negated:
                return ast.Exists(operand.query, negated=True)
            return ast.UnaryOp("not", operand)
        return self.is_expr()

    def is_expr(self) -> ast.Expr:
        e = self.comparison()
        while self.accept_kw("is"):
            negated = self.accept_kw("not") is not None
            self.expect_kw("null")
            e = ast.IsNull(e, negated)
        return e

    def comparison(self) -> ast.Expr:
        left = self.predicate()
        op = self.accept_op(*COMPARISONS)
        if op is None:
            return left
        op = "<>" if op == "!=" else op
        quantifier = self.accept_kw("all", "any", "some")
        if quantifier is not None:
            q = self.paren_query()
            if q is None:
                raise self.fail("a subquery")
            return ast.Quantified(left, op, "all" if quantifier == "all" else "any", q)
        return ast.BinaryOp(op, left, self.predicate())

    def predicate(self) -> ast.Expr:
        left = self.concat()
        negated = False
        if self.at_kw("not") and self.peek(1).is_kw("like", "ilike", "between", "in"):
            self.next()
            negated = True
        if kw := self.accept_kw("like", "ilike"):
            return ast.Like(left, self.concat(), negated, kw == "ilike")
        if self.accept_kw("between"):
            low = self.concat()
            self.expect_kw("and")
            return ast.Between(left, low, self.concat(), negated)
        if self.accept_kw("in"):
            q = self.paren_query()
            if q is not None:
                return ast.InSubquery(left, q, negated)
            self.expect_op("(")
            items = [self.expr()]
            while self.accept_op(","):
                items.append(self.expr())
            self.expect_op(")")
            return ast.InList(left, tuple(items), negated)
        return left

    def concat(self) -> ast.Expr:
        left = self.additive()
        while self.accept_op("||"):
            left = ast.BinaryOp("||", left, self.additive())
        return left

    def additive(self) -> ast.Expr:
        left = self.multiplicative()
        while op := self.accept_op("+", "-"):
            left = ast.BinaryOp(op, left, self.multiplicative())
        return left

    def multiplicative(self) -> ast.Expr:
        left = self.unary()
        while op := self.accept_op("*", "/", "%"):
            left = ast.BinaryOp(op, left, self.unary())
        return left

    def unary(self) -> ast.Expr:
        if op := self.accept_op("+", "-"):
            return ast.UnaryOp(op, self.unary())
        e = self.primary()
        while self.accept_op("::"):
            e = ast.Cast(e, self.type_name())
        return e

    def type_name(self) -> str:
        if self.accept_kw("double"):
            self.accept_kw("precision")
            return "float"
        if self.accept_kw("character"):
            self.accept_kw("varying")
            self.type_size()
            return "string"
        tok = self.peek()
        if tok.kind != "word":
            raise self.fail("a type name")
        typ = TYPES.get(tok.text.lower())
        if typ is None:
            raise _error(self.text, tok.pos, f"unknown type {tok.text!r}")
        self.next()
        self.type_size()
        return typ

    def type_size(self) -> None:
        """``(n)`` or ``(p, s)`` after a type name: read and ignored."""
        if self.accept_op("("):
            self.integer()
            if self.accept_op(","):
                self.integer()
            self.expect_op(")")

    def primary(self) -> ast.Expr:
        tok = self.peek()
        if tok.kind == "int":
            self.next()
            return ast.Literal(int(tok.text))
        if tok.kind == "float":
            self.next()
            return ast.Literal(float(tok.text))
        if tok.kind == "string":
            self.next()
            return ast.Literal(tok.text[1:-1].replace("''", "'"))
        if kw := self.accept_kw("true", "false", "null"):
            return ast.Literal({"true": True, "false": False, "null": None}[kw])
        if self.accept_kw("case"):
            return self.case()
        if self.accept_kw("cast"):
            self.expect_op("(")
            operand = self.expr()
            self.expect_kw("as")
            typ = self.type_name()
            self.expect_op(")")
            return ast.Cast(operand, typ)
        if self.accept_kw("exists"):
            q = self.paren_query()
            if q is None:
                raise self.fail("a subquery")
            return ast.Exists(q)
        if self.at_op("("):
            q = self.paren_query()
            if q is not None:
                return ast.ScalarSubquery(q)
            self.next()
            e = self.expr()
            self.expect_op(")")
            return e
        if tok.kind == "word" and self.at_name() and self.at_op("(", k=1):
            return self.call()
        if self.at_name():
            return self.column()
        raise self.fail("an expression")

    def call(self) -> ast.FuncCall:
        name = self.next().text.lower()
        self.expect_op("(")
        if self.accept_op(")"):
            return ast.FuncCall(name)
        if self.accept_op("*"):
            self.expect_op(")")
            return ast.FuncCall(name, star=True)
        distinct = self.accept_kw("distinct") is not None
        args = [self.expr()]
        while self.accept_op(","):
            args.append(self.expr())
        self.expect_op(")")
        return ast.FuncCall(name, tuple(args), distinct)

    def case(self) -> ast.Case:
        operand = None if self.at_kw("when") else self.expr()
        whens = []
        while self.accept_kw("when"):
            cond = self.expr()
            self.expect_kw("then")
            whens.append((cond, self.expr()))
        if not whens:
            raise self.fail("WHEN")
        else_ = self.expr() if self.accept_kw("else") else None
        self.expect_kw("end")
        return ast.Case(operand, tuple(whens), else_)
