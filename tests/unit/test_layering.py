"""Packages import in one direction (STYLE.md §1): base (errors, types) < spec, cql < plan <
engine < io < the application layer (compiler, runner, stats, cli, service, batch, adaptive,
catalog). And no modules import each other, directly or round a longer cycle (a package's
`__init__` importing its own submodules aside). Every `cq_service.*` import, absolute or
relative, anywhere in a module (including function bodies and TYPE_CHECKING blocks), is
checked: an import moved into a function to dodge a cycle still counts."""

from __future__ import annotations

import ast
from collections.abc import Mapping
from pathlib import Path

import cq_service

PACKAGE = Path(cq_service.__file__).resolve().parent

# What each layer must not import.
FORBIDDEN: dict[str, set[str]] = {
    "errors": {"spec", "cql", "plan", "engine", "io", "compiler", "runner", "stats", "cli",
               "service", "batch", "adaptive", "catalog", "bench"},
    "types": {"spec", "cql", "plan", "engine", "io", "compiler", "runner", "stats", "cli",
              "service", "batch", "adaptive", "catalog", "bench"},
    "spec": {"cql", "plan", "engine", "io", "compiler", "runner", "stats", "cli", "service",
             "batch", "adaptive", "catalog", "bench"},
    "cql": {"spec", "plan", "engine", "io", "compiler", "runner", "stats", "cli", "service",
            "batch", "adaptive", "catalog", "bench"},
    "plan": {"engine", "io", "compiler", "runner", "stats", "cli", "service", "batch",
             "adaptive", "catalog", "bench"},
    "engine": {"io", "compiler", "runner", "stats", "cli", "service", "batch", "adaptive",
               "catalog", "bench"},
    "io": {"engine", "plan", "cql", "compiler", "runner", "stats", "cli", "service", "batch",
           "adaptive", "catalog", "bench"},
}


def module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def imports_of(path: Path) -> list[tuple[int, str]]:
    """(line, absolute module name) of every cq_service import in the file."""
    return imports_in(path.read_text(), module_name(path), path.name == "__init__.py")


