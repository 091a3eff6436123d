"""YAML with source positions.

`parse_yaml(text, file)` composes the text with PyYAML's SafeLoader and builds plain Python
values (dicts, lists, scalars) together with a `YamlDocument` that knows where every key and
value was written, by path: ``doc.value_span(("queries", "q1", "cql"))``. Duplicate mapping keys
(which YAML would silently collapse) and keys that YAML 1.1 reads as booleans or null are
recorded in `doc.errors` instead of being accepted.

`scalar_positions` maps each character of a scalar's value back to its (line, column) in the
file, for every scalar style (plain, quoted with escapes, literal and folded block scalars).
"""

from __future__ import annotations

from bisect import bisect_right
from dataclasses import dataclass, field
from typing import Any

import yaml
from yaml.constructor import SafeConstructor
from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode
from yaml.scanner import Scanner

from cq_service.errors import Span, SpecError
from cq_service.spec.exceptions import SpecErrors, SpecLimitExceeded
from cq_service.spec.yaml_limits import BoundedSafeLoader, YamlLimitExceeded

__all__ = ["Path", "YamlDocument", "parse_yaml", "scalar_positions", "yaml_kind"]

Path = tuple[str | int, ...]

_MERGE_TAG = "tag:yaml.org,2002:merge"
_BREAKS = "\r\n\x85\u2028\u2029"


@dataclass
class _Entry:
    """Where one value (and the key that holds it, if any) was written."""

    node: Node
    key: Span | None
    indent: int  # indentation of the enclosing block collection (PyYAML's scanner indent)


@dataclass
class YamlDocument:
    """Plain Python values parsed from one YAML text, with positions by path."""

    value: Any
    text: str
    file: str | None = None
    errors: list[SpecError] = field(default_factory=list)
    _entries: dict[Path, _Entry] = field(default_factory=dict, repr=False)

    def key_span(self, path: Path) -> Span | None:
        """Span of the mapping key holding the value at `path` (None for the root or items)."""
        entry = self._entries.get(tuple(path))
        return entry.key if entry else None

    def value_span(self, path: Path) -> Span | None:
        """Span of the value at `path`, or None if there is no such value."""
        entry = self._entries.get(tuple(path))
        return _node_span(entry.node, self.file) if entry else None

    def span(self, path: Path, *, key: bool = False) -> Span:
        """Best span for `path`: its key (if `key`) or value, else the nearest ancestor's."""
        path = tuple(path)
        while True:
            found = (self.key_span(path) if key else None) or self.value_span(path)
            if found is not None:
                return found
            if not path:
                return Span(1, 1, file=self.file)
            path = path[:-1]

    def node(self, path: Path) -> Node | None:
        entry = self._entries.get(tuple(path))
        return entry.node if entry else None

    def raw(self, path: Path) -> str | None:
        """The text of the scalar at `path` as written (before YAML resolved its type)."""
        node = self.node(path)
        return node.value if isinstance(node, ScalarNode) else None

    def is_plain(self, path: Path) -> bool:
        """True if the value at `path` is an unquoted scalar."""
        node = self.node(path)
        return isinstance(node, ScalarNode) and node.style is None

    def char_positions(self, path: Path) -> tuple[tuple[int, int], ...] | None:
        """(line, col) in the file of each character of the string scalar at `path`."""
        entry = self._entries.get(tuple(path))
        if entry is None or not isinstance(entry.node, ScalarNode):
            return None
        return scalar_positions(self.text, entry.node, entry.indent)


def yaml_kind(value: Any) -> str:
    """What YAML made of a value, for messages: 'a boolean', 'null', 'a number', …"""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, dict):
        return "a mapping"
    if isinstance(value, list):
        return "a list"
    return f"a {type(value).__name__}"  # dates and timestamps


def parse_yaml(text: str, file: str | None = None) -> YamlDocument:
    """Compose `text` (one YAML document) into values with positions.

    Line ends are normalised to LF first (lines and columns are unchanged; span offsets
    index the normalised text).

    Raises `SpecErrors` for a YAML syntax error, `SpecLimitExceeded` for a document whose
    aliases expand too far or that nests too deep (yaml_limits.py); problems YAML itself would
    accept silently (duplicate keys, boolean or null keys) are collected in the result's
    `errors`.
    """
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    try:
        root = yaml.compose(text, Loader=BoundedSafeLoader)
    except YamlLimitExceeded as exc:
        span = Span(exc.mark.line + 1, exc.mark.column + 1, file=file)
        raise SpecLimitExceeded([SpecError(exc.problem, span)], file=file) from None
    except yaml.MarkedYAMLError as exc:
        raise SpecErrors([_syntax_error(exc, file)], file=file) from None
    except yaml.YAMLError as exc:  # e.g. a character YAML does not allow
        raise SpecErrors([SpecError(f"invalid YAML: {exc}", Span(file=file))], file=file) from None
    doc = YamlDocument(value=None, text=text, file=file)
    if root is not None:
        builder = _Builder(doc)
        doc.value = builder.build(root, (), None, -1)
    return doc


