"""The k of every constraint in SysStream, `cq explain --live` and the API's feed (issue 26):
a `k: auto` join's rows carry k = ∞ until k-Mon learns it, then the learned k; an increase
resets it, is counted in `k_increases` and logged once with the old and the new k; a CA window
reports its declared k; other entities have NULL constraint columns."""

from __future__ import annotations

import json
import logging
import math
from pathlib import Path

from cq_service.compiler import load_and_compile
from cq_service.engine.constraint_status import ConstraintStatus, format_k
from cq_service.engine.operators.join import Join
from cq_service.engine.statistics import EntityStatistics
from cq_service.runner import run_pipeline
from cq_service.stats import render_live
from tests.unit.engine.rids_pipeline import JUMP, PIPELINE, write_inputs


def _run(folder: Path):
    write_inputs(folder)
    path = folder / "p.yaml"
    path.write_text(PIPELINE)
    report = run_pipeline(load_and_compile(path), batch_rows=64)
    rows = [json.loads(line) for line in (folder / "stats.jsonl").read_text().splitlines()]
    return report, rows


def test_sys_stream_carries_learned_k_and_counts_increases(tmp_path, caplog):
    caplog.set_level(logging.WARNING, logger="cq_service.adaptive.k_constraints")
    report, rows = _run(tmp_path)
    (join,) = [op for op in report.executor.operators if isinstance(op, Join)]
    assert rows and {r["entity"] for r in rows} == {join.name}
    assert all(r["constraint"] == "rids" for r in rows)
    assert {r["constraint_on"] for r in rows} == {"Bids.auction -> Auctions.id"}
    by_ts = sorted(rows, key=lambda r: r["_ts"])
    # ∞ (null in JSON) before k-Mon has seen W = 500 auctions, then the learned k ≤ 3
    assert by_ts[0]["k"] is None and by_ts[0]["k_increases"] == 0
    learned = [r for r in by_ts if r["_ts"] < JUMP[0] and r["k"] is not None]
    assert learned and all(r["k"] <= 3 for r in learned)
    # the jump: counted, and the k of the last rows is ∞ or learned again (≥ 30)
    last = by_ts[-1]
    increases = join.reduction.adherence.increases
    assert increases >= 1 and last["k_increases"] == increases
    assert last["k"] is None or last["k"] >= 30
    assert last["k_dropped"] == join.reduction.dropped > 0
    assert last["k_missed"] == join.reduction.missed
    assert last["k_violations"] == join.reduction.violations
    logged = [r.getMessage() for r in caplog.records if "k increased" in r.getMessage()]
    assert len(logged) == increases
    assert "Bids.auction -> Auctions.id: k increased from 3 to at least " in logged[0]


def test_live_table_and_entities_show_the_constraint(tmp_path):
    report, _ = _run(tmp_path)
    rows = EntityStatistics(report.executor, "kstats").now()
    text = render_live(rows, "live:")
    (line,) = [x for x in text.splitlines() if "RIDS Bids.auction -> Auctions.id k=" in x]
    assert "increases" in line and "dropped" in line
    (join,) = [op for op in report.executor.operators if isinstance(op, Join)]
    others = [r for r in rows if r[2] != join.name]
    assert others and all(r[-7:] == (None, None, None, 0, 0, 0, 0) for r in others)


def test_feed_writes_an_unknown_k_as_null():
    from cq_service.service.views import _json_number

    assert _json_number(math.inf) is None and _json_number(3.0) == 3.0 and _json_number("x") == "x"


def test_status_words():
    st = ConstraintStatus("ca", "Pos.car", math.inf, 0, 1, 2, 3)
    assert st.describe() == "CA Pos.car k=∞, 0 increases, 1 violations, 2 missed, 3 dropped"
    assert format_k(4.0) == "4"
