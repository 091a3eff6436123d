"""Window operators (stream -> relation): Range, Now, Slide, Rows, Partition By Rows, Unbounded.

Each test feeds batches and heartbeats into the window's input queue and checks the relation
the output deltas describe at each instant, plus the ticks (instants that matter)."""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest

from cq_service.cql.logical import Call, ColRef, Const
from cq_service.engine.batch import Batch
from cq_service.engine.operators.range_window import RangeWindow
from cq_service.engine.operators.rows_window import PartitionRowsWindow, RowsWindow
from cq_service.engine.operators.unbounded_window import UnboundedWindow
from cq_service.types import DataType
from tests.unit.engine.window_harness import TYPES, B, Harness, Out

INT, STR, BOOL = DataType.INT, DataType.STRING, DataType.BOOL
def rows(*rs) -> Counter:
    return Counter(rs)


def range_w(size, slide=None, where=None):
    return lambda n, i, o: RangeWindow(n, i, o, size, slide, where)


A, Bb, C, D, E = (1, "a"), (2, "b"), (3, "c"), (4, "d"), (5, "e")
GT2 = Call("gt", (ColRef(0, INT), Const(2, INT)), BOOL)

# -- [Range T] --------------------------------------------------------------------------------


def test_range_expires_at_t_plus_size_plus_one():
    h = Harness(range_w(2))
    out = h.feed(B((1, A), (2, Bb)), 10)
    assert out.at(1) == rows(A)
    assert out.at(2) == rows(A, Bb)
    assert out.at(3) == rows(A, Bb)  # A is in [1, 3]
    assert out.at(4) == rows(Bb)  # A leaves at 1 + 2 + 1
    assert out.at(5) == rows()
    assert out.changes() == {1: rows(A), 2: rows(Bb), 4: Counter({A: -1}), 5: Counter({Bb: -1})}
    assert {1, 2, 4, 5} <= out.ticks
    assert out.heartbeats == [10]


def test_range_expiry_emitted_only_once_time_reaches_it():
    h = Harness(range_w(5))
    out = h.feed(B((1, A)), 3)
    assert out.at(100) == rows(A)  # nothing says time has reached 7 yet
    out = h.feed(6)
    assert out.at(100) == rows(A)
    out = h.feed(7)
    assert out.at(7) == rows()
    assert 7 in out.ticks


def test_range_expiry_driven_by_later_elements():
    h = Harness(range_w(1))
    out = h.feed(B((0, A)), B((5, Bb)))
    assert out.changes() == {0: rows(A), 2: Counter({A: -1}), 5: rows(Bb)}
    assert out.ticks >= {0, 2, 5}


def test_range_duplicates_and_same_instant():
    h = Harness(range_w(0))
    out = h.feed(B((3, A), (3, A), (3, Bb)), 10)
    assert out.at(3) == Counter({A: 2, Bb: 1})
    assert out.at(4) == rows()


def test_now_window_holds_only_the_current_instant():
    h = Harness(range_w(0))
    out = h.feed(B((1, A), (2, Bb), (2, C)), B((4, D)), 9)
    assert out.at(1) == rows(A)
    assert out.at(2) == rows(Bb, C)
    assert out.at(3) == rows()
    assert out.at(4) == rows(D)
    assert out.at(5) == rows()
    assert out.ticks >= {1, 2, 3, 4, 5}


def test_range_inner_where_before_the_cutoff():
    h = Harness(range_w(10, where=GT2))
    out = h.feed(B((1, A), (2, C), (3, Bb), (4, D)), 20)
    assert out.at(4) == rows(C, D)
    assert out.at(13) == rows(D)
    assert out.at(15) == rows()
    assert 1 in out.ticks and 3 in out.ticks  # arrivals still matter even when filtered out


def test_range_ticks_propagate_without_elements():
    h = Harness(range_w(3))
    out = h.feed(B(ticks=(2, 5)), 6)
    assert out.elements == []
    assert out.ticks == {2, 5}


def test_range_empty_input():
    h = Harness(range_w(3))
    out = h.feed(1, 2, 3)
    assert out.elements == [] and out.ticks == set()
    assert out.heartbeats == [1, 2, 3]


def test_range_window_state_drains():
    h = Harness(range_w(2))
    h.feed(B((1, A), (1, Bb)))
    assert h.op.state_size()[0] == 2
    h.feed(10)
    assert h.op.state_size()[0] == 0


