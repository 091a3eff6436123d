"""A pipeline that declares RIDS(k) (issue 26): its join drops state and gives the same output
as without the declaration; k: auto learns k through adaptive's monitor; a rids that applies to
no join is refused at its position; `explain_constraints` names the join using it."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

from cq_service.compiler import load_and_compile, run_plan
from cq_service.engine.constraint_plan import explain_constraints
from cq_service.engine.operators.join import Join
from cq_service.runner import run_pipeline
from cq_service.spec import SpecErrors

PIPELINE = """\
version: 1
name: rids
streams:
  Bids:
    schema: {ts: int, auction: int, bidder: int}
    timestamp: ts
    source: {type: file, path: bids.jsonl, format: jsonl}
    CONSTRAINTS
  Auctions:
    schema: {ts: int, id: int, seller: int}
    timestamp: ts
    source: {type: file, path: auctions.jsonl, format: jsonl}
queries:
  q:
    cql: >
      SELECT B.auction, B.bidder, A.seller
      FROM Bids [Range 40] B, Auctions [Range 200] A WHERE B.auction = A.id
    sink: {type: file, path: out.jsonl, format: jsonl}
"""


def write_inputs(folder: Path, k_true: int, seed: int = 1) -> None:
    """Auctions one per instant; bids name an auction at most k_true − 1 ahead (or none)."""
    rng = random.Random(seed)
    bids, auctions = [], []
    for t in range(300):
        for _ in range(rng.randint(0, 4)):
            a = -1 if rng.random() < 0.3 else rng.randint(max(0, t - 5), t + k_true - 1)
            bids.append({"ts": t, "auction": a, "bidder": rng.randint(0, 9)})
        auctions.append({"ts": t, "id": t, "seller": t % 7})
    (folder / "bids.jsonl").write_text("".join(json.dumps(b) + "\n" for b in bids))
    (folder / "auctions.jsonl").write_text("".join(json.dumps(a) + "\n" for a in auctions))


def run(folder: Path, constraints: str, batch_rows: int = 65_536):
    path = folder / "p.yaml"
    path.write_text(PIPELINE.replace("CONSTRAINTS", constraints))
    compiled = load_and_compile(path)
    report = run_pipeline(compiled, batch_rows=batch_rows)
    joins = [op for op in report.executor.operators if isinstance(op, Join)]
    return (folder / "out.jsonl").read_text(), joins, compiled


@pytest.mark.parametrize("k", ["3", "5", "auto"])
@pytest.mark.parametrize("batch_rows", [16, 65_536])
def test_same_output_with_rids(tmp_path, k, batch_rows):
    write_inputs(tmp_path, k_true=3)
    plain, (plain_join,), _ = run(tmp_path, "", batch_rows)
    got, (join,), compiled = run(
        tmp_path,
        f"constraints: [{{kind: rids, attribute: auction, references: Auctions.id, k: {k}}}]",
        batch_rows,
    )
    assert got == plain and plain
    red = join.reduction
    assert red is not None and red.missed == 0
    if k != "auto":
        assert red.dropped > 0
        assert join.state_size()[0] < plain_join.state_size()[0]
    lines = explain_constraints(compiled.spec, run_plan(compiled).nodes)
    assert any("join drops state by RIDS" in line for line in lines), lines


def test_below_true_k_misses_are_counted(tmp_path):
    write_inputs(tmp_path, k_true=4)
    plain, _, _ = run(tmp_path, "", batch_rows=16)
    got, (join,), _ = run(
        tmp_path,
        "constraints: [{kind: rids, attribute: auction, references: Auctions.id, k: 1}]",
        batch_rows=16,
    )
    assert join.reduction.missed > 0
    assert len(got.splitlines()) < len(plain.splitlines())


def test_rids_on_no_join_is_refused(tmp_path):
    write_inputs(tmp_path, k_true=1)
    path = tmp_path / "p.yaml"
    path.write_text(
        PIPELINE.replace(
            "CONSTRAINTS",
            "constraints: [{kind: rids, attribute: bidder, references: Auctions.id, k: 1}]",
        )
    )
    with pytest.raises(SpecErrors) as e:
        load_and_compile(path)
    (line,) = e.value.lines() if hasattr(e.value, "lines") else [str(e.value)]
    assert ":8:19: rids on bidder -> Auctions.id applies to no join" in line
