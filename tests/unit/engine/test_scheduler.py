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
    the readers are one step of each path, with one priority."""
    _, shared, ops = shared_pair()
    a, cheap, dear = ops[:3]
    p = Chain()
    fix(p, ops, [(1.0, 1.0), (0.01, 0.01), (1.0, 10.0), (0.0, 1.0), (0.0, 1.0)])
    assert p.priority_of(cheap) == p.priority_of(dear)
    # the step costs both readers, and `dear`'s output stays on `cheap`'s path
    chart = p.chart([a, cheap, ops[3]])
    assert chart.points[2] == pytest.approx((1.0 + 10.01, 0.01 + 1.0))
    assert chart.points[3][1] == pytest.approx(1.0)
    shared.push(batch(), stamp=1.0)
    cheap.run(10)  # cheap is ahead; the batch is still held for dear
    assert shared.rows == 1
    assert p.choose([cheap, dear]) is dear


def test_chain_defers_a_small_batch_when_the_fixed_cost_of_a_run_dominates():
    """Two single-operator queries of equal slope: o1 holds a small batch and costs a lot per
    run whatever it reads; the other holds a batch worth running and goes first, though
    younger."""
    head_a, ops_a = chain_of(1)
    head_b, ops_b = chain_of(1)
    p = Chain()
    fix(p, ops_a + ops_b, [(0.5, 1e-8), (0.0, 1.0), (0.5, 1e-8), (0.0, 1.0)])
    p.statistics.estimates[id(ops_a[0])].fixed = 1e-3  # a run costs 1 ms ...
    small, big = batch(), make_batch([INT], [(1, (k,)) for k in range(10_000)])
    head_a.push(small, stamp=1.0)
    head_b.push(big, stamp=2.0)
    assert p.now(ops_a[0], 1.0) < 0.01  # ... for ~10 ns of work on 8 bytes
    assert p.choose(ops_a + ops_b) is ops_b[0]
    p.statistics.estimates[id(ops_a[0])].fixed = 0.0
    assert p.choose(ops_a + ops_b) is ops_a[0]  # without it: the oldest input first


def test_queues_count_the_bytes_each_reader_has_not_read():
    q = Queue("q")
    r1, r2 = q.reader(), q.reader()
    b = batch()
    q.push(b, stamp=1.0)
    q.push(Heartbeat(1), stamp=1.0)
    q.push(b, stamp=2.0)
    assert r1.pending_bytes() == r2.pending_bytes() == 2 * b.nbytes()
    r1.get()
    assert r1.pending_bytes() == b.nbytes() and r2.pending_bytes() == 2 * b.nbytes()


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


def test_each_step_adds_a_run_to_the_operators_cost_fit():
    from cq_service.engine.executor import Executor

    head, ops = chain_of(1)
    ex = Executor(ops, [head, ops[0].output])
    for k in range(10):
        head.push(batch(k), stamp=float(k))
        ex.step(ops[0])
    assert ops[0].run_cost.runs == 10 and ops[0].run_cost.fitted
    assert ops[0].run_cost.fit()[1] > 0  # it read bytes, and that took time
