"""The two ways the chart hands the worker its pipeline files, as the worker sees them.

A ConfigMap volume is kubelet's atomic layout: ``..<timestamp>/`` holds the files, ``..data``
links to it, and each visible file links to ``..data/<file>``; an update writes a new
timestamped folder and swaps ``..data``. git-sync checks each commit out under
``.worktrees/<hash>`` and swaps the ``current`` link. The worker must deploy each file once (not
the hidden copies), and redeploy it when a link swap changes its text."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from cq_service.service.worker import Worker
from tests.unit.service.workers import sqlite_worker

PIPELINE = """\
version: 1
name: mounted
time_unit: ms
streams:
  S:
    schema: {{x: int}}
    timestamp: ts
    source: {{type: file, path: {data}, format: csv}}
queries:
  q:
    cql: SELECT x FROM S WHERE x > {bound}
    sink: {{type: blackhole}}
"""


def swap_link(link: Path, target: str) -> None:
    """Point `link` at `target` atomically (a new link renamed over the old), as kubelet and
    git-sync do."""
    tmp = link.with_name(link.name + ".tmp")
    tmp.symlink_to(target)
    os.replace(tmp, link)


def write_configmap_version(volume: Path, stamp: str, files: dict[str, str]) -> None:
    folder = volume / f"..{stamp}"
    folder.mkdir()
    for name, text in files.items():
        (folder / name).write_text(text)
    swap_link(volume / "..data", folder.name)
    for name in files:
        if not (volume / name).is_symlink():
            (volume / name).symlink_to(f"..data/{name}")


def write_git_commit(root: Path, sha: str, path: str, files: dict[str, str]) -> None:
    folder = root / ".worktrees" / sha / path
    folder.mkdir(parents=True)
    for name, text in files.items():
        (folder / name).write_text(text)
    swap_link(root / "current", f".worktrees/{sha}")


@pytest.fixture
def worker_on(tmp_path: Path):
    workers: list[Worker] = []

    def make(folder: Path) -> Worker:
        workers.append(sqlite_worker(tmp_path, folder, snapshots=str(tmp_path / "snapshots")))
        return workers[-1]

    yield make
    for worker in workers:
        worker.stop()


@pytest.fixture
def data(tmp_path: Path) -> Path:
    path = tmp_path / "s.csv"
    path.write_text("x,ts\n1,10\n5,20\n")
    return path


def statuses(worker: Worker) -> list[tuple[str, str]]:
    return sorted((r.pipeline, r.status) for r in worker.reconcile())


def test_a_configmap_volume_deploys_each_file_once_and_follows_updates(
    tmp_path: Path, data: Path, worker_on
):
    volume = tmp_path / "pipelines"
    volume.mkdir()
    write_configmap_version(
        volume, "2026_01_01_00_00_00.1", {"m.yaml": PIPELINE.format(data=data, bound=0)}
    )
    worker = worker_on(volume)
    assert statuses(worker) == [("mounted", "applied")]
    assert statuses(worker) == []  # nothing changed
    write_configmap_version(
        volume, "2026_01_01_00_01_00.2", {"m.yaml": PIPELINE.format(data=data, bound=2)}
    )
    [result] = worker.reconcile()
    assert (result.pipeline, result.status, result.replaced) == ("mounted", "applied", ["q"])


def test_a_git_sync_checkout_is_followed_through_its_link(tmp_path: Path, data: Path, worker_on):
    root = tmp_path / "git"
    root.mkdir()
    write_git_commit(
        root, "a" * 40, "pipelines/prod", {"m.yaml": PIPELINE.format(data=data, bound=0)}
    )
    worker = worker_on(root / "current" / "pipelines" / "prod")
    assert statuses(worker) == [("mounted", "applied")]
    write_git_commit(
        root, "b" * 40, "pipelines/prod", {"m.yaml": PIPELINE.format(data=data, bound=3)}
    )
    [result] = worker.reconcile()
    assert (result.status, result.replaced) == ("applied", ["q"])
