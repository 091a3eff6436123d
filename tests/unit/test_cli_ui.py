"""`cq ui PIPELINE.yaml` (cq_service/cli_ui.py): the file runs in a worker of its own, whose
web view and events answer over HTTP; an invalid file is refused with FILE:LINE:COL."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

from typer.testing import CliRunner

from cq_service.cli import app

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "pipelines" / "examples" / "web-proxy"


def _get(url: str) -> tuple[int, str]:
    with urllib.request.urlopen(url, timeout=10) as r:
        return r.status, r.read().decode()


def _first_event(url: str) -> dict:
    with urllib.request.urlopen(url, timeout=20) as r:
        for line in r:
            if line.startswith(b"data:"):
                return json.loads(line[5:])
    raise AssertionError("no event")


def test_ui_serves_the_web_view_of_a_file_run(tmp_path: Path) -> None:
    folder = tmp_path / "web-proxy"
    shutil.copytree(EXAMPLE, folder, ignore=shutil.ignore_patterns("out"))
    state = tmp_path / "state"
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "cq_service.cli",
            "ui",
            str(folder / "pipeline.yaml"),
            "--port",
            "0",
            "--token",
            "secret",
            "--state",
            str(state),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        found = re.search(r"web view (http://127\.0\.0\.1:\d+)/ui/ \(API token secret\)", line)
        assert found, line + proc.stdout.read()
        base = found.group(1)
        deadline = time.monotonic() + 30
        while True:
            try:
                status, page = _get(f"{base}/ui/")
                break
            except OSError:
                assert time.monotonic() < deadline
                time.sleep(0.2)
        assert status == 200 and "<html" in page.lower()
        event = _first_event(f"{base}/pipelines/web-proxy/events")
        assert event["pipeline"] == "web-proxy"
        assert any(n["label"].endswith("source Requests") for n in event["nodes"])
        # the run is `cq run`'s: its sinks write beside the file
        deadline = time.monotonic() + 30
        out = folder / "out" / "loyal_clients.jsonl"
        while not (out.exists() and out.read_text().count("\n") == 15):
            assert time.monotonic() < deadline
            time.sleep(0.2)
        assert (state / "catalog.db").exists()
    finally:
        proc.send_signal(signal.SIGINT)
        assert proc.wait(30) == 0


def test_ui_refuses_an_invalid_file(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("version: 1\nname: bad\nqueries:\n  q:\n    cql: SELECT FROM\n")
    result = CliRunner().invoke(app, ["ui", str(bad), "--port", "0"])
    assert result.exit_code == 2
    assert re.search(rf"{re.escape(str(bad))}:\d+:\d+: ", result.output), result.output
