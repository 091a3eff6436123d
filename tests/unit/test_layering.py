"""Packages import in one direction (STYLE.md §1): base (errors, types) < spec, cql < plan <
engine < io < the application layer (compiler, runner, stats, cli, service, batch, adaptive,
catalog). Every `cq_service.*` import, absolute or relative, anywhere in a module (including
function bodies and TYPE_CHECKING blocks), is checked."""

from __future__ import annotations

import ast
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