# -- [Range T Slide L] ------------------------------------------------------------------------


def test_slide_enters_at_next_multiple_and_leaves_after_t_plus_size():
    # Range 3 Slide 2: t=1 enters at 2 and leaves at the first multiple of 2 > 4, i.e. 6;
    # t=2 enters at 2 and leaves at 6; t=4 enters at 4 and leaves at 8.
    h = Harness(range_w(3, slide=2))
    out = h.feed(B((1, A), (2, Bb), (4, C)), 20)
    assert out.at(1) == rows()
    assert out.at(2) == rows(A, Bb)
    assert out.at(3) == rows(A, Bb)
    assert out.at(4) == rows(A, Bb, C)
    assert out.at(6) == rows(C)
    assert out.at(8) == rows()
    assert out.changes() == {
        2: rows(A, Bb),
        4: rows(C),
        6: Counter({A: -1, Bb: -1}),
        8: Counter({C: -1}),
    }
    assert out.ticks >= {1, 2, 4, 6, 8}


@pytest.mark.parametrize(
    ("size", "slide", "t", "span"),
    [
        (0, 5, 1, None),  # enters at 5, must leave at the first multiple > 1: 5 -> never
        (2, 5, 1, None),  # enters at 5, leaves at the first multiple > 3: 5 -> never
        (2, 5, 3, (5, 10)),  # enters at 5, leaves at the first multiple > 5: 10
        (0, 5, 5, (5, 10)),
        (4, 5, 0, (0, 5)),
        (10, 5, 7, (10, 20)),
    ],
)
def test_slide_boundaries(size, slide, t, span):
    h = Harness(range_w(size, slide=slide))
    out = h.feed(B((t, A)), 100)
    if span is None:
        assert out.elements == []
        assert t in out.ticks
        return
    enter, leave = span
    assert out.changes() == {enter: rows(A), leave: Counter({A: -1})}
    assert {t, enter, leave} <= out.ticks


def test_slide_against_definition():
    """Brute force: at τ the window holds the tuples with ts in [t0 − T, t0], t0 = ⌊τ/L⌋·L."""
    rng = np.random.default_rng(3)
    ts = np.sort(rng.integers(0, 40, size=60)).tolist()
    elems = [(t, (k, "x")) for k, t in enumerate(ts)]
    size, slide = 7, 3
    h = Harness(range_w(size, slide=slide))
    for k in range(0, len(elems), 9):
        h.feed(B(*elems[k : k + 9]))
    out = h.feed(60)
    for tau in range(0, 61):
        t0 = tau // slide * slide
        want = Counter(row for t, row in elems if t0 - size <= t <= t0 and t <= tau)
        assert out.at(tau) == want, tau


def test_range_against_definition_with_inner_where():
    rng = np.random.default_rng(5)
    ts = np.sort(rng.integers(0, 30, size=50)).tolist()
    elems = [(t, (int(rng.integers(0, 6)), str(k))) for k, t in enumerate(ts)]
    size = 4
    h = Harness(range_w(size, where=GT2))
    for k in range(0, len(elems), 7):
        h.feed(B(*elems[k : k + 7]))
        h.feed(elems[min(k + 6, len(elems) - 1)][0] - 1)
    out = h.feed(40)
    for tau in range(0, 41):
        want = Counter(row for t, row in elems if tau - size <= t <= tau and row[0] > 2)
        assert out.at(tau) == want, tau


# -- [Rows N] ---------------------------------------------------------------------------------


def rows_w(n, where=None):
    return lambda name, i, o: RowsWindow(name, i, o, n, where)


def test_rows_keeps_the_last_n():
    h = Harness(rows_w(2))
    out = h.feed(B((1, A), (2, Bb), (3, C)), B((5, D)))
    assert out.at(1) == rows(A)
    assert out.at(2) == rows(A, Bb)
    assert out.at(3) == rows(Bb, C)
    assert out.at(4) == rows(Bb, C)  # Rows windows do not expire with time
    assert out.at(5) == rows(C, D)


def test_rows_ties_in_arrival_order():
    h = Harness(rows_w(1))
    out = h.feed(B((1, A), (1, Bb)), B((1, C)), 1)
    assert out.at(1) == rows(C)
    h2 = Harness(rows_w(2))
    out2 = h2.feed(B((1, C), (1, A), (1, Bb)))
    assert out2.at(1) == rows(A, Bb)


