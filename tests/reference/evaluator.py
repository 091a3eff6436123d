"""The brute-force reference evaluator: the oracle the engine is checked against.

For every integer instant τ from the first timestamp of the pipeline to the end of input, each
FROM item's relation at τ is materialised directly from the definitions in docs/semantics.md
(windows by filtering the element list, stored relations by replaying their updates), loaded
into DuckDB tables, and the query's relational part runs as one SQL statement there (see
`sql.py`). The outputs follow from comparing R(τ) with R(τ−1).

Shares no code with the engine: its own CQL parser (`cql_parser`), the standard library and
DuckDB.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import duckdb

from . import cql_ast as ast
from . import pgfuncs
from .cql_parser import parse_query
from .kinds import output_op
from .ordering import bag_difference, element_key, row_key
from .sql import DUCKDB_TYPES, Leaf, Scope, ScopeItem, Translator, has_subquery, quote
from .sql import sql_literal as lit

__all__ = ["QueryOutput", "evaluate", "evaluate_outputs"]

Row = tuple
Schema = Sequence[tuple[str, str]]
Element = tuple[int, str, Row]

UNIT_NS = {
    "ns": 1,
    "us": 1_000,
    "ms": 1_000_000,
    "s": 1_000_000_000,
    "min": 60_000_000_000,
    "h": 3_600_000_000_000,
    "d": 86_400_000_000_000,
}
DURATION_UNIT_NS = {
    None: None,
    "nanosecond": 1,
    "microsecond": 1_000,
    "millisecond": 1_000_000,
    "second": 1_000_000_000,
    "minute": 60_000_000_000,
    "hour": 3_600_000_000_000,
    "day": 86_400_000_000_000,
}


@dataclass
class StreamData:
    """A stream: its elements (ts, row) in order (ties in arrival order) and the instants it
    contributes to a reader (its element timestamps, plus, for a subquery, the instants that
    matter inside it)."""

    columns: list[tuple[str, str]]
    elements: list[tuple[int, Row]]
    instants: set[int] = field(default_factory=set)


@dataclass
class RelationData:
    """A relation: its value at each instant of [lo, hi] (empty before) and its instants."""

    columns: list[tuple[str, str]]
    values: dict[int, list[Row]]
    instants: set[int]

    def at(self, t: int) -> list[Row]:
        return self.values.get(t, [])


@dataclass
class Knobs:
    """A query's QoS as far as results depend on it (docs/resources.md), and its adjustment log.

    The query owns the Range windows of positive size in its own text that `windows` covers
    (None: every one) — all of them when it has a granularity ladder, whose finest rung is
    Γ's starting granularity. `log` holds the engine's records for the query, in order of
    `since`: from instant `since` on, the window on FROM item `window` gives new tuples size (knob ``window``) or
    granularity (knob ``granularity``) `new`; earlier tuples keep theirs."""

    windows: tuple[str | None, ...] = ()
    granularity: int | None = None
    log: tuple[dict, ...] = ()

    def owns(self, names: Sequence[str]) -> bool:
        if self.granularity is not None:
            return True
        low = {n.lower() for n in names}
        return any(w is None or w.lower() in low for w in self.windows)

    def setting(self, label: str, t: int, size: int) -> tuple[int, int]:
        """(size, granularity) a tuple with timestamp `t` gets in window `label` (`log` in
        order of `since`)."""
        g = self.granularity or 1
        for r in self.log:
            if r["window"] == label and r["since"] <= t:
                if r["knob"] == "window":
                    size = r["new"]
                else:
                    g = r["new"]
        return size, g


@dataclass
class QueryOutput:
    """What one query produces: its output columns, whether it is stream-valued, its output
    elements (ts, op, row) in output order, and its relation R(τ) at every instant."""

    columns: list[str]
    column_types: list[str]
    is_stream: bool
    elements: list[Element]
    series: dict[int, list[Row]]
    instants: set[int]


def drop_late(items: Sequence[tuple], max_delay: int) -> list[tuple]:
    """Drop late elements (timestamp < max seen − δ, first field is the timestamp) and
    reorder the rest stably by timestamp."""
    kept = []
    high: int | None = None
    for item in items:
        ts = item[0]
        if high is not None and ts < high - max_delay:
            continue
        kept.append(item)
        high = ts if high is None else max(high, ts)
    return sorted(kept, key=lambda it: it[0])


class Env:
    """The pipeline being evaluated: its sources and views, the instant range, DuckDB."""

    def __init__(self, time_unit: str, lo: int, hi: int) -> None:
        self.time_unit_ns = UNIT_NS[time_unit]
        self.lo = lo
        self.hi = hi
        self.streams: dict[str, StreamData] = {}
        self.relations: dict[str, RelationData] = {}
        self.con = duckdb.connect()
        self.con.execute("SET threads = 1")
        pgfuncs.register(self.con)
        self._tables = itertools.count(1)
        self.knobs = Knobs()  # those of the query being evaluated

    def close(self) -> None:
        self.con.close()

    @property
    def instants_range(self) -> range:
        return range(self.lo, self.hi + 1)

    # ------------------------------------------------------------------------ names

    def _find(self, name: str) -> StreamData | RelationData:
        for table in (self.streams, self.relations):
            if name in table:
                return table[name]
        low = name.lower()
        for table in (self.streams, self.relations):
            for key, value in table.items():
                if key.lower() == low:
                    return value
        raise KeyError(f"unknown stream, relation or view {name!r}")

    def is_stream_name(self, name: str) -> bool:
        return isinstance(self._find(name), StreamData)

    def columns_of(self, name: str) -> list[tuple[str, str]]:
        return list(self._find(name).columns)

    # ------------------------------------------------------------------------ leaves

    def _new_table(self) -> str:
        return f"__leaf{next(self._tables)}"

    def table_leaf(self, ref: ast.TableRef, alias: str) -> Leaf:
        data = self._find(ref.name)
        if isinstance(data, StreamData):
            return self.window_leaf(data, ref.window, ref.sample, alias, (alias, ref.name))
        if ref.window is not None or ref.sample is not None:
            raise ValueError(f"a window or Sample on relation {ref.name}")
        return Leaf(self._new_table(), list(data.columns), data.at, set(data.instants))

    def subquery_leaf(self, ref: ast.SubqueryRef, alias: str) -> Leaf:
        out = self.evaluate_query(ref.query)
        data = StreamData(
            [(n, t) for n, t in zip(out.columns, out.column_types)],
            [(ts, row) for ts, _, row in out.elements],
            out.instants | {ts for ts, _, _ in out.elements},
        )
        return self.window_leaf(data, ref.window, ref.sample, alias)

    def window_leaf(
        self,
        data: StreamData,
        window: ast.Window | None,
        sample: float | None,
        alias: str,
        names: tuple[str, ...] | None = None,
    ) -> Leaf:
        """The relation a window gives over `data` at each instant, with the instants its
        content changes at (plus the stream's own instants). `names`: the FROM item's alias
        and name, for the query's knobs."""
        kept = list(range(len(data.elements)))
        if sample is not None:
            if sample == 0:
                kept = []
            elif sample != 100:
                raise NotImplementedError("Sample(p) with p other than 0 and 100")
        where = getattr(window, "where", None)
        if where is not None:
            passing = self._passing(data, where, alias)
            kept = [i for i in kept if i in passing]
        owned = (
            isinstance(window, ast.RangeWindow)
            and not window.now
            and window.size is not None
            and self._duration(window.size) > 0
            and self.knobs.owns(names or (alias,))
        )
        if owned:
            valid = self._adjusted_intervals(data, kept, window, alias)  # type: ignore[arg-type]
            contents = {
                t: [i for i, start, end in valid if start <= t < end] for t in self.instants_range
            }
        else:
            contents = {t: self._window_content(data, kept, window, t) for t in self.instants_range}
        changes = {t for t in self.instants_range if contents[t] != contents.get(t - 1, [])}
        instants = {t for t in data.instants if self.lo <= t <= self.hi} | changes

        def content(t: int) -> list[Row]:
            return [data.elements[i][1] for i in contents.get(t, [])]

        return Leaf(self._new_table(), list(data.columns), content, instants)

    def _duration(self, d: ast.Duration) -> int:
        unit_ns = DURATION_UNIT_NS[d.unit]
        if unit_ns is None:
            return d.amount
        total = d.amount * unit_ns
        if total % self.time_unit_ns:
            raise ValueError(f"duration {d.amount} {d.unit} is not a whole number of time units")
        return total // self.time_unit_ns

    def _window_content(
        self, data: StreamData, kept: list[int], window: ast.Window | None, t: int
    ) -> list[int]:
        """Indices of the elements in the window at instant t (docs/semantics.md Windows)."""
        els = data.elements
        avail = [i for i in kept if els[i][0] <= t]
        if window is None:
            return avail
        if isinstance(window, ast.RowsWindow):
            if not window.partition_by:
                return _last(avail, window.n)
            positions = [_column_index(data.columns, c.name) for c in window.partition_by]
            groups: dict[tuple, list[int]] = {}
            for i in avail:
                key = row_key(tuple(els[i][1][p] for p in positions))
                groups.setdefault(key, []).append(i)
            return sorted(i for g in groups.values() for i in _last(g, window.n))
        size = 0 if window.now else (None if window.size is None else self._duration(window.size))
        t0 = t
        if window.slide is not None:
            slide = self._duration(window.slide)
            t0 = (t // slide) * slide
        return [i for i in avail if els[i][0] <= t0 and (size is None or els[i][0] >= t0 - size)]

    def _adjusted_intervals(
        self, data: StreamData, kept: list[int], window: ast.RangeWindow, label: str
    ) -> list[tuple[int, int, int]]:
        """(index, start, end) of each element of an owned window: its validity interval
        under the setting in force at its timestamp — [ts, ts + size + 1), or with a slide L
        from the first multiple of L ≥ ts to the first multiple of L > ts + size — rounded
        inward to multiples of the granularity g (brief-costmodel §1)."""
        size0 = self._duration(window.size)  # type: ignore[arg-type]
        slide = self._duration(window.slide) if window.slide is not None else None
        out = []
        for i in kept:
            ts = data.elements[i][0]
            size, g = self.knobs.setting(label, ts, size0)
            if slide is None:
                start, end = ts, ts + size + 1
            else:
                start = -(-ts // slide) * slide
                end = ((ts + size) // slide + 1) * slide
            out.append((i, -(-start // g) * g, end // g * g))
        return out

    def _passing(self, data: StreamData, where: ast.Expr, alias: str) -> set[int]:
        """Indices of the elements satisfying an inner window Where (evaluated by DuckDB)."""
        if has_subquery(where):
            raise NotImplementedError("a subquery in a window's Where")
        table = self._new_table()
        scope = Scope([ScopeItem(alias, alias, list(data.columns))])
        pred = Translator(self).expr(where, scope)[0]
        cols = [("__idx", "int"), *data.columns]
        self._create(table, cols)
        self._load(table, [(i, *row) for i, (_, row) in enumerate(data.elements)])
        rows = self.con.execute(
            f"SELECT __idx FROM {quote(table)} AS {quote(alias)} WHERE {pred}"
        ).fetchall()
        self.con.execute(f"DROP TABLE {quote(table)}")
        return {r[0] for r in rows}

    # ------------------------------------------------------------------------ DuckDB tables

    def _create(self, table: str, columns: Sequence[tuple[str, str]]) -> None:
        cols = ", ".join(f"{quote(n)} {DUCKDB_TYPES[t]}" for n, t in columns)
        self.con.execute(f"CREATE TABLE {quote(table)} ({cols})")

    def _load(self, table: str, rows: list[Row]) -> None:
        self.con.execute(f"DELETE FROM {quote(table)}")
        if rows:
            values = ", ".join("(" + ", ".join(lit(v) for v in row) + ")" for row in rows)
            self.con.execute(f"INSERT INTO {quote(table)} VALUES {values}")

    # ------------------------------------------------------------------------ queries

    def evaluate_query(self, query: ast.Query) -> QueryOutput:
        op, rel_query = output_op(query, self.is_stream_name)
        tr = Translator(self)
        sql, cols = tr.query(rel_query)
        instants = set().union(*(leaf.instants for leaf in tr.leaves)) if tr.leaves else set()
        instants = {t for t in instants if self.lo <= t <= self.hi}
        first = min(instants) if instants else None
        for leaf in tr.leaves:
            self._create(leaf.table, leaf.columns)
        series: dict[int, list[Row]] = {}
        previous: list[list[Row]] | None = None
        for t in self.instants_range:
            if first is None or t < first:
                series[t] = []  # nothing exists before the first instant that matters
                continue
            contents = [leaf.content(t) for leaf in tr.leaves]
            if contents == previous:
                # The query is a function of its inputs: same inputs, same result (this only
                # saves running the SQL again at instants where nothing changed).
                series[t] = series[t - 1]
                continue
            previous = contents
            for leaf, rows in zip(tr.leaves, contents):
                self._load(leaf.table, rows)
            series[t] = sorted(self.con.execute(sql).fetchall(), key=row_key)
        for leaf in tr.leaves:
            self.con.execute(f"DROP TABLE {quote(leaf.table)}")
        elements = _output_elements(op, series, instants)
        return QueryOutput(
            columns=[c.name for c in cols],
            column_types=[c.type for c in cols],
            is_stream=op is not None,
            elements=elements,
            series=series,
            instants=instants,
        )

    def add_view(self, name: str, out: QueryOutput) -> None:
        columns = list(zip(out.columns, out.column_types))
        if out.is_stream:
            els = [(ts, row) for ts, _, row in out.elements]
            self.streams[name] = StreamData(columns, els, {ts for ts, _ in els})
        else:
            changes = {
                t
                for t in self.instants_range
                if sorted(out.series[t], key=row_key)
                != sorted(out.series.get(t - 1, []), key=row_key)
            }
            self.relations[name] = RelationData(columns, dict(out.series), changes)


def _last(indices: list[int], n: int | None) -> list[int]:
    if n is None:
        return indices
    return indices[max(len(indices) - n, 0) :] if n > 0 else []


def _column_index(columns: Sequence[tuple[str, str]], name: str) -> int:
    for k, (n, _) in enumerate(columns):
        if n.lower() == name.lower():
            return k
    raise KeyError(f"unknown partition column {name!r}")


def _output_elements(
    op: str | None, series: dict[int, list[Row]], instants: set[int]
) -> list[Element]:
    out: list[Element] = []
    for t in sorted(series):
        cur = series[t]
        prev = series.get(t - 1, [])
        if op is None or op == "istream":
            out += [(t, "+", r) for r in bag_difference(cur, prev)]
        if op is None:
            out += [(t, "-", r) for r in bag_difference(prev, cur)]
        if op == "dstream":
            out += [(t, "+", r) for r in bag_difference(prev, cur)]
        if op == "rstream" and t in instants:
            out += [(t, "+", r) for r in cur]
    return sorted(out, key=element_key)


def _relation_values(
    updates: list[tuple[int, str, Row]], lo: int, hi: int
) -> tuple[dict[int, list[Row]], set[int]]:
    """Replay a stored relation's updates: its bag at each instant and the instants of its
    valid updates (deleting a tuple that is not there is skipped, as dead-lettered)."""
    bag: list[Row] = []
    values: dict[int, list[Row]] = {}
    instants: set[int] = set()
    pending = list(updates)
    k = 0
    for t in range(lo, hi + 1):
        while k < len(pending) and pending[k][0] <= t:
            ts, op, row = pending[k]
            k += 1
            if op == "-":
                keys = [row_key(r) for r in bag]
                if row_key(row) not in keys:
                    continue
                del bag[keys.index(row_key(row))]
            else:
                bag.append(row)
            instants.add(ts)
        values[t] = sorted(bag, key=row_key)
    return values, instants


def _typed_row(schema: Schema, row: Sequence) -> Row:
    """Floats given as ints become floats."""
    return tuple(
        float(v) if t == "float" and isinstance(v, int) and not isinstance(v, bool) else v
        for (_, t), v in zip(schema, row)
    )


def evaluate_outputs(
    time_unit: str,
    streams: Mapping[str, tuple[Schema, Sequence[tuple[int, Row]]]],
    relations: Mapping[str, tuple[Schema, Sequence[tuple[int, str, Row]]]],
    queries: Sequence[tuple[str, str | ast.Query, bool]],
    max_delay: Mapping[str, int] | None = None,
    knobs: Mapping[str, Knobs] | None = None,
) -> dict[str, QueryOutput]:
    """Evaluate every query; the result holds those with a sink (``has_sink`` True).

    `streams`: name -> (schema [(column, type)], [(ts, row)] in arrival order); `relations`:
    name -> (schema, [(ts, op, row)] in arrival order, op "+" or "-"); `queries`: (name, CQL
    text or a `cql_ast` tree, has_sink) in file order — a query without a sink is a view later
    queries may read. `max_delay` (default 0 for every source): elements later than it are
    dropped, the others reordered stably by timestamp. `knobs`: per query, its QoS and window
    adjustments (default: none).
    """
    delays = dict(max_delay or {})
    stream_items = {
        name: (schema, drop_late(list(els), delays.get(name, 0)))
        for name, (schema, els) in streams.items()
    }
    relation_items = {
        name: (schema, drop_late(list(ups), delays.get(name, 0)))
        for name, (schema, ups) in relations.items()
    }
    stamps = [ts for _, els in stream_items.values() for ts, _ in els]
    stamps += [ts for _, ups in relation_items.values() for ts, _, _ in ups]
    lo, hi = (min(stamps), max(stamps)) if stamps else (0, -1)
    env = Env(time_unit, lo, hi)
    try:
        for name, (schema, els) in stream_items.items():
            elements = [(ts, _typed_row(schema, row)) for ts, row in els]
            env.streams[name] = StreamData(list(schema), elements, {ts for ts, _ in elements})
        for name, (schema, ups) in relation_items.items():
            typed = [(ts, op, _typed_row(schema, row)) for ts, op, row in ups]
            values, instants = _relation_values(typed, lo, hi)
            env.relations[name] = RelationData(list(schema), values, instants)
        results: dict[str, QueryOutput] = {}
        for name, cql, has_sink in queries:
            query = _parse(cql)
            env.knobs = (knobs or {}).get(name, Knobs())
            out = env.evaluate_query(query)
            env.add_view(name, out)
            if has_sink:
                results[name] = out
        return results
    finally:
        env.close()


def evaluate(
    time_unit: str,
    streams: Mapping[str, tuple[Schema, Sequence[tuple[int, Row]]]],
    relations: Mapping[str, tuple[Schema, Sequence[tuple[int, str, Row]]]],
    queries: Sequence[tuple[str, str | ast.Query, bool]],
    max_delay: Mapping[str, int] | None = None,
) -> dict[str, list[Element]]:
    """For every query with a sink, its output elements (ts, op, row), sorted by ts, then
    "-" before "+", then row. See `evaluate_outputs` for the arguments."""
    outs = evaluate_outputs(time_unit, streams, relations, queries, max_delay)
    return {name: out.elements for name, out in outs.items()}


def _parse(cql: str | ast.Query) -> ast.Query:
    return cql if not isinstance(cql, str) else parse_query(cql)


def output_column_names(outs: Mapping[str, QueryOutput]) -> dict[str, list[str]]:
    return {name: list(out.columns) for name, out in outs.items()}
