"""One pass or one conjunct at a time: which way a selection evaluates its predicate, chosen
by what each way measured (docs/adaptive.md, "One pass or ordered").

Evaluating the conjuncts one at a time, each on the rows the ones before it kept, saves the
work of the later conjuncts on the dropped rows but pays a call per conjunct and a gather of
the surviving rows' columns before each. Evaluating the whole predicate in one pass does every
conjunct on every row with no gather. Which is cheaper depends on the conjuncts' costs, their
selectivities and the batch size: three comparisons on batches of 1,000 rows are cheaper in
one pass; a substring search behind comparisons that drop most rows is cheaper ordered. Both
give the same rows, so the choice is free to change at any batch.

`PassChooser` keeps a decayed time per row of each way, measured on the batches it ran. It
starts ordered (the orderer needs batches to learn an order), tries one pass after `WARMUP`
batches, then runs the cheaper way, and the other one again once the time spent on the cheaper
way since the other last ran is `1 / EXPLORE_SHARE` times what one batch the other way is
expected to cost: trying the dearer way costs at most about `EXPLORE_SHARE` of the time, and a
drift in either way is noticed (the orderer also keeps seeing some batches while one pass
wins). Between two ways that cost about the same the other is tried every 20 batches or so;
when the other costs five times as much, every 100. When the orderer changes its order, the
ordered way's figure is forgotten and that way runs next (`order_changed`). A batch's figure
is held to `SPIKE` times the way's current one, so one preempted batch does not flip the choice
(a real rise passes in a few batches).
"""

from __future__ import annotations

__all__ = ["PassChooser"]


class PassChooser:
    """Whether the next batch is evaluated in one pass (`whole`) or conjunct by conjunct."""

    WARMUP = 8  # ordered batches before the first one-pass batch
    EXPLORE_SHARE = 0.05  # at most about this share of the time goes to the dearer way
    DECAY = 0.8  # weight of a way's past batches at each batch it runs
    SPIKE = 2.0  # a batch's time per row is held to this many times the way's current figure

    def __init__(self) -> None:
        self._seconds = [0.0, 0.0]  # decayed, by way: 0 ordered, 1 one pass
        self._rows = [0.0, 0.0]
        self._batches = 0
        self._rows_last = 0  # rows of the last batch
        self._since_other = 0.0  # seconds on the preferred way since the other one ran
        self.whole_batches = 0  # batches run in one pass

    def cost(self, whole: bool) -> float | None:
        """Seconds per row of that way (decayed), None before it ran."""
        rows = self._rows[whole]
        return self._seconds[whole] / rows if rows else None

    def prefers_one_pass(self) -> bool:
        """Whether one pass measured cheaper than the order so far."""
        ordered, one_pass = self.cost(False), self.cost(True)
        return ordered is not None and one_pass is not None and one_pass < ordered

    def whole(self) -> bool:
        """The way of the next batch: True for one pass."""
        if self._batches < self.WARMUP:
            return False
        if self.cost(True) is None:
            return True  # one pass not tried yet
        if self.cost(False) is None:
            return False  # the order changed since the ordered way was measured
        preferred = self.prefers_one_pass()
        other = self.cost(not preferred)
        assert other is not None
        due = self._since_other * self.EXPLORE_SHARE >= other * self._rows_last
        return not preferred if due else preferred

    def order_changed(self) -> None:
        """The orderer changed its order: what the ordered way measured was another order's,
        so it is forgotten and measured again on the next batch (an order learnt while one
        pass ran, from one-pass batches, is tried at once instead of at the next exploration,
        which may be a hundred batches away)."""
        self._seconds[False] = self._rows[False] = 0.0
        self._since_other = 0.0

    def record(self, whole: bool, seconds: float, rows: int) -> None:
        """A batch of `rows` rows took `seconds` the `whole` way."""
        preferred = self.prefers_one_pass()
        self._batches += 1
        self._rows_last = rows
        self.whole_batches += whole
        current = self.cost(whole)
        if current is not None:  # a preempted batch (a shared machine, a GC pause) is held back
            seconds = min(seconds, self.SPIKE * current * rows)
        self._seconds[whole] = self._seconds[whole] * self.DECAY + seconds
        self._rows[whole] = self._rows[whole] * self.DECAY + rows
        if preferred != self.prefers_one_pass():
            self._since_other = 0.0  # the preference changed: count from here
        elif whole == preferred:
            self._since_other += seconds
        else:
            self._since_other = 0.0
