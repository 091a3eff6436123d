"""What `PlanMeter` measures on real runs: a join's selectivity, with and without a residual
predicate; sources' rows per read and operators' runs."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from cq_service.adaptive.measure import PlanMeter
from cq_service.adaptive.poisson import poisson_timestamps
from cq_service.compiler import load_and_compile
from cq_service.cql import logical as L
from cq_service.runner import run_pipeline


def metered_run(tmp_path: Path, where: str, domain: int):
    lines = ["version: 1", "name: sel", "time_unit: ms", "streams:"]
    for i, name in enumerate(("S", "T")):
        rng = np.random.default_rng(i)
        ts = poisson_timestamps(rng, 10.0, 120)
        path = tmp_path / f"{name}.parquet"
        pq.write_table(pa.table({"ts": ts, "a": rng.integers(0, domain, len(ts))}), path)
        lines += [
            f"  {name}:",
            "    schema: {a: int}",
            "    timestamp: ts",
            f"    source: {{type: file, path: {path}, format: parquet}}",
        ]
    cql = f"SELECT * FROM S [Range 2000], T [Range 2000] WHERE {where}"
    lines += ["queries:", f'  q: {{cql: "{cql}", sink: {{type: blackhole}}}}']
    (tmp_path / "p.yaml").write_text("\n".join(lines) + "\n")
    compiled = load_and_compile(tmp_path / "p.yaml")
    meter = PlanMeter(compiled.plan, unit_seconds=1e-3)
    report = run_pipeline(compiled, batch_rows=20, after_step=meter)
    meter.finish(report.executor)
    return compiled, meter


def measured_selectivity(tmp_path: Path, where: str, domain: int) -> float:
    compiled, meter = metered_run(tmp_path, where, domain)
    join = next(n.id for n in compiled.plan.nodes if isinstance(n.op, L.Join))
    return meter.observed().selectivity[join]


def test_rows_per_read_and_runs_are_measured(tmp_path: Path) -> None:
    """Sources read 20 rows at a time (the last read finds nothing); a window runs once per
    read of its source, after the warm-up as before it."""
    compiled, meter = metered_run(tmp_path, "S.a = T.a", 50)
    read_rows = meter.observed().read_rows
    assert set(read_rows) == {"S", "T"}
    for rows in read_rows.values():
        assert 19.5 <= rows <= 20.0
    measured = meter.measured()
    by_kind = {n.kind: measured[n.id] for n in compiled.plan.nodes}
    source = next(n for n in compiled.plan.nodes if n.kind == "Source")
    window = next(n for n in compiled.plan.nodes if n.kind == "WindowOp" and n.inputs == [source.id])
    assert by_kind["Join"].runs > 0
    assert abs(measured[window.id].runs - measured[source.id].runs) <= 1


def test_an_equi_join_selectivity_is_the_share_of_matching_keys(tmp_path: Path) -> None:
    assert measured_selectivity(tmp_path, "S.a = T.a", 50) == pytest.approx(1 / 50, rel=0.1)


def test_a_band_join_selectivity_counts_its_residual(tmp_path: Path) -> None:
    """No keys: every pair is a candidate and the residual decides; `key_matches` alone would
    say 1."""
    sel = measured_selectivity(tmp_path, "S.a >= T.a AND S.a < T.a + 4", 200)
    assert sel == pytest.approx(4 / 200, rel=0.15)
