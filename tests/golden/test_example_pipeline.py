"""The shipped example (pipelines/examples/web-proxy) run through `cq run` agrees element for
element with the brute-force reference evaluator (about a minute of the reference's time:
it evaluates every millisecond of the 141 s the example's data spans)."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

from tests.property.harness import Outputs, assert_same, read_sink
from tests.reference import element_key, pipeline_outputs

EXAMPLE = Path(__file__).resolve().parents[2] / "pipelines" / "examples" / "web-proxy"
CQ = Path(sys.executable).with_name("cq")


def test_example_pipeline_agrees_with_the_reference(tmp_path: Path) -> None:
    work = tmp_path / "web-proxy"
    shutil.copytree(EXAMPLE, work, ignore=shutil.ignore_patterns("out"))
    pipeline = work / "pipeline.yaml"
    run = subprocess.run([str(CQ), "run", str(pipeline)], capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr
    reference = pipeline_outputs(pipeline)
    assert set(reference) == {"commerce_urls", "domain_load", "loyal_clients"}
    engine_out, reference_out = Outputs(), Outputs()
    for name, out in reference.items():
        got, cols, problem = read_sink(work / "out" / f"{name}.jsonl", out.columns)
        assert not problem, problem
        assert out.elements, f"the example's query {name} should produce output"
        engine_out[name] = sorted(got, key=element_key)
        engine_out.columns[name] = cols
        reference_out[name] = sorted(out.elements, key=element_key)
        reference_out.columns[name] = list(out.columns)
    assert_same(engine_out, reference_out)
