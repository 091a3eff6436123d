"""`cq run`'s progress display (cq_service/progress.py): what it shows of a run, and that it
stays off the output when stderr is not a terminal or with --quiet."""

from __future__ import annotations

import io
import re
import shutil
from pathlib import Path

from rich.console import Console
from typer.testing import CliRunner

from cq_service.cli import app
from cq_service.compiler import load_and_compile
from cq_service.progress import RunProgress
from cq_service.runner import run_pipeline

EXAMPLE = Path(__file__).resolve().parents[2] / "pipelines" / "examples" / "web-proxy"


def _example(tmp_path: Path) -> Path:
    folder = tmp_path / "web-proxy"
    shutil.copytree(EXAMPLE, folder, ignore=shutil.ignore_patterns("out"))
    return folder / "pipeline.yaml"


def test_the_display_follows_sources_and_queries(tmp_path: Path) -> None:
    out = io.StringIO()
    shown = RunProgress(Console(file=out, force_terminal=True, width=140), every=0)
    steps = []

    def after_step(executor) -> None:
        shown.update(executor)
        steps.append([getattr(s.reader, "progress", lambda: None)() for s in executor.sources])

    report = run_pipeline(load_and_compile(_example(tmp_path)), after_step=after_step, batch_rows=8)
    shown.update(report.executor, force=True)
    shown.close()
    text = re.sub(r"\x1b\[[0-9;?]*[a-zA-Z]", "", out.getvalue())
    final = text[text.rindex("source Requests") :]
    assert re.search(r"source Requests\s.*100%\s+60 elements \(.*\), done", final)
    assert re.search(r"source Domains\s.*100%\s+5 elements \(.*\), done", final)
    for query, rows in (("commerce_urls", 34), ("domain_load", 91), ("loyal_clients", 15)):
        assert re.search(rf"query {query}\s+{rows} results", final), final
    # a file source reports bytes read of its size, growing to the whole file
    requests = [step[0] for step in steps]
    assert all(p is not None and p[1] == requests[0][1] > 0 for p in requests)
    read = [p[0] for p in requests]
    assert read == sorted(read) and read[-1] == requests[0][1]  # (one block: 3 KiB)


def test_no_display_when_stderr_is_not_a_terminal(tmp_path: Path) -> None:
    path = _example(tmp_path)
    for args in (["run", str(path)], ["run", str(path), "--quiet"]):
        result = CliRunner().invoke(app, args)
        assert result.exit_code == 0, result.output
        assert "source Requests" not in result.output and "━" not in result.output


def test_the_bench_status_line_names_the_step(capsys) -> None:
    from cq_service.progress import BenchStatus, bench_steps

    out = io.StringIO()
    status = BenchStatus("cq bench kafka", Console(file=out, force_terminal=True, width=120))
    status.say("generating 50,000 events (seed 0)")
    status.say("nexmark-q5 on spark (1/3)")
    status._progress.refresh()
    shown = re.sub(r"\x1b\[[0-9;?]*[a-zA-Z]", "", out.getvalue())
    status.close()
    assert "cq bench kafka: nexmark-q5 on spark (1/3)" in shown  # the status line
    assert "generating 50,000 events (seed 0)\n" in shown  # the steps stay above it
    # not a terminal (pytest's stderr), or quiet: the messages only, on stderr
    for quiet in (False, True):
        with bench_steps("cq bench kafka", quiet=quiet) as say:
            say("q1 on cq (1/1)")
        assert capsys.readouterr().err == "q1 on cq (1/1)\n"