def _syntax_error(exc: yaml.MarkedYAMLError, file: str | None) -> SpecError:
    mark = exc.problem_mark or exc.context_mark
    problem = exc.problem or "invalid YAML"
    if exc.context and exc.context_mark is not None and exc.context_mark is not mark:
        problem = f"{problem} ({exc.context} at line {exc.context_mark.line + 1})"
    elif exc.context:
        problem = f"{exc.context}: {problem}"
    if "'\\t'" in problem:
        problem += " (indent with spaces, not tabs)"
    span = Span(mark.line + 1, mark.column + 1, file=file) if mark else Span(file=file)
    return SpecError(f"invalid YAML: {problem}", span)


def _node_span(node: Node, file: str | None) -> Span:
    start, end = node.start_mark, node.end_mark
    return Span(
        line=start.line + 1,
        col=start.column + 1,
        end_line=end.line + 1,
        end_col=end.column + 1,
        offset=start.index,
        end=end.index,
        file=file,
    )


class _Builder:
    """Builds plain values from nodes, recording positions and key problems."""

    def __init__(self, doc: YamlDocument):
        self.doc = doc
        self.constructor = SafeConstructor()
        self.active: set[int] = set()  # nodes being built (guards recursive aliases)

    def build(self, node: Node, path: Path, key: Span | None, indent: int) -> Any:
        self.doc._entries[path] = _Entry(node, key, indent)
        if isinstance(node, ScalarNode):
            return self._scalar(node)
        if id(node) in self.active:
            self._error("a recursive alias cannot be used here", node)
            return None
        self.active.add(id(node))
        try:
            inner = -1 if node.flow_style else node.start_mark.column
            if isinstance(node, SequenceNode):
                return [
                    self.build(item, (*path, i), None, inner) for i, item in enumerate(node.value)
                ]
            assert isinstance(node, MappingNode)
            return self._mapping(node, path, inner)
        finally:
            self.active.discard(id(node))

    def _mapping(self, node: MappingNode, path: Path, indent: int) -> dict[str, Any]:
        result: dict[str, Any] = {}
        seen: dict[str, Span] = {}
        for key_node, value_node in node.value:
            if key_node.tag == _MERGE_TAG:
                self._merge(value_node, path, result)
                continue
            name = self._key(key_node)
            if name is None:
                continue
            key_span = _node_span(key_node, self.doc.file)
            if name in seen:
                first = seen[name]
                self._error(
                    f"duplicate key '{name}' (first defined at line {first.line}, column "
                    f"{first.col}); YAML would silently keep only the last one",
                    key_node,
                )
                continue
            seen[name] = key_span
            result[name] = self.build(value_node, (*path, name), key_span, indent)
        return result

    def _merge(self, value_node: Node, path: Path, result: dict[str, Any]) -> None:
        """`<<: *anchor` (or a list of anchors): copy keys the mapping does not set itself."""
        sources = value_node.value if isinstance(value_node, SequenceNode) else [value_node]
        for source in sources:
            if not isinstance(source, MappingNode):
                self._error("a merge key '<<' needs a mapping or a list of mappings", source)
                continue
            inner = -1 if source.flow_style else source.start_mark.column
            for key_node, item in source.value:
                name = self._key(key_node)
                if name is not None and name not in result:
                    key_span = _node_span(key_node, self.doc.file)
                    result[name] = self.build(item, (*path, name), key_span, inner)

    def _scalar(self, node: ScalarNode) -> Any:
        try:
            return self.constructor.construct_object(node, deep=True)
        except yaml.MarkedYAMLError as exc:  # a tag YAML does not know, a bad !!int, …
            self._error(f"invalid YAML: {exc.problem}", node)
            return node.value

    def _key(self, key_node: Node) -> str | None:
        if not isinstance(key_node, ScalarNode):
            self._error("a mapping key must be a plain name, not a list or mapping", key_node)
            return None
        value = self._scalar(key_node)
        if isinstance(value, str):
            return value
        if value is None or isinstance(value, bool):
            shown = key_node.value or "(empty)"
            self._error(f"key '{shown}' was read as {yaml_kind(value)}; quote it", key_node)
        return key_node.value  # numbers and dates: keep the text; the schema judges it

    def _error(self, message: str, node: Node) -> None:
        self.doc.errors.append(SpecError(message, _node_span(node, self.doc.file)))


