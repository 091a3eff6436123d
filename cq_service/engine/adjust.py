"""Changing a query's window sizes and granularity while it runs, on record.

A query's QoS makes its Range windows adjustable (plan/knobs.py); each is a `RangeWindow` whose
`query` is the query (in a live engine, pass the operators of the query's deployment only).
`adjust` changes one knob of one query:

- ``window`` sets the size of every adjustable window of the query, ``window:NAME`` of those on
  FROM item NAME (alias or name, any case);
- ``granularity`` sets Γ's granularity on all of them.

All windows one call changes switch at the same instant `since`: the first instant every one of
them can change from (`RangeWindow.earliest_change`), or the caller's `at` (a replayed log).
Tuples with a timestamp ≥ since get the new value; tuples already in a window keep theirs. Each
window changed gives one `Adjustment`, which is everything needed to replay the run exactly:
`cq run --adjustments` and the reference evaluator apply the same records at the same instants.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import asdict, dataclass
from pathlib import Path

from cq_service.engine.operators.base import NEVER, Operator
from cq_service.engine.operators.range_window import RangeWindow
from cq_service.errors import AdjustmentError, Span

__all__ = [
    "KNOBS",
    "Adjustment",
    "adjust",
    "adjustable",
    "on_item",
    "parse_knob",
    "read_log",
    "replay",
    "write_log",
]

KNOBS = ("window", "granularity")


@dataclass(frozen=True)
class Adjustment:
    """One window of `query` (FROM item `window`) given `knob` = `new` from instant `since`."""

    query: str
    window: str
    knob: str  # "window" (the size) or "granularity", in time_unit
    old: int
    new: int
    since: int
    reason: str = ""

    def to_json(self) -> dict:
        return asdict(self)

    @staticmethod
    def from_json(d: dict) -> Adjustment:
        """Raises ValueError naming what is missing or mistyped."""
        if not isinstance(d, dict):
            raise ValueError("an adjustment is a JSON object")
        fields = {"query": str, "window": str, "knob": str, "old": int, "new": int, "since": int}
        for name, typ in fields.items():
            v = d.get(name)
            if not isinstance(v, typ) or isinstance(v, bool):
                raise ValueError(f"'{name}' must be {'a string' if typ is str else 'an integer'}")
        if d["knob"] not in KNOBS:
            raise ValueError(f"'knob' must be one of {', '.join(KNOBS)}")
        return Adjustment(
            d["query"], d["window"], d["knob"], d["old"], d["new"], d["since"],
            str(d.get("reason", "")),
        )


def read_log(path: str | Path) -> list[Adjustment]:
    """An adjustment log: one `Adjustment` as a JSON object per line (blank lines skipped).
    Raises AdjustmentError with the file and line of the first bad one."""
    out = []
    with open(path, encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                out.append(Adjustment.from_json(json.loads(line)))
            except ValueError as e:  # json.JSONDecodeError is one
                raise AdjustmentError(f"bad adjustment: {e}", Span(n, 1), file=str(path)) from None
    return out


def write_log(path: str | Path, records: Iterable[Adjustment]) -> None:
    with open(path, "w", encoding="utf-8") as f:
        for r in records:
            f.write(json.dumps(r.to_json()) + "\n")


def parse_knob(knob: str) -> tuple[str, str | None]:
    """``window`` → ("window", None); ``window:NAME`` → ("window", NAME); ``granularity``."""
    kind, _, name = knob.partition(":")
    if kind not in KNOBS or (kind == "granularity" and name):
        raise AdjustmentError(f"unknown knob {knob!r}: use window, window:NAME or granularity")
    return kind, name or None


def adjustable(operators: Iterable[Operator], query: str) -> list[RangeWindow]:
    """The windows `query` may adjust, in plan order."""
    return [op for op in operators if isinstance(op, RangeWindow) and op.query == query]


def on_item(windows: list[RangeWindow], name: str | None) -> list[RangeWindow]:
    """Those of `windows` on FROM item `name` (alias or name, any case); None: all."""
    if name is None:
        return windows
    return [w for w in windows if name.lower() in {n.lower() for n in w.names}]


def adjust(
    operators: Iterable[Operator],
    query: str,
    knob: str,
    value: int,
    *,
    at: int | None = None,
    reason: str = "",
) -> list[Adjustment]:
    """Set `knob` of `query` to `value` (time_unit) from instant `at` (default: as soon as
    every window concerned can change). Raises AdjustmentError when the query has no such
    window, for a value out of range or an `at` that is too early."""
    kind, name = parse_knob(knob)
    targets = on_item(adjustable(operators, query), name)
    if not targets:
        what = f"adjustable window on {name}" if name else "adjustable windows"
        raise AdjustmentError(f"query {query!r} has no {what}")
    since = max(w.earliest_change(value if kind == "granularity" else None) for w in targets)
    if at is not None:
        if at < since:
            raise AdjustmentError(
                f"query {query!r}: {knob} cannot change from instant {at}; the earliest is {since}"
            )
        since = at
    return [_set(w, query, kind, value, since, reason) for w in targets]


def replay(operators: Iterable[Operator], records: Iterable[Adjustment]) -> list[Adjustment]:
    """Make the changes of a log at the instants it gives (before the run reaches them);
    returns them as made. Raises AdjustmentError for a window the plan does not have or a
    change it cannot make."""
    windows = list(operators)
    out = []
    for r in sorted(records, key=lambda r: r.since):
        targets = [w for w in adjustable(windows, r.query) if w.label == r.window]
        if not targets:
            raise AdjustmentError(f"query {r.query!r} has no adjustable window {r.window!r}")
        at = None if r.since == NEVER else r.since
        out.extend(_set(w, r.query, r.knob, r.new, at, r.reason) for w in targets)
    return out


def _set(
    w: RangeWindow, query: str, knob: str, value: int, at: int | None, reason: str
) -> Adjustment:
    """Give window `w` `knob` = `value` from `at`, as a record."""
    old = w.size if knob == "window" else w.granularity
    try:
        if knob == "window":
            setting = w.adjust(size=value, at=at)
        else:
            setting = w.adjust(granularity=value, at=at)
    except ValueError as e:
        raise AdjustmentError(f"query {query!r}: {e}") from None
    return Adjustment(query, w.label, knob, old, value, setting.since, reason)
