"""`cq bench filters`' aggregation: spreads with "never", re-convergence to the step, and the
placements and seeds the experiments average over (each fails on a coarser or wrong version)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from cq_service.bench.filters import experiments
from cq_service.bench.filters.aggregate import settle, spread, steps
from cq_service.bench.filters.report import checks
from cq_service.bench.filters.workload import generate, groups, random_placement


def test_spread_of_numbers() -> None:
    s = spread([5.0, 1.0, 3.0, 2.0])
    assert (s["min"], s["max"], s["n"], s["never"]) == (1.0, 5.0, 4, 0)
    assert s["median"] == pytest.approx(2.5)
    assert s["mean"] == pytest.approx(2.75)
    assert s["q1"] == pytest.approx(1.75) and s["q3"] == pytest.approx(3.5)
    assert s["values"] == [5.0, 1.0, 3.0, 2.0]  # as given, in run order


def test_never_is_above_every_number() -> None:
    s = spread([30_000, None, 10_000])
    assert s["median"] == 30_000 and s["min"] == 10_000
    assert isinstance(s["median"], int)  # tuple counts stay counts
    assert s["max"] is None and s["mean"] is None and s["never"] == 1
    assert spread([None, None, 10_000])["median"] is None  # most never got there
    assert spread([None, 10_000])["median"] is None  # halfway to never: never
    assert spread([10_000, 15_000])["median"] == 12_500
    assert spread([1.0, 2.0])["median"] == 1.5
    with pytest.raises(ValueError):
        spread([])


def test_steps_sum_batches_per_step() -> None:
    batches = [(1000, 1500, 10), (1000, 1200, 0), (500, 600, 0), (500, 500, 5)]
    evals, rows = steps(batches, 1000, 3000)
    assert rows.tolist() == [1000, 1000, 1000]
    assert evals.tolist() == [1510, 1200, 1105]


def _ratio_series(bad: int, start: int = 5, total: int = 60) -> tuple[np.ndarray, np.ndarray]:
    """Optimum costs 1 a step; the orderer 2 for `bad` steps from `start`, 1 elsewhere."""
    ref = np.ones(total)
    ev = np.ones(total)
    ev[start : start + bad] = 2.0
    return ev, ref


def test_settle_to_the_step() -> None:
    """Windows of 10 steps, 3 of them within 1.2x: a window holds at most 2 bad steps, so the
    first good window starts 3 steps after the change and ends 13 steps after it (a grid of
    10-step blocks would say 20)."""
    ev, ref = _ratio_series(5)
    got = settle(ev, ref, start=5, stop=60, window=10, hold=3, within=1.2)
    assert got == 13
    ev, ref = _ratio_series(0)
    assert settle(ev, ref, start=5, stop=60, window=10, hold=3, within=1.2) == 10  # at once


def test_settle_needs_every_window_before_stop() -> None:
    ev, ref = _ratio_series(5, total=80)
    ev[30:35] = 3.0  # a relapse in the third window of the first candidates
    # the first start whose three windows hold: 34 (its first window has one relapse step)
    assert settle(ev, ref, start=5, stop=80, window=10, hold=3, within=1.2) == 34 + 10 - 5
    assert settle(ev, ref, start=5, stop=60, window=10, hold=3, within=1.2) is None  # no room
    with pytest.raises(ValueError):
        settle(ev, ref, start=5, stop=60, window=0, hold=3, within=1.2)


def test_placement_groups_and_generator() -> None:
    assert groups(5, 2, [4, 0, 2, 1, 3]) == [[4, 0], [2, 1], [3]]
    assert random_placement(6, 0) == list(range(6))
    assert sorted(random_placement(6, 3)) == list(range(6))
    assert random_placement(6, 3) != list(range(6))
    with pytest.raises(ValueError):
        groups(3, 2, [0, 0, 1])
    plain, same = generate(4, 5_000, seed=7), generate(4, 5_000, seed=7, placement=[0, 1, 2, 3])
    assert np.array_equal(plain.drops, same.drops)  # the identity is the old generator
    w = generate(4, 100_000, seed=7, placement=[3, 0, 1, 2])
    assert w.groups == [[3, 0], [1, 2]]
    agree = lambda a, b: (w.drops[:, a] == w.drops[:, b]).mean()  # noqa: E731
    assert abs(agree(3, 0) - 0.8) < 0.01 and abs(agree(1, 2) - 0.8) < 0.01
    assert abs(agree(0, 1) - 0.5) < 0.01 and abs(agree(2, 3) - 0.5) < 0.01


def test_by_n_averages_placements(tmp_path: Path) -> None:
    """The figure per n is the mean over instances with different groups; every instance runs
    every order on the same input."""
    got = experiments.by_n([4], 4_000, tmp_path, placements=3)[4]
    each = got["placements"]
    assert len(each) == 3 and len({str(e["groups"]) for e in each}) == 3
    assert len({e["seed"] for e in each}) == 3
    for name, r in got["runs"].items():
        costs = [e["runs"][name]["cost_per_tuple"] for e in each]
        assert r["cost_per_tuple"] == pytest.approx(np.mean(costs))
        assert (r["spread"]["min"], r["spread"]["max"]) == (min(costs), max(costs))
        assert r["output_rows"] == sum(e["runs"][name]["output_rows"] for e in each)
    for e in each:
        assert len({v["output_rows"] for v in e["runs"].values()}) == 1
    assert got["optimum_model"] == pytest.approx(np.mean([e["optimum_model"] for e in each]))


def test_reconvergence_medians_over_seeds(tmp_path: Path) -> None:
    got = experiments.reconvergence(
        4, 20_000, 10_000, 2_000, tmp_path, orders=("a-greedy", "sweep"), seeds=3
    )
    assert len(got["seeds"]) == 3 and got["step"] == 1_000
    assert len({str(s["phases"]) for s in got["seeds"]}) == 3  # different inputs
    for o, r in got["runs"].items():
        per_seed = [s["runs"][o]["tuples_to_reconverge"][0] for s in got["seeds"]]
        assert r["reconverge_spread"][0]["values"] == per_seed
        assert r["tuples_to_reconverge"][0] == spread(per_seed)["median"]
        assert all(t is None or t % 1_000 == 0 for t in per_seed)
        assert len(r["ratios"]) == len(got["optimum_blocks"]) == 10
        assert np.all(np.array(r["ratios_min"]) <= np.array(r["ratios"]))
        assert np.all(np.array(r["ratios"]) <= np.array(r["ratios_max"]))
        ratios = [s["runs"][o]["ratio_after_change"][0] for s in got["seeds"]]
        assert r["ratio_after_change"][0] == pytest.approx(float(np.median(ratios)))
    with pytest.raises(ValueError, match="inside a batch"):
        experiments.reconvergence(4, 20_000, 10_500, 2_000, tmp_path, seeds=1)


def test_checks_compare_medians_and_count_wins() -> None:
    def seed(ag: int | None, sw: int | None) -> dict:
        return {
            "runs": {
                "a-greedy": {"tuples_to_reconverge": [ag]},
                "sweep": {"tuples_to_reconverge": [sw]},
            }
        }

    seeds = [seed(10_000, 30_000), seed(50_000, 20_000), seed(12_000, None)]
    rc = {
        "seeds": seeds,
        "runs": {
            o: {
                "tuples_to_reconverge": [spread(v)["median"]],
                "reconverge_spread": [spread(v)],
            }
            for o, v in (("a-greedy", [10_000, 50_000, 12_000]), ("sweep", [30_000, 20_000, None]))
        },
    }
    got = checks({"reconvergence": rc})["re-convergence: A-Greedy faster than sweep"]
    assert got["holds"] is True  # median 12,000 against 30,000
    assert "2 of 3" in got["detail"] and "[None]" not in got["detail"]
