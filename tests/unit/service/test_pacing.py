"""Pacing a pausable source to its deployment's memory budget (service/pacing.py), on files
read through a reader that can pause (as a Kafka source can): the budget holds at every
turn's sample when the minimum settings can hold the input, nothing is shed; when they
cannot, the source is paused, then read on a little at a time, and the samples over the
budget are counted — still nothing is shed."""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from cq_service.service.worker import Worker

NAME = "paced"
ROWS = 12_000  # 5 ms apart on average: 60 s


class Pausable:
    """A file reader that can be paused and limited, as a Kafka reader can."""

    def __init__(self, reader: Any):
        self.reader = reader
        self.paused = False
        self.pauses = self.resumes = 0
        self.limits: list[int | None] = []

    def read(self) -> Any:
        assert not self.paused, "a paused source was read"
        return self.reader.read()

    def pause(self) -> None:
        self.paused = True
        self.pauses += 1

    def resume(self) -> None:
        self.paused = False
        self.resumes += 1

    def limit_reads(self, rows: int | None) -> None:
        self.limits.append(rows)
        self.reader.batch_rows = rows or 512

    def __getattr__(self, name: str) -> Any:
        return getattr(self.reader, name)


def write(folder: Path, budget: str, low: int) -> None:
    d = folder / NAME
    (d / "data").mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(5)
    ts = np.cumsum(rng.exponential(5.0, ROWS)).astype(int)
    lines = [json.dumps({"ts": int(t), "k": int(k), "v": int(v)})
             for t, k, v in zip(ts, rng.integers(0, 50, ROWS), rng.integers(0, 1000, ROWS),
                                strict=True)]
    (d / "data" / "s.jsonl").write_text("\n".join(lines) + "\n")
    (d / "pipeline.yaml").write_text(f"""\
version: 1
name: {NAME}
time_unit: ms
resources: {{memory_budget: {budget}}}
streams:
  S:
    schema: {{k: int, v: int}}
    timestamp: ts
    source: {{type: file, path: data/s.jsonl, format: jsonl}}
queries:
  per_key:
    cql: SELECT k, COUNT(*) AS n, SUM(v) AS total FROM S [Range 10000] GROUP BY k
    sink: {{type: blackhole}}
    qos: {{window: [{low}, 10000]}}
""")


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    return tmp_path / "p"


def run(worker: Worker) -> Pausable:
    worker.reconcile()
    [(key, source)] = worker.sources.items()
    paced = Pausable(source.reader)
    source.reader = paced
    worker.engine.sources[key].reader = paced
    ex = worker.engine.executor
    for _ in range(20_000):
        worker.step()
        if all(s.exhausted for s in ex.sources) and not any(o.runnable() for o in ex.operators):
            return paced
    raise AssertionError("the worker did not finish its file")


def test_the_budget_holds_at_every_turn_when_the_minimum_settings_can(
    folder: Path, make_worker
) -> None:
    """The full 10 s window needs about twice the budget: it binds from the first fill."""
    write(folder, "40 KiB", low=1000)
    worker = make_worker(batch_rows=512)
    paced = run(worker)
    state = worker.budgets.states[NAME]
    assert state.samples > 100 and state.over == 0 and state.peak <= 40 * 1024
    assert paced.limits and all(n is None or n <= 512 for n in paced.limits)
    assert [r.kind for r in worker.catalog.adjustments(NAME)].count("window") >= 1
    assert "shed" not in [r.kind for r in worker.catalog.adjustments(NAME)]
    assert worker.engine.windows(NAME, "per_key")[0].shed_dropped == 0


def test_when_nothing_can_hold_it_the_source_pauses_then_reads_on_counted(
    folder: Path, make_worker, caplog
) -> None:
    """Even the minimum window (9 s) needs more than the budget."""
    write(folder, "24 KiB", low=9000)
    worker = make_worker(batch_rows=512)
    with caplog.at_level(logging.INFO, logger="cq.pacing"):
        paced = run(worker)
    state = worker.budgets.states[NAME]
    assert paced.pauses >= 1 and paced.resumes >= 1
    assert state.over > 0  # counted, not hidden
    assert "budget cannot hold this input" in caplog.text
    pace = next(iter(worker.pacing.sources.values()))
    assert pace.pauses == paced.pauses
    # Nothing is shed: the source can wait.
    assert "shed" not in [r.kind for r in worker.catalog.adjustments(NAME)]
    assert worker.engine.windows(NAME, "per_key")[0].shed_dropped == 0
    assert worker.engine.sources[next(iter(worker.sources))].rows_in == ROWS
