"""Failpoints: named places in the worker where a test can make it die, for real.

A crash test needs kills at exact moments — between a checkpoint's flush and its catalog write,
half-way through a deployment — that a kill from outside hits only by luck. The worker calls
`hit(name)` at those places; `arm("checkpoint.saved=3")` makes the third hit of that point
SIGKILL the process (no clean-up, no final checkpoint: what a power cut or the OOM killer
does). The worker arms them from its `failpoints` setting (CQ_FAILPOINTS), which is empty
unless a test sets it; unarmed, `hit` is one dictionary lookup.

The points (docs/service.md, "Crash safety"):

- ``checkpoint.flushed``: the sinks are flushed, nothing is recorded yet;
- ``checkpoint.saved``: the catalog holds the checkpoint, the offsets are not committed yet;
- ``snapshot.writing``: half-way through writing a state snapshot (its payload is in a
  temporary file, not yet in place);
- ``snapshot.written``: a checkpoint's state snapshot is in place, the catalog does not hold
  the checkpoint yet (the snapshot's frontiers are newer than the catalog's);
- ``deploy.stopped``: a deployment stopped the queries it replaces or removes, and started
  nothing yet;
- ``deploy.started``: a deployment started its new queries, and recorded nothing yet.
"""

from __future__ import annotations

import os
import signal

__all__ = ["POINTS", "FailpointError", "arm", "check_failpoints", "hit"]

POINTS = frozenset({
    "checkpoint.flushed", "checkpoint.saved", "deploy.stopped", "deploy.started",
    "snapshot.writing", "snapshot.written",
})

_armed: dict[str, int] = {}  # point -> hits left before the kill


class FailpointError(ValueError):
    """A failpoint setting that does not parse or names no point."""


def arm(spec: str) -> None:
    """Arm points from ``NAME=N[,NAME=N…]``: the N-th hit of NAME kills the process (an
    empty `spec` disarms every point)."""
    _armed.clear()
    _armed.update(check_failpoints(spec))


def check_failpoints(spec: str) -> dict[str, int]:
    """The points and counts of a ``NAME=N[,NAME=N…]`` setting; FailpointError if it is bad."""
    armed: dict[str, int] = {}
    for part in filter(None, (p.strip() for p in spec.split(","))):
        name, _, count = part.partition("=")
        name = name.strip()
        if name not in POINTS:
            known = ", ".join(sorted(POINTS))
            raise FailpointError(f"unknown failpoint {name!r} (known: {known})")
        try:
            n = int(count or "1")
        except ValueError:
            raise FailpointError(f"failpoint {name}: {count!r} is not a count") from None
        if n < 1:
            raise FailpointError(f"failpoint {name}: the count must be at least 1")
        armed[name] = n
    return armed


def hit(name: str) -> None:
    """Pass failpoint `name`: if it is armed and this is its N-th hit, SIGKILL the process."""
    left = _armed.get(name)
    if left is None:
        return
    if left <= 1:
        os.kill(os.getpid(), signal.SIGKILL)
    _armed[name] = left - 1
