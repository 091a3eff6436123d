"""Hypothesis strategies: random pipelines (CQL text) and small data for them.

Inputs (time_unit ms): streams S(a int, b int, c string) and T(a int, d int) with timestamp
field ts, relation R(a int, e string) with `_op` updates. At most 25 elements per input,
timestamps non-decreasing in 0..40 with ties, ints in 0..4 and sometimes NULL, strings from a
tiny set. Each source is written as jsonl or csv.

Queries are built from small pieces (a FROM item with its window, a typed expression, a
projection, a predicate) so that a shrunk counterexample reads well: every choice is an index
whose smallest value is the simplest option. Every column is qualified by its FROM item's
alias, so no name is ambiguous. Constructs the reference does not support are never generated:
Sample other than 0/100, [Rows N] / [Partition By … Rows N] over a derived stream (ties have no
defined order there), Istream/Dstream/Rstream inside a subquery in an expression or inside a
set operation, windows on relations.

`cases(family, ...)` draws a `Case` (pipeline dict + data dict for `harness.run_both`) whose
queries come from `family`, one of the query strategies below (`window_queries`,
`join_queries`, `aggregate_queries`, `setop_queries`, `subquery_queries`,
`r2s_queries`, `view_pipelines`, `mixed_queries`). `adjusted_cases(family)` also gives queries
QoS ranges and draws a schedule of window and granularity changes (`harness.run_adjusted`).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from hypothesis import strategies as st

__all__ = [
    "AdjustedCase",
    "Case",
    "adjusted_cases",
    "aggregate_queries",
    "cases",
    "correlated_aggregate_queries",
    "distinct_queries",
    "extreme_queries",
    "join_queries",
    "mixed_queries",
    "paned_cases",
    "paned_queries",
    "r2s_queries",
    "setop_queries",
    "sized_window_queries",
    "subquery_queries",
    "view_pipelines",
    "window_queries",
]

SCHEMAS: dict[str, list[tuple[str, str]]] = {
    "S": [("a", "int"), ("b", "int"), ("c", "string")],
    "T": [("a", "int"), ("d", "int")],
    "R": [("a", "int"), ("e", "string")],
}
STREAMS = ("S", "T")
RELATIONS = ("R",)
STRINGS = ("x", "y", "xy", "ab", "")
PATTERNS = ("x%", "%y", "_", "x_", "%", "a%", "%b%", "")
MAX_TS = 40
MAX_ELEMENTS = 25
# Cases with many groups (`cases(..., wide=True)`): more elements, int values from a wide
# range, so aggregates keep tens of groups that appear, change and vanish within a batch.
MAX_WIDE_ELEMENTS = 150
WIDE_INTS = 60

Refs = list[tuple[str, str]]  # (qualified column text, type)


@dataclass
class Case:
    pipeline: dict[str, Any]
    data: dict[str, list[dict[str, Any]]]

    def __repr__(self) -> str:  # what hypothesis prints for a falsifying example
        lines = ["Case("]
        for name, q in self.pipeline["queries"].items():
            cql = q if isinstance(q, str) else q["cql"]
            sink = "" if isinstance(q, str) or q.get("sink", True) else "  (view)"
            lines.append(f"  {name}: {cql}{sink}")
        for name, recs in self.data.items():
            fmt = {**self.pipeline.get("streams", {}), **self.pipeline.get("relations", {})}[name][
                "format"
            ]
            lines.append(f"  {name} ({fmt}): {recs}")
        lines.append(")")
        return "\n".join(lines)


@dataclass
class From:
    """A FROM item: its text, the alias its columns are qualified with, its columns."""

    text: str
    alias: str
    columns: list[tuple[str, str]]
    inputs: set[str] = field(default_factory=set)
    is_stream_read: bool = False  # a stream read with no window (default Istream)

    def refs(self) -> Refs:
        return [(f"{self.alias}.{n}", t) for n, t in self.columns]


# ============================================================================== data


def rare(draw: Any, n: int) -> bool:
    """True with probability 1/(n+1); shrinks to False (the simpler choice)."""
    return draw(st.integers(0, n)) == n


@st.composite
def timestamps(draw: Any, n: int) -> list[int]:
    return sorted(draw(st.lists(st.integers(0, MAX_TS), min_size=n, max_size=n)))


@st.composite
def int_values(draw: Any, nulls: bool, wide: bool = False) -> int | None:
    if nulls and draw(st.integers(0, 5)) == 5:
        return None
    return draw(st.integers(0, WIDE_INTS if wide else 4))


@st.composite
def str_values(draw: Any, nulls: bool) -> str | None:
    if nulls and draw(st.integers(0, 6)) == 6:
        return None
    return draw(st.sampled_from(STRINGS))


@st.composite
def stream_data(draw: Any, name: str, nulls: bool, wide: bool = False) -> list[dict[str, Any]]:
    n = draw(st.integers(0, MAX_WIDE_ELEMENTS if wide else MAX_ELEMENTS))
    ts = draw(timestamps(n))
    out = []
    for t in ts:
        rec: dict[str, Any] = {"ts": t}
        for col, typ in SCHEMAS[name]:
            rec[col] = draw(int_values(nulls, wide) if typ == "int" else str_values(nulls))
        out.append(rec)
    return out


@st.composite
def disordered(draw: Any, rows: list[dict[str, Any]], delay: int) -> list[dict[str, Any]]:
    """`rows` (in timestamp order) with some arrivals moved earlier, within `delay` of the
    latest timestamp before them or beyond it (late elements, which the pipeline drops)."""
    out = [dict(r) for r in rows]
    for _ in range(draw(st.integers(0, 3))):
        if len(out) < 2:
            break
        i = draw(st.integers(1, len(out) - 1))
        latest = max(r["ts"] for r in out[:i])
        out[i]["ts"] = max(0, latest - draw(st.integers(0, delay + 2)))
    return out


@st.composite
def relation_data(draw: Any, name: str, nulls: bool) -> list[dict[str, Any]]:
    """Inserts and deletes; a delete always removes a tuple that is there."""
    n = draw(st.integers(0, MAX_ELEMENTS))
    ts = draw(timestamps(n))
    bag: list[dict[str, Any]] = []
    out = []
    for t in ts:
        if bag and draw(st.integers(0, 2)) == 2:
            victim = bag.pop(draw(st.integers(0, len(bag) - 1)))
            out.append({"ts": t, **victim, "_op": "-"})
            continue
        rec = {}
        for col, typ in SCHEMAS[name]:
            rec[col] = draw(int_values(nulls) if typ == "int" else str_values(nulls))
        bag.append(rec)
        op = draw(st.sampled_from(["+", "+", None]))  # no _op means insert
        out.append({"ts": t, **rec, **({"_op": op} if op else {"_op": None})})
    return out


# ============================================================================== expressions


def _of(refs: Refs, typ: str) -> list[str]:
    return [r for r, t in refs if t == typ]


@st.composite
def int_expr(draw: Any, refs: Refs, depth: int = 1) -> str:
    cols = _of(refs, "int")
    top = 6 if depth > 0 else 1
    k = draw(st.integers(0, top))
    if k == 0 and cols:
        return draw(st.sampled_from(cols))
    if k <= 1:
        v = draw(st.integers(-1, 4))
        return f"({v})" if v < 0 else str(v)
    sub = int_expr(refs, depth - 1)
    if k == 2:
        op = draw(st.sampled_from(["+", "-", "*"]))
        return f"({draw(sub)} {op} {draw(sub)})"
    if k == 3:
        op = draw(st.sampled_from(["/", "%"]))
        return f"({draw(sub)} {op} {draw(sub)})"
    if k == 4:
        cond = draw(bool_expr(refs, depth - 1))
        els = f" ELSE {draw(sub)}" if draw(st.booleans()) else ""
        return f"CASE WHEN {cond} THEN {draw(sub)}{els} END"
    if k == 5:
        return f"(- {draw(sub)})"
    fn = draw(st.integers(0, 5))
    if fn == 0:
        return f"abs({draw(sub)})"
    if fn == 1:
        return f"coalesce({draw(sub)}, {draw(st.integers(0, 4))})"
    if fn == 2:
        return f"nullif({draw(sub)}, {draw(st.integers(0, 4))})"
    if fn == 3:
        return f"greatest({draw(sub)}, {draw(sub)})"
    if fn == 4:
        return f"least({draw(sub)}, {draw(sub)})"
    return f"length({draw(str_expr(refs, depth - 1))})"


@st.composite
def str_expr(draw: Any, refs: Refs, depth: int = 1) -> str:
    cols = _of(refs, "string")
    top = 4 if depth > 0 else 1
    k = draw(st.integers(0, top))
    if k == 0 and cols:
        return draw(st.sampled_from(cols))
    if k <= 1:
        return "'" + draw(st.sampled_from(STRINGS)) + "'"
    sub = str_expr(refs, depth - 1)
    if k == 2:
        return f"({draw(sub)} || {draw(sub)})"
    if k == 3:
        return f"{draw(st.sampled_from(['upper', 'lower']))}({draw(sub)})"
    cond = draw(bool_expr(refs, depth - 1))
    return f"CASE WHEN {cond} THEN {draw(sub)} ELSE {draw(sub)} END"


CMP = ["=", "<>", "<", "<=", ">", ">="]


@st.composite
def bool_expr(draw: Any, refs: Refs, depth: int = 1) -> str:
    has_str = bool(_of(refs, "string"))
    top = 8 if depth > 0 else 4
    k = draw(st.integers(0, top))
    ie = int_expr(refs, max(depth - 1, 0))
    if k == 0:
        cols = _of(refs, "int")
        lhs = draw(st.sampled_from(cols)) if cols else draw(ie)
        return f"{lhs} {draw(st.sampled_from(CMP))} {draw(ie)}"
    if k == 1:
        what = draw(st.sampled_from([r for r, _ in refs])) if refs else draw(ie)
        return f"{what} IS {draw(st.sampled_from(['', 'NOT ']))}NULL"
    if k == 2:
        items = draw(st.lists(st.integers(0, 4), min_size=1, max_size=3))
        if rare(draw, 4):
            items_text = ", ".join(map(str, items)) + ", NULL"
        else:
            items_text = ", ".join(map(str, items))
        neg = draw(st.sampled_from(["", "NOT "]))
        return f"{draw(ie)} {neg}IN ({items_text})"
    if k == 3:
        lo, hi = draw(st.integers(0, 4)), draw(st.integers(0, 4))
        neg = draw(st.sampled_from(["", "NOT "]))
        return f"{draw(ie)} {neg}BETWEEN {lo} AND {hi}"
    if k == 4:
        if not has_str:
            return f"{draw(ie)} {draw(st.sampled_from(CMP))} {draw(ie)}"
        se = str_expr(refs, max(depth - 1, 0))
        if draw(st.booleans()):
            neg = draw(st.sampled_from(["", "NOT "]))
            return f"{draw(se)} {neg}LIKE '{draw(st.sampled_from(PATTERNS))}'"
        return f"{draw(se)} {draw(st.sampled_from(CMP))} {draw(se)}"
    sub = bool_expr(refs, depth - 1)
    if k == 5:
        return f"({draw(sub)} AND {draw(sub)})"
    if k == 6:
        return f"({draw(sub)} OR {draw(sub)})"
    if k == 7:
        return f"NOT ({draw(sub)})"
    return draw(st.sampled_from(["TRUE", "FALSE", "NULL IS NULL"]))


@st.composite
def select_items(
    draw: Any, refs: Refs, min_size: int = 1, max_size: int = 3, star: bool = True
) -> tuple[str, list[str]]:
    """A projection: (text, output types)."""
    if star and rare(draw, 5):
        return "*", [t for _, t in refs]
    n = draw(st.integers(min_size, max_size))
    texts, types = [], []
    for i in range(n):
        k = draw(st.integers(0, 3))
        if k == 0:
            ref, typ = draw(st.sampled_from(refs))
            texts.append(ref)
        elif k == 1:
            ref, typ = draw(st.sampled_from(refs))
            texts.append(f"{ref} AS x{i}")
        elif k == 2:
            typ = "int"
            texts.append(f"{draw(int_expr(refs, 1))} AS x{i}")
        else:
            typ = "string"
            texts.append(f"{draw(str_expr(refs, 1))} AS x{i}")
        types.append(typ)
    return ", ".join(texts), types


@st.composite
def typed_items(draw: Any, refs: Refs, types: list[str]) -> str:
    """A projection producing exactly `types` (for set operations), named y0, y1, …"""
    texts = []
    for i, typ in enumerate(types):
        cols = _of(refs, typ)
        if cols and draw(st.integers(0, 2)) < 2:
            texts.append(f"{draw(st.sampled_from(cols))} AS y{i}")
        elif typ == "int":
            texts.append(f"{draw(int_expr(refs, 1))} AS y{i}")
        else:
            texts.append(f"{draw(str_expr(refs, 1))} AS y{i}")
    return ", ".join(texts)


# ============================================================================== FROM items


WINDOW_KINDS = ("none", "now", "range", "rows", "slide", "partition", "range_unb", "rows_unb")
DERIVED_WINDOW_KINDS = ("none", "now", "range", "slide", "range_unb")


@st.composite
def duration(draw: Any, lo: int, hi: int) -> str:
    n = draw(st.integers(lo, hi))
    unit = draw(st.sampled_from(["", "", "", " ms", " milliseconds"]))
    return f"{n}{unit}"


@st.composite
def window(
    draw: Any,
    alias: str,
    columns: list[tuple[str, str]],
    derived: bool = False,
    kinds: tuple[str, ...] | None = None,
) -> str:
    """A window spec text (possibly empty) over a stream whose columns are `columns`."""
    kinds = kinds or (DERIVED_WINDOW_KINDS if derived else WINDOW_KINDS)
    kind = kinds[draw(st.integers(0, len(kinds) - 1))]
    if kind == "none":
        return ""
    pre = draw(st.sampled_from(["", "", " Preceding"]))
    if kind == "now":
        body = "Now"
    elif kind == "range":
        body = f"Range {draw(duration(0, 8))}{pre}"
    elif kind == "rows":
        body = f"Rows {draw(st.integers(1, 4))}{pre}"
    elif kind == "slide":
        body = f"Range {draw(duration(0, 8))} Slide {draw(duration(1, 5))}"
    elif kind == "partition":
        ints = [n for n, t in columns if t == "int"]
        keys = draw(st.lists(st.sampled_from(ints), min_size=1, max_size=2, unique=True))
        qual = draw(st.booleans())
        keys_text = ", ".join(f"{alias}.{k}" if qual else k for k in keys)
        body = f"Partition By {keys_text} Rows {draw(st.integers(1, 3))}{pre}"
    elif kind == "range_unb":
        body = "Range Unbounded"
    else:
        body = "Rows Unbounded"
    if rare(draw, 4):
        refs = [(f"{alias}.{n}", t) for n, t in columns]
        body += f" Where {draw(bool_expr(refs, 1))}"
    return f"[{body}]"


def _from_text(draw: Any, name: str, win: str, alias: str) -> str:
    sample = ""
    if rare(draw, 15):
        sample = f" Sample({draw(st.sampled_from([100, 0]))})"
    if alias == name and draw(st.booleans()):
        return " ".join(p for p in (name, win) if p) + sample
    if not win:
        return f"{name} AS {alias}{sample}"
    if draw(st.booleans()):
        return f"{name} {win} AS {alias}{sample}"
    return f"{name} {alias} {win}{sample}"


@st.composite
def stream_from(
    draw: Any,
    name: str | None = None,
    alias: str | None = None,
    kinds: tuple[str, ...] | None = None,
) -> From:
    name = name or draw(st.sampled_from(STREAMS))
    alias = alias or name
    win = draw(window(alias, SCHEMAS[name], kinds=kinds))
    return From(_from_text(draw, name, win, alias), alias, SCHEMAS[name], {name}, not win)


def relation_from(alias: str = "R") -> From:
    text = "R" if alias == "R" else f"R AS {alias}"
    return From(text, alias, SCHEMAS["R"], {"R"})


@st.composite
def any_from(draw: Any, alias_suffix: str = "", kinds: tuple[str, ...] | None = None) -> From:
    name = draw(st.sampled_from(["S", "T", "R"]))
    alias = name + alias_suffix
    if name == "R":
        return relation_from(alias)
    return draw(stream_from(name, alias, kinds))


SMALL = ("now", "range", "rows", "slide", "partition")  # bounded windows (cross joins)


# ============================================================================== queries


@dataclass
class Q:
    """A generated query: CQL text, output columns, inputs, whether stream-valued."""

    cql: str
    columns: list[tuple[str, str]]
    inputs: set[str]
    is_stream: bool


def _select(
    items: str,
    froms: list[From],
    where: str | None = None,
    distinct: bool = False,
    tail: str = "",
) -> str:
    text = "SELECT " + ("DISTINCT " if distinct else "") + items
    text += " FROM " + ", ".join(f.text for f in froms)
    if where:
        text += f" WHERE {where}"
    return text + tail


@st.composite
def wrap(draw: Any, select_text: str, items: str, stream_default: bool) -> tuple[str, bool]:
    """Maybe apply Istream/Dstream/Rstream, around the query or in its select list.
    (text, is_stream)."""
    k = draw(st.integers(0, 6))
    if k <= 2:
        return select_text, stream_default
    op = draw(st.sampled_from(["Istream", "Dstream", "Rstream"]))
    if k <= 4 or items == "*":
        return f"{op}({select_text})", True
    head = select_text[: select_text.index(items)]
    rest = select_text[select_text.index(items) + len(items) :]
    return f"{head}{op}({items}){rest}", True


def _out_columns(items: str, types: list[str], refs: Refs) -> list[tuple[str, str]]:
    if items == "*":
        return [(r.split(".")[1], t) for r, t in refs]
    return [(f"c{i}", t) for i, t in enumerate(types)]


@st.composite
def window_query(draw: Any, kinds: tuple[str, ...] | None = None) -> Q:
    """One stream through a window, a filter, a projection; maybe DISTINCT and a wrapper."""
    f = draw(stream_from(kinds=kinds))
    refs = f.refs()
    items, types = draw(select_items(refs))
    where = draw(bool_expr(refs, 2)) if draw(st.integers(0, 3)) else None
    distinct = rare(draw, 4)
    text = _select(items, [f], where, distinct)
    text, is_stream = draw(wrap(text, items, f.is_stream_read))
    return Q(text, _out_columns(items, types, refs), f.inputs, is_stream)


@st.composite
def conjunctive_query(draw: Any) -> Q:
    """One stream, a WHERE of 2 to 5 conjuncts (each any boolean expression), a projection:
    a selection whose conjuncts the engine orders (resources.filter_order)."""
    f = draw(stream_from())
    refs = f.refs()
    items, types = draw(select_items(refs))
    conjuncts = draw(st.lists(bool_expr(refs, 1), min_size=2, max_size=5))
    text = _select(items, [f], " AND ".join(f"({c})" for c in conjuncts))
    text, is_stream = draw(wrap(text, items, f.is_stream_read))
    return Q(text, _out_columns(items, types, refs), f.inputs, is_stream)


@st.composite
def join_query(draw: Any) -> Q:
    """Two (or three) FROM items joined on a = a, or crossed; a filter and a projection."""
    k = draw(st.integers(0, 5))
    if k == 0:  # stream x relation
        left, right = draw(stream_from("S")), relation_from()
    elif k == 1:  # self-join
        left = draw(stream_from("S", "S1"))
        right = draw(stream_from("S", "S2"))
    elif k == 2:  # three-way
        left, right = draw(stream_from("S")), draw(stream_from("T"))
    else:
        left, right = draw(stream_from("S")), draw(stream_from("T"))
    froms = [left, right]
    if k == 2:
        froms.append(relation_from())
    refs = [r for f in froms for r in f.refs()]
    conds = [f"{froms[0].alias}.a = {f.alias}.a" for f in froms[1:]]
    style = draw(st.integers(0, 3))
    bounded = all(f.inputs == {"R"} or ("[" in f.text and "Unbounded" not in f.text) for f in froms)
    if style >= 2 and bounded:
        conds = []  # a cross join of bounded windows
    extra = draw(bool_expr(refs, 1)) if draw(st.booleans()) else None
    items, types = draw(select_items(refs, max_size=4))
    distinct = rare(draw, 5)
    if style == 1 and len(froms) == 2 and conds:
        from_text = f"{froms[0].text} JOIN {froms[1].text} ON {conds[0]}"
        where = extra
    elif style == 2 and len(froms) == 2 and not conds:
        from_text = f"{froms[0].text} CROSS JOIN {froms[1].text}"
        where = extra
    else:
        from_text = ", ".join(f.text for f in froms)
        where = " AND ".join(conds + ([extra] if extra else [])) or None
    text = "SELECT " + ("DISTINCT " if distinct else "") + items + " FROM " + from_text
    if where:
        text += f" WHERE {where}"
    stream_default = any(f.is_stream_read for f in froms)
    text, is_stream = draw(wrap(text, items, stream_default))
    inputs = set().union(*(f.inputs for f in froms))
    return Q(text, _out_columns(items, types, refs), inputs, is_stream)


AGGS = ("COUNT(*)", "COUNT", "SUM", "AVG", "MIN", "MAX")


@st.composite
def aggregate_call(draw: Any, refs: Refs) -> tuple[str, str]:
    """(text, type) of an aggregate call."""
    k = draw(st.integers(0, len(AGGS) - 1))
    if k == 0:
        return "COUNT(*)", "int"
    fn = AGGS[k]
    distinct = "DISTINCT " if rare(draw, 4) else ""
    if fn in ("MIN", "MAX", "COUNT") and _of(refs, "string") and rare(draw, 3):
        arg = draw(st.sampled_from(_of(refs, "string")))
        return f"{fn}({distinct}{arg})", "int" if fn == "COUNT" else "string"
    cols = _of(refs, "int")
    arg = (
        draw(st.sampled_from(cols)) if cols and draw(st.integers(0, 2)) else draw(int_expr(refs, 1))
    )
    typ = {"COUNT": "int", "SUM": "int", "AVG": "float"}.get(fn, "int")
    return f"{fn}({distinct}{arg})", typ


@st.composite
def having(draw: Any, refs: Refs, keys: list[str]) -> str:
    agg, typ = draw(aggregate_call(refs))
    if typ == "string":
        return f"{agg} <> '{draw(st.sampled_from(STRINGS))}'"
    cond = f"{agg} {draw(st.sampled_from(CMP))} {draw(st.integers(0, 4))}"
    if keys and rare(draw, 3):
        cond += f" AND {draw(st.sampled_from(keys))} IS NOT NULL"
    return cond


@st.composite
def aggregate_query(draw: Any, froms: list[From] | None = None, wrapped: bool = True) -> Q:
    """GROUP BY 0–2 keys (global aggregate with none), 1–3 aggregates, maybe HAVING."""
    if froms is None:
        k = draw(st.integers(0, 4))
        if k <= 2:
            froms = [draw(stream_from())]
        elif k == 3:
            froms = [draw(stream_from("S")), relation_from()]
        else:
            froms = [draw(stream_from("S")), draw(stream_from("T"))]
    refs = [r for f in froms for r in f.refs()]
    conds = [f"{froms[0].alias}.a = {f.alias}.a" for f in froms[1:]]
    if rare(draw, 2):
        conds.append(draw(bool_expr(refs, 1)))
    nkeys = draw(st.integers(0, min(2, len(refs))))
    key_cols = draw(
        st.lists(st.sampled_from([r for r, _ in refs]), min_size=nkeys, max_size=nkeys, unique=True)
    )
    key_types = {r: t for r, t in refs}
    items, columns = [], []
    keys_text = list(key_cols)
    expr_key = None
    if key_cols and rare(draw, 5) and _of(refs, "int"):
        col = draw(st.sampled_from(_of(refs, "int")))
        expr_key = f"{col} % 2"
        keys_text.append(expr_key)
    for i, kc in enumerate(key_cols):
        if draw(st.integers(0, 4)) or not wrapped:
            items.append(kc if wrapped and draw(st.booleans()) else f"{kc} AS k{i}")
            columns.append((f"k{i}", key_types[kc]))
    if expr_key:
        items.append(f"{expr_key} AS kx")
        columns.append(("kx", "int"))
    for i in range(draw(st.integers(1, 3))):
        agg, typ = draw(aggregate_call(refs))
        if rare(draw, 6) and typ == "int":
            agg = f"{agg} + 1"
        items.append(f"{agg} AS n{i}")
        columns.append((f"n{i}", typ))
    items_text = ", ".join(items)
    text = _select(items_text, froms, " AND ".join(conds) or None)
    if keys_text:
        text += " GROUP BY " + ", ".join(keys_text)
    if rare(draw, 2):
        text += " HAVING " + draw(having(refs, key_cols))
    is_stream = False
    if wrapped:
        text, is_stream = draw(wrap(text, items_text, False))
    return Q(text, columns, set().union(*(f.inputs for f in froms)), is_stream)


def _grouped_with_deletions(draw: Any) -> tuple[Any, list, list[str], list[str], list[str]]:
    """A stream read through a window with deletions, 1–2 of its columns as group keys: the
    FROM item, its column refs, the keys, the keys' select items and the int refs."""
    f = draw(stream_from("S", kinds=("slide", "range", "rows", "partition", "now", "range_unb")))
    refs = f.refs()
    keys = draw(st.lists(st.sampled_from([r for r, _ in refs]), min_size=1, max_size=2, unique=True))
    return f, refs, keys, [f"{k} AS k{i}" for i, k in enumerate(keys)], _of(refs, "int")


