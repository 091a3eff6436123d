"""The one error root, and the source positions errors carry.

Every error a user can cause (a bad pipeline file, a CQL syntax or name error, an unsupported
construct) is a `CQError` with a `Span`; `render()` gives ``FILE:LINE:COL: message``.

A dependency that cannot be reached now — a Kafka broker, the catalog database — is an
`Unreachable` error carrying an `Outage`: the same call may succeed later, so the worker retries
it instead of failing (docs/service.md, "When Kafka or the catalog is away").
"""

from __future__ import annotations

import time
from dataclasses import dataclass

__all__ = [
    "AdjustmentError",
    "CQError",
    "CQLError",
    "EngineError",
    "Outage",
    "Span",
    "SpecError",
    "Unreachable",
]


@dataclass(frozen=True)
class Span:
    """A position in a source text: 1-based line and column, plus the file it came from.

    `offset`/`end` are 0-based character offsets into the text the span was made from (the CQL
    query text for CQL spans), when known.
    """

    line: int = 1
    col: int = 1
    end_line: int | None = None
    end_col: int | None = None
    offset: int | None = None
    end: int | None = None
    file: str | None = None

    def shifted(self, line: int, col: int, file: str | None = None) -> Span:
        """This span, for a text that starts at (`line`, `col`) of an enclosing file.

        Used to map a position inside a CQL query back into the YAML file holding it: a span on
        the query's first line moves right by the query's starting column; later lines keep
        their column (block scalars) — callers pass the indentation as `col` for those.
        """
        first = self.line == 1
        return Span(
            line=self.line + line - 1,
            col=self.col + (col - 1 if first else 0),
            end_line=None if self.end_line is None else self.end_line + line - 1,
            end_col=self.end_col,
            offset=self.offset,
            end=self.end,
            file=file if file is not None else self.file,
        )


class CQError(Exception):
    """Root of every error cq-service raises on purpose."""

    def __init__(self, message: str, span: Span | None = None, *, file: str | None = None):
        super().__init__(message)
        self.message = message
        self.span = span
        self.file = file if file is not None else (span.file if span else None)

    def render(self) -> str:
        """``FILE:LINE:COL: message`` (parts that are unknown are left out)."""
        where = []
        if self.file:
            where.append(self.file)
        if self.span is not None:
            where.append(str(self.span.line))
            where.append(str(self.span.col))
        prefix = ":".join(where)
        return f"{prefix}: {self.message}" if prefix else self.message

    def lines(self) -> list[str]:
        """Each problem as one ``FILE:LINE:COL: message`` line."""
        return [self.render()]

    def __str__(self) -> str:
        return self.render()


class SpecError(CQError):
    """A pipeline file that is malformed or inconsistent."""


class CQLError(CQError):
    """A CQL query that does not parse, bind or plan."""


class EngineError(CQError):
    """A failure while running a pipeline."""


class AdjustmentError(CQError):
    """A window adjustment that cannot be made: no such query or window, a value out of range,
    an instant already past, or a malformed line of an adjustment log."""


@dataclass(frozen=True)
class Outage:
    """A dependency that cannot be reached now: which (`dependency`, e.g. ``kafka
    127.0.0.1:9092``), who needs it (`role`, e.g. ``sink topic out``; may be empty), why
    (`reason`, e.g. ``connection refused``) and since when (`since`, seconds since the epoch)."""

    dependency: str
    role: str
    reason: str
    since: float

    def describe(self) -> str:
        """``kafka 127.0.0.1:9092: sink topic out: connection refused since 12:03:04 UTC``."""
        at = time.strftime("%H:%M:%S", time.gmtime(self.since))
        who = f"{self.role}: " if self.role else ""
        return f"{self.dependency}: {who}{self.reason} since {at} UTC"

    def again(self, reason: str) -> Outage:
        """The same outage, still going on, now for `reason` (it keeps its start)."""
        return Outage(self.dependency, self.role, reason, self.since)


class Unreachable(CQError):
    """A dependency cannot be reached now (`outage` says which and why); the call that raised
    it may succeed later and is retried, never taken as the user's mistake."""

    def __init__(self, outage: Outage, span: Span | None = None):
        super().__init__(outage.describe(), span)
        self.outage = outage
