"""Factory fixtures for pipeline-file tests: write a pipeline next to small data files."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from cq_service.spec import PipelineSpec, SpecErrors, load_pipeline_text

FIXTURES = Path(__file__).parent / "fixtures"


@pytest.fixture
def pipeline_dir(tmp_path: Path) -> Path:
    """A folder with data/s.csv, data/r.csv and data/e.jsonl for pipelines to read."""
    data = tmp_path / "data"
    data.mkdir()
    (data / "s.csv").write_text("ts,a\n1,2\n")
    (data / "r.csv").write_text("ts,k,_op\n0,x,+\n")
    (data / "e.jsonl").write_text('{"ts": 1}\n')
    return tmp_path


@pytest.fixture
def load(pipeline_dir: Path) -> Callable[[str], PipelineSpec]:
    """Load pipeline text as if written to pipeline_dir/p.yaml."""

    def _load(text: str) -> PipelineSpec:
        return load_pipeline_text(text, pipeline_dir / "p.yaml")

    return _load


@pytest.fixture
def problems(pipeline_dir: Path) -> Callable[[str], list[str]]:
    """The errors of pipeline text, each as ``LINE:COL: message``."""

    def _problems(text: str) -> list[str]:
        with pytest.raises(SpecErrors) as caught:
            load_pipeline_text(text, pipeline_dir / "p.yaml")
        return [f"{e.span.line}:{e.span.col}: {e.message}" for e in caught.value.errors]

    return _problems
