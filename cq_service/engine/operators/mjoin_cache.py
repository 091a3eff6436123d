"""A subresult cache on a segment of an MJoin pipeline (thesis 003 §5.3; docs/joins.md,
"A-Caching"; the seam: engine/cache_policy.py).

A segment is a run of consecutive probes of input i's pipeline. What those probes add to a
partial row depends only on the values of the equalities joining the inputs bound before the
segment to the segment's inputs — the cache *key* — and on the segment's inputs' current
relations (the filters that read only segment inputs run inside it; those that also read
earlier inputs run after the lookup). An entry holds, for one key, the segment's join of those
relations: its inputs' columns and the product of weights, one row per combination.

**Consistency.** An entry is never stale: every insertion or deletion on a segment input (a
window's expiry, a relation's retraction) invalidates, before the next lookup, every entry it
could change. When the updated input holds the segment side of every key equality, the
entries named by its rows' keys go; when it holds some, the entries that agree with a row on
those; when it holds none, all of them. Entries are filled from the relations as they stand
(the MJoin only looks a segment up when none of its inputs has a delta in the telescoping term
being computed), and never from a delta.

**Memory.** Entries are direct-mapped: key → slot (its hash modulo `slots`); a new entry
replaces whatever held its slot. Filled rows live in blocks (one per fill), entries refer to
ranges of a block; a block goes when no entry refers to it, and live blocks are merged when
there are many. `max_rows` bounds the result rows held (a fill beyond it is used once and not
kept). A *shadow* (values=False) keeps keys only: the would-be hits of a profiled candidate.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from cq_service.engine.cache_policy import Segment

__all__ = ["SegmentCache"]

Key = tuple


class SegmentCache:
    """The entries of one segment's cache (or, with `values` False, its shadow)."""

    MAX_BLOCKS = 8

    def __init__(
        self,
        segment: Segment,
        key_ev: list,
        inv: list[tuple[int, object]],
        columns: list[int],
        values: bool = True,
        slots: int = 4096,
        max_rows: int = 1 << 20,
    ):
        self.segment = segment
        self.key_ev = key_ev  # over the partial rows' columns
        self.inv = inv  # per key part: (segment input, evaluator over its own columns)
        self.columns = columns  # the segment inputs' columns in the partial rows
        self.values = values
        self.slots = max(1, slots)
        self.max_rows = max_rows
        # slot -> (key, block, lo, hi) (values) or key (shadow)
        self._slots: dict[int, tuple] = {}
        self._blocks: dict[int, list] = {}  # id -> [columns, w, entries referring to it]
        self._next_block = 0
        self.rows = 0  # result rows held by live entries

    # -- keys -------------------------------------------------------------------------------

    def distinct(self, cols: list, m: int) -> tuple[list[Key], np.ndarray]:
        """The distinct keys of `m` partial rows, and each row's index among them."""
        if len(self.key_ev) == 1:  # one key part: vectorised
            arr = self.key_ev[0](cols, m)
            uniq = pc.unique(arr)
            inv = pc.index_in(arr, value_set=uniq).to_numpy(zero_copy_only=False)
            return [(v,) for v in uniq.to_pylist()], inv.astype(np.int64)
        parts = [ev(cols, m).to_pylist() for ev in self.key_ev]
        ids: dict = {}
        keys = zip(*parts, strict=True)
        inv = np.fromiter((ids.setdefault(k, len(ids)) for k in keys), np.int64, m)
        return list(ids), inv

    def __len__(self) -> int:
        return len(self._slots)

    def get(self, key: Key) -> tuple | None:
        """The entry of `key` — (key, block, lo, hi), or the key in a shadow — or None."""
        e = self._slots.get(hash(key) % self.slots)
        if e is None:
            return None
        k = e[0] if self.values else e
        return e if k == key else None

    # -- filling ----------------------------------------------------------------------------

    def put_block(self, cols: list[pa.Array], w: np.ndarray) -> int:
        """A block of filled rows (the segment inputs' columns and weights); its id."""
        b = self._next_block
        self._next_block += 1
        self._blocks[b] = [cols, w, 1]  # pinned: `unpin` once read
        return b

    def unpin(self, block: int) -> None:
        """Release a block `put_block` returned: gone if no entry refers to it."""
        blk = self._blocks[block]
        blk[2] -= 1
        if blk[2] == 0:
            del self._blocks[block]
        if len(self._blocks) > self.MAX_BLOCKS:
            self._merge()

    def put(self, key: Key, block: int = -1, lo: int = 0, hi: int = 0) -> bool:
        """Keep `key`'s entry (rows [lo, hi) of `block`); False when over `max_rows`."""
        slot = hash(key) % self.slots
        old = self._slots.get(slot)
        if not self.values:
            self._slots[slot] = key
            return True
        if old is not None:
            self._drop(slot, old)
        if self.rows + (hi - lo) > self.max_rows:
            return False
        self._slots[slot] = (key, block, lo, hi)
        self._blocks[block][2] += 1
        self.rows += hi - lo
        return True

    def _drop(self, slot: int, entry: tuple) -> None:
        del self._slots[slot]
        if self.values:
            _, b, lo, hi = entry
            self.rows -= hi - lo
            blk = self._blocks[b]
            blk[2] -= 1
            if blk[2] == 0:
                del self._blocks[b]

    def _merge(self) -> None:
        """One block with the rows of every live entry."""
        entries = sorted(self._slots.items())
        if not entries:
            self._blocks.clear()
            return
        slots, blocks, los, his = [], [], [], []
        for slot, (_, b, lo, hi) in entries:
            slots.append(slot)
            blocks.append(b)
            los.append(lo)
            his.append(hi)
        cols, w, starts = self.gather(np.array(blocks), np.array(los), np.array(his))
        self._blocks.clear()
        nb = self.put_block(cols, w)
        self._blocks[nb][2] = len(entries)
        for (slot, (key, _, lo, hi)), s in zip(entries, starts.tolist(), strict=True):
            self._slots[slot] = (key, nb, s, s + hi - lo)

    # -- reading ----------------------------------------------------------------------------

    def gather(
        self, blocks: np.ndarray, lo: np.ndarray, hi: np.ndarray
    ) -> tuple[list[pa.Array], np.ndarray, np.ndarray]:
        """The rows of entries (block, lo, hi), one entry after the other: the columns,
        weights, and where each entry's rows start."""
        counts = hi - lo
        starts = np.concatenate([[0], np.cumsum(counts)[:-1]]).astype(np.int64)
        total = int(counts.sum())
        w = np.zeros(total, np.int64)
        ncols = len(self.columns)
        order_parts: list[np.ndarray] = []
        col_parts: list[list[pa.Array]] = [[] for _ in range(ncols)]
        for b in np.unique(blocks).tolist():
            mine = np.flatnonzero(blocks == b)
            c = counts[mine]
            if not c.sum():
                continue
            # positions in the block, and where they go in the output
            src = np.repeat(lo[mine] - np.cumsum(np.concatenate([[0], c[:-1]])), c)
            src = src + np.arange(int(c.sum()))
            dst = np.repeat(starts[mine] - np.cumsum(np.concatenate([[0], c[:-1]])), c)
            dst = dst + np.arange(int(c.sum()))
            bcols, bw, _ = self._blocks[b]
            w[dst] = bw[src]
            idx = pa.array(src)
            for k in range(ncols):
                col_parts[k].append(bcols[k].take(idx))
            order_parts.append(dst)
        if not order_parts:
            return [pa.nulls(0) for _ in range(ncols)], w, starts
        where = np.concatenate(order_parts)
        back = pa.array(np.argsort(where, kind="stable"))
        cols = []
        for parts in col_parts:
            arr = parts[0] if len(parts) == 1 else pa.concat_arrays(parts)
            cols.append(arr.take(back) if len(parts) > 1 else arr)
        return cols, w, starts

    # -- consistency ------------------------------------------------------------------------

    def invalidate(self, j: int, cols: list[pa.Array], m: int) -> int:
        """Drop every entry that `m` updated rows of segment input `j` could change; the
        number dropped."""
        parts = [k for k, (inp, _) in enumerate(self.inv) if inp == j]
        if not self._slots:
            return 0
        if not parts:
            n = len(self._slots)
            self.clear()
            return n
        named = self._named(parts, cols, m)
        dropped = 0
        if len(parts) == len(self.inv):
            for key in named:  # parts are every key part, in order
                if (e := self.get(key)) is not None:
                    self._drop(hash(key) % self.slots, e)
                    dropped += 1
            return dropped
        for slot, e in list(self._slots.items()):
            key = e[0] if self.values else e
            if tuple(key[k] for k in parts) in named:
                self._drop(slot, e)
                dropped += 1
        return dropped

    def _named(self, parts: list[int], cols: list[pa.Array], m: int) -> set[Key]:
        """The distinct values of key parts `parts` in `m` updated rows (one part: found by
        Arrow, so Python sees each value once however often the rows repeat it)."""
        if len(parts) == 1:
            arr = self.inv[parts[0]][1](cols, m)  # type: ignore[operator]
            return {(v,) for v in pc.unique(arr).to_pylist()}
        vals = [self.inv[k][1](cols, m).to_pylist() for k in parts]  # type: ignore[operator]
        return set(zip(*vals, strict=True))

    def clear(self) -> None:
        self._slots.clear()
        self._blocks.clear()
        self.rows = 0

    def nbytes(self) -> int:
        out = 0
        for cols, w, _ in self._blocks.values():
            out += w.nbytes + sum(c.nbytes for c in cols)
        return out + 64 * len(self._slots)