def imports_in(source: str, name: str, is_package: bool) -> list[tuple[int, str]]:
    tree = ast.parse(source)
    package = name if is_package else name.rpartition(".")[0]
    found: list[tuple[int, str]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.extend((node.lineno, a.name) for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                if node.level > 1:
                    base = base[: -(node.level - 1)]
                target = ".".join([*base, node.module] if node.module else base)
            else:
                target = node.module or ""
            found.append((node.lineno, target))
            # `from cq_service import engine` imports the subpackage too.
            found.extend((node.lineno, f"{target}.{a.name}") for a in node.names)
    return [(line, m) for line, m in found if m == "cq_service" or m.startswith("cq_service.")]


def layer(module: str) -> str | None:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else None


def test_modules_are_found():
    files = list(PACKAGE.rglob("*.py"))
    assert len(files) > 20
    names = {layer(module_name(f)) for f in files}
    assert {"spec", "cql", "plan", "engine", "io"} <= names


def test_import_direction():
    offending = []
    for path in sorted(PACKAGE.rglob("*.py")):
        src = layer(module_name(path))
        banned = FORBIDDEN.get(src or "", set())
        for line, target in imports_of(path):
            dst = layer(target)
            if dst in banned:
                rel = path.relative_to(PACKAGE.parent)
                offending.append(f"{rel}:{line}: {src} imports {target}")
    assert not offending, "imports against the layering:\n" + "\n".join(offending)


def test_the_checker_resolves_relative_and_nested_imports():
    mod = PACKAGE / "engine" / "operators" / "base.py"
    assert module_name(mod) == "cq_service.engine.operators.base"
    source = (
        "from ...io import open_source\n"
        "from . import batch\n"
        "import json\n"
        "def f():\n"
        "    import cq_service.runner\n"
        "    from cq_service import compiler\n"
    )
    got = {m for _, m in imports_in(source, "cq_service.engine.operators.base", False)}
    assert got == {
        "cq_service.io",
        "cq_service.io.open_source",
        "cq_service.engine.operators",
        "cq_service.engine.operators.batch",
        "cq_service.runner",
        "cq_service",
        "cq_service.compiler",
    }
    assert {layer(m) for m in got} == {"io", "engine", "runner", None, "compiler"}
    in_init = {m for _, m in imports_in("from .queues import Queue\n", "cq_service.engine", True)}
    assert "cq_service.engine.queues" in in_init


def import_graph(modules: Mapping[str, tuple[str, bool]]) -> dict[str, dict[str, int]]:
    """{module: {module it imports: line}} for `modules` = {name: (source, is_package)}. An
    imported name resolves to the longest module it names (`from a.b import C` -> a.b); a
    package's imports of its own submodules are left out."""
    graph: dict[str, dict[str, int]] = {}
    for name, (source, is_package) in modules.items():
        for line, target in imports_in(source, name, is_package):
            parts = target.split(".")
            while parts and ".".join(parts) not in modules:
                parts.pop()
            imported = ".".join(parts)
            if not parts or imported == name:
                continue
            if is_package and imported.startswith(name + "."):
                continue
            graph.setdefault(name, {}).setdefault(imported, line)
    return graph


def cycles(graph: Mapping[str, Mapping[str, int]]) -> list[list[str]]:
    """Every group of modules that import each other, directly or round a cycle (the strongly
    connected components of more than one module, Tarjan's algorithm, iteratively)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph.get(root, {}))))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, successors = work[-1]
            nxt = next(successors, None)
            if nxt is not None:
                if nxt not in index:
                    index[nxt] = low[nxt] = len(index)
                    stack.append(nxt)
                    on_stack.add(nxt)
                    work.append((nxt, iter(sorted(graph.get(nxt, {})))))
                elif nxt in on_stack:
                    low[node] = min(low[node], index[nxt])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                group = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    group.append(member)
                    if member == node:
                        break
                if len(group) > 1:
                    found.append(sorted(group))
    return found


def _package_modules() -> dict[str, tuple[str, bool]]:
    return {
        module_name(p): (p.read_text(), p.name == "__init__.py")
        for p in sorted(PACKAGE.rglob("*.py"))
    }


def test_no_modules_import_each_other():
    graph = import_graph(_package_modules())
    assert sum(len(imported) for imported in graph.values()) > 100  # the imports are seen
    problems = []
    for group in cycles(graph):
        members = set(group)
        edges = [
            f"  {a} imports {b} (line {line})"
            for a in group
            for b, line in sorted(graph.get(a, {}).items())
            if b in members
        ]
        problems.append(" <-> ".join(group) + ":\n" + "\n".join(edges))
    assert not problems, "modules importing each other:\n" + "\n".join(problems)


def test_the_cycle_checker_finds_pairs_and_longer_cycles_but_not_a_package_init():
    modules = {
        "cq_service.a": ("from cq_service import b\n", False),
        "cq_service.b": ("def f():\n    from cq_service.a import thing\n", False),
        "cq_service.c": ("from .d import x\n", False),
        "cq_service.d": ("import cq_service.e\n", False),
        "cq_service.e": ("from cq_service.c import y\n", False),
        "cq_service.p": ("from .q import Q\n", True),
        "cq_service.p.q": ("from cq_service.p import helper\n", False),
        "cq_service.r": ("from cq_service.a import thing\n", False),
    }
    graph = import_graph(modules)
    assert graph["cq_service.b"] == {"cq_service.a": 2}
    assert "cq_service.p" not in graph  # a package importing its own submodule is left out
    assert cycles(graph) == [
        ["cq_service.a", "cq_service.b"],
        ["cq_service.c", "cq_service.d", "cq_service.e"],
    ]
