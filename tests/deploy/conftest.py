"""The Helm binary and a renderer of the chart (helm.py says where Helm comes from)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.deploy.helm import CHART, KUBE_VERSION, Rendered, find_helm, run_helm

Render = Callable[..., Rendered]


@pytest.fixture(scope="session")
def helm() -> str:
    found = find_helm()
    if found is None:
        pytest.skip(
            "no helm binary: `make .tools/helm-v3.22.0/helm` builds it (`make test` always does), "
            "or set $HELM"
        )
    return found


@pytest.fixture
def render_error(helm: str, tmp_path: Path) -> Callable[[dict[str, Any]], str]:
    """`helm template`'s error output for `values`, which it must refuse."""

    def refused(values: dict[str, Any]) -> str:
        done = template(helm, tmp_path, values)
        assert done.returncode != 0, f"the chart accepted {values}"
        return done.stderr

    return refused


@pytest.fixture
def render(helm: str, tmp_path: Path) -> Render:
    """The chart rendered with values files (paths) and/or mappings of values, in order."""

    def rendered(*values: Path | dict[str, Any]) -> Rendered:
        done = template(helm, tmp_path, *values)
        assert done.returncode == 0, done.stderr
        return Rendered.parse(done.stdout)

    return rendered


def template(helm: str, tmp_path: Path, *values: Path | dict[str, Any]):
    args: list[str | Path] = ["template", "rel", CHART, "--namespace", "cq"]
    args += ["--kube-version", KUBE_VERSION]
    for i, v in enumerate(values):
        if isinstance(v, dict):
            path = tmp_path / f"values-{i}.yaml"
            path.write_text(yaml.safe_dump(v))
            v = path
        args += ["-f", v]
    return run_helm(helm, *args)
