"""SysStream through `cq run`: one element per entity per interval, with statistics checked
against inputs whose counts are known; reading it changes no other query's results."""

from __future__ import annotations

import json
from collections import defaultdict
from itertools import pairwise
from pathlib import Path

import pytest

from cq_service.compiler import load_and_compile
from cq_service.errors import CQError
from cq_service.runner import run_pipeline
from cq_service.spec.sys_stream import SYS_STREAM_FIELDS

# ts,a; the record after ts 2 is malformed, the one after ts 6 is late (max_delay 0).
ROWS = "ts,a\n1,1\n2,5\nx,oops\n3,7\n4,2\n5,9\n6,3\n2,4\n7,8\n8,1\n9,6\n10,4\n"
PASSING = 4  # a > 4 AND a < 9 among the in-order records: 5, 7, 8, 6 (the late 4 would fail)
MONITOR = "SELECT * FROM SysStream"


def _pipeline(folder: Path, monitor: str | None = MONITOR, interval: str = "2") -> Path:
    (folder / "in.csv").write_text(ROWS)
    queries = {
        "big": "SELECT * FROM S WHERE a > 4 AND a < 9",
        "recent": "SELECT Rstream(a) FROM S [Range 4 Slide 2]",
        "last3": "SELECT a FROM S [Rows 3]",
    }
    if monitor is not None:
        queries["stats"] = monitor
    text = (
        "version: 1\nname: mon\ntime_unit: s\n"
        "streams:\n  S:\n    schema: {ts: int, a: int}\n    timestamp: ts\n"
        "    source: {type: file, path: in.csv}\n"
        f"resources: {{statistics_interval: {interval}, filter_order: static}}\nqueries:\n"
    )
    for name, cql in queries.items():
        text += f"  {name}:\n    cql: {cql}\n    sink: {{type: file, path: out/{name}.jsonl}}\n"
    path = folder / "pipeline.yaml"
    path.write_text(text)
    return path


