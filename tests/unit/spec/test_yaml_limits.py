"""YAML aliases and nesting are bounded: a document that would expand past MAX_VALUES values
or nest past MAX_DEPTH levels is refused at the node that goes over, before it is expanded."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from cq_service.spec import SpecErrors, SpecLimitExceeded
from cq_service.spec.positions import parse_yaml
from cq_service.spec.yaml_limits import MAX_DEPTH, MAX_VALUES
from tests.unit.spec.yaml_bombs import laughs

CQ = Path(sys.executable).with_name("cq")


def test_billion_laughs_is_refused_where_it_goes_over() -> None:
    with pytest.raises(SpecLimitExceeded) as caught:
        parse_yaml(laughs(), "lol.yaml")
    [error] = caught.value.errors
    # l0 stands for 10 values, l1 91, l2 820, l3 7,381, l4 66,430: the first over 10,000.
    assert error.render() == (
        "lol.yaml:7:5: this value stands for more than 10,000 values once its aliases are "
        "expanded (66,430); a pipeline file may hold at most 10,000"
    )


def test_cq_validate_refuses_billion_laughs_with_exit_2(tmp_path: Path) -> None:
    (tmp_path / "lol.yaml").write_text(laughs())
    r = subprocess.run([str(CQ), "validate", "lol.yaml"], cwd=tmp_path, capture_output=True,
                       text=True, timeout=120)
    assert r.returncode == 2
    assert r.stdout.startswith("lol.yaml:7:5: this value stands for more than 10,000 values")


def test_aliases_within_the_bound_expand() -> None:
    width = 98  # a: 99 values; b: 1 + 98 * 99 = 9,703; the root: 1 + 2 keys + 99 + 9,703 = 9,805
    text = f"a: &a [{', '.join(['1'] * width)}]\nb: [{', '.join(['*a'] * width)}]\n"
    doc = parse_yaml(text, "ok.yaml")
    assert doc.value["b"] == [[1] * width] * width
    assert MAX_VALUES == 10_000


def test_a_document_just_over_the_bound_is_refused() -> None:
    width = 100  # a: 101 values; b: 1 + 100 * 101 = 10,101, over the bound on its own
    text = f"a: &a [{', '.join(['1'] * width)}]\nb: [{', '.join(['*a'] * width)}]\n"
    with pytest.raises(SpecLimitExceeded) as caught:
        parse_yaml(text, "big.yaml")
    assert caught.value.errors[0].span.line == 2


def test_nesting_is_bounded_before_python_recursion_is() -> None:
    deep = "x: " + "[" * 5000 + "]" * 5000 + "\n"
    with pytest.raises(SpecLimitExceeded) as caught:
        parse_yaml(deep, "deep.yaml")
    [error] = caught.value.errors
    # The root mapping is level 1, the first "[" (column 4) level 2: the one at column
    # 3 + MAX_DEPTH is the first too deep.
    assert error.render() == (
        f"deep.yaml:1:{3 + MAX_DEPTH}: lists and mappings nest more than {MAX_DEPTH} deep"
    )
    ok = "x: " + "[" * (MAX_DEPTH - 1) + "]" * (MAX_DEPTH - 1) + "\n"
    assert parse_yaml(ok, "ok.yaml").value["x"] is not None


def test_nesting_through_aliases_is_bounded() -> None:
    lines = ["a0: &a0 [1]"] + [f"a{i}: &a{i} [*a{i - 1}]" for i in range(1, MAX_DEPTH + 1)]
    with pytest.raises(SpecLimitExceeded) as caught:
        parse_yaml("\n".join(lines) + "\n", "chain.yaml")
    [error] = caught.value.errors
    assert error.span.line == MAX_DEPTH + 1
    assert f"at most {MAX_DEPTH} are allowed" in error.message


def test_a_limit_error_is_a_spec_error() -> None:
    with pytest.raises(SpecErrors):
        parse_yaml(laughs(), "lol.yaml")