def test_rows_more_than_n_arrivals_at_one_instant():
    h = Harness(rows_w(2))
    out = h.feed(B((0, E)), B((1, A), (1, Bb), (1, C), (1, D)), 1)
    assert out.at(0) == rows(E)
    assert out.at(1) == rows(C, D)
    assert set(out.changes()) == {0, 1}
    assert out.changes()[1] == Counter({E: -1, C: 1, D: 1})


def test_rows_n_larger_than_input():
    h = Harness(rows_w(100))
    out = h.feed(B((1, A), (2, Bb), (2, A)), 5)
    assert out.at(5) == Counter({A: 2, Bb: 1})
    assert all(w == 1 for *_, w in out.elements)


def test_rows_duplicates_leave_one_at_a_time():
    h = Harness(rows_w(2))
    out = h.feed(B((1, A), (2, A), (3, Bb), (4, Bb)))
    assert out.at(2) == Counter({A: 2})
    assert out.at(3) == Counter({A: 1, Bb: 1})
    assert out.at(4) == Counter({Bb: 2})


def test_rows_inner_where_before_the_cutoff():
    h = Harness(rows_w(1, where=GT2))
    out = h.feed(B((1, C), (2, A), (3, Bb)), B((4, D)))
    assert out.at(3) == rows(C)  # A and B never enter, so C stays
    assert out.at(4) == rows(D)
    assert {1, 2, 3, 4} <= out.ticks


def test_rows_ticks_propagate_when_nothing_admitted():
    h = Harness(rows_w(1, where=GT2))
    out = h.feed(B((1, A), (2, Bb)), B(ticks=(7,)))
    assert out.elements == []
    assert out.ticks == {1, 2, 7}


def test_rows_against_definition():
    rng = np.random.default_rng(11)
    ts = np.sort(rng.integers(0, 15, size=80)).tolist()
    elems = [(t, (int(rng.integers(0, 3)), str(k % 4))) for k, t in enumerate(ts)]
    n = 5
    h = Harness(rows_w(n))
    for k in range(0, len(elems), 6):
        h.feed(B(*elems[k : k + 6]))
    out = h.feed(20)
    for tau in range(0, 16):
        upto = [row for t, row in elems if t <= tau]
        assert out.at(tau) == Counter(upto[-n:]), tau


# -- [Partition By … Rows N] ------------------------------------------------------------------


def part_w(n, keys=(0,), where=None):
    return lambda name, i, o: PartitionRowsWindow(name, i, o, n, keys, where)


def test_partition_rows_last_n_per_partition():
    h = Harness(part_w(1))
    out = h.feed(B((1, (1, "a")), (2, (2, "b")), (3, (1, "c")), (3, (2, "d")), (3, (2, "e"))))
    assert out.at(2) == rows((1, "a"), (2, "b"))
    assert out.at(3) == rows((1, "c"), (2, "e"))


def test_partition_null_keys_form_one_partition():
    h = Harness(part_w(2))
    out = h.feed(B((1, (None, "a")), (2, (None, "b")), (3, (None, "c")), (3, (1, "d"))))
    assert out.at(2) == rows((None, "a"), (None, "b"))
    assert out.at(3) == rows((None, "b"), (None, "c"), (1, "d"))


def test_partition_by_two_keys():
    h = Harness(part_w(1, keys=(0, 1)))
    out = h.feed(B((1, (1, "a")), (2, (1, "b")), (3, (1, "a")), (4, (None, None)), (5, (None, None))))
    assert out.at(5) == Counter({(1, "a"): 1, (1, "b"): 1, (None, None): 1})


def test_partition_inner_where_and_ticks():
    h = Harness(part_w(1, where=GT2))
    out = h.feed(B((1, (3, "a")), (2, (1, "b")), (3, (3, "c"))), B(ticks=(9,)))
    assert out.at(3) == rows((3, "c"))
    assert out.ticks == {1, 2, 3, 9}


def test_partition_against_definition():
    rng = np.random.default_rng(13)
    ts = np.sort(rng.integers(0, 12, size=70)).tolist()
    keys = [None, 1, 2]
    elems = [(t, (keys[int(rng.integers(0, 3))], str(k))) for k, t in enumerate(ts)]
    n = 3
    h = Harness(part_w(n))
    for k in range(0, len(elems), 8):
        h.feed(B(*elems[k : k + 8]))
    out = h.feed(20)
    for tau in range(0, 13):
        want: Counter = Counter()
        for key in keys:
            part = [row for t, row in elems if t <= tau and row[0] == key]
            want.update(part[-n:])
        assert out.at(tau) == want, tau