@st.composite
def extreme_query(draw: Any) -> Q:
    """MIN/MAX of ints grouped by 1–2 keys over a window with deletions (so the columnar
    group table's multisets, group_multiset.py), maybe next to COUNT/SUM, maybe HAVING, as a
    relation or under Istream/Dstream/Rstream."""
    f, refs, keys, items, ints = _grouped_with_deletions(draw)
    for i in range(draw(st.integers(1, 3))):
        fn = draw(st.sampled_from(["MIN", "MAX", "MIN", "MAX", "COUNT", "SUM"]))
        arg = draw(st.sampled_from(ints)) if draw(st.integers(0, 3)) else draw(int_expr(refs, 1))
        distinct = "DISTINCT " if fn in ("MIN", "MAX") and rare(draw, 4) else ""
        items.append(f"{fn}({distinct}{arg}) AS n{i}")
    items_text = ", ".join(items)
    text = _select(items_text, [f]) + " GROUP BY " + ", ".join(keys)
    if rare(draw, 2):
        fn = draw(st.sampled_from(["MIN", "MAX"]))
        text += f" HAVING {fn}({draw(st.sampled_from(ints))}) {draw(st.sampled_from(CMP))} "
        text += str(draw(st.integers(0, 60)))
    text, is_stream = draw(wrap(text, items_text, False))
    return Q(text, [], f.inputs, is_stream)


