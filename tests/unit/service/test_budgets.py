"""The resource manager in the worker: it shrinks windows to hold a deployment's budget,
inside every range and on record; grows them back when a query leaves; sheds only when every
range is exhausted; rejects a query that cannot fit; and the results stay exact for the
settings it chose (`cq run --adjustments` replays its log)."""

from __future__ import annotations

import re
import threading
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

from cq_service.compiler import load_and_compile
from cq_service.engine.batch import Batch
from cq_service.runner import run_pipeline
from cq_service.service import views as w
from cq_service.service.adjusting import logged_adjustment
from cq_service.service.metrics import render_metrics
from cq_service.service.worker import Worker

NAME = "trades"
ROWS = 12_000  # 5 ms apart on average: 60 s of each stream


def pipeline(budget: str, *, big: bool = True, extra: str = "") -> str:
    text = f"""\
version: 1
name: {NAME}
time_unit: ms
resources: {{memory_budget: {budget}}}
streams:
  Bids:
    schema: {{item: int, price: int}}
    timestamp: ts
    source: {{type: file, path: data/bids.csv, format: csv}}
  Asks:
    schema: {{item: int, price: int}}
    timestamp: ts
    source: {{type: file, path: data/asks.csv, format: csv}}
queries:
  matches:
    cql: SELECT B.item, B.price, A.price AS ask FROM Bids B [Range 10000], Asks A [Range 10000] WHERE B.item = A.item
    sink: {{type: file, path: out/matches.jsonl, format: jsonl}}
    qos: {{window: [1000, 10000]}}
    weight: 1
"""
    if big:
        text += """\
  per_item:
    cql: SELECT item, COUNT(*) AS n, MAX(price) AS top FROM Bids [Range 20000] GROUP BY item
    sink: {type: file, path: out/per_item.jsonl, format: jsonl}
    qos: {window: [2000, 20000], granularity: [1, 10, 100]}
    weight: 4
"""
    return text + extra


def write(folder: Path, text: str, seed: int = 3) -> Path:
    d = folder / NAME
    (d / "data").mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(seed)
    for name in ("bids", "asks"):
        ts = np.cumsum(rng.exponential(5.0, ROWS)).astype(int)
        items = rng.integers(0, 50, ROWS)
        prices = rng.integers(1, 1000, ROWS)
        lines = ["ts,item,price"] + [f"{t},{i},{p}" for t, i, p in zip(ts, items, prices, strict=True)]
        (d / "data" / f"{name}.csv").write_text("\n".join(lines) + "\n")
    path = d / "pipeline.yaml"
    path.write_text(text)
    return path


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    return tmp_path / "p"


def run(worker: Worker, *, every: int = 5, limit: int = 5_000) -> list[dict]:
    """Step to the end of the files, a manager round every `every` steps; each round's view."""
    seen = []

    def tick() -> None:
        worker.budgets.tick()
        state = worker.budgets.states.get(NAME)
        if state is not None:
            seen.append({**state.to_json(), "windows": dict(w.window_settings(worker))})

    for i in range(limit):
        worker.step()
        if i % every == 0:
            tick()
        ex = worker.engine.executor
        if all(s.exhausted for s in ex.sources) and not any(o.runnable() for o in ex.operators):
            tick()
            worker.checkpoint()  # flushes the sinks
            return seen
    raise AssertionError("the worker did not finish its files")


def budget_records(worker: Worker, kind: str) -> list:
    return [r for r in worker.catalog.adjustments(NAME) if r.kind == kind]


