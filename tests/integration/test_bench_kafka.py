"""`cq bench kafka` on cq alone against the real broker: the output topics hold the counts
computed here, by brute force, from the generated events (no timing is checked); the latency
phase runs and counts every result it should."""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path

from cq_service.bench.kafka_bench import (
    AGG_SETTLED_MS,
    FILTER_MODULUS,
    delete_topics,
    generate,
    generate_nexmark,
    run_benchmark,
)

EVENTS = 20_000
SEED = 7


def _brute_force(data) -> dict[str, int]:
    bids, asks = data["bids"], data["asks"]
    b_rows = list(zip(bids["auction"].tolist(), bids["dateTime"].tolist(), strict=True))
    a_rows = list(zip(asks["auction"].tolist(), asks["dateTime"].tolist(), strict=True))
    asks_by_auction = defaultdict(list)
    for auction, t in a_rows:
        asks_by_auction[auction].append(t)
    join = sum(1 for auction, t in b_rows for u in asks_by_auction[auction] if abs(t - u) <= 1000)
    # The sliding COUNT: at each whole second t0 from the first to the last time - AGG_SETTLED_MS,
    # one row per auction with a bid in [t0 - 9999 ms, t0].
    times = sorted({t for _, t in b_rows})
    last = times[-1]
    agg = 0
    for t0 in range(times[0], last - AGG_SETTLED_MS + 1, 1000):
        agg += len({auction for auction, t in b_rows if t0 - 9999 <= t <= t0})
    nex = list(zip(data["nexmark"]["dateTime"].tolist(), data["nexmark"]["price"].tolist(),
                   strict=True))
    # q7: at each minute boundary t0 from the first bid to the last, the bids in
    # [t0 - 1 min, t0] with the largest price there.
    q7 = 0
    first_boundary = -(-min(t for t, _ in nex) // 60_000) * 60_000
    for t0 in range(first_boundary, max(t for t, _ in nex) + 1, 60_000):
        inside = [p for t, p in nex if t0 - 60_000 <= t <= t0]
        if inside:
            q7 += inside.count(max(inside))
    # q5: at each minute boundary t0 from the first bid to the last, the auctions with the
    # most bids in [t0 - 60 min, t0].
    nex_auctions = list(zip(data["nexmark"]["dateTime"].tolist(),
                            data["nexmark"]["auction"].tolist(), strict=True))
    q5 = 0
    for t0 in range(first_boundary, max(t for t, _ in nex) + 1, 60_000):
        per = defaultdict(int)
        for t, a in nex_auctions:
            if t0 - 3_600_000 <= t <= t0:
                per[a] += 1
        if per:
            q5 += sum(1 for n in per.values() if n == max(per.values()))
    return {
        "nexmark-q1": len(nex),
        "nexmark-q5": q5,
        "nexmark-q7": q7,
        "pass-through": EVENTS,
        "filter": sum(1 for p in bids["price"].tolist() if p % FILTER_MODULUS == 0),
        "sliding-agg": agg,
        "join": join,
    }


def test_cq_output_counts_match(kafka_bootstrap: str, tmp_path: Path) -> None:
    data = generate(EVENTS, SEED)
    data["nexmark"] = generate_nexmark(EVENTS, SEED)
    want = _brute_force(data)
    try:
        rows = run_benchmark(
            bootstrap=kafka_bootstrap, events=EVENTS, seed=SEED,
            queries=("pass-through", "filter", "sliding-agg", "join", "nexmark-q1", "nexmark-q5",
                     "nexmark-q7"),
            engines=("cq", "cq-kafka-python"), repeat=1, work=tmp_path, say=lambda _s: None,
        )
    finally:
        delete_topics(kafka_bootstrap, [f"cqbench-{kind}-{EVENTS}-{SEED}"
                                        for kind in ("bids", "asks", "nexmark")])
    for row in rows:
        assert row.expected == want[row.query], row.query
        for engine, cell in row.cells.items():
            assert cell.compared == want[row.query], (row.query, engine, cell.note)
            assert cell.agrees, (row.query, engine)
    assert {r.query: r.cells["cq"].outputs for r in rows}["pass-through"] == EVENTS


def test_cq_latency_phase(kafka_bootstrap: str, tmp_path: Path) -> None:
    events, seed = 4_000, 8
    try:
        rows = run_benchmark(
            bootstrap=kafka_bootstrap, events=events, seed=seed,
            queries=("pass-through", "nexmark-q5"), engines=("cq",), repeat=1,
            work=tmp_path, say=lambda _s: None, latency=True, grace=1.0,
        )
    finally:
        delete_topics(kafka_bootstrap, [f"cqbench-{kind}-{events}-{seed}"
                                        for kind in ("bids", "asks", "nexmark")])
    by = {r.query: r.cells["cq"] for r in rows}
    for query, cell in by.items():
        assert cell.agrees, query
        assert cell.latency_rate and cell.latency_rate > 0, (query, cell.latency_note)
        assert cell.p50_ms is not None and cell.p99_ms is not None, (query, cell.latency_note)
        assert 0 <= cell.p50_ms <= cell.p99_ms < 60_000, query
    # Every pass-through output is matched to its input; every q5 row counted once.
    assert by["pass-through"].latency_samples == events
    assert by["nexmark-q5"].latency_samples == {r.query: r.expected for r in rows}["nexmark-q5"]