@st.composite
def distinct_query(draw: Any) -> Q:
    """COUNT, SUM or AVG(DISTINCT) of ints grouped by 1–2 keys over a window with deletions
    (so the columnar group table's multisets, group_multiset.py), maybe next to COUNT/SUM/MIN,
    maybe HAVING on a distinct count, as a relation or under Istream/Dstream/Rstream."""
    f, refs, keys, items, ints = _grouped_with_deletions(draw)
    for i in range(draw(st.integers(1, 3))):
        fn = draw(st.sampled_from(["COUNT", "COUNT", "SUM", "AVG", "COUNT(*)", "SUM", "MIN"]))
        arg = draw(st.sampled_from(ints)) if draw(st.integers(0, 3)) else draw(int_expr(refs, 1))
        if fn == "COUNT(*)":
            items.append(f"COUNT(*) AS n{i}")
            continue
        distinct = "DISTINCT " if fn != "MIN" and (i == 0 or draw(st.booleans())) else ""
        items.append(f"{fn}({distinct}{arg}) AS n{i}")
    items_text = ", ".join(items)
    text = _select(items_text, [f]) + " GROUP BY " + ", ".join(keys)
    if rare(draw, 2):
        text += f" HAVING COUNT(DISTINCT {draw(st.sampled_from(ints))}) "
        text += f"{draw(st.sampled_from(CMP))} {draw(st.integers(0, 4))}"
    text, is_stream = draw(wrap(text, items_text, False))
    return Q(text, [], f.inputs, is_stream)


