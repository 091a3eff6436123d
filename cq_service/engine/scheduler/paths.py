"""Operator paths: every way from a source to the end of a query, through the plan's queues.

A queue read by several operators (a shared subplan) is one node of several paths: its
memory is counted once, but each path sees the operators after it.
"""

from __future__ import annotations

from cq_service.engine.operators.base import Operator
from cq_service.engine.operators.source import SourceOperator

__all__ = ["MAX_PATHS", "operator_paths", "queue_readers"]

MAX_PATHS = 4096  # a plan with more paths (heavy sharing) gets priorities from the first ones


def queue_readers(operators: list[Operator]) -> dict[int, list[Operator]]:
    """The operators reading each queue (by id), in plan order."""
    readers: dict[int, list[Operator]] = {}
    for op in operators:
        for r in op.inputs:
            readers.setdefault(id(r.queue), []).append(op)
    return readers


def operator_paths(
    operators: list[Operator], readers: dict[int, list[Operator]] | None = None
) -> list[list[Operator]]:
    """Each leaf-to-root path, without its source: the operators a source's element passes
    through, in order. Operators with no producer in the plan start paths of their own.
    `readers` is `queue_readers(operators)`, if the caller has it already."""
    readers = queue_readers(operators) if readers is None else readers
    produced = {id(op.output) for op in operators}
    starts: list[Operator] = []
    for op in operators:
        if isinstance(op, SourceOperator):
            starts.extend(readers.get(id(op.output), []))
        elif op.inputs and not any(id(r.queue) in produced for r in op.inputs):
            starts.append(op)
    paths: list[list[Operator]] = []
    stack: list[list[Operator]] = [[op] for op in reversed(starts)]
    while stack and len(paths) < MAX_PATHS:
        path = stack.pop()
        nxt = readers.get(id(path[-1].output), [])
        if not nxt:
            paths.append(path)
        for op in reversed(nxt):
            if op not in path:  # plans are acyclic; this only guards against a bad one
                stack.append([*path, op])
    return paths
