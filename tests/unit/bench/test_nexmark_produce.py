"""`cq nexmark produce`'s pace (cq_service/bench/nexmark_produce.py): the steady rate and the
bursts as a function of time, the order of the events, and the loop on a simulated clock."""

from __future__ import annotations

import json

import pyarrow as pa
import pytest

from cq_service.bench.nexmark_produce import (
    DEFAULT_TOPICS,
    Schedule,
    parse_bursts,
    produce,
    rows_before,
)
from cq_service.io.nexmark import KINDS, generate


def test_a_steady_rate() -> None:
    s = Schedule(100)
    assert [s.due(t) for t in (0, 0.5, 1, 10, 60.25)] == [0, 50, 100, 1000, 6025]
    assert not any(s.in_burst(t) for t in (0, 30, 60, 61))


def test_bursts_every_minute() -> None:
    s = Schedule(100, *parse_bursts("60:5:4"))  # at 60-65 s, 120-125 s, ... 400 events/s
    assert s.due(59.9) == 5990 and not s.in_burst(59.9)
    assert s.in_burst(60) and s.in_burst(64.9) and not s.in_burst(65)
    assert s.due(62) == 6000 + 2 * 400
    assert s.due(65) == 6500 + 5 * 300  # the burst's extra 3 x 100 events/s for 5 s
    assert s.due(120) == 12000 + 1500
    assert s.due(125) == 12500 + 3000
    assert s.due(150) == 15000 + 3000
    due = [s.due(t / 10) for t in range(2000)]
    assert due == sorted(due)


@pytest.mark.parametrize("text", ["60:5", "a:b:c", "1:2:3:4"])
def test_bad_bursts(text: str) -> None:
    with pytest.raises(ValueError, match="EVERY:LENGTH:FACTOR"):
        parse_bursts(text)


@pytest.mark.parametrize("args", [(0,), (10, 5, 6, 2), (10, 60, 5, 0.5)])
def test_bad_schedules(args: tuple) -> None:
    with pytest.raises(ValueError):
        Schedule(*args)


def test_off() -> None:
    assert parse_bursts("off") == (0.0, 0.0, 1.0)


def test_rows_before_counts_the_generators_events() -> None:
    chunk = next(generate(1000, chunk=1000))
    assert [rows_before(k, 1000) for k in KINDS] == [chunk.table(k).num_rows for k in KINDS]
    assert [rows_before(k, 0) for k in KINDS] == [0, 0, 0]
    assert [rows_before(k, 1) for k in KINDS] == [1, 0, 0]
    assert [rows_before(k, 4) for k in KINDS] == [1, 3, 0]
    assert [rows_before(k, 51) for k in KINDS] == [2, 3, 46]


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += seconds


class FakeWriter:
    def __init__(self) -> None:
        self.sent: dict[str, list[bytes | None]] = {}
        self.flushes = 0

    def send_many(self, topic: str, values: list[bytes | None]) -> None:
        self.sent.setdefault(topic, []).extend(values)

    def flush(self, timeout: float | None = None) -> None:
        self.flushes += 1


def test_produce_follows_the_schedule_on_a_simulated_clock() -> None:
    clock, writer = FakeClock(), FakeWriter()
    seen = []
    done = produce(
        writer,
        Schedule(500, 2, 1, 3),
        seconds=4,
        clock=clock,
        sleep=clock.sleep,
        report=lambda d: seen.append(d.events),
    )
    # 4 s at 500/s, with 1 s of burst at 3x (2-3 s): 2000 + 1000 events
    assert done.events == 3000 and done.seconds == 4
    assert done.rows == {k: rows_before(k, 3000) for k in KINDS}
    assert {t: len(v) for t, v in writer.sent.items()} == {
        DEFAULT_TOPICS[k]: rows_before(k, 3000) for k in KINDS
    }
    assert writer.flushes >= 4 and seen == sorted(seen) and len(seen) >= 3
    # the messages are the generator's rows, in order, as JSON objects
    # (generated 10,000 at a time: the events depend on the chunk size)
    expected = next(generate(10_000, chunk=10_000, rate=500))
    for kind in KINDS:
        rows = [json.loads(v) for v in writer.sent[DEFAULT_TOPICS[kind]]]  # type: ignore[arg-type]
        assert rows == expected.table(kind).slice(0, len(rows)).to_pylist()


def test_produce_stops_at_the_limit_across_chunks() -> None:
    clock, writer = FakeClock(), FakeWriter()
    done = produce(
        writer,
        Schedule(7000),
        limit=25_013,
        topics={k: k for k in KINDS},
        clock=clock,
        sleep=clock.sleep,
    )
    assert done.events == 25_013
    table = pa.concat_tables([c.bid for c in generate(30_000, chunk=10_000, rate=7000)])
    prices = [json.loads(v)["price"] for v in writer.sent["bid"]]
    assert prices == table["price"].to_pylist()[: rows_before("bid", 25_013)]
    assert writer.flushes >= 1


def test_the_commands_refuse_bad_options_before_any_broker() -> None:
    from pathlib import Path

    from typer.testing import CliRunner

    from cq_service.cli import app

    for args, message in (
        (["--bursts", "5:10:2"], "cannot last longer"),
        (["--rate", "0"], "rate must be positive"),
        (["--limit", "-1"], "cannot be negative"),
    ):
        result = CliRunner().invoke(
            app, ["nexmark", "produce", "--bootstrap", "127.0.0.1:1", *args]
        )
        assert result.exit_code == 2 and message in result.output, result.output
    example = Path(__file__).resolve().parents[3] / "pipelines/examples/web-proxy/pipeline.yaml"
    result = CliRunner().invoke(app, ["nexmark", "topics", str(example), "--bootstrap", "x:1"])
    assert result.exit_code == 0 and "created: none (of 0 topics)" in result.output