SETOPS = ("UNION", "UNION ALL", "EXCEPT", "EXCEPT ALL", "INTERSECT", "INTERSECT ALL")


@st.composite
def setop_block(draw: Any, types: list[str], suffix: str) -> tuple[str, bool, set[str]]:
    f = draw(any_from(suffix))
    refs = f.refs()
    if rare(draw, 4) and _of(refs, "int"):  # an aggregate block
        items = []
        for i, typ in enumerate(types):
            if typ == "int":
                items.append(f"COUNT(*) AS y{i}" if i else f"{_of(refs, 'int')[0]} AS y{i}")
            else:
                cols = _of(refs, "string")
                items.append(f"MIN({cols[0]}) AS y{i}" if cols else f"'x' AS y{i}")
        group = _of(refs, "int")[0]
        text = _select(", ".join(items), [f]) + f" GROUP BY {group}"
        return text, False, f.inputs
    items = draw(typed_items(refs, types))
    where = draw(bool_expr(refs, 1)) if draw(st.booleans()) else None
    distinct = rare(draw, 5)
    return _select(items, [f], where, distinct), f.is_stream_read, f.inputs


@st.composite
def setop_query(draw: Any) -> Q:
    types = draw(st.sampled_from([["int"], ["int", "string"], ["int", "int"], ["string"]]))
    n = draw(st.integers(2, 3))
    blocks = [draw(setop_block(types, str(i + 1))) for i in range(n)]
    text = blocks[0][0]
    for b in blocks[1:]:
        op = draw(st.sampled_from(SETOPS))
        text = f"{text} {op} {b[0]}" if draw(st.integers(0, 3)) else f"{text} {op} ({b[0]})"
    stream_default = any(b[1] for b in blocks)
    is_stream = stream_default
    if rare(draw, 3):
        op = draw(st.sampled_from(["Istream", "Dstream", "Rstream"]))
        text, is_stream = f"{op}({text})", True
    inputs = set().union(*(b[2] for b in blocks))
    return Q(text, [(f"y{i}", t) for i, t in enumerate(types)], inputs, is_stream)