def _rows(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


@pytest.fixture
def run(tmp_path: Path):
    path = _pipeline(tmp_path)
    report = run_pipeline(load_and_compile(path), batch_rows=1)
    return report, _rows(tmp_path / "out" / "stats.jsonl")


def test_one_element_per_entity_per_interval(run) -> None:
    report, stats = run
    assert [k for k in stats[0] if not k.startswith("_")] == [n for n, _, _ in SYS_STREAM_FIELDS]
    by_ts: dict[int, set[tuple[str, str]]] = defaultdict(set)
    for r in stats:
        assert r["_op"] == "+" and r["pipeline"] == "mon"
        key = (r["kind"], r["entity"])
        assert key not in by_ts[r["_ts"]], key  # once per instant
        by_ts[r["_ts"]].add(key)
    assert sorted(by_ts) == [0, 2, 4, 6, 8, 10]  # the boundaries the clock passed, to the end
    ex = report.executor
    entities = {("queue", q.name) for q in ex.queues}
    entities |= {("source", s.name) for s in ex.sources}
    entities |= {("sink", s.name) for s in ex.sinks}
    entities |= {("operator", op.name) for op in ex.downstream if op not in ex.sinks}
    for ts, seen in by_ts.items():
        assert seen == entities, ts


def test_statistics_match_known_inputs(run) -> None:
    report, stats = run
    last = {(r["kind"], r["entity"]): r for r in stats if r["_ts"] == 10}
    source = last[("source", "S")]
    # at 10 every record has been read: 11 well-formed (one of them late), one malformed
    assert source["rows_in"] == 11
    assert source["dead_lettered"] == 1
    assert source["late"] == 1
    assert report.sources["S"] == {"elements": 11, "late": 1, "malformed": 1}
    # counts only grow, and never pass the run's final totals
    series: dict[tuple[str, str], list[dict]] = defaultdict(list)
    for r in stats:
        series[(r["kind"], r["entity"])].append(r)
    finals = {("operator", op.name): op for op in report.executor.downstream}
    for key, rs in series.items():
        ins = [r["rows_in"] for r in rs]
        assert ins == sorted(ins), key
        if key in finals:
            assert ins[-1] <= finals[key].rows_in
    # an interval's selectivity is its rows out over its rows in
    for rs in series.values():
        for before, after in pairwise(rs):
            came = after["rows_in"] - before["rows_in"]
            if came > 0 and after["kind"] != "queue":
                assert after["selectivity"] == pytest.approx(
                    (after["rows_out"] - before["rows_out"]) / came
                )
                assert after["us_per_row"] is None or after["us_per_row"] >= 0
            elif after["kind"] != "queue":
                assert after["selectivity"] is None and after["us_per_row"] is None
    ops = [r for r in stats if r["_ts"] == 10 and r["kind"] == "operator"]
    windows = {r["window"] for r in ops} - {None}
    assert windows == {"Range 4 Slide 2", "Rows 3"}
    orders = {r["filter_order"] for r in ops} - {None}
    assert orders == {"static: F1, F2"}
    rows3 = next(r for r in ops if r["window"] == "Rows 3")
    assert rows3["memory"] > 0
    queues = [r for r in stats if r["_ts"] == 10 and r["kind"] == "queue"]
    assert all(r["selectivity"] is None and r["rows_out"] <= r["rows_in"] for r in queues)


def test_reading_sys_stream_changes_no_other_result(tmp_path: Path) -> None:
    outs = {}
    for monitor in (None, MONITOR):
        folder = tmp_path / str(monitor is None)
        folder.mkdir()
        run_pipeline(load_and_compile(_pipeline(folder, monitor)), batch_rows=1)
        outs[monitor] = {n: (folder / "out" / f"{n}.jsonl").read_text()
                         for n in ("big", "recent", "last3")}
    assert outs[None] == outs[MONITOR]
    assert len(outs[None]["big"].splitlines()) == PASSING


def test_aggregates_over_sys_stream(tmp_path: Path) -> None:
    cql = (
        "SELECT Rstream(entity, AVG(memory) AS mem) FROM SysStream [Range 1 Minute] "
        "WHERE kind = 'operator' GROUP BY entity"
    )
    path = _pipeline(tmp_path, cql)
    report = run_pipeline(load_and_compile(path))
    rows = _rows(tmp_path / "out" / "stats.jsonl")
    operators = {op.name for op in report.executor.downstream if op not in report.executor.sinks}
    assert {r["entity"] for r in rows} == operators
    assert all(r["mem"] >= 0 for r in rows)


def test_sys_stream_name_is_reserved(tmp_path: Path) -> None:
    path = _pipeline(tmp_path)
    text = path.read_text().replace(
        "  S:\n", "  SysStream:\n    schema: {a: int}\n    source: {type: file, path: in.csv}\n  S:\n"
    )
    path.write_text(text)
    with pytest.raises(CQError) as err:
        load_and_compile(path)
    assert "stream name 'SysStream' is reserved" in str(err.value.lines())
    assert ":5:3:" in err.value.lines()[0]


def test_statistics_interval_must_be_positive(tmp_path: Path) -> None:
    path = _pipeline(tmp_path, interval="0")
    with pytest.raises(CQError) as err:
        load_and_compile(path)
    assert "statistics_interval" in err.value.lines()[0]


def test_explain_live_runs_the_file_and_shows_windows_and_orders(tmp_path: Path) -> None:
    """`cq explain --live FILE`: the plan, then every entity's statistics at the end of
    input (the same rows SysStream publishes), sinks left unwritten."""
    import subprocess
    import sys

    path = _pipeline(tmp_path, monitor=None)
    cq = Path(sys.executable).with_name("cq")
    r = subprocess.run([cq, "explain", str(path), "--live"], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    live = r.stdout.split("live, at the end of input")[1]
    assert "Range 4 Slide 2" in live and "Rows 3" in live
    assert "select [static: F1, F2]" in live
    source = next(line for line in live.splitlines() if " S " in line and "source" in line)
    assert source.split()[2] == "11"  # the elements read: every well-formed record
    assert not (tmp_path / "out").exists()
    bad = subprocess.run([cq, "explain", str(path), "--every", "1"], capture_output=True,
                         text=True)
    assert bad.returncode == 2 and "--live" in bad.stderr
