"""Golden cases: hand-written pipelines and data with outputs worked out by hand.

Each folder under `cases/` holds `pipeline.yaml`, its data files, and `expected/<query>.jsonl`
for every query with a sink (written to `out/<query>.jsonl`). The case is copied to a temporary
folder and run through the real command line, `cq run pipeline.yaml`; every output file must
equal its expected file element for element: the same timestamps and ops, the same rows as a
multiset within each timestamp, the same column names in the same order.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.property.harness import assert_same, read_sink

CASES = Path(__file__).parent / "cases"
CASE_DIRS = sorted(p for p in CASES.iterdir() if (p / "pipeline.yaml").exists())


def cq_executable() -> str:
    exe = Path(sys.executable).parent / "cq"
    if exe.exists():
        return str(exe)
    found = shutil.which("cq")
    assert found is not None, "the cq command is not installed: run `make test`"
    return found


def _expected_columns(path: Path) -> list[str]:
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.strip():
            return [k for k in json.loads(line) if k not in ("_ts", "_op")]
    return []


@pytest.mark.parametrize("case", CASE_DIRS, ids=[p.name for p in CASE_DIRS])
def test_golden(case: Path, tmp_path: Path) -> None:
    work = tmp_path / case.name
    shutil.copytree(case, work, ignore=shutil.ignore_patterns("expected", "out"))
    proc = subprocess.run(
        [cq_executable(), "run", "pipeline.yaml"],
        cwd=work,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, f"cq run exited {proc.returncode}\n{proc.stdout}\n{proc.stderr}"
    expected_files = sorted((case / "expected").glob("*.jsonl"))
    assert expected_files, f"{case.name}: no expected outputs"
    engine, expected, problems = {}, {}, []
    for exp in expected_files:
        query = exp.stem
        expected[query], exp_cols, _ = read_sink(exp, None)
        got, got_cols, problem = read_sink(work / "out" / exp.name, exp_cols)
        engine[query] = got
        if problem:
            problems.append(f"{query}: {problem}")
        if got and got_cols != _expected_columns(exp):
            problems.append(f"{query}: columns {got_cols}, expected {_expected_columns(exp)}")
    pipeline_text = (case / "pipeline.yaml").read_text(encoding="utf-8")
    assert not problems, "\n".join(problems) + "\n\n" + pipeline_text
    assert_same(engine, expected, pipeline_text)
