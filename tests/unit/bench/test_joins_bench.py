"""`cq bench joins` (cq_service/bench/joins) on a tiny case: every setting gives the tree's
results, the MJoin keeps less state than the tree, and the JSON has the figures."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from cq_service.bench.joins import SETTINGS, run_all
from cq_service.bench.joins.plots import charts
from cq_service.bench.joins.workload import CASES, write_case


def test_a_tiny_run_agrees_across_settings(tmp_path: Path) -> None:
    out = run_all(["skewed-3"], tmp_path, scale=0.02, repeats=2)
    runs = out["skewed-3"]
    checks = runs["checks"]
    assert runs["repeats"] == 2 and len(runs["load"]["before"]) == 3
    for s in SETTINGS:  # medians of two rounds, each kept
        rounds = runs[s]["rounds"]
        assert len(rounds) == 2 and runs[s]["tuples_per_cpu_s"] > 0
        lo, hi = sorted(r["tuples_per_cpu_s"] for r in rounds)
        assert lo <= runs[s]["tuples_per_cpu_s"] <= hi
    assert checks["caching_less_state_than_tree"] in (True, False)
    assert "auto_vs_own_form" in checks
    paths = charts(out, tmp_path / "plots", "tiny")
    assert all(p.stat().st_size > 0 for p in paths)
    assert checks["mjoin_same_results_as_tree"] and checks["mjoin-caching_same_results_as_tree"]
    assert runs["tree"]["results"] > 0
    for s in ("tree", "mjoin", "mjoin-caching"):
        assert runs[s]["tuples_per_s"] > 0 and runs[s]["peak_state_rows"] > 0
    assert "caches" in runs["mjoin-caching"]
    assert checks["auto_same_results_as_tree"]
    assert runs["auto"]["join_form"] in ("tree", "mjoin", "mjoin-caching")
    assert checks["best_form"] in ("tree", "mjoin", "mjoin-caching")
    assert checks["auto_vs_best"] > 0
    assert checks["auto_within_10pct_of_best"] == (checks["auto_vs_best"] >= 0.9)


def test_the_pipeline_is_valid_for_every_case(tmp_path: Path) -> None:
    from cq_service.compiler import load_and_compile

    for name, case in CASES.items():
        t = write_case(case, tmp_path / name, scale=0.01)
        p = t.with_name("p.yaml")
        p.write_text(t.read_text().replace("@JOIN@", "mjoin-caching"))
        assert load_and_compile(p).spec.resources.join == "mjoin-caching"


def test_the_command_prints_json(tmp_path: Path, monkeypatch) -> None:
    from cq_service.bench import joins
    from cq_service.cli import app

    monkeypatch.setattr(
        joins,
        "run_all",
        lambda cases, work, scale, say, repeats: {c: {"checks": {}} for c in cases},
    )
    r = CliRunner().invoke(app, ["bench", "joins", "--quick", "--json", "--work", str(tmp_path)])
    assert r.exit_code == 0, r.output
    assert set(json.loads(r.output)) == {"uniform-3", "skewed-3", "residual-3"}
