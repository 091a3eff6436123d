"""Per-group accumulators: a group's state pickles (state snapshots) and a state pickled when
the accumulators were still defined in aggregate.py loads into the same values."""

from __future__ import annotations

import pickle

import numpy as np

from cq_service.cql.logical import AggCall, ColRef
from cq_service.engine.operators.accumulators import Group, make_accumulator
from cq_service.types import DataType

INT, FLT, STR = DataType.INT, DataType.FLOAT, DataType.STRING
CALLS = [
    AggCall("count", None, False, INT),
    AggCall("sum", ColRef(0, FLT), False, FLT),
    AggCall("min", ColRef(1, STR), False, STR),
    AggCall("max", ColRef(2, INT), False, INT),
]


def a_group() -> Group:
    g = Group([make_accumulator(c) for c in CALLS])
    g.rows = 3
    count, fsum, smin, imax = g.accs
    count.apply((3, 0))
    for v in (0.1, 0.2, 0.3):
        fsum.update(v, 1)
    for v in ("b", "a", "c"):
        smin.update(v, 1)
    imax.apply_segment(3, 9, None, np.array([4, 9, 2]), np.array([1, 1, 1]))
    return g


def test_a_group_round_trips_through_pickle() -> None:
    g = a_group()
    again = pickle.loads(pickle.dumps(g, protocol=5))
    assert again.rows == 3
    assert again.result() == g.result() == (3, g.accs[1].value(), "a", 9)


def test_a_state_pickled_under_the_old_module_path_loads() -> None:
    """Snapshots written before the split name `aggregate._Group`, `_Acc` and `_Extreme`."""
    old = pickle.dumps(a_group(), protocol=2)  # GLOBAL opcodes: module and name as text
    new_mod = b"cq_service.engine.operators.accumulators\n"
    old_mod = b"cq_service.engine.operators.aggregate\n"
    for name in (b"Group", b"Acc", b"Extreme"):
        assert new_mod + name + b"\n" in old
        old = old.replace(new_mod + name + b"\n", old_mod + b"_" + name + b"\n")
    assert new_mod not in old
    g = pickle.loads(old)
    assert type(g) is Group
    assert g.result() == a_group().result()
