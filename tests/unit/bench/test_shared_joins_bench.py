"""`cq bench shared-joins --quick --json` on the engine, and the paced loop's warm-up.

Response times are not asserted (they are measurements); what must hold on any machine is
asserted: every policy finds the same number of results for every query (the shared join is
exact, so the counts are the data's), the preload's results are not counted, and the shared
join keeps less state than the seven queries planned alone.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pyarrow as pa
from typer.testing import CliRunner

from cq_service.bench.cli import bench_app
from cq_service.bench.paced import Arrivals, run_shape
from cq_service.bench.shared_joins import DISTRIBUTIONS
from cq_service.bench.shared_joins.report import checks, text


def _pairs(a_keys: np.ndarray, b_keys: np.ndarray) -> int:
    return int(sum(np.sum(b_keys == k) for k in a_keys))


def test_warm_up_results_are_not_measured(tmp_path: Path) -> None:
    """Tuples arriving at a negative time are a preload: they enter first and their results
    reach the sink, but only the measured tuples' results count as latencies."""
    pipeline = tmp_path / "p.yaml"
    for name in "AB":  # the spec wants the files; the arrivals below are what the run reads
        (tmp_path / f"{name}.csv").write_text("ts,k\n")
    pipeline.write_text(
        "version: 1\nname: warm\ntime_unit: ms\nstreams:\n"
        + "".join(
            f"  {s}: {{schema: {{k: int}}, timestamp: ts, "
            f"source: {{type: file, path: {s}.csv, format: csv}}}}\n"
            for s in "AB"
        )
        + "queries:\n  j:\n    cql: SELECT Istream(*) FROM A [Range 100000], B [Range 100000]"
        " WHERE A.k = B.k\n    sink: {type: blackhole}\n"
    )
    rng = np.random.default_rng(3)
    streams, keys = {}, {}
    for name in ("A", "B"):
        k = rng.integers(0, 5, 60)
        ts = np.arange(60, dtype=np.int64) * 10 + (name == "B")
        at = np.where(ts < 300, -1.0, (ts - 300) / 1e4)  # the first 30 are a preload
        streams[name] = Arrivals(pa.table({"k": k}), at, ts, 300, 1e4)
        keys[name] = k
    run = run_shape(pipeline, streams, "fifo")
    # pairs whose later tuple is measured: all pairs minus the preload's own pairs
    measured = _pairs(keys["A"], keys["B"]) - _pairs(keys["A"][:30], keys["B"][:30])
    assert run.latencies["j"].count == measured


def test_quick_bench_counts_agree_across_policies(tmp_path: Path) -> None:
    result = CliRunner().invoke(
        bench_app, ["shared-joins", "--quick", "--json", "--work", str(tmp_path)]
    )
    assert result.exit_code == 0, result.output
    out = json.loads(result.output)
    by_window = out["by_window"]
    assert set(by_window) == {"mqt", "swf", "lwo", "off"}
    for dist, windows in DISTRIBUTIONS.items():
        counts = {
            p: [by_window[p][dist]["windows"][str(float(w))]["results"] for w in windows]
            for p in by_window
        }
        assert counts["mqt"] == counts["swf"] == counts["lwo"] == counts["off"], dist
        assert all(c > 0 for c in counts["off"][1:]), counts  # every window but 1 s finds pairs
        assert counts["off"] == sorted(counts["off"])  # a larger window holds more pairs
        assert out["checks"][f"{dist}: shared state below the queries alone"]
    assert set(out["bursts"]["mqt"]) == {"1.0", "4.0"}
    assert "burst 4: MQT's average ≥ 50% below LWO's" in out["checks"]


def test_checks_and_text_read_the_figures() -> None:
    """The verdicts follow the numbers: MQT best, LWO flat, SWF rising; and the reverse."""

    def run(avgs: list[float], state: int) -> dict:
        return {"windows": {w: {"avg": a, "max": 2 * a, "results": 1}
                            for w, a in zip((1.0, 600.0), avgs)}, "peak_state_bytes": state}

    good = {"mqt": {"d": run([1, 2], 10)}, "swf": {"d": run([1, 5], 10)},
            "lwo": {"d": run([3, 3], 10)}, "off": {"d": run([2, 2], 50)}}
    bursts = {"mqt": {4.0: {"avg": 1.0, "max_largest": 2.0}},
              "swf": {4.0: {"avg": 1.5, "max_largest": 9.0}},
              "lwo": {4.0: {"avg": 3.0, "max_largest": 3.0}}}
    verdicts = checks(good, bursts)
    assert all(verdicts.values()), verdicts
    bad = {"mqt": {"d": run([3, 9], 60)}, "swf": {"d": run([5, 1], 10)},
           "lwo": {"d": run([1, 3], 10)}, "off": {"d": run([2, 2], 50)}}
    bursts["mqt"][4.0] = {"avg": 2.0, "max_largest": 10.0}
    verdicts = checks(bad, bursts)
    assert not any(verdicts.values()), verdicts
    assert "DOES NOT HOLD: d: MQT best on average" in text(bad, bursts, verdicts)


def test_bad_options_are_refused_before_running(tmp_path: Path) -> None:
    runner = CliRunner()
    for args, says in (
        (["--bursts", "four"], "comma-separated numbers"),
        (["--bursts", "0.5"], "mean bursts ≥ 1"),
        (["--speedup", "0"], "positive rate, speedup"),
    ):
        result = runner.invoke(bench_app, ["shared-joins", "--work", str(tmp_path), *args])
        assert result.exit_code == 2, args
        assert says in result.output, result.output
    assert not any(tmp_path.iterdir())  # nothing ran
