"""Selectivities and costs measured while running, for the priority policies.

Both are per byte of input, since memory is what is being minimised: σ = bytes written /
bytes read, c = seconds in `run` / bytes read. Time is cut into windows (`refresh`); each
window's figures are blended with the previous estimate, so priorities follow drift without
jumping on one noisy window. An operator that has read nothing yet keeps σ = 1 and the
median cost of the others.

Once an operator has run often enough for its `run_cost` fit (engine/run_cost.py), its cost is
that fit's per-byte part: a run of a few rows is mostly fixed cost, and counting that in c
would make an operator that usually sees small batches look slow.
"""

from __future__ import annotations

from dataclasses import dataclass

from cq_service.engine.operators.base import Operator

__all__ = ["Estimate", "OperatorStatistics"]

MIN_SELECTIVITY = 1e-6  # a filter that passed nothing yet may still pass something
MIN_COST = 1e-12  # seconds per byte
DEFAULT_COST = 1e-8
BLEND = 0.5  # weight of the newest window
DRIFT = 0.2  # relative change of σ or c that triggers new priorities


@dataclass
class Estimate:
    selectivity: float = 1.0
    cost: float = 0.0  # 0: nothing measured yet
    bytes_in: int = 0  # counters at the last refresh
    bytes_out: int = 0
    seconds: float = 0.0


class OperatorStatistics:
    def __init__(self) -> None:
        self.estimates: dict[int, Estimate] = {}
        self._median_cost: float | None = None  # of the measured costs; None: to recompute

    def refresh(self, operators: list[Operator]) -> bool:
        """Close the current window; True if an estimate drifted by more than `DRIFT`."""
        drifted = False
        for op in operators:
            e = self.estimates.get(id(op))
            if e is None:
                e = self.estimates[id(op)] = Estimate(
                    bytes_in=op.bytes_in, bytes_out=op.bytes_out, seconds=op.busy_seconds
                )
                drifted = True
                continue
            b_in, b_out, secs = op.bytes_in, op.bytes_out, op.busy_seconds
            d_in = b_in - e.bytes_in
            if d_in > 0:
                sel = max((b_out - e.bytes_out) / d_in, MIN_SELECTIVITY)
                _, per_byte = op.run_cost.fit()
                cost = max(per_byte or (secs - e.seconds) / d_in, MIN_COST)
                if e.cost == 0.0:
                    new_sel, new_cost = sel, cost
                else:
                    new_sel = BLEND * sel + (1 - BLEND) * e.selectivity
                    new_cost = BLEND * cost + (1 - BLEND) * e.cost
                drifted |= _changed(e.selectivity, new_sel) or _changed(e.cost, new_cost)
                e.selectivity, e.cost = new_sel, new_cost
                e.bytes_in, e.bytes_out, e.seconds = b_in, b_out, secs
                self._median_cost = None
        return drifted

    def forget(self, keep: list[Operator]) -> None:
        ids = {id(op) for op in keep}
        self.estimates = {k: v for k, v in self.estimates.items() if k in ids}
        self._median_cost = None

    def selectivity(self, op: Operator) -> float:
        e = self.estimates.get(id(op))
        return e.selectivity if e is not None else 1.0

    def cost(self, op: Operator) -> float:
        e = self.estimates.get(id(op))
        if e is not None and e.cost > 0:
            return e.cost
        if self._median_cost is None:
            known = sorted(x.cost for x in self.estimates.values() if x.cost > 0)
            self._median_cost = known[len(known) // 2] if known else DEFAULT_COST
        return self._median_cost

    def set(self, op: Operator, selectivity: float, cost: float) -> None:
        """Fix an operator's figures (tests, and statistics loaded from elsewhere)."""
        e = self.estimates.setdefault(id(op), Estimate())
        e.selectivity, e.cost = selectivity, cost
        e.bytes_in, e.bytes_out, e.seconds = op.bytes_in, op.bytes_out, op.busy_seconds
        self._median_cost = None


def _changed(old: float, new: float) -> bool:
    return abs(new - old) > DRIFT * max(abs(old), 1e-300)
