"""The optional `archive` section: where `cq archive` writes and how often the worker runs it."""

from __future__ import annotations

from pathlib import Path

import pytest

from cq_service.batch.layout import archive_root
from cq_service.spec.model import DEFAULT_ARCHIVE_DIR

HEADER = "version: 1\nname: p\n"
STREAM = "streams:\n  S:\n    schema: {ts: int, a: int}\n    timestamp: ts\n    source: {type: file, path: data/s.csv}\n"


def test_no_section_archives_beside_the_file(load, pipeline_dir: Path):
    spec = load(HEADER + STREAM)
    assert spec.archive is None
    assert archive_root(spec) == (pipeline_dir / DEFAULT_ARCHIVE_DIR).resolve()


def test_path_is_relative_to_the_pipeline_file_and_every_is_seconds(load, pipeline_dir: Path):
    spec = load(HEADER + STREAM + "archive: {path: history/x, every: 1 hour}\n")
    assert spec.archive.path == str((pipeline_dir / "history" / "x").resolve())
    assert spec.archive.every == 3600.0
    assert spec.archive.span.line == 8
    assert archive_root(spec) == pipeline_dir / "history" / "x"


def test_the_override_wins(load, tmp_path: Path):
    spec = load(HEADER + STREAM + "archive: {path: history}\n")
    assert spec.archive.every is None
    assert archive_root(spec, tmp_path / "elsewhere") == tmp_path / "elsewhere"


def test_defaults_inside_the_section(load, pipeline_dir: Path):
    spec = load(HEADER + STREAM + "archive: {every: 15 minutes}\n")
    assert archive_root(spec) == (pipeline_dir / "archive").resolve()
    assert spec.archive.every == 900.0


@pytest.mark.parametrize(
    ("section", "expected"),
    [
        (
            "archive:\n  path: a\n  often: 1 hour\n",
            "10:3: unknown key 'often' in archive (expected one of: path, every)",
        ),
        ("archive:\n  every: 100 ms\n", "9:10: every of the archive must be at least 1 second, got '100 ms'"),
        (
            "archive:\n  every: 1 fortnight\n",
            "9:10: every of the archive: unknown unit 'fortnight' in duration '1 fortnight' "
            "(use ns, us, ms, s, min, h, d or their names, e.g. 'seconds')",
        ),
        (
            "archive:\n  every: hourly\n",
            "9:10: every of archive 'hourly' is not a duration such as '1 hour' or '15 minutes'",
        ),
        ("archive:\n  every: yes\n", "9:10: every of archive: yes was read as a boolean; quote it"),
        ("archive:\n  path: ''\n", "9:9: path of archive must not be empty"),
        ("archive: 3\n", "8:10: archive must be a mapping, got 3"),
    ],
)
def test_errors_carry_line_and_column(problems, section: str, expected: str):
    assert problems(HEADER + STREAM + section) == [expected]
