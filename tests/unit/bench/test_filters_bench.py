"""`cq bench filters --quick --json` on the engine, and one metered run.

Costs and times are measurements and are not asserted; what must hold on any machine is: every
order writes the same rows, as many as the generator says pass, the meters agree with the
selections' counters, and the JSON has every experiment and check.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from cq_service.bench.cli import bench_app
from cq_service.bench.filters.engine_runs import run
from cq_service.bench.filters.experiments import QUICK_PLACEMENTS, QUICK_SEEDS, same_output
from cq_service.bench.filters.optimum import cost_of
from cq_service.bench.filters.pipeline import pipeline_yaml, query_cql
from cq_service.bench.filters.report import checks, text
from cq_service.bench.filters.workload import generate


def test_metered_runs_agree(tmp_path: Path) -> None:
    """Written order one conjunct at a time costs what the model says; every order writes the
    same rows; profiling is counted for the adaptive ones only."""
    w = generate(4, 20_000, seed=1)
    w.write(tmp_path / "S0.parquet")
    path = tmp_path / "p.yaml"
    path.write_text(pipeline_yaml(4, query_cql(w.sets)))
    out = tmp_path / "out" / "q.jsonl"
    runs = {o: run(path, o, out=out) for o in ("fixed", "static", "a-greedy", "local-swaps")}
    same_output(list(runs.values()), w.passing())
    assert runs["fixed"].cost_per_tuple == pytest.approx(cost_of(w.drops, range(4)))
    assert runs["fixed"].profile_evaluations == 0
    assert runs["static"].cost_per_tuple == 4  # the whole predicate on every row
    assert runs["a-greedy"].profiled > 0 and runs["a-greedy"].profile_evaluations > 0
    assert all(r.tuples == 20_000 for r in runs.values())
    timed = run(path, "a-greedy", out=out, timed=True, p=0.05)
    t = timed.timings
    assert t is not None and 0 < t.profile < t.apply and 0 < t.observe < t.apply
    assert timed.profiled > runs["a-greedy"].profiled  # p = 0.05 profiles more than 0.01


def test_disagreeing_outputs_fail_loudly(tmp_path: Path) -> None:
    w = generate(2, 2_000, seed=2)
    w.write(tmp_path / "S0.parquet")
    a, b = tmp_path / "a.yaml", tmp_path / "b.yaml"
    a.write_text(pipeline_yaml(2, query_cql(w.sets)))
    b.write_text(pipeline_yaml(2, query_cql(w.sets, [0])))  # F2 left out: more rows
    out = tmp_path / "out" / "q.jsonl"
    ra, rb = run(a, "fixed", out=out), run(b, "fixed", out=out)
    with pytest.raises(RuntimeError, match="disagree"):
        same_output([ra, rb])
    with pytest.raises(RuntimeError, match="generator says"):
        same_output([rb], w.passing())


def test_quick_bench(tmp_path: Path) -> None:
    result = CliRunner().invoke(
        bench_app,
        [
            "filters",
            "--quick",
            "--json",
            "--work",
            str(tmp_path / "work"),
            "--plots",
            str(tmp_path / "plots"),
        ],
    )
    assert result.exit_code == 0, result.output
    data = json.loads(result.output)
    assert set(data["by_n"]) == {"3", "6"}
    for r in data["by_n"].values():
        assert len(r["placements"]) == QUICK_PLACEMENTS
        for e in r["placements"]:  # every instance: every order the same rows
            assert len({v["output_rows"] for v in e["runs"].values()}) == 1
        rows = {v["output_rows"] for v in r["runs"].values()}
        assert len(rows) == 1
        assert {
            "a-greedy",
            "sweep",
            "independent",
            "local-swaps",
            "static",
            "written",
            "optimum",
        } <= set(r["runs"])
        assert r["runs"]["optimum"]["cost_per_tuple"] == pytest.approx(r["optimum_model"])
    rc = data["reconvergence"]
    assert len(rc["seeds"]) == QUICK_SEEDS
    assert {"a-greedy", "sweep", "local-swaps"} <= set(rc["runs"])
    assert len({v["output_rows"] for v in rc["runs"].values()}) == 1
    for v in rc["runs"].values():
        assert len(v["blocks"]) == len(rc["optimum_blocks"])
        assert len(v["tuples_to_reconverge"]) == len(rc["phases"]) - 1
    assert {(r["n"], r["p"]) for r in data["overhead"]} == {
        (3, 0.01),
        (3, 0.05),
        (8, 0.01),
        (8, 0.05),
    }
    for per in data["real"]["by_batch"].values():
        assert len({v["output_rows"] for v in per.values()}) == 1
        assert {"static", "written", "a-greedy", "hindsight"} <= set(per)
    assert data["checks"] and all(isinstance(v["holds"], bool) for v in data["checks"].values())
    assert (tmp_path / "plots" / "filters-cost.png").stat().st_size > 0
    assert (tmp_path / "plots" / "filters-reconvergence.png").stat().st_size > 0
    assert "FAIL" in text(data, data["checks"]) or "pass" in text(data, data["checks"])


def test_checks_read_the_figures() -> None:
    def runs(ag: float, ind: float, opt: float) -> dict:
        return {
            "runs": {
                "a-greedy": {"cost_per_tuple": ag},
                "independent": {"cost_per_tuple": ind},
                "optimum": {"cost_per_tuple": opt},
            }
        }

    results = {
        "by_n": {3: runs(1.5, 1.6, 1.4), 8: runs(2.0, 1.9, 1.0)},
        "reconvergence": {
            "runs": {
                "a-greedy": {"tuples_to_reconverge": [10_000]},
                "sweep": {"tuples_to_reconverge": [None]},
                "local-swaps": {"tuples_to_reconverge": [5_000]},
            }
        },
        "real": {
            "by_batch": {
                1000: {"a-greedy": {"rows_per_second": 300.0}, "static": {"rows_per_second": 100.0}}
            }
        },
    }
    got = {k: v["holds"] for k, v in checks(results).items()}
    assert got == {
        "n = 3: A-Greedy below Independent": True,
        "n = 3: A-Greedy within 1.5x the optimum": True,
        "n = 8: A-Greedy below Independent": False,
        "re-convergence: A-Greedy faster than sweep": True,
        "re-convergence: A-Greedy faster than local-swaps": False,
        "real case (batches of 1,000): A-Greedy ≥ 2x static": True,
    }
