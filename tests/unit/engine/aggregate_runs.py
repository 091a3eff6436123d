"""An Aggregate fed batch by batch, with its columnar group table or without: the harness of
the group table's tests (test_group_table.py, test_group_multiset.py, test_group_distinct.py)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable

from cq_service.engine.operators.aggregate import Aggregate
from cq_service.engine.queues import Heartbeat, Queue
from cq_service.types import DataType
from tests.unit.engine.batches import make_batch


class Run:
    """One Aggregate over input columns `in_types`; `table` False takes its group table away
    (the general path). `out`: (ts, row, w, column types, value types) of every output row."""

    def __init__(self, keys: tuple, table: bool, aggs: tuple, in_types: list[DataType]):
        self.inq = Queue("in")
        out = Queue("out")
        self.reader = out.reader()
        self.in_types = in_types
        self.op = Aggregate("a", [self.inq.reader()], out, keys, aggs)
        self.op.out_types = [k.type for k in keys] + [a.type for a in aggs]
        if not table:
            self.op._table = None
        self.out: list[tuple] = []

    def feed(self, elems: list[tuple], upto: int) -> None:
        if elems:
            self.inq.push(make_batch(self.in_types, elems))
        self.inq.push(Heartbeat(upto))
        while self.op.runnable():
            self.op.run(1 << 30)
        while (item := self.reader.get()) is not None:
            if not isinstance(item, Heartbeat):
                types = tuple(str(c.type) for c in item.columns)
                for t, row, w in zip(item.ts.tolist(), item.rows(), item.w.tolist()):
                    self.out.append((t, row, w, types, tuple(type(v) for v in row)))


def against_general_path(
    batches: list[list[tuple]], keys: tuple, aggs: tuple, in_types: list[DataType],
    expected: Callable[[Counter], Counter],
) -> Run:
    """Feed `batches` (elements (ts, row, w)) to the aggregate with its table and without:
    after every batch the table's output must add up to `expected(live rows)`, and in the end
    both outputs must be the same, element for element. Returns the run with the table."""
    with_table, without = Run(keys, True, aggs, in_types), Run(keys, False, aggs, in_types)
    live: Counter = Counter()
    for elems in batches:
        upto = max(e[0] for e in elems) if elems else 0
        with_table.feed(elems, upto)
        without.feed(elems, upto)
        for _, row, w in elems:
            live[row] += w
        got: Counter = Counter()
        for _, row, w, _, _ in with_table.out:
            got[row] += w
        assert +got == expected(+live)
    assert with_table.out == without.out
    assert with_table.op._table is not None
    return with_table


def rows_by_group(live: Counter, keyed: Callable[[tuple], tuple]) -> dict[tuple, list]:
    """The live rows, each as many times as its multiplicity, per group key `keyed(row)`: what
    a direct evaluation of the aggregate starts from."""
    groups: dict[tuple, list] = {}
    for row, n in live.items():
        groups.setdefault(keyed(row), []).extend([row] * n)
    return groups