@pytest.mark.parametrize("n", [1, 2, 3, 7])
@pytest.mark.parametrize("keys", [(0,), (1,), (2,), (0, 1), (2, 1, 0)])
@pytest.mark.parametrize("slack", [0, 1 << 20])
def test_partition_vectorised_emits_what_the_per_tuple_loop_emits(n, keys, slack):
    """Element for element (order, timestamps, weights): the per-tuple loop is the contract
    the vectorised window (ring of ids, store compaction) must meet exactly."""
    types = [INT, STR, BOOL]
    rng = np.random.default_rng(n * 31 + len(keys))
    ints, strs, bools = [None, 1, 2, 3, 4], [None, "a", "b", "c"], [None, True, False]
    batches, t = [], 0
    for _ in range(25):
        elems = []
        for _ in range(int(rng.integers(0, 12))):
            t += int(rng.integers(0, 2))
            row = (
                ints[int(rng.integers(0, 5))],
                strs[int(rng.integers(0, 4))],
                bools[int(rng.integers(0, 3))],
            )
            elems.append((t, row))
        batches.append(B(*elems, ticks=(t,), types=types))

    def run(vector: bool) -> Out:
        def make(name, i, o):
            w = PartitionRowsWindow(name, i, o, n, keys, None)
            w.COMPACT_SLACK = slack
            w.RING_LIMIT = 1024 if vector else 0
            return w

        h = Harness(make, types=types)
        out = h.feed(*batches, t + 1)
        assert (h.op._stored > 0) == vector or not out.elements
        return out

    vec, loop = run(True), run(False)
    assert vec.elements == loop.elements
    assert vec.ticks == loop.ticks
    assert vec.heartbeats == loop.heartbeats


def test_partition_vectorised_state_and_compaction():
    h = Harness(part_w(2))
    h.op.COMPACT_SLACK = 0
    out = h.feed(B(*[(t, (t % 3, str(t))) for t in range(30)]))
    assert h.op.state_size()[0] == 6  # 2 per partition
    assert h.op._stored == 6  # only live tuples stay stored
    out = h.feed(B((31, (0, "x")), (31, (5, "y"))), 40)
    assert out.at(31) == rows((0, "27"), (0, "x"), (1, "28"), (1, "25"), (2, "29"), (2, "26"), (5, "y"))


def test_partition_float_keys_keep_python_equality():
    """NaN never equals NaN in Python, so each NaN is a partition of its own; -0.0 = 0.0."""
    types = [DataType.FLOAT, STR]
    h = Harness(part_w(1), types=types)
    nan = float("nan")
    out = h.feed(B((1, (nan, "a")), (2, (nan, "b")), (3, (0.0, "c")), (4, (-0.0, "d")), types=types))
    final = out.at(4)
    assert sum(final.values()) == 3
    assert Counter(r[1] for r in final.elements()) == Counter({"a": 1, "b": 1, "d": 1})


# -- Unbounded --------------------------------------------------------------------------------


def test_unbounded_keeps_everything():
    h = Harness(lambda name, i, o: UnboundedWindow(name, i, o, None))
    out = h.feed(B((1, A), (1, A), (4, Bb)), B(ticks=(6,)), 100)
    assert out.at(1) == Counter({A: 2})
    assert out.at(100) == Counter({A: 2, Bb: 1})
    assert out.ticks == {1, 4, 6}
    assert out.heartbeats == [100]


def test_unbounded_inner_where():
    h = Harness(lambda name, i, o: UnboundedWindow(name, i, o, GT2))
    out = h.feed(B((1, A), (2, C), (3, (None, "n"))))
    assert out.at(3) == rows(C)
    assert out.ticks == {1, 2, 3}


@pytest.mark.parametrize(
    "make",
    [range_w(3), range_w(3, slide=2), rows_w(2), part_w(2), lambda n, i, o: UnboundedWindow(n, i, o, None)],
    ids=["range", "slide", "rows", "partition", "unbounded"],
)
def test_every_window_passes_heartbeats_and_empty_batches(make):
    h = Harness(make)
    out = h.feed(Batch.empty(TYPES), 1, B(ticks=(3,)), 4)
    assert out.elements == []
    assert out.heartbeats == [1, 4]
    assert 3 in out.ticks


