"""`check_sink` (restarts.py) on made-up sink contents: where a life after a kill must resume.

A kill after a checkpoint wrote its state snapshot and before the catalog recorded that
checkpoint leaves the snapshot's frontier ahead of the catalog's; the next life restores from
the snapshot and resumes after its frontier (every result up to it was acknowledged before the
snapshot was written). The check must accept exactly that, and still reject a result repeated
from before where the life resumes, and a result lost.
"""

from __future__ import annotations

import pytest

from tests.integration.restarts import Death, Element, check_sink

# One result per instant 1..20: result #i has timestamp i + 1.
EXPECTED: list[Element] = [(t, "+", (t,)) for t in range(1, 21)]


def check(catalog: int, snapshot: int | None, resumed: int) -> int:
    """`check_sink` (the results it counts repeated) on three lives: life 1 writes the results
    at 1..12 and dies with `catalog` and `snapshot` frontiers; life 2 writes those after
    `resumed` up to 16 and dies with the catalog's frontier at 16; life 3 writes the rest."""
    got = EXPECTED[:12] + EXPECTED[resumed:16] + EXPECTED[16:]
    return check_sink("q", got, EXPECTED, [
        Death(1, "outside", {"q": 12}, {"q": catalog}, {} if snapshot is None else {"q": snapshot}),
        Death(2, "outside", {"q": 12 + 16 - resumed}, {"q": 16}),
    ])


def test_a_life_restored_from_a_snapshot_ahead_of_the_checkpoint_resumes_after_it() -> None:
    # catalog frontier 8, snapshot 11: 12 is written again, 9..11 are not
    assert check(8, 11, 11) == 1


def test_without_the_snapshot_the_checkpoint_frontier_is_where_it_resumes() -> None:
    assert check(8, None, 8) == 4
    with pytest.raises(AssertionError, match="life 2 wrote something other"):
        check(8, None, 11)  # the old check's verdict on a snapshot ahead of the checkpoint


def test_a_snapshot_older_than_the_checkpoint_changes_nothing() -> None:
    assert check(8, 5, 8) == 4


def test_repeating_what_the_snapshot_covers_is_caught() -> None:
    with pytest.raises(AssertionError, match=r"life 2 wrote .* its #0 is \(9, "):
        check(8, 11, 8)


def test_a_loss_is_caught() -> None:
    with pytest.raises(AssertionError, match="2 lost"):
        check(8, 14, 14)
    with pytest.raises(AssertionError, match="life 2 wrote"):
        check(8, 11, 12)
