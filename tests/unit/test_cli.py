"""The `cq` command: exit codes, FILE:LINE:COL messages, run and explain end to end."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

CQ = Path(sys.executable).with_name("cq")

BAD = """\
version: 1
name: bad
streams:
  S: {schema: {a: int}, timestamp: ts, source: {type: file, path: s.csv}}
queries:
  q1:
    cql: >
      SELECT a, b
      FROM S [Range 5]
    sink: {type: stdout}
  q2:
    cql: "SELECT COUNT(* FROM S"
    sink: {type: stdout}
  q3:
    cql: |
      SELECT a FROM S
      WHERE a LIKE 3
    sink: {type: stdout}
  q4:
    cql: SELECT x FROM q5
  q5:
    cql: SELECT a FROM q4
"""

GOOD = """\
version: 1
name: good
streams:
  S: {schema: {a: int}, timestamp: ts, source: {type: file, path: s.csv}}
queries:
  big:
    cql: SELECT Istream(a) FROM S [Now] WHERE a > 4
    sink: {type: file, path: out/big.jsonl}
  total:
    cql: SELECT SUM(a) AS total FROM S [Rows 2]
    sink: {type: file, path: out/total.jsonl}
"""


def cq(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([str(CQ), *args], cwd=cwd, capture_output=True, text=True, timeout=120)


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    (tmp_path / "s.csv").write_text("ts,a\n1,5\n2,3\n4,9\n")
    return tmp_path


def test_validate_reports_every_cql_error_at_its_place_in_the_yaml(folder: Path) -> None:
    (folder / "bad.yaml").write_text(BAD)
    r = cq("validate", "bad.yaml", cwd=folder)
    assert r.returncode == 2
    assert r.stdout.splitlines() == [
        "bad.yaml:8:17: query 'q1': unknown column 'b'",
        "bad.yaml:12:26: query 'q2': unexpected 'FROM'; expected ')'",
        "bad.yaml:17:13: query 'q3': LIKE needs string, not int",
        "bad.yaml:19:3: views form a cycle: q4 -> q5 -> q4",
    ]


def test_validate_ok_and_run_writes_exact_results(folder: Path) -> None:
    (folder / "good.yaml").write_text(GOOD)
    assert cq("validate", "good.yaml", cwd=folder).returncode == 0
    r = cq("run", "good.yaml", "--stats", cwd=folder)
    assert r.returncode == 0, r.stderr
    assert "peak memory" in r.stderr
    big = [json.loads(x) for x in (folder / "out/big.jsonl").read_text().splitlines()]
    assert big == [{"_ts": 1, "_op": "+", "a": 5}, {"_ts": 4, "_op": "+", "a": 9}]
    total = [json.loads(x) for x in (folder / "out/total.jsonl").read_text().splitlines()]
    assert total == [
        {"_ts": 1, "_op": "+", "total": 5},
        {"_ts": 2, "_op": "-", "total": 5},
        {"_ts": 2, "_op": "+", "total": 8},
        {"_ts": 4, "_op": "-", "total": 8},
        {"_ts": 4, "_op": "+", "total": 12},
    ]


def test_run_refuses_an_invalid_file_without_running(folder: Path) -> None:
    (folder / "bad.yaml").write_text(BAD)
    r = cq("run", "bad.yaml", cwd=folder)
    assert r.returncode == 2
    assert not (folder / "out").exists()


def test_explain_shows_operators_and_sharing(folder: Path) -> None:
    (folder / "good.yaml").write_text(GOOD)
    r = cq("explain", "good.yaml", cwd=folder)
    assert r.returncode == 0
    assert "stream source S" in r.stdout and "shared by big, total" in r.stdout
    assert "window [Rows 2]" in r.stdout and "window [Range 0]" in r.stdout


def test_explain_costs_runs_the_pipeline_and_compares(folder: Path) -> None:
    """Estimates next to measurements, without writing the pipeline's sinks."""
    rows = "\n".join(f"{t},{t % 7}" for t in range(0, 3000, 3))
    (folder / "s.csv").write_text("ts,a\n" + rows + "\n")
    (folder / "good.yaml").write_text(GOOD.replace("[Now]", "[Range 30]"))
    r = cq("explain", "good.yaml", "--costs", cwd=folder)
    assert r.returncode == 0, r.stderr
    assert "est rows" in r.stdout and "meas rows" in r.stdout
    assert "measured: S d = 3 ms" in r.stdout
    costs = r.stdout.split("costs of good")[1].splitlines()
    window = next(line for line in costs if line.startswith("#") and "window [Range 30]" in line)
    est, meas = (float(x) for x in window.split("]")[1].split()[:2])
    assert est == pytest.approx(31 / 3, rel=0.05) and meas == pytest.approx(est, rel=0.05)
    assert not (folder / "out").exists()


