"""Scheduling policies on small hand-built plans: what each picks next, and why.

Statistics are fixed with `OperatorStatistics.set`, so priorities are known exactly; the
conformance of results under every policy is in test_executor.py and the property tests.
"""

from __future__ import annotations

from fractions import Fraction

import pytest

from cq_service.cql.logical import Const
from cq_service.engine.operators.select import Select
from cq_service.engine.operators.set_operation import SetOperation
from cq_service.engine.operators.sink import SinkOperator
from cq_service.engine.queues import Heartbeat, Queue
from cq_service.engine.scheduler import (
    POLICIES,
    ByOwner,
    Chain,
    ChainBounded,
    ChainShare,
    Fifo,
    Greedy,
    RoundRobin,
    policy,
)
from cq_service.engine.scheduler.paths import operator_paths
from cq_service.engine.scheduler.progress import (
    ProgressChart,
    chain_priorities,
    greedy_priorities,
    lower_envelope,
)
from cq_service.spec.model import SCHEDULERS
from cq_service.types import DataType
from tests.unit.engine.batches import make_batch

INT = DataType.INT
TRUE = Const(True, DataType.BOOL)


class Discard:
    def write(self, ts, ops, columns) -> None:
        pass

    def flush(self) -> None:
        pass

    def close(self) -> None:
        pass


def chain_of(n: int) -> tuple[Queue, list]:
    """source queue -> n selects -> sink; returns (input queue, operators in plan order)."""
    head = Queue("in")
    q = head
    ops = []
    for k in range(n):
        out = Queue(f"q{k}")
        op = Select(f"o{k + 1}", [q.reader()], out, TRUE)
        op.out_types = [INT]
        ops.append(op)
        q = out
    sink = SinkOperator("sink", [q.reader()], Discard(), is_stream=True, canonical=False)
    sink.out_types = [INT]
    ops.append(sink)
    return head, ops


def batch(ts: int = 1):
    return make_batch([INT], [(ts, (1,))])


def fix(p, ops, figures):
    """Give each operator (σ, cost) and attach the policy."""
    for op, (sel, cost) in zip(ops, figures, strict=True):
        p.statistics.set(op, sel, cost)
    p.attach(ops)
    p.rebuild()


def test_every_pipeline_scheduler_name_has_a_policy():
    assert tuple(POLICIES) == SCHEDULERS


def test_policy_registry_checks_the_latency_bound():
    assert isinstance(policy("chain"), Chain)
    assert policy("chain_bounded", 0.5).bound == 0.5
    with pytest.raises(ValueError, match="needs a latency bound"):
        policy("chain_bounded")
    with pytest.raises(ValueError, match="chain_bounded only"):
        policy("fifo", 1.0)
    with pytest.raises(ValueError, match="unknown scheduling policy 'lifo'"):
        policy("lifo")


# -- progress charts ------------------------------------------------------------------------


def test_chart_scales_costs_by_cumulative_selectivity_and_ends_at_zero():
    chart = ProgressChart.from_operators([Fraction(1), Fraction(5)], [Fraction(1, 5), Fraction(1, 2)])
    assert chart.points == ((0, 1), (1, Fraction(1, 5)), (2, 0))


def test_envelope_of_example_1_is_two_chains():
    chart = ProgressChart.from_points([(0, 1), (1, Fraction(1, 5)), (2, 0)])
    assert lower_envelope(chart) == [0, 1, 2]
    assert chain_priorities(chart) == greedy_priorities(chart) == [Fraction(4, 5), Fraction(1, 5)]


def test_envelope_of_the_greedy_counterexample_is_one_chain():
    chart = ProgressChart.from_points([(0, 1), (1, Fraction(9, 10)), (2, Fraction(9, 10)), (3, 0)])
    assert lower_envelope(chart) == [0, 3]
    assert chain_priorities(chart) == [Fraction(1, 3)] * 3
    assert greedy_priorities(chart) == [Fraction(1, 10), 0, Fraction(9, 10)]


def test_envelope_looks_past_a_selectivity_bump():
    # a stored-relation join doubles the tuple, then a very selective filter
    chart = ProgressChart.from_points([(0, 1), (1, 2), (2, Fraction(1, 10)), (3, 0)])
    assert lower_envelope(chart) == [0, 2, 3]
    assert chain_priorities(chart) == [Fraction(9, 20)] * 2 + [Fraction(1, 10)]


