"""StreaMon: the engine's one profiler/re-optimizer framework (docs/adaptive.md, "StreaMon").

An adaptive part of a running plan (a selection's conjunct order, ...) is watched by a
`Profiler` (the statistics it keeps: sampled, over a window) and steered by a `ReOptimizer`,
which says when those statistics changed significantly (`significant`) and then changes the
plan between steps (`reoptimize`) without changing any result. Both protocols are implemented
above the engine (cq_service/adaptive); the engine keeps only them and the registry.

The operator that owns an adaptive part makes a `Watch` of it when it is built and flags it
(`Watch.flag`) after feeding its profiler, when `significant()` says so. The executor owns a
`StreaMon` registry, fills it from its operators' `watches()` on every `replace_plan` (so an
operator's watches leave with the operator) and polls it between steps: `poll` re-optimizes
only the flagged watches, so it costs O(1) when nothing is flagged. The owner also polls its
own watch before it next uses the plan (`Watch.poll`, a selection before each slice), so a
change takes effect at the same point whether or not an executor runs it.

Example::

    watch = Watch(orderer, owner="sel1", on_change=chooser.order_changed)
    monitor = StreaMon()
    monitor.register(watch)
    orderer.observe(...)                 # the profiler's statistics
    if orderer.significant():
        watch.flag()
    monitor.poll()                       # reoptimize(); on_change() if the plan changed
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

__all__ = ["Profiler", "ReOptimizer", "StreaMon", "Watch", "WatchStatus"]


@runtime_checkable
class Profiler(Protocol):
    """Keeps the statistics it is told to watch (sampled, windowed)."""

    watches: str  # what it watches, in words (e.g. "3 conjuncts: drops, seconds per row")

    def statistics(self) -> Mapping[str, object]:
        """The current statistics over its window (small: for listings, not the hot path)."""
        ...


@runtime_checkable
class ReOptimizer(Profiler, Protocol):
    """Changes the running plan when its profiler's statistics changed significantly."""

    kind: str  # what it re-optimizes, e.g. "filter order: a-greedy"

    def significant(self) -> bool:
        """Whether the statistics changed enough since the last `reoptimize` to run it."""
        ...

    def reoptimize(self) -> bool:
        """Re-optimize (between steps); True if the plan changed."""
        ...


@dataclass(frozen=True)
class WatchStatus:
    """One registered re-optimizer as a listing shows it."""

    owner: str
    kind: str
    watches: str
    triggers: int  # re-optimizations run so far
    changes: int  # of them, those that changed the plan


class Watch:
    """A re-optimizer registered by the part of the plan it steers (`owner`); `on_change` is
    called after a re-optimization that changed the plan."""

    __slots__ = ("_monitor", "changes", "flagged", "on_change", "owner", "reoptimizer", "triggers")

    def __init__(
        self,
        reoptimizer: ReOptimizer,
        owner: str = "",
        on_change: Callable[[], None] | None = None,
    ):
        self.reoptimizer = reoptimizer
        self.owner = owner
        self.on_change = on_change
        self.flagged = False
        self.triggers = 0
        self.changes = 0
        self._monitor: StreaMon | None = None

    def flag(self) -> None:
        """A significant change: re-optimize at the next poll (its registry's, or `poll`)."""
        if self.flagged:
            return
        self.flagged = True
        if self._monitor is not None:
            self._monitor._flagged.append(self)

    def poll(self) -> bool:
        """Re-optimize now if flagged; True if the plan changed."""
        if not self.flagged:
            return False
        self.flagged = False
        self.triggers += 1
        changed = self.reoptimizer.reoptimize()
        if changed:
            self.changes += 1
            if self.on_change is not None:
                self.on_change()
        return changed

    def status(self) -> WatchStatus:
        r = self.reoptimizer
        return WatchStatus(self.owner, r.kind, r.watches, self.triggers, self.changes)


class StreaMon:
    """The registry of a running plan's re-optimizers, polled by the executor between steps."""

    def __init__(self) -> None:
        self._watches: list[Watch] = []
        self._flagged: list[Watch] = []  # in the order flagged; may hold ones polled since

    def register(self, watch: Watch) -> None:
        if watch._monitor is self:
            return
        watch._monitor = self
        self._watches.append(watch)
        if watch.flagged:
            self._flagged.append(watch)

    def unregister(self, watch: Watch) -> None:
        if watch._monitor is not self:
            return
        watch._monitor = None
        self._watches.remove(watch)
        self._flagged = [w for w in self._flagged if w is not watch]

    def replace(self, watches: Iterable[Watch]) -> None:
        """Register exactly `watches` (a new plan): the others are unregistered."""
        keep = list(watches)
        ids = {id(w) for w in keep}
        for w in list(self._watches):
            if id(w) not in ids:
                self.unregister(w)
        for w in keep:
            self.register(w)

    def poll(self) -> int:
        """Re-optimize every flagged watch (O(1) when none is); returns how many changed the
        plan."""
        if not self._flagged:
            return 0
        flagged, self._flagged = self._flagged, []
        return sum(w.poll() for w in flagged)

    def __len__(self) -> int:
        return len(self._watches)

    def statuses(self) -> list[WatchStatus]:
        """Every registered re-optimizer, in registration order."""
        return [w.status() for w in self._watches]