# ---------------------------------------------------------------------------- subqueries


@st.composite
def predicate_subquery(draw: Any, outer: From, corr_agg: bool = False) -> tuple[str, set[str]]:
    """A predicate over `outer` using a subquery: IN, NOT IN, EXISTS, NOT EXISTS, a scalar
    comparison, ALL, ANY; uncorrelated or correlated on a. Aggregate subqueries are correlated
    only when `corr_agg` (then they always are, and the subquery always aggregates)."""
    inner = draw(any_from("i"))
    irefs = inner.refs()
    o_int = [r for r, t in outer.refs() if t == "int"]
    k = draw(st.sampled_from([2, 5])) if corr_agg else draw(st.integers(0, 5))
    correlated = corr_agg or (k not in (2, 5) and draw(st.booleans()))
    conds = []
    if correlated:
        conds.append(f"{inner.alias}.a = {outer.alias}.a")
    if rare(draw, 2):
        conds.append(draw(bool_expr(irefs, 1)))
    where = " AND ".join(conds) or None
    i_int = _of(irefs, "int")
    lhs = draw(st.sampled_from(o_int))
    if k == 0:
        neg = draw(st.sampled_from(["", "NOT "]))
        sub = _select(draw(st.sampled_from(i_int)), [inner], where)
        return f"{lhs} {neg}IN ({sub})", inner.inputs
    if k == 1:
        neg = draw(st.sampled_from(["", "NOT "]))
        sub = _select(draw(st.sampled_from(["*", "1", i_int[0]])), [inner], where)
        return f"{neg}EXISTS ({sub})", inner.inputs
    if k == 2:
        agg = draw(
            st.sampled_from(
                [f"MAX({i_int[-1]})", f"MIN({i_int[-1]})", "COUNT(*)", f"SUM({i_int[-1]})"]
            )
        )
        sub = _select(agg, [inner], where)
        return f"{lhs} {draw(st.sampled_from(CMP))} ({sub})", inner.inputs
    if k == 3:
        q = draw(st.sampled_from(["ALL", "ANY", "SOME"]))
        sub = _select(draw(st.sampled_from(i_int)), [inner], where)
        return f"{lhs} {draw(st.sampled_from(CMP))} {q} ({sub})", inner.inputs
    if k == 4:  # a scalar subquery that may have several rows (NULL then)
        sub = _select(draw(st.sampled_from(i_int)), [inner], where)
        return f"{lhs} {draw(st.sampled_from(CMP))} ({sub})", inner.inputs
    sub = _select("COUNT(*)", [inner], where)
    return f"({sub}) > {draw(st.integers(0, 2))}", inner.inputs