# -- paths ----------------------------------------------------------------------------------


def test_paths_follow_shared_queues_to_every_end():
    src = Queue("src")
    shared = Queue("shared")
    a = Select("a", [src.reader()], shared, TRUE)
    left = Select("left", [shared.reader()], Queue("l"), TRUE)
    right = Select("right", [shared.reader()], Queue("r"), TRUE)
    ends = [
        SinkOperator(n, [q.output.reader()], Discard(), True, False) for n, q in (("sl", left), ("sr", right))
    ]
    paths = operator_paths([a, left, right, *ends])
    assert [[op.name for op in p] for p in paths] == [["a", "left", "sl"], ["a", "right", "sr"]]


# -- choices ---------------------------------------------------------------------------------


def test_chain_runs_the_fast_selective_operator_behind_a_slow_one_first():
    """The greedy counterexample's shape, turned around: o1 slow and unselective, o2 fast and
    very selective. Greedy prefers neither to o1's input; Chain sees that o1 then o2 frees
    memory fastest and runs the pair as one chain, oldest input first."""
    head, ops = chain_of(2)
    figures = [(1.0, 1.0), (0.01, 0.01), (0.0, 1.0)]
    chain, greedy = Chain(), Greedy()
    fix(chain, ops, figures)
    fix(greedy, ops, figures)
    assert chain.priority_of(ops[0]) == pytest.approx(chain.priority_of(ops[1]))
    assert greedy.priority_of(ops[0]) == 0.0 < greedy.priority_of(ops[1])
    head.push(batch(), stamp=1.0)
    ops[0].output.push(batch(), stamp=2.0)  # a younger element already past o1
    assert chain.choose(ops) is ops[0]  # same chain: the oldest element first
    assert greedy.choose(ops) is ops[1]


def test_priority_ties_go_to_the_oldest_input_then_to_the_later_operator():
    head, ops = chain_of(2)
    p = Chain()
    fix(p, ops, [(0.5, 1.0), (1.0, 1.0), (0.0, 1.0)])  # chart (0,1) (1,.5) (1.5,.5) (2,0)
    assert len({p.priority_of(op) for op in ops}) == 1  # slopes tie: one priority
    head.push(batch(), stamp=5.0)
    ops[0].output.push(batch(), stamp=3.0)
    assert p.choose(ops) is ops[1]
    ops[1].output.push(batch(), stamp=3.0)
    assert p.choose(ops) is ops[2]  # equal stamps: the later operator pushes the block on


def test_fifo_takes_the_oldest_input_anywhere():
    head, ops = chain_of(2)
    p = Fifo()
    p.attach(ops)
    head.push(batch(), stamp=1.0)
    ops[1].output.push(batch(), stamp=2.0)
    assert p.choose(ops) is ops[0]


def test_chain_bounded_yields_to_an_element_waiting_too_long():
    """Two queries: A slow and unselective (low priority) holding an old element, B steep
    holding a young one. Chain serves B; with a bound of 0 the old element goes first."""
    for bound, expected in ((1e9, "b"), (0.0, "a")):
        head_a, ops_a = chain_of(1)
        head_b, ops_b = chain_of(1)
        ops_a[0].name, ops_b[0].name = "a", "b"
        p = ChainBounded(bound)
        for op, figures in zip(ops_a + ops_b, [(1.0, 1.0), (0.0, 1.0), (0.0, 1e-6), (0.0, 1.0)]):
            p.statistics.set(op, *figures)
        p.attach(ops_a + ops_b)
        p.rebuild()
        head_a.push(batch(), stamp=0.0)  # waiting since the start of the clock
        head_b.push(batch(), stamp=1e12)
        assert p.choose(ops_a + ops_b).name == expected, bound