def test_windows_shrink_to_the_budget_inside_their_ranges_and_replay_exactly(
    tmp_path: Path, folder: Path, make_worker
) -> None:
    write(folder, pipeline("300 KiB"))
    worker = make_worker(batch_rows=256)
    worker.reconcile()
    seen = run(worker)
    assert budget_records(worker, "shed") == []  # shedding is random: no exact replay
    records = [logged_adjustment(r) for r in worker.catalog.adjustments(NAME)
               if r.kind in ("window", "granularity")]
    assert records, "the manager made no change"
    assert all(r.reason.startswith("budget:") for r in records)
    for r in records:
        if r.knob == "window" and r.query == "matches":
            assert 1000 <= r.new <= 10000
        elif r.knob == "window":
            assert 2000 <= r.new <= 20000
        else:
            assert r.new in (1, 10, 100)
    settings = w.window_settings(worker)
    light = settings[(NAME, "matches", "B")][0]
    heavy = settings[(NAME, "per_item", "Bids")][0]
    assert light / 10000 < heavy / 20000  # the lighter query gave up more of its range
    last = seen[-1]
    assert last["estimated_bytes"] <= last["memory_budget"] - last["reserve"]
    assert last["shedding"] == {}
    # Exact for the settings in force: `cq run` replaying the log gives the same files.
    replay = write(tmp_path / "replay", pipeline("300 KiB"))
    run_pipeline(load_and_compile(replay), adjustments=records)
    for name in ("matches.jsonl", "per_item.jsonl"):
        got = (folder / NAME / "out" / name).read_text()
        assert got == (replay.parent / "out" / name).read_text(), name