@st.composite
def from_subquery(draw: Any, alias: str = "X") -> From:
    """A subquery in FROM: relation-valued (an aggregate or a windowed select), or
    stream-valued (a filter over a stream with no window) read through a window."""
    k = draw(st.integers(0, 2))
    if k == 0:
        q = draw(aggregate_query(wrapped=False))
        cols = q.columns
        return From(f"({q.cql}) AS {alias}", alias, cols, q.inputs)
    if k == 1:
        f = draw(stream_from(kinds=("now", "range", "rows", "slide", "partition")))
        refs = f.refs()
        items, types = draw(select_items(refs, star=False))
        cols = [(f"c{i}", t) for i, t in enumerate(types)]
        items = ", ".join(
            f"{it.rsplit(' AS ', 1)[0]} AS c{i}" for i, it in enumerate(_split_items(items))
        )
        where = draw(bool_expr(refs, 1)) if draw(st.booleans()) else None
        sub = _select(items, [f], where)
        return From(f"({sub}) AS {alias}", alias, cols, f.inputs)
    name = draw(st.sampled_from(STREAMS))
    f = From(name, name, SCHEMAS[name], {name}, True)
    refs = f.refs()
    where = draw(bool_expr(refs, 1)) if draw(st.booleans()) else None
    sub = _select("*", [f], where)
    win = draw(window(alias, SCHEMAS[name], derived=True))
    stream_read = not win
    text = (
        f"({sub}) AS {alias} {win}".rstrip()
        if draw(st.booleans()) or not win
        else (f"({sub}) {win} AS {alias}")
    )
    return From(text, alias, SCHEMAS[name], {name}, stream_read)


def _split_items(items: str) -> list[str]:
    """Split a projection at top-level commas."""
    out, depth, cur = [], 0, ""
    for ch in items:
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
        if ch == "," and depth == 0:
            out.append(cur.strip())
            cur = ""
        else:
            cur += ch
    out.append(cur.strip())
    return out


@st.composite
def subquery_query(draw: Any, corr_agg: bool = False) -> Q:
    """Subqueries in WHERE (IN, EXISTS, scalar, ALL/ANY), in the select list, in FROM.
    With `corr_agg`: only correlated subqueries that aggregate (WHERE and select list)."""
    k = draw(st.sampled_from([1, 2])) if corr_agg else draw(st.integers(0, 3))
    if k == 3:  # a subquery in FROM
        f = draw(from_subquery())
        froms = [f]
        if rare(draw, 2) and _of(f.refs(), "int"):
            other = draw(stream_from("T", kinds=SMALL))
            froms.append(other)
        refs = [r for g in froms for r in g.refs()]
        conds = []
        if len(froms) == 2:
            conds.append(f"{_of(f.refs(), 'int')[0]} = T.a")
        if draw(st.booleans()):
            conds.append(draw(bool_expr(refs, 1)))
        items, types = draw(select_items(refs))
        text = _select(items, froms, " AND ".join(conds) or None)
        text, is_stream = draw(wrap(text, items, any(g.is_stream_read for g in froms)))
        inputs = set().union(*(g.inputs for g in froms))
        return Q(text, _out_columns(items, types, refs), inputs, is_stream)
    outer = draw(stream_from("S", "S0"))
    refs = outer.refs()
    inputs = set(outer.inputs)
    if k == 2:  # a scalar subquery in the select list
        inner = draw(any_from("i"))
        i_int = _of(inner.refs(), "int")
        corr = f" WHERE {inner.alias}.a = S0.a" if corr_agg else ""
        agg = draw(st.sampled_from([f"MAX({i_int[-1]})", "COUNT(*)", f"SUM({i_int[-1]})"]))
        items = f"S0.a, ({_select(agg, [inner])}{corr}) AS sq"
        types = ["int", "int"]
        inputs |= inner.inputs
        where = draw(bool_expr(refs, 1)) if draw(st.booleans()) else None
        text = _select(items, [outer], where)
    else:
        pred, more = draw(predicate_subquery(outer, corr_agg))
        inputs |= more
        if rare(draw, 2):
            pred2, more2 = draw(predicate_subquery(outer, corr_agg))
            pred = f"({pred}) {draw(st.sampled_from(['AND', 'OR']))} ({pred2})"
            inputs |= more2
        items, types = draw(select_items(refs))
        text = _select(items, [outer], pred)
        if k == 1 and items != "*":
            text, is_stream = draw(wrap(text, items, outer.is_stream_read))
            return Q(text, _out_columns(items, types, refs), inputs, is_stream)
    return Q(text, _out_columns(items, types, refs), inputs, outer.is_stream_read)


@st.composite
def r2s_query(draw: Any) -> Q:
    """Istream / Dstream / Rstream over windowed selects, joins and aggregates."""
    k = draw(st.integers(0, 2))
    if k == 0:
        f = draw(stream_from())
        refs = f.refs()
        items, types = draw(select_items(refs))
        where = draw(bool_expr(refs, 1)) if draw(st.booleans()) else None
        inner = _select(items, [f], where, rare(draw, 3))
        cols = _out_columns(items, types, refs)
        inputs = f.inputs
    elif k == 1:
        q = draw(aggregate_query(wrapped=False))
        inner, items, cols, inputs = q.cql, None, q.columns, q.inputs
    else:
        q = draw(join_query())
        if (
            q.cql.startswith(("Istream", "Dstream", "Rstream"))
            or "stream(" in q.cql.split(" FROM ")[0]
        ):
            return q
        inner, items, cols, inputs = q.cql, None, q.columns, q.inputs
    op = draw(st.sampled_from(["Istream", "Dstream", "Rstream"]))
    if items is not None and items != "*" and draw(st.booleans()):
        head, rest = inner[: inner.index(items)], inner[inner.index(items) + len(items) :]
        return Q(f"{head}{op}({items}){rest}", cols, inputs, True)
    return Q(f"{op}({inner})", cols, inputs, True)


