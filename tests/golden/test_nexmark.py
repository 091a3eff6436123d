"""The NEXMark pipeline (pipelines/nexmark/nexmark.yaml): q0-q8 through `cq run` agree element for
element with the brute-force reference evaluator on a small generated input, and the generator
source gives exactly the events `cq nexmark generate` writes.

The input is stretched in time (10 events per second of event time) so that 1,500 events span
150 s: q5's and q7's minute boundaries pass twice, auctions close (up to 10 min later), windows
slide. The reference evaluates every instant of the run, so it reads the events in seconds
(timestamps divided by 1000, the pipeline's time_unit `s`): some 750 instants, not 750,000."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
import yaml

from cq_service.io import nexmark
from tests.property.harness import Outputs, assert_same, read_sink
from tests.reference import element_key, pipeline_outputs

NEXMARK = Path(__file__).resolve().parents[2] / "pipelines" / "nexmark"
CQ = Path(sys.executable).with_name("cq")
EVENTS, RATE, SEED = 1_500, 10.0, 7
QUERIES = [f"q{i}" for i in range(9)]


def _pipeline(work: Path, variant: str) -> Path:
    """The shipped pipeline on a small input: `generator` sources, the same events as `files`,
    or as files in `seconds`."""
    doc = yaml.safe_load((NEXMARK / "nexmark.yaml").read_text(encoding="utf-8"))
    if variant == "seconds":
        doc["time_unit"] = "s"
        doc["relations"]["Category"]["source"]["path"] = "categories-s.csv"
    for stream in doc["streams"].values():
        if stream.get("max_delay") == "10 minutes":  # the reference reads time_unit integers
            stream["max_delay"] = 600 if variant == "seconds" else 600_000
        src = stream["source"]
        if variant == "generator":
            src.update(events=EVENTS, rate=RATE, seed=SEED)
        else:
            folder = "data-s" if variant == "seconds" else "data"
            stream["source"] = {"type": "file", "path": f"{folder}/{src['table']}.parquet"}
    path = work / f"{variant}.yaml"
    for q in doc["queries"].values():
        if "sink" in q:
            q["sink"]["path"] = q["sink"]["path"].replace("out/", f"out-{path.stem}/")
    path.write_text(yaml.safe_dump(doc, sort_keys=False), encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def work(tmp_path_factory: pytest.TempPathFactory) -> Path:
    work = tmp_path_factory.mktemp("nexmark")
    shutil.copy(NEXMARK / "categories.csv", work)
    nexmark.write(work / "data", EVENTS, seed=SEED, rate=RATE)
    _in_seconds(work)
    for variant in ("generator", "files", "seconds"):
        pipeline = _pipeline(work, variant)
        run = subprocess.run(
            [str(CQ), "run", str(pipeline)], capture_output=True, text=True, timeout=300
        )
        assert run.returncode == 0, run.stderr
    return work


def _in_seconds(work: Path) -> None:
    (work / "data-s").mkdir()
    for kind in nexmark.KINDS:
        table = pq.read_table(work / "data" / f"{kind}.parquet")
        for name in ("dateTime", "expires"):
            if name in table.column_names:
                seconds = pc.divide(table[name], pa.scalar(1000, pa.int64()))
                table = table.set_column(table.column_names.index(name), name, seconds)
        pq.write_table(table, work / "data-s" / f"{kind}.parquet")
    text = (work / "categories.csv").read_text(encoding="utf-8")
    (work / "categories-s.csv").write_text(text.replace("1436918400000", "1436918400"))


def test_the_generator_source_reads_what_cq_nexmark_generate_writes(work: Path) -> None:
    for q in QUERIES:
        a = (work / "out-files" / f"{q}.jsonl").read_bytes()
        b = (work / "out-generator" / f"{q}.jsonl").read_bytes()
        assert a == b, f"{q}: the generator source and the files give different results"


@pytest.mark.slow
def test_q0_to_q8_agree_with_the_reference(work: Path) -> None:
    reference = pipeline_outputs(work / "seconds.yaml")
    engine_out, reference_out = Outputs(), Outputs()
    for name in QUERIES:
        out = reference[name]
        got, cols, problem = read_sink(work / "out-seconds" / f"{name}.jsonl", out.columns)
        assert not problem, problem
        assert out.elements, f"{name} should produce output on this input"
        engine_out[name] = sorted(got, key=element_key)
        engine_out.columns[name] = cols
        reference_out[name] = sorted(out.elements, key=element_key)
        reference_out.columns[name] = list(out.columns)
    assert_same(engine_out, reference_out)
