"""Compiled bytecode for the processes a benchmark times.

This machine's environment sets PYTHONDONTWRITEBYTECODE, so a checkout's modules are compiled
again at every interpreter start (about 1 s of each `cq run` here) unless their `.pyc` files
exist. An installed package has them (pip compiles on install); a benchmark compiles the
checkout once before it times anything, so every engine's Python starts as an installed one
would. Up-to-date files are skipped; a `.pyc` older than its source is not used.
"""

from __future__ import annotations

import compileall
from pathlib import Path

import cq_service

__all__ = ["compile_package"]


def compile_package() -> None:
    """Write the `.pyc` files of `cq_service` (quietly; unchanged ones are left alone)."""
    compileall.compile_dir(Path(cq_service.__file__).parent, quiet=1)
