"""The snapshot store: numbered files written whole or not at all, the newest `keep` kept, and
a snapshot that does not read back whole (truncated, flipped bits, another format, a write
that never finished) skipped for the one before, with a count."""

from __future__ import annotations

import pickle
import signal
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from cq_service.service.snapshots import SnapshotStore, read_snapshot


def payload(n: int) -> dict:
    return {"n": n, "values": np.arange(n, dtype=np.int64)}


def test_written_snapshots_read_back_and_only_the_newest_are_kept(tmp_path: Path) -> None:
    store = SnapshotStore(tmp_path / "w", keep=3)
    assert store.latest() is None
    for n in range(1, 6):
        assert store.write(payload(n)) == n
    assert store.sequences() == [3, 4, 5]
    seq, got = store.latest()
    assert seq == 5 and got["n"] == 5 and got["values"].tolist() == list(range(5))
    assert store.corrupt == 0
    assert not list((tmp_path / "w").glob(".*"))  # no temporary files left


def test_keep_one(tmp_path: Path) -> None:
    store = SnapshotStore(tmp_path, keep=1)
    store.write(payload(1))
    store.write(payload(2))
    assert store.sequences() == [2]


@pytest.mark.parametrize("damage", ["truncate", "flip", "magic", "empty"])
def test_a_damaged_snapshot_is_skipped_for_the_one_before(tmp_path: Path, damage: str) -> None:
    store = SnapshotStore(tmp_path)
    store.write(payload(10))
    store.write(payload(20))
    path = store.path(2)
    data = bytearray(path.read_bytes())
    if damage == "truncate":
        data = data[: len(data) // 2]
    elif damage == "flip":
        data[len(data) // 2] ^= 0x01
    elif damage == "magic":
        data[:4] = b"XXXX"
    else:
        data = bytearray()
    path.write_bytes(bytes(data))
    with pytest.raises(ValueError):
        read_snapshot(path)
    seq, got = store.latest()
    assert (seq, got["n"]) == (1, 10)
    assert store.corrupt == 1


def test_nothing_usable_is_none(tmp_path: Path) -> None:
    store = SnapshotStore(tmp_path)
    store.write(payload(1))
    store.path(1).write_bytes(b"garbage")
    assert store.latest() is None and store.corrupt == 1


def test_a_write_killed_half_way_leaves_the_previous_snapshot(tmp_path: Path) -> None:
    """The failpoint inside `write` kills the process with the payload in a temporary file:
    the store still reads the snapshot before it, and removes the leftover."""
    store = SnapshotStore(tmp_path)
    store.write(payload(7))
    code = (
        "from cq_service.service import failpoints\n"
        "from cq_service.service.snapshots import SnapshotStore\n"
        "failpoints.arm('snapshot.writing=1')\n"
        f"SnapshotStore({str(tmp_path)!r}).write({{'n': 8}})\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, timeout=60)
    assert done.returncode == -signal.SIGKILL
    assert list(tmp_path.glob(".snapshot-*.tmp"))  # the unfinished write
    seq, got = store.latest()
    assert (seq, got["n"]) == (1, 7)
    assert not list(tmp_path.glob(".snapshot-*.tmp"))


def test_an_unpicklable_payload_leaves_no_file(tmp_path: Path) -> None:
    store = SnapshotStore(tmp_path)
    with pytest.raises((pickle.PicklingError, AttributeError, TypeError)):
        store.write({"f": lambda: 1})
    assert store.sequences() == [] and not list(tmp_path.iterdir())


def test_a_slice_is_stored_as_its_own_rows(tmp_path: Path) -> None:
    """A window's ten rows cut from a chunk of a million cost ten rows, not the chunk (pyarrow
    alone would pickle the parent's whole buffers)."""
    import pyarrow as pa

    chunk = pa.array(np.arange(1_000_000, dtype=np.int64))
    strings = pa.array([f"s{i}" for i in range(100_000)])
    store = SnapshotStore(tmp_path)
    store.write({"window": [chunk.slice(500, 10), strings.slice(7, 10)]})
    assert store.path(1).stat().st_size < 2_000
    _, got = store.latest()
    assert got["window"][0].to_pylist() == list(range(500, 510))
    assert got["window"][1].to_pylist() == [f"s{i}" for i in range(7, 17)]