def test_measured_memory_follows_into_the_budget(folder: Path, make_worker) -> None:
    write(folder, pipeline("150 KiB"))
    worker = make_worker(batch_rows=256)
    worker.reconcile()
    seen = run(worker, every=2)
    budget = seen[-1]["memory_budget"]
    # Once the windows had time to drain (the largest window after the last change), the
    # state the operators hold stays under the budget.
    assert max(s["measured_bytes"] for s in seen[len(seen) * 2 // 3:]) <= budget


def test_windows_grow_back_when_a_query_leaves(folder: Path, make_worker) -> None:
    path = write(folder, pipeline("150 KiB"))
    worker = make_worker(batch_rows=256)
    worker.reconcile()
    for _ in range(300):
        worker.step()
        worker.budgets.tick()
    shrunk = w.window_settings(worker)[(NAME, "matches", "B")][0]
    assert shrunk < 10000
    path.write_text(pipeline("150 KiB", big=False))
    worker.reconcile()
    run(worker)
    assert w.window_settings(worker)[(NAME, "matches", "B")][0] > shrunk
    grown = [r for r in budget_records(worker, "window") if "room to grow" in r.detail["reason"]]
    assert grown and all(r.detail["new"] <= 10000 for r in grown)


def test_shedding_only_past_every_range_and_on_record(folder: Path, make_worker) -> None:
    write(folder, pipeline("8 KiB", big=False))
    worker = make_worker(batch_rows=256)
    worker.reconcile()
    seen = run(worker)
    sheds = budget_records(worker, "shed")
    assert sheds, "nothing was shed"
    first = sheds[0].detail
    assert 0 < first["fraction"] < 1 and first["windows"] == ["B", "A"]
    # every range was exhausted first: both windows at their minimum
    assert w.window_settings(worker)[(NAME, "matches", "B")][0] == 1000
    assert seen[-1]["shedding"]["trades/matches"] == pytest.approx(sheds[-1].detail["fraction"])
    dropped = [op.shed_dropped for op in worker.engine.windows(NAME, "matches")]
    assert all(n > 0 for n in dropped)
    text = render_metrics(w.metrics_snapshot(worker)).decode()
    assert re.search(r'cq_shed_fraction\{pipeline="trades",query="matches"\} 0\.\d+', text)
    assert 'cq_memory_budget_bytes{pipeline="trades"} 8192.0' in text


def test_a_query_that_cannot_fit_is_rejected_with_its_estimate(folder: Path, make_worker) -> None:
    path = write(folder, pipeline("150 KiB", big=False))
    worker = make_worker(batch_rows=256)
    worker.reconcile()
    for _ in range(200):
        worker.step()
    greedy = """\
  greedy:
    cql: SELECT * FROM Bids [Range 60000], Asks [Range 60000] WHERE Bids.price > Asks.price
    sink: {type: file, path: out/greedy.jsonl, format: jsonl}
"""
    path.write_text(pipeline("150 KiB", big=False, extra=greedy))
    [result] = worker.reconcile()
    assert result.status == "applied" and list(result.rejected) == ["greedy"]
    assert "minimum settings" in result.rejected["greedy"]
    record = worker.catalog.query(NAME, "greedy")
    assert record.status == "stopped" and "rejected by admission control" in record.error
    [logged] = budget_records(worker, "rejected")
    assert logged.query == "greedy" and "KiB" in logged.detail["reason"]
    assert f"{NAME}/greedy" not in worker.queries and f"{NAME}/matches" in worker.queries


def test_the_running_worker_holds_the_budget_on_its_own(folder: Path, make_worker) -> None:
    """`Worker.run` schedules the rounds (apscheduler) on the engine thread."""
    write(folder, pipeline("150 KiB"))
    worker = make_worker(batch_rows=64, manage_interval=0.05)
    thread = threading.Thread(target=worker.run, daemon=True)
    thread.start()
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            state = worker.budgets.states.get(NAME)
            if state is not None and state.ticks >= 3 and budget_records(worker, "window"):
                break
            time.sleep(0.05)
        else:
            raise AssertionError("no round of the resource manager changed a window")
    finally:
        worker.stop()
        thread.join(30)
    assert not thread.is_alive()
    assert worker._manager is not None and not worker._manager.running


def test_the_pipeline_status_shows_the_budget(folder: Path, make_worker) -> None:
    write(folder, pipeline("150 KiB"))
    worker = make_worker(batch_rows=256)
    worker.reconcile()
    for _ in range(2):  # the first round has seen no rates yet
        for _ in range(30):
            worker.step()
        worker.budgets.tick()
    [p] = [p for p in w.describe(worker)["pipelines"] if p["name"] == NAME]
    b = p["budget"]
    assert b["memory_budget"] == 150 * 1024 and b["reserve"] == pytest.approx(15 * 1024)
    assert b["estimated_bytes"] > 0 and b["measured_bytes"] > 0
    assert 0.0 <= b["f_window"] <= 1.0


def test_a_weight_set_through_the_catalog_moves_the_choice(folder: Path, make_worker) -> None:
    write(folder, pipeline("300 KiB"))
    worker = make_worker(batch_rows=256)
    worker.reconcile()
    worker.catalog.set_control(NAME, "matches", weight=100.0)
    weights = {q.key: q.weight for q in worker.budgets.managed(NAME, worker.pipelines[NAME])}
    assert weights == {"trades/matches": 100.0, "trades/per_item": 4.0}


def test_queries_over_different_streams_are_measured_together(
    folder: Path, make_worker, caplog
) -> None:
    """The first query of a group reads only some of the group's sources."""
    text = pipeline("300 KiB", big=False).replace(
        "queries:\n",
        "queries:\n"
        "  asks_only:\n"
        "    cql: SELECT item, COUNT(*) AS n FROM Asks [Range 5000] GROUP BY item\n"
        "    sink: {type: blackhole}\n"
        "    qos: {window: [1000, 5000]}\n",
    )
    write(folder, text)
    worker = make_worker(batch_rows=256)
    worker.reconcile()
    assert next(iter(worker.queries)) == f"{NAME}/asks_only"
    for _ in range(3):
        for _ in range(30):
            worker.step()
        worker.budgets.tick()
    assert "resource manager failed" not in caplog.text
    decision = worker.budgets.states[NAME].decision
    assert decision is not None and set(decision.settings) == {
        f"{NAME}/asks_only", f"{NAME}/matches"
    }


def test_the_estimate_and_the_samples_count_what_is_queued(folder: Path, make_worker) -> None:
    write(folder, pipeline("300 KiB", big=False))
    worker = make_worker(batch_rows=256)
    worker.reconcile()
    for _ in range(20):
        worker.step()
    assert worker.engine.queued_of(NAME) == 0
    # A read the gates have not taken yet: it waits in the source's queue.
    source = next(s for k, s in worker.engine.sources.items() if k.startswith("Bids"))
    ts = np.arange(source.watermark + 1, source.watermark + 1001, dtype=np.int64)
    batch = Batch((pa.array(ts % 50), pa.array(ts % 1000)), ts, np.ones(1000, np.int64))
    source.output.push(batch)
    assert worker.engine.queued_of(NAME) == batch.nbytes()
    worker.budgets.tick()
    worker.budgets.sample()
    state = worker.budgets.states[NAME]
    held = sum(op.state_size()[1] for op in worker.engine.operators_of(NAME))
    assert state.queued == batch.nbytes() and state.now == held + batch.nbytes()
    assert state.estimated.memory > state.queued
    assert state.to_json()["queued_bytes"] == batch.nbytes()
