"""The examples in the package's docstrings are run, so none goes stale."""

from __future__ import annotations

import doctest
import importlib
from pathlib import Path

import pytest

PACKAGE = Path(__file__).parents[2] / "cq_service"
MODULES = sorted(
    ".".join(p.relative_to(PACKAGE.parent).with_suffix("").parts)
    for p in PACKAGE.rglob("*.py")
    if ">>> " in p.read_text()
)


def test_some_modules_have_examples():
    assert "cq_service.adaptive.cost_model" in MODULES


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name):
    failed, tried = doctest.testmod(importlib.import_module(name), optionflags=doctest.ELLIPSIS)
    assert failed == 0, f"{failed} of {tried} examples failed"