@st.composite
def mixed_query(draw: Any) -> Q:
    family = draw(st.integers(0, 5))
    return draw(
        [
            window_query(),
            join_query(),
            aggregate_query(),
            setop_query(),
            subquery_query(),
            r2s_query(),
        ][family]
    )


# ============================================================================== pipelines


QueryFamily = Callable[[], st.SearchStrategy]


@st.composite
def queries_of(draw: Any, one: st.SearchStrategy, max_queries: int = 2) -> list[tuple]:
    qs = draw(st.lists(one, min_size=1, max_size=max_queries))
    return [(f"q{i + 1}", q.cql, True, q.inputs) for i, q in enumerate(qs)]


def window_queries() -> st.SearchStrategy:
    return queries_of(window_query())


def conjunctive_queries() -> st.SearchStrategy:
    return queries_of(conjunctive_query())


def join_queries() -> st.SearchStrategy:
    return queries_of(join_query())


def aggregate_queries() -> st.SearchStrategy:
    return queries_of(aggregate_query())


def extreme_queries() -> st.SearchStrategy:
    return queries_of(extreme_query())


def distinct_queries() -> st.SearchStrategy:
    return queries_of(distinct_query())


def setop_queries() -> st.SearchStrategy:
    return queries_of(setop_query())


def subquery_queries() -> st.SearchStrategy:
    return queries_of(subquery_query())


def correlated_aggregate_queries() -> st.SearchStrategy:
    return queries_of(subquery_query(corr_agg=True))


def r2s_queries() -> st.SearchStrategy:
    return queries_of(r2s_query())


def mixed_queries() -> st.SearchStrategy:
    return queries_of(mixed_query(), max_queries=3)


@st.composite
def _view_pipeline(draw: Any) -> list[tuple]:
    """A view (no sink) and one or two queries reading it (and maybe other inputs)."""
    k = draw(st.integers(0, 3))
    if k == 0:  # stream-valued view: a filter/projection of a stream with no window
        f = draw(stream_from(kinds=("none",)))
        refs = f.refs()
        items = ", ".join(f"{r} AS v{i}" for i, (r, _) in enumerate(refs))
        vcols = [(f"v{i}", t) for i, (_, t) in enumerate(refs)]
        where = draw(bool_expr(refs, 1)) if draw(st.booleans()) else None
        view = Q(_select(items, [f], where), vcols, f.inputs, True)
    elif k == 1:  # relation-valued view: an aggregate
        view = draw(aggregate_query(wrapped=False))
        view.columns = [(n, t) for n, t in view.columns]
    elif k == 2:  # relation-valued view: a windowed projection
        f = draw(stream_from(kinds=("now", "range", "rows", "slide", "partition")))
        refs = f.refs()
        items = ", ".join(f"{r} AS v{i}" for i, (r, _) in enumerate(refs))
        vcols = [(f"v{i}", t) for i, (_, t) in enumerate(refs)]
        view = Q(_select(items, [f]), vcols, f.inputs, False)
    else:  # stream-valued view from a relation-to-stream operator
        q = draw(aggregate_query(wrapped=False))
        op = draw(st.sampled_from(["Istream", "Dstream", "Rstream"]))
        view = Q(f"{op}({q.cql})", q.columns, q.inputs, True)
    vf = From("V", "V", view.columns, {"V"}, view.is_stream)
    readers = []
    for _ in range(draw(st.integers(1, 2))):
        if view.is_stream:
            win = draw(window("V", view.columns, derived=True))
            text = f"V {win}".strip() if win else "V"
            vf = From(text, "V", view.columns, set(), not win)
        else:
            vf = From("V", "V", view.columns, set(), False)
        refs = vf.refs()
        j = draw(st.integers(0, 2))
        if j == 0 and _of(refs, "int"):
            q = draw(aggregate_query(froms=[vf]))
        elif j == 1 and _of(refs, "int"):  # joined with a stream on an int column
            s = draw(stream_from("S", kinds=SMALL))
            allrefs = refs + s.refs()
            items, _ = draw(select_items(allrefs, star=False))
            cond = f"{_of(refs, 'int')[0]} = S.a"
            text = _select(items, [vf, s], cond)
            text, is_stream = draw(wrap(text, items, vf.is_stream_read))
            q = Q(text, [], {"S"}, is_stream)
        else:
            items, _ = draw(select_items(refs))
            where = draw(bool_expr(refs, 1)) if draw(st.booleans()) else None
            text = _select(items, [vf], where)
            text, is_stream = draw(wrap(text, items, vf.is_stream_read))
            q = Q(text, [], set(), is_stream)
        readers.append(q)
    out = [("V", view.cql, False, view.inputs)]
    out += [(f"q{i + 1}", q.cql, True, q.inputs) for i, q in enumerate(readers)]
    return out


def view_pipelines() -> st.SearchStrategy:
    return _view_pipeline()


@st.composite
def cases(draw: Any, family: QueryFamily, wide: bool = False) -> Case:
    """A pipeline with queries from `family` and data for S, T and R (`wide`: streams with
    many distinct int values, see MAX_WIDE_ELEMENTS)."""
    queries = draw(family())
    used: set[str] = set().union(*(q[3] for q in queries))
    used.add("S")
    if rare(draw, 3):
        used.add("T")
    if rare(draw, 4):
        used.add("R")
    nulls = draw(st.booleans())
    pipeline: dict[str, Any] = {"time_unit": "ms", "streams": {}, "relations": {}}
    data: dict[str, list[dict[str, Any]]] = {}
    for name in ("S", "T", "R"):
        if name not in used:
            continue
        fmt = draw(st.sampled_from(["jsonl", "csv"]))
        section = "relations" if name in RELATIONS else "streams"
        pipeline[section][name] = {"schema": dict(SCHEMAS[name]), "format": fmt}
        if name == "T" and rare(draw, 5):  # timestamped by arrival order (0, 1, 2, …)
            pipeline[section][name]["timestamp"] = None
        if name in RELATIONS:
            data[name] = draw(relation_data(name, nulls))
        else:
            data[name] = draw(stream_data(name, nulls, wide))
            if name == "S" and rare(draw, 4):  # out of order within max_delay, some too late
                delay = draw(st.sampled_from([0, 2, 5]))
                pipeline[section][name]["max_delay"] = delay
                data[name] = draw(disordered(data[name], delay))
    pipeline["queries"] = {name: {"cql": cql, "sink": sink} for name, cql, sink, _ in queries}
    return Case(pipeline, data)