# --- character positions of scalars ------------------------------------------------------------


class _Cursor:
    """A read position in the text that tracks PyYAML's column and emits (char, index) pairs."""

    def __init__(self, text: str, index: int, column: int):
        self.text = text
        self.index = index
        self.column = column
        self.out: list[tuple[str, int]] = []

    def peek(self, k: int = 0) -> str:
        i = self.index + k
        return self.text[i] if i < len(self.text) else "\0"

    def forward(self, n: int = 1) -> None:
        for _ in range(n):
            ch = self.text[self.index]
            self.index += 1
            if ch in "\n\x85\u2028\u2029":
                self.column = 0
            else:
                self.column += 1

    def take(self, n: int = 1) -> None:
        """Emit the next `n` characters as themselves."""
        for _ in range(n):
            self.out.append((self.peek(), self.index))
            self.forward()

    def line_break(self) -> tuple[str, int]:
        """Consume one line break; return what YAML makes of it and where it was."""
        at, ch = self.index, self.peek()
        self.forward()
        return ("\n" if ch in "\n\x85" else ch), at


def scalar_positions(text: str, node: ScalarNode, indent: int = -1) -> tuple[tuple[int, int], ...]:
    """(line, col), 1-based, in `text` of each character of `node.value`.

    Re-scans the scalar's source the way PyYAML's scanner does. A line break folded into a
    space maps to the line break's position; escapes map to their backslash. `indent` is the
    indentation of the enclosing block collection (needed for block scalars with an explicit
    indentation indicator). If the re-scan does not reproduce the value (an exotic construct),
    every character maps to the scalar's start.
    """
    start = _skip_properties(text, node.start_mark.index)
    column = start - (text.rfind("\n", 0, start) + 1)
    cursor = _Cursor(text, start, column)
    try:
        if node.style in ("|", ">"):
            _block(cursor, indent)
        elif node.style in ("'", '"'):
            _quoted(cursor)
        else:
            _plain(cursor, node.end_mark.index)
    except (IndexError, KeyError, ValueError):
        cursor.out = []
    if "".join(ch for ch, _ in cursor.out) != node.value:
        here = (node.start_mark.line + 1, node.start_mark.column + 1)
        return tuple(here for _ in node.value)
    lines = _LineTable(text)
    return tuple(lines.position(i) for _, i in cursor.out)


class _LineTable:
    def __init__(self, text: str):
        self.starts = [0] + [i + 1 for i, ch in enumerate(text) if ch in "\n\x85\u2028\u2029"]

    def position(self, index: int) -> tuple[int, int]:
        line = bisect_right(self.starts, index) - 1
        return line + 1, index - self.starts[line] + 1


def _skip_properties(text: str, index: int) -> int:
    """Skip a tag (`!!str`) and/or anchor (`&a`) in front of a scalar."""
    while index < len(text) and text[index] in "!&":
        while index < len(text) and not text[index].isspace():
            index += 1
        while index < len(text) and text[index].isspace():
            index += 1
    return index


def _plain(c: _Cursor, end: int) -> None:
    while c.index < end:
        ch = c.peek()
        if ch not in " \t" + _BREAKS:
            c.take()
            continue
        spaces_at = c.index
        while c.peek() in " \t":
            c.forward()
        if c.peek() not in _BREAKS:
            c.out.extend((c.text[i], i) for i in range(spaces_at, c.index))
            continue
        _fold(c, c.line_break(), _collect_breaks(c, " "))


def _collect_breaks(c: _Cursor, blanks: str) -> list[tuple[str, int]]:
    """The line breaks of the empty lines that follow, skipping indentation."""
    breaks = []
    while True:
        while c.peek() in blanks:
            c.forward()
        if c.peek() not in _BREAKS:
            return breaks
        breaks.append(c.line_break())


