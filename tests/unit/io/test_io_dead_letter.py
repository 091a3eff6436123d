"""The dead-letter sink: malformed records and late elements as JSON lines, opened lazily."""

from __future__ import annotations

import json

import pytest

from cq_service.io import DeadLetterSink, DeadRecord, LateElement, SinkError, open_source
from cq_service.spec.model import SinkSpec


def test_no_file_when_nothing_is_dead_lettered(tmp_path):
    path = tmp_path / "dl" / "dead.jsonl"
    sink = DeadLetterSink(SinkSpec("file", str(path), "jsonl"))
    assert sink.write([]) == 0
    sink.close()
    assert not path.exists()
    assert sink.count == 0


def test_stale_file_from_an_earlier_run_is_removed(tmp_path):
    path = tmp_path / "dead.jsonl"
    path.write_text("old\n")
    DeadLetterSink(SinkSpec("file", str(path), "jsonl")).close()
    assert not path.exists()


def test_records_and_late_elements_exact_bytes(tmp_path):
    path = tmp_path / "dl" / "dead.jsonl"
    with DeadLetterSink(SinkSpec("file", str(path))) as sink:
        n = sink.write(
            [
                DeadRecord("S", "/d/s.csv", 3, "column 'price': 'abc' is not an int", "2,abc"),
                LateElement.make("S", 5, {"a": 1, "f": float("nan"), "s": "é"}, 17, 10),
            ]
        )
        sink.write(iter([DeadRecord("R", "/d/r.jsonl", 9, "invalid JSON: x", '{"a"')]))
        assert (n, sink.count) == (2, 3)
    assert path.read_text(encoding="utf-8") == (
        '{"source": "S", "file": "/d/s.csv", "record": 3, '
        '"reason": "column \'price\': \'abc\' is not an int", "raw": "2,abc"}\n'
        '{"source": "S", "reason": "late: timestamp 5 < 17 - max_delay 10", "_ts": 5, '
        '"row": {"a": 1, "f": null, "s": "é"}}\n'
        '{"source": "R", "file": "/d/r.jsonl", "record": 9, "reason": "invalid JSON: x", '
        '"raw": "{\\"a\\""}\n'
    )


def test_dead_records_from_a_source_round_trip(tmp_path, write, stream):
    path = write("s.csv", "ts,a\n1,x\n")
    dead = open_source(stream(path, {"a": "int"}), "ms").read().dead
    out = tmp_path / "dead.jsonl"
    with DeadLetterSink(SinkSpec("file", str(out), "jsonl")) as sink:
        sink.write(dead)
    assert json.loads(out.read_text()) == {
        "source": "S",
        "file": str(path),
        "record": 2,
        "reason": "column 'a': 'x' is not an int",
        "raw": "1,x",
    }


def test_the_newest_entries_are_kept_as_samples():
    sink = DeadLetterSink(SinkSpec("blackhole"))
    assert list(sink.recent) == []
    sink.write([DeadRecord("S", "/d/s.csv", k, f"bad {k}", str(k)) for k in range(7)])
    sink.write([DeadRecord("S", "/d/s.csv", 7, "bad 7", "7")])
    assert [json.loads(line)["record"] for line in sink.recent] == [3, 4, 5, 6, 7]
    assert sink.count == 8


def test_stdout_and_blackhole(capsys):
    record = DeadRecord("S", "f", 1, "r", "raw")
    with DeadLetterSink(SinkSpec("stdout")) as sink:
        sink.write([record])
    assert json.loads(capsys.readouterr().out)["reason"] == "r"
    with DeadLetterSink(SinkSpec("blackhole")) as hole:
        hole.write([record, record])
    assert hole.count == 2


def test_bad_specs(tmp_path):
    with pytest.raises(SinkError, match="writes jsonl"):
        DeadLetterSink(SinkSpec("file", str(tmp_path / "d.csv"), "csv"))
    with pytest.raises(SinkError, match="unsupported"):
        DeadLetterSink(SinkSpec("http"))
    with pytest.raises(SinkError, match="a kafka dead-letter sink takes a topic"):
        DeadLetterSink(SinkSpec("kafka"))
    sink = DeadLetterSink(SinkSpec("blackhole"))
    with pytest.raises(TypeError):
        sink.write(["not an entry"])
    sink.close()
    with pytest.raises(SinkError, match="closed"):
        sink.write([])


def test_append_keeps_what_an_earlier_worker_wrote(tmp_path) -> None:
    from cq_service.io.base import DeadRecord
    from cq_service.io.dead_letter import DeadLetterSink
    from cq_service.spec.model import SinkSpec

    path = tmp_path / "dead.jsonl"
    spec = SinkSpec(type="file", path=str(path), format="jsonl", options={"append": True})
    for n in (1, 2):
        sink = DeadLetterSink(spec)
        sink.write([DeadRecord("S", "f", n, "bad", "x")])
        sink.close()
    assert [line.count('"record": ') for line in path.read_text().splitlines()] == [1, 1]
    assert '"record": 1' in path.read_text() and '"record": 2' in path.read_text()