def test_run_refuses_a_spark_master_for_an_embedded_pipeline(folder: Path) -> None:
    (folder / "good.yaml").write_text(GOOD)
    r = cq("run", "good.yaml", "--master", "spark://127.0.0.1:7077", cwd=folder)
    assert r.returncode == 2 and "runner: spark" in r.stderr
    assert not (folder / "out").exists()


def _outputs(folder: Path) -> dict[str, str]:
    return {p.name: p.read_text() for p in sorted((folder / "out").iterdir())}


def test_chain_share_from_the_file_or_the_options_gives_fifo_s_results(folder: Path) -> None:
    rows = "".join(f"{t},{(t * 7) % 11}\n" for t in range(1, 201))
    (folder / "s.csv").write_text("ts,a\n" + rows)
    (folder / "good.yaml").write_text(GOOD)
    results = {}
    for how, args in {
        "fifo": ("--policy", "fifo"),
        "options": ("--policy", "chain_share", "--share", "0.3"),
    }.items():
        r = cq("run", "good.yaml", "--batch-rows", "3", *args, cwd=folder)
        assert r.returncode == 0, r.stderr
        results[how] = _outputs(folder)
    shared = GOOD.replace("name: good\n", "name: good\nresources: {scheduler: chain_share, share: 0.3}\n")
    (folder / "shared.yaml").write_text(shared)
    r = cq("run", "shared.yaml", "--batch-rows", "3", "--stats", cwd=folder)
    assert r.returncode == 0, r.stderr
    assert "scheduling steps (chain_share)" in r.stderr  # the file's scheduler ran
    results["file"] = _outputs(folder)
    assert results["fifo"]["total.jsonl"].count("\n") > 300
    assert results["options"] == results["fifo"] == results["file"]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("--policy", "chain_share"), "chain_share needs a share of FIFO steps"),
        (("--policy", "chain_share", "--share", "1.5"), "must be in [0, 1], not 1.5"),
        (("--policy", "chain_share", "--share", "-0.1"), "must be in [0, 1], not -0.1"),
        (("--policy", "fifo", "--share", "0.5"), "applies to chain_share only, not to fifo"),
        (("--share", "0.5"), "--latency-bound and --share go with --policy"),
    ],
)
def test_run_refuses_a_bad_share(folder: Path, args: tuple[str, ...], message: str) -> None:
    (folder / "good.yaml").write_text(GOOD)
    r = cq("run", "good.yaml", *args, cwd=folder)
    assert r.returncode == 2 and message in r.stderr, r.stderr
    assert not (folder / "out").exists()


CONJUNCTIVE = GOOD.replace("WHERE a > 4", "WHERE a > 4 AND a < 100 AND a <> 7")


@pytest.mark.parametrize("order", ["static", "a-greedy", "sweep", "independent", "local-swaps"])
def test_run_filter_order_option_shows_the_order_and_keeps_results(
    folder: Path, order: str
) -> None:
    (folder / "good.yaml").write_text(CONJUNCTIVE)
    explained = cq("explain", "good.yaml", cwd=folder)
    assert "select (3 conjuncts, order: a-greedy)" in explained.stdout
    r = cq("run", "good.yaml", "--stats", "--filter-order", order, cwd=folder)
    assert r.returncode == 0, r.stderr
    assert f"select [{order}: F" in r.stderr
    big = [json.loads(x) for x in (folder / "out/big.jsonl").read_text().splitlines()]
    assert big == [{"_ts": 1, "_op": "+", "a": 5}, {"_ts": 4, "_op": "+", "a": 9}]


def test_run_refuses_an_unknown_filter_order(folder: Path) -> None:
    (folder / "good.yaml").write_text(GOOD)
    r = cq("run", "good.yaml", "--filter-order", "greedy", cwd=folder)
    assert r.returncode == 2 and "unknown --filter-order 'greedy'" in r.stderr, r.stderr
    assert not (folder / "out").exists()
