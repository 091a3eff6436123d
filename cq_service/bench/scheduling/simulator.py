"""The discrete-time scheduling simulator (Chain, paper 000), in cost units, exact arithmetic.

At each integer time t: the arrivals at t enter (progress 0, size 1), the total memory (sum of
all tuple sizes) is recorded, then the policy picks one operator and the oldest tuple at it gets
one unit of processing. Recording stops at the first instant after the last arrival at which the
system is empty (that final 0 is included).

>>> from cq_service.bench.scheduling.workload import Workload, chart
>>> w = Workload.build([chart((0, 1), (1, 0.2), (2, 0))], [(t, 0, 1) for t in range(7)])
>>> [float(m) for m in simulate(w, Chain()).memory[:7]]
[1.0, 1.2, 1.4, 1.6, 1.8, 2.0, 2.2]
"""

from __future__ import annotations

import heapq
import math
from dataclasses import dataclass
from fractions import Fraction

from cq_service.bench.scheduling.optimum import optimum_memory
from cq_service.bench.scheduling.policies import Chain, Operator, Policy, TupleKey, make_policy
from cq_service.bench.scheduling.workload import Workload

__all__ = ["Result", "operators", "run", "simulate"]


@dataclass(frozen=True)
class Result:
    """One policy's run. `switches` counts units whose operator differs from the last one run
    (idle units are skipped); it and the latencies are empty for the clairvoyant optimum."""

    policy: str
    memory: tuple[Fraction, ...]  # at t = 0, 1, …, up to the instant the system is empty
    latencies: tuple[int, ...] = ()  # completion − arrival time, per tuple in arrival order
    switches: int | None = None

    @property
    def peak(self) -> Fraction:
        return max(self.memory, default=Fraction(0))

    @property
    def average(self) -> Fraction:
        """Mean memory over every recorded instant."""
        return sum(self.memory, Fraction(0)) / len(self.memory) if self.memory else Fraction(0)

    def latency(self, q: float) -> int | None:
        """The q-quantile (0 < q ≤ 1) of the tuple latencies, nearest rank."""
        if not self.latencies:
            return None
        ordered = sorted(self.latencies)
        return ordered[max(0, math.ceil(q * len(ordered)) - 1)]


def operators(workload: Workload) -> list[Operator]:
    """Every operator of the workload, path-major (the policies' numbering)."""
    return [
        Operator(k, i, path.chain[i], path.greedy[i])
        for k, path in enumerate(workload.paths)
        for i in range(path.operators)
    ]


def simulate(workload: Workload, policy: Policy) -> Result:
    """Run `policy` over `workload` until the system is empty after the last arrival."""
    paths = workload.paths
    base = [0]
    for path in paths:
        base.append(base[-1] + path.operators)
    policy.start(operators(workload))
    queues: list[list[TupleKey]] = [[] for _ in range(base[-1])]  # heaps, oldest first
    progress: list[int] = []
    arrived: list[int] = []
    latency: list[int] = []
    memory, in_system, switches = Fraction(0), 0, 0
    recorded: list[Fraction] = []
    last_op: int | None = None
    arrivals, j, t = workload.arrivals, 0, 0
    while True:
        while j < len(arrivals) and arrivals[j].time == t:
            a = arrivals[j]
            for _ in range(a.count):
                seq = len(progress)
                progress.append(0)
                arrived.append(t)
                latency.append(-1)
                heapq.heappush(queues[base[a.path]], (t, a.path, seq))
            memory += a.count * paths[a.path].sizes[0]
            in_system += a.count
            j += 1
        recorded.append(memory)
        if j == len(arrivals) and in_system == 0:
            break
        op = policy.choose([q[0] if q else None for q in queues], t)
        if op is not None:
            if not queues[op]:
                raise ValueError(f"{policy.name} chose operator {op}, which has no tuple")
            _, k, seq = key = queues[op][0]
            path, p = paths[k], progress[seq]
            progress[seq] = p + 1
            memory += path.sizes[p + 1] - path.sizes[p]
            if p + 1 == path.length:
                heapq.heappop(queues[op])
                latency[seq] = t + 1 - arrived[seq]
                in_system -= 1
            elif path.operator_at[p + 1] != path.operator_at[p]:
                heapq.heappop(queues[op])
                heapq.heappush(queues[op + 1], key)
            switches += last_op is not None and op != last_op
            last_op = op
            policy.ran(op, not queues[op])
        t += 1
    return Result(policy.name, tuple(recorded), tuple(latency), switches)


def run(
    workload: Workload,
    name: str,
    *,
    quantum: int = 1,
    bound: int | None = None,
    share: Fraction | None = None,
) -> Result:
    """Run a policy by name; ``opt`` is the brute-force clairvoyant optimum (memory only, small
    instances), computed over as many instants as Chain's run."""
    if name == "opt":
        horizon = len(simulate(workload, Chain()).memory) - 1
        return Result("opt", tuple(optimum_memory(workload, horizon)))
    return simulate(workload, make_policy(name, quantum=quantum, bound=bound, share=share))