def test_slide_flush_over_several_boundaries_keeps_the_stable_order():
    # One batch crossing many slide boundaries, released at once by a late heartbeat: every
    # instant's elements come out time-ordered (the harness checks), insertions before
    # retractions, each in arrival order.
    elems = [(t, (k, "x")) for k, t in enumerate([0, 1, 1, 3, 4, 4, 6, 7, 9])]
    h = Harness(range_w(3, slide=2))
    out = h.feed(B(*elems), 30)
    by_instant: dict[int, list[tuple[tuple, int]]] = {}
    for ts, row, w in out.elements:
        by_instant.setdefault(ts, []).append((row, w))
    for t, items in by_instant.items():
        ws = [w for _, w in items]
        assert ws == sorted(ws, reverse=True), t  # +1s then −1s
        for sign in (1, -1):
            ids = [row[0] for row, w in items if w == sign]
            assert ids == sorted(ids), (t, sign)
    for tau in range(31):
        t0 = tau // 2 * 2
        want = Counter(row for t, row in elems if t0 - 3 <= t <= t0)
        assert out.at(tau) == want, tau


def test_slide_flush_at_one_boundary_emits_enters_then_leaves():
    h = Harness(range_w(1, slide=2))
    h.feed(B((0, A), (1, Bb)))
    out = h.feed(B((2, C), (3, D)), B((4, E)), 10)
    at4 = [(row, w) for ts, row, w in out.elements if ts == 4]
    assert at4 == [(D, 1), (E, 1), (Bb, -1), (C, -1)]  # B, C entered at 2; D (t=3) at 4


# -- Γ and run-time changes (docs/resources.md) ------------------------------------------------


def _interval(t: int, size: int, g: int, slide: int | None) -> tuple[int, int]:
    """The definition: [t, t + T + 1) (with a slide, from the first multiple of L ≥ t to the
    first multiple > t + T), rounded inward to multiples of g."""
    if slide is None:
        s, e = t, t + size + 1
    else:
        s = next(m for m in range(t, t + slide + 1) if m % slide == 0)
        e = next(m for m in range(t + size + 1, t + size + slide + 2) if m % slide == 0)
    s = next(m for m in range(s, s + g) if m % g == 0)
    e = e - e % g
    return s, e


@pytest.mark.parametrize("slide", [None, 4])
@pytest.mark.parametrize("g", [1, 3, 5])
def test_granularity_rounds_validity_inward(g, slide):
    rng = np.random.default_rng(g * 10 + (slide or 0))
    ts = np.sort(rng.integers(0, 60, size=80)).tolist()
    elems = [(t, (k, "x")) for k, t in enumerate(ts)]
    size = 7
    h = Harness(lambda n, i, o: RangeWindow(n, i, o, size, slide, None, granularity=g))
    for k in range(0, len(elems), 11):
        h.feed(B(*elems[k : k + 11]))
    out = h.feed(100)
    for tau in range(0, 101):
        want = Counter(
            row for t, row in elems if (iv := _interval(t, size, g, slide))[0] <= tau < iv[1]
        )
        assert out.at(tau) == want, tau
    if g > 1:
        assert all(t % g == 0 for t, _, _ in out.elements)  # changes only at multiples of g


def test_granularity_drops_intervals_it_rounds_to_nothing():
    h = Harness(lambda n, i, o: RangeWindow(n, i, o, 2, None, None, granularity=10))
    out = h.feed(B((3, A), (10, Bb)), 30)  # A: [3, 6) -> [10, 0): dropped; Bb: [10, 13) -> [10, 10)
    assert out.elements == []
    assert h.op.state_size() == (0, 0)


def test_window_change_keeps_stored_expiries_and_gives_new_tuples_the_new_size():
    h = Harness(range_w(10))
    h.feed(B((1, A), (2, Bb)))
    setting = h.op.adjust(size=3)
    assert setting.since == 3  # after everything admitted
    out = h.feed(B((3, C), (4, D)), 40)
    assert out.changes()[12] == Counter({A: -1})  # 1 + 10 + 1: kept its size
    assert out.changes()[7] == Counter({C: -1})  # 3 + 3 + 1: the new size
    assert out.changes()[8] == Counter({D: -1})
    assert out.changes()[13] == Counter({Bb: -1})
    assert h.op.state_size() == (0, 0)


