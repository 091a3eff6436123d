"""The k of every constraint in SysStream, `cq explain --live` and the API's feed (issue 26):
a `k: auto` join's rows carry k = ∞ until k-Mon learns it, then the learned k; an increase
resets it, is counted in `k_increases` and logged once with the old and the new k; a CA window
reports its declared k; other entities have NULL constraint columns."""

from __future__ import annotations

import json
import logging
import math
import random
from pathlib import Path

from cq_service.compiler import load_and_compile
from cq_service.engine.constraint_status import ConstraintStatus, format_k
from cq_service.engine.operators.join import Join
from cq_service.engine.statistics import EntityStatistics
from cq_service.runner import run_pipeline
from cq_service.stats import render_live

PIPELINE = """\
version: 1
name: kstats
streams:
  Bids:
    schema: {ts: int, auction: int, bidder: int}
    timestamp: ts
    source: {type: file, path: bids.jsonl, format: jsonl}
    constraints: [{kind: rids, attribute: auction, references: Auctions.id, k: auto}]
  Auctions:
    schema: {ts: int, id: int, seller: int}
    timestamp: ts
    source: {type: file, path: auctions.jsonl, format: jsonl}
resources: {statistics_interval: 100}
queries:
  q:
    cql: >
      SELECT B.auction, B.bidder, A.seller
      FROM Bids [Range 40] B, Auctions [Range 200] A WHERE B.auction = A.id
    sink: {type: file, path: out.jsonl, format: jsonl}
  stats:
    cql: SELECT * FROM SysStream WHERE constraint_on IS NOT NULL
    sink: {type: file, path: stats.jsonl, format: jsonl}
"""

INSTANTS = 1500
JUMP = (1000, 1100)  # bids in these instants name the auction 30 ahead: k grows past 3


def write_inputs(folder: Path, seed: int = 1) -> None:
    """Auctions one per instant; bids name an auction at most 2 ahead (RIDS(3)), except in
    JUMP, where every bid names one 30 ahead."""
    rng = random.Random(seed)
    bids, auctions = [], []
    for t in range(INSTANTS):
        for _ in range(rng.randint(1, 4)):
            a = t + 30 if JUMP[0] <= t < JUMP[1] else rng.randint(max(0, t - 5), t + 2)
            bids.append({"ts": t, "auction": a, "bidder": rng.randint(0, 9)})
        auctions.append({"ts": t, "id": t, "seller": t % 7})
    (folder / "bids.jsonl").write_text("".join(json.dumps(b) + "\n" for b in bids))
    (folder / "auctions.jsonl").write_text("".join(json.dumps(a) + "\n" for a in auctions))


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
