"""The worker's snapshot store: a directory of numbered, checksummed state snapshots.

A snapshot is one file, `snapshot-<seq>.cqs`, under `<snapshots>/<worker name>/`:

    b"CQSNAP1\\n"                      magic and format version
    payload                            pickle (protocol 5) of the snapshot's dict
    payload length (8 bytes, big endian), SHA-256 of the payload (32 bytes)
    b"CQSNAPEND\\n"

It is written to a hidden temporary file in the same directory, fsynced, renamed into place and
the directory fsynced, so a snapshot file is either whole or absent; the newest `keep` are kept
and older ones deleted. `latest` returns the newest one that reads back whole with a matching
checksum; a newer one that does not (truncated, flipped bits, another format) is skipped with a
warning naming the file and the reason, and counted in `corrupt`.

The payload is a pickle because it holds the engine's own objects (batches of Arrow arrays and
numpy arrays, counters, the plan); pickle runs code on load, so the store trusts its directory:
it is the worker's own (docs/service.md, "State snapshots").
"""

from __future__ import annotations

import hashlib
import logging
import os
import pickle
import re
import struct
from pathlib import Path
from typing import IO, Any

import pyarrow as pa

from cq_service.service import failpoints

__all__ = ["SnapshotStore"]

log = logging.getLogger("cq.snapshots")

MAGIC = b"CQSNAP1\n"
END = b"CQSNAPEND\n"
_TRAILER = struct.Struct(">Q32s")
_NAME = re.compile(r"snapshot-(\d{12})\.cqs")


class _Pickler(pickle.Pickler):
    """Pickles an Arrow array that is a slice of a larger one as its own data only (pyarrow
    pickles a slice with its parent's whole buffers: a window of ten rows cut from a chunk of
    65,536 would cost the whole chunk)."""

    def reducer_override(self, obj: Any) -> Any:
        if isinstance(obj, pa.Array) and obj.get_total_buffer_size() > obj.nbytes:
            return pa.concat_arrays([obj]).__reduce__()
        return NotImplemented


class _Hashing:
    """A write-only file that hashes and counts what goes through it."""

    def __init__(self, f: IO[bytes]):
        self.f = f
        self.sha = hashlib.sha256()
        self.size = 0

    def write(self, b: Any) -> int:
        view = memoryview(b)
        self.sha.update(view)
        self.size += view.nbytes
        return self.f.write(view)


class SnapshotStore:
    def __init__(self, root: str | Path, keep: int = 3):
        if keep < 1:
            raise ValueError("a snapshot store keeps at least one snapshot")
        self.root = Path(root)
        self.keep = keep
        self.corrupt = 0  # snapshots skipped because they did not read back whole
        self.written = 0

    def sequences(self) -> list[int]:
        """The numbers of the snapshot files present, oldest first."""
        if not self.root.is_dir():
            return []
        return sorted(int(m.group(1)) for p in self.root.iterdir()
                      if (m := _NAME.fullmatch(p.name)))

    def path(self, seq: int) -> Path:
        return self.root / f"snapshot-{seq:012d}.cqs"

    def write(self, payload: Any) -> int:
        """Write `payload` as the next snapshot; returns its number. Older ones beyond `keep`
        are deleted once it is in place."""
        self.root.mkdir(parents=True, exist_ok=True)
        seqs = self.sequences()
        seq = (seqs[-1] + 1) if seqs else 1
        final = self.path(seq)
        tmp = self.root / f".{final.name}.tmp"
        try:
            with tmp.open("wb") as f:
                f.write(MAGIC)
                body = _Hashing(f)
                _Pickler(body, protocol=5).dump(payload)
                failpoints.hit("snapshot.writing")
                f.write(_TRAILER.pack(body.size, body.sha.digest()))
                f.write(END)
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, final)
        except BaseException:
            tmp.unlink(missing_ok=True)
            raise
        _fsync_dir(self.root)
        self.written += 1
        for old in [s for s in self.sequences() if s < seq][: -(self.keep - 1) or None]:
            self.path(old).unlink(missing_ok=True)
        return seq

    def latest(self) -> tuple[int, Any] | None:
        """(number, payload) of the newest snapshot that reads back whole, or None."""
        self._remove_leftovers()
        for seq in reversed(self.sequences()):
            path = self.path(seq)
            try:
                return seq, read_snapshot(path)
            except (OSError, ValueError, pickle.UnpicklingError, EOFError) as e:
                self.corrupt += 1
                log.warning("snapshot %s cannot be used (%s); trying the one before", path, e)
        return None

    def _remove_leftovers(self) -> None:
        """Temporary files of writes that never finished (a crash while writing)."""
        if self.root.is_dir():
            for p in self.root.glob(".snapshot-*.cqs.tmp"):
                p.unlink(missing_ok=True)


def read_snapshot(path: Path) -> Any:
    """The payload of one snapshot file; ValueError naming what is wrong with it."""
    size = path.stat().st_size
    tail = len(END) + _TRAILER.size
    if size < len(MAGIC) + tail:
        raise ValueError(f"{size} bytes: too short to be a snapshot")
    with path.open("rb") as f:
        if f.read(len(MAGIC)) != MAGIC:
            raise ValueError("not a snapshot of this format (magic)")
        f.seek(size - tail)
        length, digest = _TRAILER.unpack(f.read(_TRAILER.size))
        if f.read(len(END)) != END:
            raise ValueError("truncated (no end marker)")
        if length != size - len(MAGIC) - tail:
            raise ValueError(f"payload of {size - len(MAGIC) - tail} bytes, {length} recorded")
        f.seek(len(MAGIC))
        sha = hashlib.sha256()
        left = length
        while left:
            chunk = f.read(min(left, 1 << 20))
            if not chunk:
                raise ValueError("truncated payload")
            sha.update(chunk)
            left -= len(chunk)
        if sha.digest() != digest:
            raise ValueError("checksum mismatch")
        f.seek(len(MAGIC))
        return pickle.load(f)


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
