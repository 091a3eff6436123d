"""The io package's surface and its place in the import order."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

import cq_service.io as io_pkg
from cq_service.io import SINKS, SOURCES, SourceError, open_source
from cq_service.spec.model import SourceSpec, StreamSpec

ROOT = Path(__file__).resolve().parents[3]


def test_all_names_exist():
    for name in io_pkg.__all__:
        assert hasattr(io_pkg, name), name


def test_registries_hold_the_builtin_connectors():
    assert {"file:csv", "file:jsonl", "file:parquet"} <= set(SOURCES)
    assert {"file:csv", "file:jsonl", "file:parquet", "stdout", "blackhole"} <= set(SINKS)


def test_io_does_not_import_engine_plan_or_cql():
    code = (
        "import sys, cq_service.io; "
        "bad = [m for m in sys.modules if m.split('.')[:2] in "
        "(['cq_service', 'engine'], ['cq_service', 'plan'], ['cq_service', 'cql'])]; "
        "print(bad)"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT
    )
    assert out.stdout.strip() == "[]"


def test_unknown_source_is_an_error(tmp_path):
    spec = StreamSpec("S", (), SourceSpec("file", str(tmp_path / "s.xml"), "xml"))
    with pytest.raises(SourceError, match="unsupported source 'file:xml'"):
        open_source(spec, "ms")


def test_unknown_time_unit_is_an_error(tmp_path):
    path = tmp_path / "s.csv"
    path.write_text("ts\n1\n")
    spec = StreamSpec("S", (), SourceSpec("file", str(path), "csv"), timestamp="ts")
    with pytest.raises(SourceError, match="unknown time unit"):
        open_source(spec, "fortnight")
