"""Running a benchmark participant as a child process and measuring its peak resident memory.

A JVM peer is a grandchild (pyspark and pyflink start `java` themselves), so `wait4`'s
`ru_maxrss` would miss it: the whole process tree's resident set is sampled from /proc instead.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import threading
import time
from dataclasses import dataclass
from pathlib import Path

__all__ = ["Finished", "process_tree", "run_measured"]

_PAGE = os.sysconf("SC_PAGE_SIZE")


@dataclass(frozen=True)
class Finished:
    returncode: int
    stdout: str
    stderr: str
    peak_rss: int  # bytes, the process tree's largest sampled total
    wall: float  # seconds, start to exit


def _children() -> dict[int, list[int]]:
    tree: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        ppid = int(stat.rpartition(")")[2].split()[1])
        tree.setdefault(ppid, []).append(int(entry.name))
    return tree


def process_tree(root: int) -> list[int]:
    """`root` and every process descended from it, as /proc shows them now."""
    tree, pids, todo = _children(), [], [root]
    while todo:
        pid = todo.pop()
        pids.append(pid)
        todo.extend(tree.get(pid, ()))
    return pids


def _tree_rss(root: int) -> int:
    total = 0
    for pid in process_tree(root):
        with contextlib.suppress(OSError, IndexError, ValueError):
            total += int(Path(f"/proc/{pid}/statm").read_text().split()[1]) * _PAGE
    return total


def run_measured(
    cmd: list[str], *, timeout: float, env: dict[str, str] | None = None, interval: float = 0.1
) -> Finished:
    """Run `cmd` to completion, sampling its process tree's resident memory every `interval`."""
    start = time.perf_counter()
    proc = subprocess.Popen(
        cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env
    )
    peak = 0
    done = threading.Event()

    def sample() -> None:
        nonlocal peak
        while not done.wait(interval):
            peak = max(peak, _tree_rss(proc.pid))

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, err = proc.communicate()
        err += f"\n(killed after {timeout:.0f} s)"
    finally:
        done.set()
        sampler.join()
    return Finished(proc.returncode, out, err, peak, time.perf_counter() - start)