def test_window_change_waits_for_the_rest_of_an_instant():
    """Tuples of the instant already seen keep the old size even when they arrive after."""
    h = Harness(range_w(10))
    h.feed(B((5, A)))
    assert h.op.adjust(size=2).since == 6
    out = h.feed(B((5, Bb), (6, C)), 40)
    assert out.changes()[16] == Counter({A: -1, Bb: -1})
    assert out.changes()[9] == Counter({C: -1})


def test_change_to_a_finer_granularity_waits_for_a_coarse_instant():
    h = Harness(lambda n, i, o: RangeWindow(n, i, o, 20, None, None, granularity=10))
    h.feed(B((12, A)))
    assert h.op.earliest_change(granularity=1) == 20
    assert h.op.earliest_change(granularity=100) == 13  # coarser: at once
    setting = h.op.adjust(granularity=1)
    assert (setting.since, setting.granularity) == (20, 1)
    out = h.feed(B((15, Bb), (21, C)), 80)
    # A and Bb (before 20) at granularity 10: [12, 33) -> [20, 30) and [15, 36) -> [20, 30).
    assert out.changes()[20] == Counter({A: 1, Bb: 1})
    assert out.changes()[30] == Counter({A: -1, Bb: -1})
    assert out.changes()[21] == Counter({C: 1})  # at granularity 1
    assert out.changes()[42] == Counter({C: -1})


def test_a_change_cannot_reach_into_the_past():
    h = Harness(range_w(10))
    h.feed(B((5, A)), 8)
    with pytest.raises(ValueError, match="too early"):
        h.op.adjust(size=3, at=8)
    assert h.op.adjust(size=3, at=9).since == 9
    with pytest.raises(ValueError):
        h.op.adjust(size=-1)


def test_changes_scheduled_ahead_apply_at_their_instants():
    """A replayed log registers every change before the data arrives."""
    h = Harness(range_w(10))
    h.op.adjust(size=2, at=5)
    h.op.adjust(size=0, granularity=1, at=8)
    out = h.feed(B((4, A), (5, Bb), (8, C)), 40)
    assert out.changes() == {
        4: rows(A), 5: rows(Bb), 8: Counter({Bb: -1, C: 1}), 9: Counter({C: -1}),
        15: Counter({A: -1}),
    }


@pytest.mark.parametrize("seed", range(8))
def test_run_time_changes_against_definition(seed):
    """Random sizes and granularities changed between random batches: at every instant the
    window holds the tuples whose interval, under the setting in force at their timestamp,
    contains it."""
    rng = np.random.default_rng(seed)
    slide = [None, 3][seed % 2]
    ts = np.sort(rng.integers(0, 120, size=150)).tolist()
    elems = [(t, (k, "x")) for k, t in enumerate(ts)]
    h = Harness(lambda n, i, o: RangeWindow(n, i, o, 12, slide, None, granularity=2))
    log = [(-(2**63), 12, 2)]
    for k in range(0, len(elems), 13):
        h.feed(B(*elems[k : k + 13]))
        if rng.random() < 0.6:
            size = int(rng.integers(0, 25))
            g = int(rng.choice([1, 2, 4, 8]))
            s = h.op.adjust(size=size, granularity=g)
            log = [e for e in log if e[0] < s.since] + [(s.since, size, g)]
    out = h.feed(200)
    for tau in range(0, 201):
        want = Counter()
        for t, row in elems:
            _, size, g = max(e for e in log if e[0] <= t)
            s, e = _interval(t, size, g, slide)
            if s <= tau < e:
                want[row] += 1
        assert out.at(tau) == want, tau
    assert h.op.state_size() == (0, 0)
    assert len(h.op._phases) == 1  # drained phases are retired


def test_adaptation_delay_of_a_window_reduction():
    """The brief's example: 60 → 30 at t = 80 starts to show at t + 30 and completes at t + 60
    (one tuple per instant, so a window of size T holds T + 1; here the change applies from
    81, whose tuple leaves at 112, and the last old tuple, 80's, leaves at 141)."""
    h = Harness(range_w(60))
    held = {}
    for t in range(0, 200):
        h.feed(B((t, (t, "x"))))
        if t == 80:
            assert h.op.adjust(size=30).since == 81
        held[t] = h.op.state_size()[0]
    assert held[79] == held[111] == 61
    assert [held[t] for t in range(112, 142)] == list(range(60, 30, -1))
    assert held[199] == 31
