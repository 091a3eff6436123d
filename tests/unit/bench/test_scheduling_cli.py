"""`cq bench scheduling`: the JSON rows of Example 1, the text tables and the errors."""

from __future__ import annotations

import json

from typer.testing import CliRunner

from cq_service.cli import app


def cq(*args: str):
    return CliRunner().invoke(app, ["bench", "scheduling", *args], catch_exceptions=False)


def test_example1_json_rows():
    result = cq("--scenario", "example1", "--json")
    assert result.exit_code == 0
    out = json.loads(result.stdout)
    assert out["scenario"] == "example1"
    assert list(out["policies"]) == ["fifo", "round_robin", "greedy", "chain"]
    assert out["policies"]["fifo"]["memory"][:7] == [1.0, 1.2, 2.0, 2.2, 3.0, 3.2, 4.0]
    assert out["policies"]["chain"]["memory"][:7] == [1.0, 1.2, 1.4, 1.6, 1.8, 2.0, 2.2]
    chain = out["policies"]["chain"]
    assert (chain["peak"], chain["average"], chain["switches"]) == (2.2, 1.12, 1)
    assert (chain["latency_p50"], chain["latency_p99"]) == (8, 8)


def test_bound_adds_bounded_chain_and_opt_is_memory_only():
    out = json.loads(
        cq("--json", "--bound", "3", "--policy", "chain_bounded", "--policy", "opt").stdout
    )
    assert out["policies"]["chain_bounded"]["peak"] == 3.4
    assert out["policies"]["opt"]["memory"][:7] == [1.0, 1.2, 1.4, 1.6, 1.8, 2.0, 2.2]
    assert out["policies"]["opt"]["switches"] is None
    assert "chain_bounded" in json.loads(cq("--json", "--bound", "3").stdout)["policies"]


def test_text_tables_and_tradeoff():
    result = cq("--scenario", "counterexample", "--bounds", "0,10")
    assert result.exit_code == 0
    lines = result.stdout.splitlines()
    assert any(
        ln.split()[:8] == ["greedy", "1.0", "1.9", "2.8", "3.7", "4.6", "5.5", "6.4"]
        for ln in lines
    )
    assert "chain_bounded: peak memory vs latency" in result.stdout


def test_errors_exit_2():
    assert cq("--scenario", "nope").exit_code == 2
    assert cq("--policy", "lifo").exit_code == 2
    assert cq("--policy", "chain_bounded").exit_code == 2
    assert cq("--scenario", "bursty", "--policy", "opt").exit_code == 2


def test_shares_sweep_chain_share_and_plot_the_curve(tmp_path):
    png = tmp_path / "curve.png"
    result = cq("--scenario", "example1", "--shares", "0.5,1/3", "--plot", str(png), "--json")
    assert result.exit_code == 0
    curve = json.loads(result.stdout)["share_tradeoff"]
    assert [round(p["share"], 3) for p in curve] == [0, 0.333, 0.5, 1]
    assert [p["peak"] for p in curve] == [2.2, 3.4, 4.0, 4.0]  # chain … fifo
    assert png.read_bytes()[:4] == b"\x89PNG"
    text = cq("--scenario", "example1", "--shares", "0.25").stdout
    assert "chain_share: peak memory vs latency" in text
    assert cq("--shares", "2").exit_code == 2
    assert cq("--plot", str(png)).exit_code == 2