def test_a_join_waiting_for_its_other_input_is_not_ready():
    a, b, out = Queue("a"), Queue("b"), Queue("out")
    union = SetOperation("u", [a.reader(), b.reader()], out, "union", True)
    union.out_types = [INT]
    other_in = Queue("c")
    other = Select("s", [other_in.reader()], Queue("s.out"), TRUE)
    other.output.reader()
    out.reader()
    a.push(batch(1), stamp=1.0)
    a.push(Heartbeat(1), stamp=1.0)
    assert union.blocked()  # b has said nothing about instant 1
    other_in.push(batch(1), stamp=9.0)
    p = Chain()
    fix(p, [union, other], [(1.0, 1e-3), (1.0, 1.0)])  # the union's priority is higher
    assert p.priority_of(union) > p.priority_of(other)
    assert p.choose([union, other]) is other
    b.push(Heartbeat(1), stamp=2.0)
    assert not union.blocked()
    assert p.choose([union, other]) is union


def test_a_blocked_join_lends_to_every_reader_of_a_shared_queue_it_waits_on():
    """u waits for x's side; x reads a shared queue with y. x alone moving would free none
    of the queue, so y borrows too and runs before z, which is steeper than x and y."""
    shared, b_in = Queue("shared"), Queue("b.in")
    x = Select("x", [shared.reader()], Queue("x.out"), TRUE)
    y = Select("y", [shared.reader()], Queue("y.out"), TRUE)
    w = Select("w", [b_in.reader()], Queue("w.out"), TRUE)
    u = SetOperation("u", [x.output.reader(), w.output.reader()], Queue("u.out"), "union", True)
    z_in = Queue("z.in")
    z = Select("z", [z_in.reader()], Queue("z.out"), TRUE)
    ops = [x, y, w, u, z]
    for op in ops:
        op.out_types = [INT]
    p = Chain()
    fix(p, ops, [(1.0, 1.0), (1.0, 1.0), (1.0, 1e-3), (0.0, 1e-3), (0.0, 0.1)])
    assert p.priority_of(z) > max(p.priority_of(x), p.priority_of(y))
    b_in.push(batch(5), stamp=1.0)
    b_in.push(Heartbeat(5), stamp=1.0)
    w.run(10)  # w's side says instant 5; x's side has said nothing
    shared.push(batch(1), stamp=2.0)
    x.run(10)  # x ran ahead of y: the queue still holds the batch
    z_in.push(batch(1), stamp=0.5)  # z's input is the oldest
    assert u.blocked() and u.lagging_ports() == [0]
    assert p.choose(ops) is y


def test_a_stored_relations_path_does_not_set_the_priority_of_a_streams_operators():
    from cq_service.engine.operators.source import SourceOperator

    s_src = SourceOperator("S", Queue("S"), None)
    r_src = SourceOperator("R", Queue("R"), None, is_relation=True)
    s_op = Select("s", [s_src.output.reader()], Queue("s.out"), TRUE)
    j = SetOperation("j", [s_op.output.reader(), r_src.output.reader()], Queue("j.out"),
                     "union", True)
    k = Select("k", [j.output.reader()], Queue("k.out"), TRUE)
    ops = [s_src, r_src, s_op, j, k]
    for op in ops:
        op.out_types = [INT]
    p = Chain()
    fix(p, ops, [(1.0, 1.0), (1.0, 1.0), (2.0, 1.0), (1.0, 1.0), (0.0, 1.0)])
    # the stream's path: (0, 1), (1, 2), (3, 2), (5, 0), one segment of slope 1/5; the
    # relation's, which starts at j, would give j and k 1/2
    assert p.priority_of(j) == p.priority_of(k) == pytest.approx(0.2)


def test_statistics_measure_selectivity_and_cost_per_byte():
    head, ops = chain_of(1)
    p = Chain()
    p.attach(ops)
    head.push(batch(), stamp=0.0)
    ops[0].run(10)
    ops[0].busy_seconds += 0.002
    assert p.statistics.refresh(ops)
    e = p.statistics.estimates[id(ops[0])]
    assert e.selectivity == pytest.approx(1.0)  # a true filter keeps every byte
    assert e.cost == pytest.approx(0.002 / ops[0].bytes_in)


def test_round_robin_still_includes_sources_in_turn():
    head, ops = chain_of(1)
    p = RoundRobin()
    p.attach(ops)
    head.push(batch())
    assert p.choose(ops) is ops[0]