def _fold(c: _Cursor, first: tuple[str, int], breaks: list[tuple[str, int]]) -> None:
    """Line folding: one break becomes a space, n+1 breaks become n newlines."""
    if first[0] != "\n":
        c.out.append(first)
    elif not breaks:
        c.out.append((" ", first[1]))
    c.out.extend(breaks)


def _quoted(c: _Cursor) -> None:
    quote = c.peek()
    double = quote == '"'
    c.forward()
    _quoted_non_spaces(c, double)
    while c.peek() != quote:
        spaces_at = c.index
        while c.peek() in " \t":
            c.forward()
        if c.peek() in _BREAKS:
            _fold(c, c.line_break(), _collect_breaks(c, " \t"))
        else:
            c.out.extend((c.text[i], i) for i in range(spaces_at, c.index))
        _quoted_non_spaces(c, double)


def _quoted_non_spaces(c: _Cursor, double: bool) -> None:
    while True:
        while c.peek() not in "'\"\\\0 \t" + _BREAKS:
            c.take()
        ch = c.peek()
        if not double and ch == "'" and c.peek(1) == "'":
            c.out.append(("'", c.index))
            c.forward(2)
        elif (double and ch == "'") or (not double and ch in '"\\'):
            c.take()
        elif double and ch == "\\":
            at = c.index
            c.forward()
            code = c.peek()
            if code in Scanner.ESCAPE_REPLACEMENTS:
                c.out.append((Scanner.ESCAPE_REPLACEMENTS[code], at))
                c.forward()
            elif code in Scanner.ESCAPE_CODES:
                length = Scanner.ESCAPE_CODES[code]
                c.forward()
                digits = c.text[c.index : c.index + length]
                c.out.append((chr(int(digits, 16)), at))
                c.forward(length)
            elif code in _BREAKS:
                c.line_break()
                c.out.extend(_collect_breaks(c, " \t"))
            else:
                raise ValueError(f"unknown escape {code!r}")
        else:
            return


def _block(c: _Cursor, parent_indent: int) -> None:
    folded = c.peek() == ">"
    c.forward()
    chomping, increment = _block_indicators(c)
    while c.peek() == " ":  # rest of the header line: spaces and a comment
        c.forward()
    if c.peek() == "#":
        while c.peek() not in "\0" + _BREAKS:
            c.forward()
    if c.peek() in _BREAKS:
        c.line_break()
    min_indent = max(parent_indent + 1, 1)
    if increment is None:
        breaks, max_indent = _block_indentation(c)
        indent = max(min_indent, max_indent)
    else:
        indent = min_indent + increment - 1
        breaks = _block_breaks(c, indent)
    line_break: tuple[str, int] | None = None
    while c.column == indent and c.peek() != "\0":
        c.out.extend(breaks)
        leading_non_space = c.peek() not in " \t"
        while c.peek() not in "\0" + _BREAKS:
            c.take()
        line_break = c.line_break() if c.peek() != "\0" else ("", c.index)
        breaks = _block_breaks(c, indent)
        if not (c.column == indent and c.peek() != "\0"):
            break
        if folded and line_break[0] == "\n" and leading_non_space and c.peek() not in " \t":
            if not breaks:
                c.out.append((" ", line_break[1]))
        elif line_break[0]:
            c.out.append(line_break)
    if chomping is not False and line_break is not None and line_break[0]:
        c.out.append(line_break)
    if chomping is True:
        c.out.extend(breaks)


def _block_indicators(c: _Cursor) -> tuple[bool | None, int | None]:
    chomping: bool | None = None
    increment: int | None = None
    for _ in range(2):
        ch = c.peek()
        if ch in "+-" and chomping is None:
            chomping = ch == "+"
            c.forward()
        elif ch.isdigit() and increment is None:
            increment = int(ch)
            c.forward()
    return chomping, increment


def _block_indentation(c: _Cursor) -> tuple[list[tuple[str, int]], int]:
    breaks: list[tuple[str, int]] = []
    max_indent = 0
    while c.peek() in " " + _BREAKS:
        if c.peek() != " ":
            breaks.append(c.line_break())
        else:
            c.forward()
            max_indent = max(max_indent, c.column)
    return breaks, max_indent


def _block_breaks(c: _Cursor, indent: int) -> list[tuple[str, int]]:
    breaks: list[tuple[str, int]] = []
    while c.column < indent and c.peek() == " ":
        c.forward()
    while c.peek() in _BREAKS:
        breaks.append(c.line_break())
        while c.column < indent and c.peek() == " ":
            c.forward()
    return breaks
