"""The physical plan: operators to instantiate, their inputs, and what is shared.

Each node implements one logical operator; nodes are deduplicated by structural equality of
their logical subtree, so two queries reading the same stream share its source, and equal
subexpressions (a view read twice, the same window on the same stream) run once.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from cq_service.cql.logical import LogicalOp
from cq_service.spec.model import SinkSpec
from cq_service.types import DataType

__all__ = ["PhysicalNode", "PhysicalPlan", "SinkNode"]


@dataclass
class PhysicalNode:
    id: int
    op: LogicalOp
    inputs: list[int]
    queries: list[str] = field(default_factory=list)

    @property
    def kind(self) -> str:
        return type(self.op).__name__

    @property
    def types(self) -> list[DataType]:
        return [f.type for f in self.op.schema]


@dataclass
class SinkNode:
    query: str
    input: int
    sink: SinkSpec
    is_stream: bool
    columns: tuple[str, ...]
    types: list[DataType]


@dataclass
class PhysicalPlan:
    nodes: list[PhysicalNode]  # inputs before the nodes that read them
    sinks: list[SinkNode]
    # Stream source name -> the schema columns the plan uses (plan/columns.py); a source not
    # listed reads every column.
    source_columns: dict[str, tuple[str, ...]] = field(default_factory=dict)
    # Choices the planner made that no operator shows (`join: auto`'s); `cq explain` prints them.
    notes: list[str] = field(default_factory=list)

    def consumers(self, node_id: int) -> list[int]:
        return [n.id for n in self.nodes if node_id in n.inputs]
