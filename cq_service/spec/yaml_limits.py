"""Bounds on what one YAML document may stand for: values after aliases, and nesting.

A YAML alias (``*name``) repeats the value anchored elsewhere (``&name``), and aliases of
values that hold aliases multiply: nine short lines can stand for 10⁹ values (the "billion
laughs"). `BoundedSafeLoader` is PyYAML's SafeLoader that measures each node while composing
it — how many values it stands for once every alias in it is expanded, and how deep it nests
— and stops with `YamlLimitExceeded` at the first node over a bound, before anything is
expanded. Composing never expands aliases (an alias is the anchored node again), so a
document is refused in time linear in its text.

The bounds: at most `MAX_VALUES` values (every scalar, list and mapping counts one; a value
reached through an alias counts once per alias) and at most `MAX_DEPTH` levels of lists and
mappings, both after expansion. A pipeline file needs a few hundred values and a handful of
levels.
"""

from __future__ import annotations

import yaml
from yaml.error import Mark
from yaml.nodes import MappingNode, Node, SequenceNode

__all__ = ["MAX_DEPTH", "MAX_VALUES", "BoundedSafeLoader", "YamlLimitExceeded"]

MAX_VALUES = 10_000
MAX_DEPTH = 100


class YamlLimitExceeded(yaml.YAMLError):
    """A document over a bound; `mark` is where the node that went over it starts."""

    def __init__(self, problem: str, mark: Mark):
        super().__init__(problem)
        self.problem = problem
        self.mark = mark


class BoundedSafeLoader(yaml.SafeLoader):
    """SafeLoader that refuses documents over `MAX_VALUES` or `MAX_DEPTH` (see the module)."""

    def __init__(self, stream: str):
        super().__init__(stream)
        self._nesting = 0
        self._measured: dict[int, tuple[int, int]] = {}  # id(node) -> (values, depth) expanded

    def compose_node(self, parent: Node | None, index: object) -> Node:
        if self.check_event(yaml.AliasEvent):  # the anchored node, measured already
            return super().compose_node(parent, index)
        start = self.peek_event().start_mark
        self._nesting += 1
        if self._nesting > MAX_DEPTH:
            raise YamlLimitExceeded(f"lists and mappings nest more than {MAX_DEPTH} deep", start)
        try:
            node = super().compose_node(parent, index)
        finally:
            self._nesting -= 1
        self._measure(node, start)
        return node

    def _measure(self, node: Node, start: Mark) -> None:
        if isinstance(node, SequenceNode):
            children = list(node.value)
        elif isinstance(node, MappingNode):
            children = [part for pair in node.value for part in pair]
        else:
            self._measured[id(node)] = (1, 0)
            return
        # A child not measured yet is a recursive alias of a node still being composed: the
        # builder refuses it, count it as one value here.
        sizes = [self._measured.get(id(child), (1, 0)) for child in children]
        values = 1 + sum(v for v, _ in sizes)
        depth = 1 + max((d for _, d in sizes), default=0)
        if values > MAX_VALUES:
            raise YamlLimitExceeded(
                f"this value stands for more than {MAX_VALUES:,} values once its aliases are "
                f"expanded ({values:,}); a pipeline file may hold at most {MAX_VALUES:,}",
                start,
            )
        if depth > MAX_DEPTH:
            raise YamlLimitExceeded(
                f"this value nests {depth} lists and mappings deep once its aliases are "
                f"expanded; at most {MAX_DEPTH} are allowed",
                start,
            )
        self._measured[id(node)] = (values, depth)