def test_deployments_take_turns_each_with_its_own_policy():
    head_a, ops_a = chain_of(1)
    head_b, ops_b = chain_of(1)
    for op in ops_a:
        op.owner = "a"
    for op in ops_b:
        op.owner = "b"
    p = ByOwner(Chain)
    p.attach(ops_a + ops_b)
    p.set("b", Fifo())
    assert isinstance(p.policy_of("a"), Chain) and isinstance(p.policy_of("b"), Fifo)
    for _ in range(2):
        head_a.push(batch(), stamp=1.0)
        head_b.push(batch(), stamp=1.0)
    picked = []
    while (op := p.choose(ops_a + ops_b)) is not None and len(picked) < 4:
        picked.append(op.owner)
        op.run(1)
    assert picked == ["a", "b", "a", "b"]
    p.attach(ops_a)  # deployment b removed: its policy goes too
    assert set(p.policies) == {"a"}


# -- shared queues and batches --------------------------------------------------------------


def shared_pair():
    """src -> a; a's output read by `cheap` (fast, very selective) and `dear` (slow, keeps
    everything), each ending in a sink."""
    src, shared = Queue("src"), Queue("shared")
    a = Select("a", [src.reader()], shared, TRUE)
    cheap = Select("cheap", [shared.reader()], Queue("c"), TRUE)
    dear = Select("dear", [shared.reader()], Queue("d"), TRUE)
    ends = [SinkOperator(f"{op.name}.sink", [op.output.reader()], Discard(), True, False)
            for op in (cheap, dear)]
    for op in (a, cheap, dear, *ends):
        op.out_types = [INT]
    return src, shared, [a, cheap, dear, *ends]


def test_readers_of_a_shared_queue_move_together():
    """Running `cheap` alone frees nothing of the shared queue while `dear` has not read it:
    the readers get one priority, the slope of reading the queue with every reader."""
    _, shared, ops = shared_pair()
    cheap, dear = ops[1:3]
    p = Chain()
    fix(p, ops, [(1.0, 1.0), (0.01, 0.01), (1.0, 10.0), (0.0, 1.0), (0.0, 1.0)])
    # alone, cheap's path would give it 0.99 / 1.01 and dear's 1 / 12; together: the step
    # costs 10.01 and writes 1.01, the sinks then free it at slope 1, and the envelope from
    # the start runs straight to the end, (0, 1) to (11.02, 0)
    assert p.priority_of(cheap) == p.priority_of(dear) == pytest.approx(1 / 11.02)
    # cheap's sink keeps its path's slope; dear's, 1 / 12 on its path, is in the step's
    # segment and moves what the step writes on at the step's slope
    assert p.priority_of(ops[3]) == pytest.approx(1 / 1.02)
    assert p.priority_of(ops[4]) == pytest.approx(1 / 11.02)
    shared.push(batch(), stamp=1.0)
    cheap.run(10)  # cheap is ahead; the batch is still held for dear
    assert shared.rows == 1
    assert p.choose([cheap, dear]) is dear


def test_a_shared_queue_is_read_at_the_slope_of_its_branches_in_their_best_order():
    """The branches after a shared queue run in order of slope: here `cheap`'s sink, which
    frees `cheap`'s small output fast, counts before `dear`'s slow one."""
    _, _, ops = shared_pair()
    cheap, dear = ops[1:3]
    p = Chain()
    fix(p, ops, [(1.0, 1.0), (0.5, 0.5), (0.5, 0.5), (0.0, 0.1), (0.0, 10.0)])
    # step: (0, 1) to (1, 1); cheap.sink: 0.5 freed in 0.05 (slope 10); dear.sink: 0.5 in 5.
    # From (0, 1): to (1.05, 0.5) the slope is 0.5 / 1.05, to (6.05, 0) it is 1 / 6.05: the
    # first is steeper
    assert p.priority_of(cheap) == p.priority_of(dear) == pytest.approx(0.5 / 1.05)


def test_the_executor_fits_fixed_and_per_byte_costs_of_runs():
    from cq_service.engine.run_cost import RunCost

    c = RunCost()
    for _ in range(3):
        for b in (0, 1_000, 100_000):
            c.add(b, 2e-5 + 1e-9 * b)
    assert c.fit() == pytest.approx((2e-5, 1e-9))
    same = RunCost()
    for _ in range(10):
        same.add(500, 1e-3)  # one batch size: the parts cannot be told apart
    assert same.fit() == pytest.approx((0.0, 2e-6))
    assert RunCost().fit() == (0.0, 0.0)  # nothing seen yet


