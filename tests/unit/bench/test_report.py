"""The NEXMark results: the targets table says met or missed by how much, and a saved run loads
back unchanged (`cq bench nexmark --latency-only` re-measures latency on a saved run)."""

from __future__ import annotations

from cq_service.bench.nexmark import Cell, Row, load, save
from cq_service.bench.report import table, targets

META = {"events": 1000, "seed_note": "seed 0", "repeat": 3, "machine": "m", "date": "d"}


def _rows() -> list[Row]:
    return [
        Row("q1", {"cq": Cell(events_per_s=3e6, latency_ms={"p50": 1.0, "p99": 150.0}),
                   "spark": Cell(events_per_s=1e6)}, floor_events_per_s=9e6),
        Row("q4", {"cq": Cell(events_per_s=4e5, state_bytes=2**20, half_state_bytes=2**19),
                   "spark": Cell(events_per_s=1e5), "flink": Cell(events_per_s=5e5)}),
    ]


def test_targets_say_met_or_missed_by_how_much():
    lines = "\n".join(targets(_rows()))
    assert "| q1: cq ÷ spark | ≥ 1× | 3.00× | met |" in lines
    assert "| q1: floor ÷ cq | < 2× | 3.00× | missed by 1.50× |" in lines
    assert "| q1: p99 at half rate | < 100 ms | 150.00 ms | missed by 1.50× |" in lines
    assert "| q4: cq ÷ spark | ≥ 5× | 4.00× | missed by 1.25× |" in lines
    assert "| q4: cq ÷ flink | ≥ 1× | 0.80× | missed by 1.25× |" in lines
    assert "| q4: p99 at half rate | < 100 ms | — | not measured |" in lines


def test_table_rows_have_as_many_cells_as_the_header():
    text = table(_rows(), META)
    rows = [ln for ln in text.splitlines() if ln.startswith("| q") and "events/s" not in ln][:2]
    header = next(ln for ln in text.splitlines() if ln.startswith("| query |"))
    assert all(r.count("|") == header.count("|") for r in rows)
    assert "0.5 → 1.0" in text  # our state on half and all of the input, MiB


def test_a_saved_run_loads_back(tmp_path):
    save(_rows(), tmp_path, META)
    rows, meta = load(tmp_path)
    assert rows == _rows() and meta == META
    assert (tmp_path / "nexmark.md").exists() and (tmp_path / "nexmark-throughput.png").exists()
