"""Where a group table keeps each group: its key's slot, found for a whole batch at once.

`IntIndex` (one int or timestamp key) is an open-addressing hash table in numpy arrays: keys
hashed by Fibonacci multiplication into a power-of-two table, collisions resolved by linear
probing, deleted entries left as tombstones. A batch's keys are probed together, one round per
probe step, each round only over the keys still unresolved; new keys are inserted the same way,
the keys that race for one free bucket settled by which write landed. The table is rebuilt,
without tombstones and a quarter full, when half its buckets are in use, so the expected probes per key stay
bounded and a batch costs time proportional to its groups, not to the table.

`DictIndex` (any other keys) is a dict from the key tuple to its slot.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa

from cq_service.engine.operators.segments import Segments

__all__ = ["DictIndex", "IntIndex"]

_EMPTY, _TOMB = -1, -2  # `slots` of a bucket without a key, and of a key deleted
_FIB = np.uint64(0x9E3779B97F4A7C15)  # 2**64 / golden ratio: spreads keys over the high bits
_MIN_BITS = 4  # small: tables of a few groups (as in the property tests) grow, probe and rebuild


class DictIndex:
    """Group keys as Python tuples, each with its slot."""

    __slots__ = ("slots",)

    def __init__(self) -> None:
        self.slots: dict[tuple, int] = {}

    def __len__(self) -> int:
        return len(self.slots)

    def lookup(self, seg: Segments) -> tuple[np.ndarray, list[tuple]] | None:
        """Each batch group's slot (-1: new), or None when keys distinct in Arrow are equal in
        Python (0.0 and -0.0)."""
        gkeys = seg.gkeys
        if len(set(gkeys)) != len(gkeys):
            return None
        get = self.slots.get
        return np.fromiter((get(k, -1) for k in gkeys), dtype=np.int64, count=len(gkeys)), gkeys

    def update(self, gkeys: list[tuple], gone: np.ndarray, new: np.ndarray,
               new_slots: np.ndarray) -> None:
        slots = self.slots
        for gi in gone.tolist():
            del slots[gkeys[gi]]
        for gi, s in zip(new.tolist(), new_slots.tolist()):
            slots[gkeys[gi]] = s

    def items(self) -> list[tuple[tuple, int]]:
        return list(self.slots.items())


class IntIndex:
    """One int key: a numpy hash table from key to slot (`keys`, `slots`: per bucket, `slots`
    _EMPTY or _TOMB when it holds no key), and the slot of the NULL key (-1: none)."""

    __slots__ = ("bits", "keys", "live", "null", "slots", "used")

    def __init__(self) -> None:
        self.null = -1
        self._reset(_MIN_BITS)

    def _reset(self, bits: int) -> None:
        self.bits = bits
        self.keys = np.zeros(1 << bits, dtype=np.int64)
        self.slots = np.full(1 << bits, _EMPTY, dtype=np.int64)
        self.live = 0  # buckets holding a key
        self.used = 0  # buckets holding a key or a tombstone

    def __len__(self) -> int:
        return self.live + (self.null >= 0)

    def _home(self, v: np.ndarray) -> np.ndarray:
        h = v.view(np.uint64) * _FIB  # wraps: multiplication modulo 2**64
        return (h >> np.uint64(64 - self.bits)).astype(np.int64)

    def _find(self, v: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Per key, its bucket (-1: absent) and its slot (-1: absent)."""
        n = len(v)
        pos = np.full(n, -1, dtype=np.int64)
        slot = np.full(n, -1, dtype=np.int64)
        mask = (1 << self.bits) - 1
        todo = np.arange(n)
        h = self._home(v)
        keys, slots = self.keys, self.slots
        while len(todo):
            s = slots[h]
            hit = (s >= 0) & (keys[h] == v[todo])
            if hit.any():
                pos[todo[hit]] = h[hit]
                slot[todo[hit]] = s[hit]
            go_on = ~hit & (s != _EMPTY)  # a tombstone or another key: probe the next bucket
            todo, h = todo[go_on], (h[go_on] + 1) & mask
        return pos, slot

    def _insert(self, v: np.ndarray, s: np.ndarray) -> None:
        """Insert keys known to be absent and distinct, with their slots."""
        if self.used + len(v) > (1 << self.bits) // 2:
            self._rebuild(self.live + len(v))
        mask = (1 << self.bits) - 1
        keys, slots = self.keys, self.slots
        todo = np.arange(len(v))
        h = self._home(v)
        fresh = 0  # empty buckets taken (tombstones taken keep `used` as it was)
        while len(todo):
            free = np.flatnonzero(slots[h] < 0)
            if len(free):
                cand, hc = todo[free], h[free]
                was_empty = slots[hc] == _EMPTY
                slots[hc] = cand  # a marker: the write that lands wins its bucket
                won = slots[hc] == cand
                hw = hc[won]
                keys[hw] = v[cand[won]]
                slots[hw] = s[cand[won]]  # every marked bucket had a winner: no marker left
                fresh += int(was_empty[won].sum())
                rest = np.ones(len(todo), dtype=bool)
                rest[free[won]] = False
                todo, h = todo[rest], h[rest]
            h = (h + 1) & mask
        self.live += len(v)
        self.used += fresh

    def _rebuild(self, need: int) -> None:
        live = self.slots >= 0
        k, s = self.keys[live], self.slots[live]
        bits = _MIN_BITS
        while (1 << bits) < 4 * need:  # at most a quarter full after rebuilding
            bits += 1
        self._reset(bits)
        if len(k):
            self._insert(k, s)

    def lookup(self, seg: Segments) -> tuple[np.ndarray, tuple]:
        k = seg.key_values()[0]
        if isinstance(k, pa.ChunkedArray):
            k = k.combine_chunks()
        if k.type != pa.int64():
            k = k.cast(pa.int64())
        v = np.asarray(k.fill_null(0).to_numpy(zero_copy_only=False), dtype=np.int64)
        null = np.asarray(k.is_null().to_numpy(zero_copy_only=False), dtype=bool)
        pos, slot = self._find(v)
        pos[null] = -1
        slot[null] = self.null
        return slot, (v, null, pos)

    def update(self, where: tuple, gone: np.ndarray, new: np.ndarray,
               new_slots: np.ndarray) -> None:
        v, null, pos = where
        if len(gone):
            if null[gone].any():
                self.null = -1
            p = pos[gone[~null[gone]]]
            self.slots[p] = _TOMB
            self.live -= len(p)
        if len(new):
            nn = null[new]
            if nn.any():
                self.null = int(new_slots[nn][0])
            self._insert(v[new[~nn]], new_slots[~nn])

    def items(self) -> list[tuple[tuple, int]]:
        live = self.slots >= 0
        out = [((k,), s) for k, s in zip(self.keys[live].tolist(), self.slots[live].tolist())]
        if self.null >= 0:
            out.append(((None,), self.null))
        return out

    def __setstate__(self, state: Any) -> None:
        """Also a snapshot's sorted-array index (before the hash table): rebuilt as one."""
        fields = state[1] if isinstance(state, tuple) else state
        if "bits" in fields:
            for name, value in fields.items():
                setattr(self, name, value)
            return
        self.null = fields["null"]
        self._reset(_MIN_BITS)
        if len(fields["keys"]):
            self._insert(np.asarray(fields["keys"], dtype=np.int64),
                         np.asarray(fields["slots"], dtype=np.int64))