def test_a_step_runs_a_slow_operator_for_about_step_seconds():
    """10 ms per element measured and 30 ms per step: three one-row batches, not the budget."""
    from cq_service.engine.executor import Executor

    head, ops = chain_of(1)
    op = ops[0]
    for k in range(10):
        head.push(batch(k), stamp=float(k))
    op.rows_in, op.busy_seconds = 100, 1.0
    Executor(ops, [head, op.output], budget=1_000, step_seconds=0.03).step(op)
    assert op.rows_in == 103
    Executor(ops, [head, op.output], budget=1_000).step(op)  # no step length: the budget
    assert op.rows_in == 110
    with pytest.raises(ValueError, match="step_seconds must be positive"):
        Executor(ops, [head, op.output], step_seconds=0.0)


def test_each_step_adds_a_run_to_the_operators_cost_fit():
    from cq_service.engine.executor import Executor

    head, ops = chain_of(1)
    ex = Executor(ops, [head, ops[0].output])
    for k in range(10):
        head.push(batch(k), stamp=float(k))
        ex.step(ops[0])
    assert ops[0].run_cost.runs == 10 and ops[0].run_cost.fitted
    assert ops[0].run_cost.fit()[1] > 0  # it read bytes, and that took time


# -- chain_share: a share of FIFO steps ----------------------------------------------------


def two_queries(p):
    """Query A (a: slow, unselective, so low priority) and query B (b: cheap, steep), each
    with three one-row batches waiting: A's at stamps 0, 1, 2, B's at 3, 4, 5."""
    head_a, ops_a = chain_of(1)
    head_b, ops_b = chain_of(1)
    ops_a[0].name, ops_a[1].name, ops_b[0].name, ops_b[1].name = "a", "A", "b", "B"
    ops = ops_a + ops_b
    if isinstance(p, Fifo):
        p.attach(ops)
    else:
        fix(p, ops, [(1.0, 1.0), (0.0, 1.0), (1.0, 1e-6), (0.0, 1e-6)])
    for k in range(3):
        head_a.push(batch(k + 1), stamp=float(k))
        head_b.push(batch(k + 1), stamp=float(k + 3))
    return ops


def step_order(p) -> str:
    """The operators `p` runs, one batch a step, until nothing is left."""
    ops = two_queries(p)
    names = []
    while (op := p.choose(ops)) is not None:
        op.run(1)
        names.append(op.name)
    return "".join(names)


CHAIN_ORDER = "bBbBbBaAaAaA"  # B's steep chain drains first, oldest block to the end
FIFO_ORDER = "aAaAaAbBbBbB"  # the oldest element first, pushed through its path


def test_chain_and_fifo_step_orders_on_two_queries():
    assert step_order(Chain()) == CHAIN_ORDER
    assert step_order(Fifo()) == FIFO_ORDER


@pytest.mark.parametrize(
    ("share", "expected"),
    [
        (0.0, CHAIN_ORDER),
        (1.0, FIFO_ORDER),
        # every 2nd step FIFO's: A's oldest row moves at steps 2 and 4, B's chain meanwhile
        (0.5, "baBAbaBAbaBA"),
        # every 3rd step FIFO's (steps 3, 6, 9); once B is done only A is left
        (1 / 3, "bBabBAbBaAaA"),
        (2 / 3, "baABaAbaABbB"),
    ],
)
def test_chain_share_takes_every_kth_step_for_the_oldest_input(share, expected):
    assert step_order(ChainShare(share)) == expected


def test_chain_share_registry_checks_the_share():
    assert policy("chain_share", share=0.25).share == 0.25
    assert POLICIES["chain_share"] is ChainShare  # a pipeline file's choice, with its share
    with pytest.raises(ValueError, match="needs a share"):
        policy("chain_share")
    with pytest.raises(ValueError, match="chain_share only"):
        policy("chain", share=0.5)
    with pytest.raises(ValueError, match="chain_share needs a share of FIFO steps and no"):
        policy("chain_share", 0.5, 0.5)
    with pytest.raises(ValueError, match=r"in \[0, 1\]"):
        ChainShare(1.5)
