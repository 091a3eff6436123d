"""A pipeline whose two-way join uses RIDS with `k: auto` (bids name an auction at most 2
ahead, RIDS(3), except in JUMP, where k grows past 3), its inputs, and a SysStream query of the
join's constraint columns: shared by the constraint statistics tests of the engine
(tests/unit/engine/test_constraint_statistics.py) and of the worker
(tests/unit/service/test_worker_constraints.py)."""

from __future__ import annotations

import json
import random
from pathlib import Path

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
