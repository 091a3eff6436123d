"""The ``cq bench`` application the benchmark families register their commands on, and what
they share: the status line and the description of the machine a result was measured on."""

from __future__ import annotations

import os
import platform
from pathlib import Path

import typer

__all__ = ["bench_app", "is_quiet", "machine", "steps"]

bench_app = typer.Typer(no_args_is_help=True, help="Benchmarks against other engines.")

_QUIET = [False]


@bench_app.callback()
def bench_setup(
    quiet: bool = typer.Option(False, "--quiet", "-q", help="no status line (shown only when "
                               "stderr is a terminal): `cq bench --quiet kafka …`"),
) -> None:
    """Compile the package's bytecode first: the processes a benchmark times start as an
    installed package would (bench/bytecode.py). On a terminal, a status line shows which
    query and engine the benchmark is on."""
    from cq_service.bench.bytecode import compile_package

    _QUIET[0] = quiet
    compile_package()


def is_quiet() -> bool:
    """Whether `cq bench --quiet` turned the status line off."""
    return _QUIET[0]


def steps(title: str, *, silent: bool = False):
    """A benchmark's step messages: to stderr, and into a status line on a terminal; nowhere
    when `silent` (a --json run keeps to its JSON)."""
    from contextlib import nullcontext

    from cq_service.progress import bench_steps

    return nullcontext(lambda _: None) if silent else bench_steps(title, quiet=_QUIET[0])


def machine(note: str = "") -> str:
    """Cores, CPU model, memory and Python, as results files record them; `note` is appended
    (e.g. "shared with other work")."""
    cpu = next(
        (ln.split(":", 1)[1].strip() for ln in Path("/proc/cpuinfo").read_text().splitlines()
         if ln.startswith("model name")),
        platform.processor(),
    )
    return (f"{os.cpu_count()} cores ({cpu}), {_memory_gib()} GiB, "
            f"Python {platform.python_version()}" + (f", {note}" if note else ""))


def _memory_gib() -> int:
    for line in Path("/proc/meminfo").read_text().splitlines():
        if line.startswith("MemTotal:"):
            return round(int(line.split()[1]) / 2**20)
    return 0
