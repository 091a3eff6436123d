"""The NEXMark results: events/s counts the events of the streams a query reads, both timings are
reported, the targets table says met or missed by how much, and a saved run loads back unchanged
(`cq bench nexmark --latency-only` re-measures latency on a saved run)."""

from __future__ import annotations

from cq_service.bench.nexmark import events_read, save
from cq_service.bench.nexmark_model import INPUTS, Cell, Row, load
from cq_service.bench.report import table, targets
from cq_service.io import nexmark

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


def test_table_rows_have_as_many_cells_as_their_header():
    text = table(_rows(), META)
    lines = text.splitlines()
    headers = [i for i, ln in enumerate(lines) if ln.startswith("| query |")]
    assert len(headers) == 2  # times and events/s; then floor, latency, memory, agreement
    for h in headers:
        body = lines[h + 2 : h + 4]
        assert [b[:5] for b in body] == ["| q1 ", "| q4 "]
        assert all(b.count("|") == lines[h].count("|") for b in body)
    assert "0.5 → 1.0" in text  # our state on half and all of the input, MiB


def test_both_timings_and_both_rates_are_in_the_table():
    cq = Cell(seconds=[2.0, 1.0, 3.0], process_seconds=[5.0, 4.0, 6.0])
    spark = Cell(seconds=[8.0], process_seconds=[20.0])
    cq.settle(600)
    spark.settle(600)
    # The medians: 2 s in-process, 5 s whole process, over the 600 events the query reads.
    assert (cq.events_per_s, cq.process_events_per_s) == (300.0, 120.0)
    text = table([Row("q3", {"cq": cq, "spark": spark}, events_read=600)], META)
    row = next(ln for ln in text.splitlines() if ln.startswith("| q3 | 600 |"))
    assert row == (
        "| q3 | 600 | 2.00 s (300) | 8.00 s (75) | 5.00 s (120) | 20.00 s (30) | 4.0× / 4.0× |"
    )


def test_events_read_counts_only_the_streams_the_query_reads(tmp_path):
    nexmark.write(tmp_path, 1000, seed=0)
    # 1 person, 3 auctions and 46 bids in every 50 events.
    assert events_read(tmp_path, "q3") == 20 + 60
    assert events_read(tmp_path, "q8") == 20 + 60
    assert events_read(tmp_path, "q0") == 920
    assert events_read(tmp_path, "q4") == 60 + 920
    assert set(INPUTS) == {f"q{i}" for i in range(9)}


def test_a_saved_run_loads_back(tmp_path):
    rows = _rows()
    rows[0].events_read = 920
    rows[0].cells["cq"].process_seconds = [1.5]
    save(rows, tmp_path, META)
    loaded, meta = load(tmp_path)
    assert loaded == rows and meta == META
    assert (tmp_path / "nexmark.md").exists() and (tmp_path / "nexmark-throughput.png").exists()
