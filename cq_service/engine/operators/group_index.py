"""Where a group table keeps each group: its key's slot, found for a whole batch at once.

`IntIndex` (one int or timestamp key) addresses its keys directly while they span a range not
much wider than the groups (a table of slots indexed by key − base, as ids and small codes
usually do: a batch is one gather), and otherwise is an open-addressing hash table in numpy
arrays (it moves from one to the other when the keys spread, and back when the groups have
doubled and fill their span again): keys
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
_DIRECT_MIN = 1 << 16  # a direct table may span this many keys whatever the groups ...
_DIRECT_PER_GROUP = 8  # ... or this many per live group (and key of the batch)
_MIN_DIRECT = 1 << 12  # hash tables of fewer groups stay so


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
    """One int key: while `direct` is not None, the slot of key `base + i` at `direct[i]` (-1:
    absent); after, a numpy hash table from key to slot (`keys`, `slots`: per bucket, `slots`
    _EMPTY or _TOMB when it holds no key). And the slot of the NULL key (-1: none)."""

    __slots__ = ("base", "bits", "checked", "direct", "keys", "live", "null", "slots", "used")

    def __init__(self, direct: bool = True) -> None:
        self.null = -1
        self.base = 0
        self.direct: np.ndarray | None = np.zeros(0, dtype=np.int64) if direct else None
        self.checked = 0 if direct else -1  # groups when last moved (-1: never direct)
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

    def _covers(self, v: np.ndarray) -> bool:
        """Whether the direct table covers keys `v`, grown if it may be; when it may not, the
        keys move into the hash table for good."""
        if len(v) == 0:
            return True
        lo, hi = int(v.min()), int(v.max())
        table = self.direct
        assert table is not None
        if self.live:
            if lo >= self.base and hi < self.base + len(table):
                return True
            lo, hi = min(lo, self.base), max(hi, self.base + len(table) - 1)
        span = hi - lo + 1
        limit = max(_DIRECT_MIN, _DIRECT_PER_GROUP * (self.live + len(v)))
        if span > limit:
            held = np.flatnonzero(table >= 0)
            self.direct = None
            self.checked = self.live
            self._rebuild(self.live)
            if len(held):
                self._insert(held + self.base, table[held])
            return False
        grown = np.full(min(limit, max(span, 2 * len(table))), -1, dtype=np.int64)
        if self.live:
            grown[self.base - lo: self.base - lo + len(table)] = table
        self.base, self.direct = lo, grown
        return True

    def _to_direct(self, v: np.ndarray) -> None:
        """Move the keys into a direct table if they and the batch's `v` now span few enough
        keys per group; checked again when the groups double."""
        self.checked = self.live + len(v)
        live = self.slots >= 0
        k, s = self.keys[live], self.slots[live]
        both = np.concatenate([k, v])
        if len(both) == 0:
            return
        lo, hi = int(both.min()), int(both.max())
        if hi - lo + 1 > _DIRECT_PER_GROUP * len(both):
            return
        table = np.full(hi - lo + 1, -1, dtype=np.int64)
        table[k - lo] = s
        self.base, self.direct = lo, table
        held = self.live
        self._reset(_MIN_BITS)
        self.live = held

    def lookup(self, seg: Segments) -> tuple[np.ndarray, tuple]:
        k = seg.key_values()[0]
        if isinstance(k, pa.ChunkedArray):
            k = k.combine_chunks()
        if k.type != pa.int64():
            k = k.cast(pa.int64())
        if k.null_count:
            v = np.asarray(k.fill_null(0).to_numpy(zero_copy_only=False), dtype=np.int64)
            null = np.asarray(k.is_null().to_numpy(zero_copy_only=False), dtype=bool)
        else:
            v = np.asarray(k.to_numpy(zero_copy_only=False), dtype=np.int64)
            null = np.zeros(len(v), dtype=bool)
        nulls = bool(null.any())
        if self.direct is None and 0 <= 2 * self.checked <= self.live + len(v) - _MIN_DIRECT:
            self._to_direct(v[~null] if nulls else v)
        if self.direct is not None and self._covers(v[~null] if nulls else v):
            if nulls:
                pos = np.full(len(v), -1, dtype=np.int64)
                pos[~null] = v[~null] - self.base
                slot = np.full(len(v), self.null, dtype=np.int64)
                slot[~null] = self.direct[pos[~null]]
            else:
                pos = v - self.base
                slot = self.direct[pos]
            return slot, (v, null, pos)
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
            if self.direct is not None:
                self.direct[p] = -1
            else:
                self.slots[p] = _TOMB
            self.live -= len(p)
        if len(new):
            nn = null[new]
            if nn.any():
                self.null = int(new_slots[nn][0])
            if self.direct is not None:  # lookup grew the table over these keys
                self.direct[pos[new[~nn]]] = new_slots[~nn]
                self.live += int((~nn).sum())
            else:
                self._insert(v[new[~nn]], new_slots[~nn])

    def items(self) -> list[tuple[tuple, int]]:
        if self.direct is not None:
            held = np.flatnonzero(self.direct >= 0)
            keys, slots = held + self.base, self.direct[held]
        else:
            live = self.slots >= 0
            keys, slots = self.keys[live], self.slots[live]
        out = [((k,), s) for k, s in zip(keys.tolist(), slots.tolist())]
        if self.null >= 0:
            out.append(((None,), self.null))
        return out

    def __setstate__(self, state: Any) -> None:
        """Also a snapshot's sorted-array index (before the hash table), rebuilt as a hash
        table, and one's hash table from before direct tables."""
        fields = state[1] if isinstance(state, tuple) else state
        self.base, self.direct, self.checked = 0, None, -1
        if "bits" in fields:
            for name, value in fields.items():
                setattr(self, name, value)
            return
        self.null = fields["null"]
        self._reset(_MIN_BITS)
        if len(fields["keys"]):
            self._insert(np.asarray(fields["keys"], dtype=np.int64),
                         np.asarray(fields["slots"], dtype=np.int64))