# ============================================================================== adjustments

LADDERS = ((1, 2, 4), (1, 3), (2, 6), (1, 5, 10))
SIZED = ("range", "slide")  # the windows a qos can make adjustable


@st.composite
def sized_window_query(draw: Any) -> Q:
    """A query over Range windows: a window query, an aggregate over one stream (α(Γ(ω))) or
    over two joined on a = a."""
    k = draw(st.integers(0, 2))
    if k == 0:
        return draw(window_query(kinds=SIZED))
    froms = [draw(stream_from("S", kinds=SIZED))]
    if k == 2:
        froms.append(draw(stream_from("T", kinds=SIZED)))
    return draw(aggregate_query(froms=froms))


def sized_window_queries() -> st.SearchStrategy:
    return queries_of(sized_window_query())
MAX_STEP = 60  # adjustments happen after one of the engine's first steps


@dataclass
class AdjustedCase(Case):
    schedule: list[tuple[int, str, str, int]] = field(default_factory=list)

    def __repr__(self) -> str:
        lines = [super().__repr__()[: -len("\n)")]]
        for name, q in self.pipeline["queries"].items():
            if isinstance(q, dict) and q.get("qos"):
                lines.append(f"  {name} qos: {q['qos']}")
        lines.append(f"  schedule (after step, query, knob, value): {self.schedule}")
        lines.append(")")
        return "\n".join(lines)


@st.composite
def adjusted_cases(draw: Any, family: QueryFamily) -> AdjustedCase:
    """A case whose queries may have qos (a window range over every Range window they have,
    a granularity ladder) and changes to make while the engine runs."""
    case = draw(cases(family))
    knobs: list[tuple[str, str, list[int]]] = []  # (query, knob, values)
    for name, q in case.pipeline["queries"].items():
        qos: dict[str, Any] = {}
        sizes = [int(n) for n in re.findall(r"\[Range (\d+)", q["cql"])]
        sized = bool(sizes)
        if sized and min(sizes) > 0 and not rare(draw, 3):  # a range has 0 < min
            qos["window"] = [1, 40]
            knobs.append((name, "window", list(range(1, 13))))
            for alias in ("S", "T"):
                if re.search(rf"\b{alias}\b", q["cql"]):
                    knobs.append((name, f"window:{alias}", list(range(1, 13))))
        if sized and not rare(draw, 2):
            ladder = draw(st.sampled_from(LADDERS))
            qos["granularity"] = list(ladder)
            knobs.append((name, "granularity", list(ladder)))
        if qos:
            q["qos"] = qos
    schedule = []
    if knobs:
        for _ in range(draw(st.integers(1, 5))):
            query, knob, values = draw(st.sampled_from(knobs))
            step = draw(st.integers(1, MAX_STEP))
            schedule.append((step, query, knob, draw(st.sampled_from(values))))
    return AdjustedCase(case.pipeline, case.data, sorted(schedule))


# ============================================================================== panes

PANED_AGGS = ("COUNT(*)", "COUNT", "SUM", "AVG", "MIN", "MAX")


@st.composite
def paned_call(draw: Any, refs: Refs) -> tuple[str, str]:
    """(text, type) of an aggregate the paned operator computes (no DISTINCT, int args)."""
    fn = draw(st.sampled_from(PANED_AGGS))
    if fn == "COUNT(*)":
        return fn, "int"
    if fn == "COUNT" and rare(draw, 2):
        return f"COUNT({draw(st.sampled_from(_of(refs, 'string')))})", "int"
    ints = _of(refs, "int")
    arg = draw(st.sampled_from(ints)) if draw(st.integers(0, 2)) else draw(int_expr(refs, 1))
    return f"{fn}({arg})", {"AVG": "float"}.get(fn, "int")


@st.composite
def paned_query(draw: Any) -> Q:
    """A grouped or global aggregate over S [Range T Slide L] with several slides per window
    (plan/panes.py fuses it into one paned operator), maybe with HAVING and Istream/Dstream/
    Rstream."""
    slide = draw(st.integers(2, 6))
    size = draw(st.integers(slide - 1, 4 * slide + 3))
    body = f"Range {size} Slide {slide}"
    if rare(draw, 4):
        body += f" Where {draw(bool_expr([(f'S.{n}', t) for n, t in SCHEMAS['S']], 1))}"
    f = From(_from_text(draw, "S", f"[{body}]", "S"), "S", SCHEMAS["S"], {"S"}, False)
    refs = f.refs()
    nkeys = draw(st.integers(0, 2))
    keys = draw(st.lists(st.sampled_from([r for r, _ in refs]), min_size=nkeys, max_size=nkeys,
                         unique=True))
    types = dict(refs)
    items, columns = [], []
    for i, k in enumerate(keys):
        items.append(f"{k} AS k{i}")
        columns.append((f"k{i}", types[k]))
    keys_text = list(keys)
    if keys and rare(draw, 4):
        keys_text.append("S.a % 3")
    for i in range(draw(st.integers(1, 3))):
        agg, typ = draw(paned_call(refs))
        if i == 0 and not agg.startswith(("MIN", "MAX")):  # panes are used with a MIN/MAX
            agg, typ = f"{draw(st.sampled_from(['MIN', 'MAX']))}({draw(st.sampled_from(_of(refs, 'int')))})", "int"
        items.append(f"{agg} AS n{i}")
        columns.append((f"n{i}", typ))
    items_text = ", ".join(items)
    text = _select(items_text, [f])
    if keys_text:
        text += " GROUP BY " + ", ".join(keys_text)
    if rare(draw, 2):
        agg, _ = draw(paned_call(refs))
        text += f" HAVING {agg} {draw(st.sampled_from(CMP))} {draw(st.integers(0, 4))}"
    text, is_stream = draw(wrap(text, items_text, False))
    return Q(text, columns, {"S"}, is_stream)


def paned_queries() -> st.SearchStrategy:
    return queries_of(paned_query())


@st.composite
def paned_cases(draw: Any) -> Case:
    """`cases` of `paned_queries` over many groups, S's timestamps maybe stretched so that
    whole slides are empty and the window empties between bursts."""
    case = draw(cases(paned_queries, wide=True))
    stretch = draw(st.sampled_from([1, 1, 3, 9]))
    if stretch > 1:
        case.data["S"] = [{**r, "ts": r["ts"] * stretch} for r in case.data["S"]]
    return case
