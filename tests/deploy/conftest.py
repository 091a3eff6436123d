"""The Helm binary and a renderer of the chart (helm.py says where Helm comes from); a local
Kubernetes API server to install it into (apiserver.py)."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.deploy.apiserver import ApiServer, find_etcd, find_kube_apiserver, running_api_server
from tests.deploy.helm import CHART, KUBE_VERSION, Rendered, find_helm, run_helm

Render = Callable[..., Rendered]


@pytest.fixture(scope="session")
def helm() -> str:
    found = find_helm()
    # `make test` always passes $HELM, so find_helm never gives None there: this skip is only
    # for a developer running pytest on a machine without the built tools.
    if found is None:
        pytest.skip(
            "no helm binary: `make .tools/helm-v3.22.0/helm` builds it (`make test` always does), "
            "or set $HELM"
        )
    return found


@pytest.fixture(scope="session")
def api_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ApiServer]:
    """etcd and kube-apiserver on 127.0.0.1 for the session (one per xdist worker)."""
    kube_apiserver, etcd = find_kube_apiserver(), find_etcd()
    # `make test` passes $KUBE_APISERVER and installs etcd: there a missing binary fails below
    if (kube_apiserver is None or etcd is None) and not os.environ.get("KUBE_APISERVER"):
        pytest.skip(
            "no kube-apiserver or etcd: `make .tools/kube-apiserver-v1.37.2/kube-apiserver /usr/bin/etcd` "
            "builds and installs them (`make test` always does), or set $KUBE_APISERVER, $ETCD"
        )
    assert kube_apiserver and etcd, f"kube-apiserver {kube_apiserver!r}, etcd {etcd!r}"
    with running_api_server(kube_apiserver, etcd, tmp_path_factory.mktemp("kube")) as server:
        yield server


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
