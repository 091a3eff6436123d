"""Pacing the sources so each deployment's memory stays inside its budget between rounds.

The resource manager's rounds (budgets.py) choose settings that fit; between rounds, and while
a change has not released what it holds, a burst can still fill a deployment faster than any
setting can help. So at every turn of the worker's loop, after the keeper has sampled each
deployment (its operators' state and what is queued for it), the pacing decides how much each
source that can be paused may read:

- A pausable source (one whose reader has `pause`: a Kafka topic, where records wait without
  cost — the lag grows, memory does not) reads at most the rows that fit in the room its
  deployments have left: (budget − sampled) / (4 × its bytes per row), since a row is counted
  more than once on its way (queued, then in a window and its output queue, then as the
  results it causes until the sink takes them); and at most `READ_SHARE` of the budget a
  read, so that catching up, a burst cannot fill the budget between two rounds. With no room it is paused
  (`reader.pause()`), and a round of the resource manager is asked for at once rather than at
  the next interval — as it is whenever a sample passes the level the rounds aim at, or the
  last round's estimate by `grow_margin` of the budget (a burst the model has not seen yet),
  or has grown by half `grow_margin` of the budget since the last round it asked for; at most
  every `ROUND_EVERY_S` per deployment, unless it grew that much.
- A paused source resumes (hysteresis) when its deployments have a reserve's worth of room
  again (`memory_reserve` of the budget), or when waiting cannot help: what is queued for the
  deployment no longer falls (nothing is, or what is waits for the input held back, such as
  a join's other side) and a round has run since — application time stands still while the
  input waits, so the state it holds cannot fall. Then it reads `STUCK_ROWS` a turn: the
  budget cannot be held at the settings the ranges allow without losing input, and the
  samples over the budget are counted (`cq_memory_samples_over_budget_total`).
- A source that cannot be paused (a file, a generator) is read as before; its deployments
  hold the budget by the rounds' settings and, past every range, by shedding.

A source read by several deployments takes the smallest room among them.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable
from dataclasses import dataclass

from cq_service.service.budgets import BudgetKeeper
from cq_service.service.running import Runtime

__all__ = ["READ_SHARE", "STUCK_ROWS", "Pacing", "SourcePace"]

log = logging.getLogger("cq.pacing")

STUCK_ROWS = 256  # rows a turn a paused source reads when waiting cannot help
# A row read is counted more than once until it has gone through: queued, then in a window
# and in the window's output queue, then as the results it causes waiting for the sink.
IN_FLIGHT = 4.0
ROUND_EVERY_S = 0.25  # the least time between two rounds the pacing asks for, per deployment
DEFAULT_ROW_BYTES = 64.0  # a source's bytes per row before it has read any
READ_SHARE = 0.05  # the most of a budget one read of a paced source may fill


@dataclass
class SourcePace:
    """One pausable source: paused for a budget or not, how often, and its last limit."""

    paused: bool = False
    pauses: int = 0
    limit: int | None = None  # rows a read may return now (None: no limit)
    stuck: bool = False  # reading on although no deployment has room (see the module doc)


class Pacing:
    def __init__(self, rt: Runtime, keeper: BudgetKeeper, round_now: Callable[[str], None]):
        self.rt = rt
        self.keeper = keeper
        self.round_now = round_now  # runs one round of the resource manager for a deployment
        self.sources: dict[str, SourcePace] = {}
        self._asked: dict[str, tuple[float, float]] = {}  # deployment -> (when, sampled then)
        self._round_after_drain: dict[str, bool] = {}  # a round ran since its queue stopped
        self._queued: dict[str, int] = {}  # deployment -> bytes queued at the last look
        self._margin = rt.config.grow_margin
        self._aim = 1 - self._margin / 2  # of the target: where the rounds aim

    def turn(self) -> set[str]:
        """Sample every deployment with a budget and pace the sources; the keys of the
        sources not to read this turn."""
        self.keeper.sample()
        readers = self._deployments_by_source()
        skip = set()
        for key, deployments in readers.items():
            running = self.rt.sources.get(key)
            if running is None or not hasattr(running.reader, "pause"):
                continue
            pace = self.sources.setdefault(key, SourcePace())
            rooms = [self._room(d) for d in deployments]
            rooms = [r for r in rooms if r is not None]
            if not rooms:
                self._set_limit(key, pace, None)
                if pace.paused:
                    self._resume(key, pace)
                continue
            room = min(r[0] for r in rooms)
            reserve = min(r[1] for r in rooms)
            rows = self._rows_for(key, room, min(r[2] for r in rooms))
            for d in deployments:
                state = self.keeper.states.get(d)
                if state is not None and (
                    state.now > state.budget.target * self._aim
                    or state.now > state.estimated.memory + state.budget.target * self._margin
                    or self._grown(d)
                ):  # past the planned level, above the estimate, or growing: a round now
                    self._ask_round(d)
            if pace.paused:
                if (room >= reserve and rows > 0) or self._cannot_drain(deployments):
                    self._resume(key, pace)
                else:
                    skip.add(key)
                    continue
            if rows > 0:
                pace.stuck = False
            elif pace.stuck or self._cannot_drain(deployments):
                if not pace.stuck:
                    log.warning(
                        "source %s: its deployments %s are at their budget with nothing left "
                        "to drain; reading on (%d rows a turn): their budget cannot hold this "
                        "input at the settings their ranges allow", key, sorted(deployments),
                        STUCK_ROWS,
                    )
                pace.stuck = True
                rows = STUCK_ROWS
            else:
                self._pause(key, pace)
                for d in deployments:
                    self._round_after_drain[d] = False
                    self._ask_round(d)
                skip.add(key)
                continue
            self._set_limit(key, pace, rows)
        for key in [k for k in self.sources if k not in readers]:
            del self.sources[key]
        return skip

    # -- the deployments ------------------------------------------------------------------------

    def _deployments_by_source(self) -> dict[str, set[str]]:
        out: dict[str, set[str]] = {}
        for q in self.rt.queries.values():
            for key in q.source_keys.values():
                out.setdefault(key, set()).add(q.pipeline)
        return out

    def _room(self, deployment: str) -> tuple[float, float, float] | None:
        """(bytes left under the budget now, the reserve, the budget), None without a memory
        budget."""
        state = self.keeper.states.get(deployment)
        if state is None or not math.isfinite(state.budget.memory):
            return None
        budget = state.budget
        return budget.memory - state.now, max(budget.reserve, 0.0), budget.memory

    def _cannot_drain(self, deployments: set[str]) -> bool:
        """What is queued for each of `deployments` no longer falls (nothing is queued, or
        what is waits for input that is held back, such as a join's other side) and a round
        has run for each since: waiting cannot lower what they hold."""
        ready = True
        for d in deployments:
            queued = self.rt.engine.queued_of(d)
            before = self._queued.get(d)
            self._queued[d] = queued
            if queued > 0 and (before is None or queued < before):
                self._round_after_drain[d] = False
                ready = False
            elif not self._round_after_drain.get(d, False):
                self._round_after_drain[d] = True
                self._ask_round(d, force=True)
                ready = False
        return ready

    def _ask_round(self, deployment: str, force: bool = False) -> None:
        """A round now, unless one ran less than `ROUND_EVERY_S` ago and the deployment has
        grown by less than half `grow_margin` of its budget since (catching up, the input moves
        faster than the clock)."""
        now = time.monotonic()
        last, _ = self._asked.get(deployment, (0.0, 0.0))
        if not force and now - last < ROUND_EVERY_S and not self._grown(deployment):
            return
        state = self.keeper.states.get(deployment)
        self._asked[deployment] = (now, state.now if state is not None else 0.0)
        self.round_now(deployment)

    def _grown(self, deployment: str) -> bool:
        """The deployment's sample grew by half `grow_margin` of its budget since the last
        round the pacing asked for."""
        state = self.keeper.states.get(deployment)
        if state is None:
            return False
        _, at = self._asked.get(deployment, (0.0, 0.0))
        return state.now - at > self._margin / 2 * state.budget.target

    # -- the sources ----------------------------------------------------------------------------

    def _rows_for(self, key: str, room: float, budget: float) -> int:
        """Rows a read may take: what fits the room, and at most `READ_SHARE` of the budget,
        so a round can follow before a burst has filled it."""
        out = self.rt.engine.sources[key].output
        row_bytes = out.total_bytes / out.total_rows if out.total_rows else DEFAULT_ROW_BYTES
        allowed = min(room, READ_SHARE * budget)
        return max(0, int(allowed / (IN_FLIGHT * max(row_bytes, 1.0))))

    def _set_limit(self, key: str, pace: SourcePace, rows: int | None) -> None:
        reader = self.rt.sources[key].reader
        if rows is not None:
            rows = min(rows, self.rt.config.batch_rows)
        if rows != pace.limit and hasattr(reader, "limit_reads"):
            reader.limit_reads(rows)
        pace.limit = rows

    def _pause(self, key: str, pace: SourcePace) -> None:
        pace.paused = True
        pace.pauses += 1
        self.rt.sources[key].reader.pause()
        log.info("source %s paused: its deployments' memory is at their budget", key)

    def _resume(self, key: str, pace: SourcePace) -> None:
        pace.paused = False
        self.rt.sources[key].reader.resume()
        log.info("source %s resumed", key)
