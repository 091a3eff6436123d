"""What the engines' NEXMark results have in common, and checking that they agree.

Every engine writes, per query, a *comparable result*: a table whose columns and meaning are the
same whatever the engine (docs/nexmark.md lists them). `from_cql` derives it from our engine's
output; the peers write it directly. Where CQL says more than a peer can (a running average at
every instant, Rstream's repetition at every instant), the comparable result keeps what both
say: the last value per key, one row per window boundary.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

__all__ = ["COLUMNS", "SLIDE_MS", "Mismatch", "compare", "from_cql", "restrict"]

SLIDE_MS = 60_000  # q5's and q7's window boundaries

# The comparable result's columns per query, in order.
COLUMNS: dict[str, tuple[str, ...]] = {
    "q0": ("auction", "bidder", "price", "channel", "url", "dateTime", "extra"),
    "q1": ("auction", "price", "bidder", "dateTime"),
    "q2": ("auction", "price"),
    "q3": ("name", "city", "state", "id"),
    "q4": ("category", "avg"),
    "q5": ("t0", "auction"),
    "q6": ("seller", "avg"),
    "q7": ("t0", "auction", "price", "bidder"),
    "q8": ("id", "name", "reserve"),
}


def from_cql(query: str, table: pa.Table) -> pa.Table:
    """The comparable result of our engine's output for `query` (columns ``_ts``, ``_op`` and
    the query's result columns, as the parquet sink writes them)."""
    if query not in COLUMNS:
        raise ValueError(f"unknown NEXMark query {query!r}")
    plus = table.filter(pc.equal(table["_op"], "+"))
    cols = [c for c in table.column_names if c not in ("_ts", "_op")]
    if query == "q4":  # Istream(C.id, AVG(...)): the last average per category
        return _last_per_key(plus, cols[0], cols[1], ("category", "avg"))
    if query == "q6":  # Istream(AVG(...), Q.seller)
        return _last_per_key(plus, cols[1], cols[0], ("seller", "avg"))
    if query in ("q5", "q7"):
        return _per_boundary(query, plus, cols)
    return pa.table([plus[c] for c in cols], names=list(COLUMNS[query]))


def _last_per_key(table: pa.Table, key: str, value: str, names: tuple[str, str]) -> pa.Table:
    ts = table["_ts"].to_numpy()
    keys = table[key].to_numpy()
    order = np.lexsort((ts, keys))  # by key, then time: the last row of each key run wins
    k = keys[order]
    last = order[np.r_[k[1:] != k[:-1], True]] if len(k) else order
    idx = pa.array(last)
    return pa.table([table[key].take(idx), table[value].take(idx)], names=list(names))


def _per_boundary(query: str, table: pa.Table, cols: list[str]) -> pa.Table:
    """Rstream repeats the window's result at every instant until the next boundary; keep the
    result of each boundary once (t0: the boundary, as the window's inclusive end)."""
    ts = table["_ts"].to_numpy()
    t0 = ts // SLIDE_MS * SLIDE_MS
    # The first instant of each boundary's period carries the whole result (rows are in time
    # order, so a period's first instant is the largest period start seen so far).
    starts = np.r_[True, t0[1:] != t0[:-1]] if len(ts) else np.zeros(0, dtype=bool)
    first = ts == np.maximum.accumulate(np.where(starts, ts, np.iinfo(np.int64).min))
    idx = pa.array(np.flatnonzero(first))
    out = pa.table(
        [pa.array(t0).take(idx), *(table[c].take(idx) for c in cols)],
        names=list(COLUMNS[query]),
    )
    if query == "q5":
        out = out.group_by(list(out.column_names)).aggregate([])
    return out


def restrict(query: str, table: pa.Table, last_instant: int) -> pa.Table:
    """Only what CQL evaluates: window boundaries up to the end of input (q5, q7)."""
    if query in ("q5", "q7") and table.num_rows:
        return table.filter(pc.less_equal(table["t0"], last_instant))
    return table


@dataclass(frozen=True)
class Mismatch:
    query: str
    engine: str
    reason: str

    def __str__(self) -> str:
        return f"{self.query}: {self.engine} disagrees with cq: {self.reason}"


def compare(query: str, engine: str, expected: pa.Table, got: pa.Table) -> Mismatch | None:
    """None when `got` holds the same rows as `expected` (as bags; floats to 1e-9 relative)."""
    names = list(COLUMNS[query])
    if list(got.column_names) != names:
        return Mismatch(query, engine, f"columns {got.column_names}, expected {names}")
    if got.num_rows != expected.num_rows:
        return Mismatch(query, engine, f"{got.num_rows} rows, expected {expected.num_rows}")
    a, b = _sorted(expected), _sorted(got)
    for name in names:
        x, y = a[name], b[name]
        if pa.types.is_floating(x.type) or pa.types.is_floating(y.type):
            xv = x.cast(pa.float64()).to_numpy(zero_copy_only=False)
            yv = y.cast(pa.float64()).to_numpy(zero_copy_only=False)
            bad = ~np.isclose(xv, yv, rtol=1e-9, atol=0.0, equal_nan=True)
        else:
            if x.type != y.type:
                y = y.cast(x.type)
            bad = ~np.asarray(
                pc.fill_null(pc.equal(x, y), False).to_numpy(zero_copy_only=False), dtype=bool
            )
        if bad.any():
            i = int(np.flatnonzero(bad)[0])
            return Mismatch(
                query,
                engine,
                f"first difference in sorted order at row {i}: "
                f"{_row(b, i)} where cq has {_row(a, i)}",
            )
    return None


def _sorted(table: pa.Table) -> pa.Table:
    return table.sort_by([(c, "ascending") for c in table.column_names])


def _row(table: pa.Table, i: int) -> dict:
    return table.slice(i, 1).to_pylist()[0]
