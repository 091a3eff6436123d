"""`join: auto`'s cost model (adaptive/join_choice.py): constructed cases where each form
should win, and the statistics it reads from a plan."""

from __future__ import annotations

import math
from dataclasses import replace
from pathlib import Path

import pytest

from cq_service.adaptive.estimate import Observed
from cq_service.adaptive.join_choice import JoinStats, choose_join, join_chooser
from cq_service.plan.mjoins import JoinChoice, multiway_joins
from tests.unit.plan.join_pipelines import compile_joins

CHAIN = "SELECT * FROM A [Range 5], B [Range 5], C [Range 5] WHERE A.k = B.k AND B.y = C.k"
STAR = "SELECT * FROM A [Range 5], B [Range 5], C [Range 5] WHERE A.k = B.k AND A.k = C.k"


def _candidate(tmp_path: Path, q: str):
    seen = []

    def grab(plan, cand):
        seen.append((plan, cand))
        return JoinChoice("tree")

    multiway_joins(compile_joins(tmp_path, {"q": q}, "auto").plan, "auto", grab)
    (found,) = seen
    return found


def _stats(cand, size, updates, edge_sel) -> JoinStats:
    join_sel = {
        j: math.prod(s for s, o in zip(edge_sel, cand.edge_joins, strict=True) if o == j)
        for j in cand.joins
    }
    return JoinStats(size, updates, edge_sel, join_sel)


@pytest.mark.parametrize(
    ("q", "size", "updates", "edge_sel", "form"),
    [
        # the bench's chain: A fast, B a tenth, C a hundredth; keys uniform over 200 values
        (CHAIN, (400, 40, 4), (2, 0.2, 0.02), (1 / 200, 1 / 200), "mjoin-caching"),
        # the same with skewed keys: caching pays more still
        (CHAIN, (400, 40, 4), (2, 0.2, 0.02), (0.05, 0.05), "mjoin-caching"),
        # a star on A.k with skew, inputs at one rate: no key repeats before it is dropped,
        # and the tree's intermediate A ⋈ B is large
        (STAR, (400, 400, 400), (2, 2, 2), (0.05, 0.05), "mjoin"),
        # C fast, A and B slow and A ⋈ B small: the tree keeps A ⋈ B for C to probe once; C's
        # keys are too many for a cache's slots
        (CHAIN, (10, 1e6, 400), (0.001, 0.002, 2), (1e-4, 1e-4), "tree"),
    ],
)
def test_each_form_wins_where_it_should(tmp_path, q, size, updates, edge_sel, form) -> None:
    plan, cand = _candidate(tmp_path, q)
    choice = choose_join(plan, cand, _stats(cand, size, updates, edge_sel))
    assert choice.form == form
    assert set(choice.costs) == {"tree", "mjoin", "mjoin-caching"}
    if form != "tree":  # the MJoin holds less than the tree here
        assert choice.costs["mjoin"][1] < choice.costs["tree"][1]


def test_an_mjoin_chosen_on_assumed_statistics_runs_with_a_caching(tmp_path: Path) -> None:
    plan, cand = _candidate(tmp_path, STAR)
    stats = _stats(cand, (400, 400, 400), (2, 2, 2), (0.05, 0.05))
    assert choose_join(plan, cand, stats).form == "mjoin"  # measured: the plain MJoin
    assumed = replace(stats, assumed=("A: one element per time unit",))
    choice = choose_join(plan, cand, assumed)
    assert choice.form == "mjoin-caching" and choice.costs == choose_join(plan, cand, stats).costs


def test_two_inputs_are_never_asked(tmp_path: Path) -> None:
    compiled = compile_joins(
        tmp_path, {"q": "SELECT * FROM A [Range 5], B [Range 5] WHERE A.k = B.k"}, "auto"
    )
    plan = multiway_joins(compiled.plan, "auto", join_chooser())
    assert plan is compiled.plan  # a two-way join stays a binary join (the tree)


def test_statistics_come_from_observed_else_defaults(tmp_path: Path) -> None:
    plan, cand = _candidate(tmp_path, CHAIN)
    default = join_chooser(unit_seconds=1.0)(plan, cand)
    assert any("one element per time unit" in a for a in default.assumed)
    j1, j2 = cand.joins
    fast = Observed({"A": 0.01, "B": 1.0, "C": 10.0}, selectivity={j1: 0.01, j2: 0.01})
    measured = join_chooser(fast, unit_seconds=1.0)(plan, cand)
    assert not any("selectivity" in a or "time unit" in a for a in measured.assumed)
    assert measured.form == "mjoin-caching"  # A's repeated keys find B ⋈ C cached


def test_explain_costs_shows_every_form_and_the_choice(tmp_path: Path) -> None:
    from cq_service.bench.joins.workload import CASES, write_case
    from cq_service.compiler import load_and_compile
    from cq_service.explain_costs import measure_costs, render_costs

    t = write_case(CASES["skewed-3"], tmp_path, scale=0.02)
    p = t.with_name("auto.yaml")
    p.write_text(t.read_text().replace("@JOIN@", "auto"))
    text = render_costs(measure_costs(load_and_compile(p)))
    lines = text.split("join forms (resources.join auto")[1].splitlines()
    assert "from measured statistics auto chooses" in lines[1]
    assert "the plan runs mjoin" in lines[1]  # default statistics: see the cost model's doc
    forms = [line.split()[0] for line in lines[2:5]]
    assert forms == ["tree", "mjoin", "mjoin-caching"]
    assert sum("<- chosen" in line for line in lines[2:5]) == 1
    # F is ten times S1's rate and a hundred times S2's: F's keys repeat, caching pays
    assert "chooses mjoin-caching" in lines[1]
