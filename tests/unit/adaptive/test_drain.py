"""What a window holds above its steady level until a change drains (adaptive/drain.py), the
window's own account of it (`RangeWindow.held_after`, `recent_rate`), and the estimates that
count it: a query's cost, and the keeper's estimate with what is queued."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest

from cq_service.adaptive.drain import HeldProfile, held_profile, unreleased
from cq_service.adaptive.manager import Budget, decide
from cq_service.engine.batch import Batch
from cq_service.engine.operators.range_window import RangeWindow
from cq_service.engine.queues import Heartbeat, Queue
from cq_service.types import DataType
from tests.unit.adaptive.managed_queries import GROUP, managed


def steady(rate: float, size: int) -> HeldProfile:
    """A window of `size` filled at `rate` bytes a time unit, unchanged: H(x) = r·(W − x)⁺."""
    return held_profile(lambda at: rate * np.maximum(0, size - at), 0, size, cells=size)


def within_a_cell(got: float, exact: float, per_cell: float) -> bool:
    """The grid rounds each cell the safe way: never below the exact value, at most one
    cell's worth of H above it."""
    return exact - 1e-9 <= got <= exact + per_cell + 1e-9


def test_an_unchanged_window_holds_nothing_above_its_steady_level() -> None:
    assert within_a_cell(unreleased(steady(3.0, 60), 60, 3.0), 0.0, 3.0)
    # A burst: new tuples arrive faster than the old ones leave, still nothing unreleased.
    assert within_a_cell(unreleased(steady(3.0, 60), 60, 30.0), 0.0, 3.0)


def test_a_shrink_keeps_the_old_level_until_the_new_window_is_full() -> None:
    """60 → 10 at a steady rate: the window holds r·60 until x = 10, then falls to r·10 by
    x = 60 (brief-costmodel §4); the excess over r·10 is r·50."""
    profile = steady(2.0, 60)
    assert within_a_cell(unreleased(profile, 10, 2.0), 2.0 * 50, 2.0)
    assert within_a_cell(unreleased(profile, 10, 2.0) + 2.0 * 10, profile.now, 2.0)
    # A window of size 0 keeps nothing new: what it holds now is all excess.
    assert unreleased(profile, 0, 2.0) == pytest.approx(profile.now)
    # The grid never makes it smaller than the exact maximum, and a coarse grid errs high.
    coarse = held_profile(lambda at: 2.0 * np.maximum(0, 60 - at), 0, 60, cells=7)
    assert unreleased(coarse, 10, 2.0) >= 2.0 * 50


def test_a_burst_after_a_shrink_counts_the_old_tuples_and_the_new() -> None:
    """Held now: 60 units at rate 1; from now on 10 units at rate 10. The peak of
    H(x) + 10·min(x, 10) is at x = 10: 50 + 100."""
    profile = steady(1.0, 60)
    level = 10.0 * 10 + unreleased(profile, 10, 10.0)
    assert within_a_cell(level, 150.0, 1.0)


def window(size: int) -> tuple[RangeWindow, Queue]:
    inq, out = Queue("in"), Queue("out")
    out.reader()
    w = RangeWindow("w", [inq.reader()], out, size, None, None)
    w.out_types = [DataType.INT]
    return w, inq


def feed(w: RangeWindow, inq: Queue, lo: int, hi: int) -> None:
    """One tuple an instant for [lo, hi), ten to a batch, then a heartbeat at hi − 1."""
    for start in range(lo, hi, 10):
        ts = np.arange(start, min(start + 10, hi), dtype=np.int64)
        inq.push(Batch((pa.array(ts),), ts, np.ones(len(ts), np.int64)))
    inq.push(Heartbeat(hi - 1))
    while w.runnable():
        w.run(1 << 20)


def test_a_window_tells_what_it_will_still_hold_after_a_shrink() -> None:
    w, inq = window(50)
    feed(w, inq, 0, 100)
    w.adjust(size=10)  # from instant 100: the tuples already in keep their 50
    feed(w, inq, 100, 120)
    rows, nbytes = w.state_size()
    per_row = nbytes / rows
    # old tuples t ≤ 99 leave at t + 51, new ones at t + 11; held at 119: t ≥ 69 and t ≥ 109
    assert rows == 31 + 11
    xs = np.array([0, 5, 10, 20, 31, 40], dtype=np.int64)
    held = w.held_after(w.seen + xs) / per_row
    expected = [len([t for t in range(69, 100) if t + 51 > 119 + x])
                + len([t for t in range(109, 120) if t + 11 > 119 + x]) for x in xs]
    assert held.tolist() == pytest.approx(expected)
    assert w.longest_stay == 51
    # What it took in lately: one tuple an instant (as bytes per time unit).
    assert w.recent_rate(10) / per_row == pytest.approx(1.0)


def test_a_querys_cost_adds_what_its_windows_have_not_released(tmp_path) -> None:
    q = managed(tmp_path, cql=GROUP, qos="{window: [1000, 60000]}", d=10.0)
    settings = {w.label: (10_000, 1) for w in q.windows}
    plain = q.cost(settings).memory
    label = q.windows[0].label
    rate = 100.0  # bytes a time unit, as held now at 60 s
    q.held = {label: steady_grid(rate, 60_000)}
    q._cache.clear()
    with_held = q.cost(settings).memory
    from cq_service.adaptive.estimate import estimate_plan

    est = estimate_plan(q.plan, q.observed, windows={q.windows[0].node: (10_000, 1)})
    modelled = est[q.windows[0].node].bytes / 10_000
    per_unit = max(modelled, q.held[label].recent)
    assert with_held == pytest.approx(plain + unreleased(q.held[label], 10_000, per_unit))
    assert with_held > plain + 0.5 * rate * 50_000  # most of the old 60 s is still held


def steady_grid(rate: float, size: int, recent: float = 0.0) -> HeldProfile:
    return held_profile(lambda at: rate * np.maximum(0, size - at), 0, size, recent=recent)


def test_a_recent_burst_raises_the_estimate_before_the_rates_know_it(tmp_path) -> None:
    q = managed(tmp_path, cql=GROUP, qos="{window: [1000, 60000]}", d=10.0)
    label = q.windows[0].node, q.windows[0].label
    settings = {label[1]: (20_000, 1)}
    calm = q.cost(settings).memory
    from cq_service.adaptive.estimate import estimate_plan

    modelled = estimate_plan(q.plan, q.observed, windows={label[0]: (20_000, 1)})[label[0]].bytes
    burst = 10 * modelled / 20_000  # ten times the model's rate, as the window admitted lately
    q.held = {label[1]: HeldProfile((0,), (0.0,), burst)}
    q._cache.clear()
    assert q.cost(settings).memory == pytest.approx(calm + 9 * modelled)


def test_a_floor_no_setting_can_release_is_reported_as_not_fitting(tmp_path) -> None:
    """What the windows hold now leaves when it was told to; if it alone passes the budget,
    no choice fits (the keeper then takes the minimum settings and sheds only for the
    steady state, or paces a pausable source)."""
    q = managed(tmp_path, cql=GROUP, qos="{window: [1000, 60000]}", d=10.0)
    q.held = {q.windows[0].label: steady_grid(1_000.0, 60_000)}
    decision = decide([q], Budget(1_000.0 * 30_000))
    assert not decision.fits
