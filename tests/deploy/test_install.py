"""`helm install` and `helm upgrade` of the chart into a real API server (apiserver.py), and the
objects read back with the Kubernetes Python client: what the server admitted and stored is
what the chart rendered (the server adds only its defaults), and a value the chart's schema
lets through but Kubernetes does not is refused with the server's message."""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import client, config, utils
from kubernetes.client.exceptions import ApiException

from tests.deploy.apiserver import ApiServer
from tests.deploy.conftest import Render
from tests.deploy.helm import CHART, CI_VALUES, run_helm

CI = {p.name.removesuffix("-values.yaml"): p for p in CI_VALUES}
NAME = "rel-cq-service"  # the objects' name for release "rel"
TOKEN = "s3cret-token"


@pytest.fixture(scope="session")
def kube(api_server: ApiServer) -> Iterator[client.ApiClient]:
    """A client of the local API server, through the kubeconfig Helm uses too."""
    with config.new_client_from_config(config_file=str(api_server.kubeconfig)) as api:
        yield api


def as_dict(kube: client.ApiClient, obj: Any) -> dict[str, Any]:
    """A client model as the API's JSON (camelCase keys), to compare with rendered YAML."""
    return kube.sanitize_for_serialization(obj)


def assert_contains(served: Any, rendered: Any, where: str = "") -> None:
    """Everything `rendered` says is in `served` (which may add the server's defaults)."""
    if isinstance(rendered, dict):
        assert isinstance(served, dict), f"{where}: {served!r}"
        for key, value in rendered.items():
            assert key in served, f"{where}.{key} missing from what the server stored"
            assert_contains(served[key], value, f"{where}.{key}")
    elif isinstance(rendered, list):
        assert isinstance(served, list) and len(served) == len(rendered), f"{where}: {served!r}"
        for i, (s, r) in enumerate(zip(served, rendered, strict=True)):
            assert_contains(s, r, f"{where}[{i}]")
    else:
        assert served == rendered, f"{where}: stored {served!r}, rendered {rendered!r}"


def values_file(tmp_path: Path, name: str, values: dict[str, Any]) -> Path:
    path = tmp_path / f"{name}.yaml"
    path.write_text(yaml.safe_dump(values))
    return path


def helm_on(helm: str, api_server: ApiServer, *args: str | Path):
    """`helm ARGS…` on the local API server (release "rel")."""
    return run_helm(helm, *args, "--kubeconfig", api_server.kubeconfig)


def helm_into(helm: str, api_server: ApiServer, command: str, namespace: str, *args: str | Path):
    """`helm install|upgrade rel CHART` into `namespace` of the local API server."""
    return helm_on(helm, api_server, command, "rel", CHART, "--namespace", namespace, *args)


def installed(helm: str, api_server: ApiServer, namespace: str, *args: str | Path) -> None:
    done = helm_into(helm, api_server, "install", namespace, "--create-namespace", *args)
    assert done.returncode == 0, done.stderr
    status = helm_on(helm, api_server, "status", "rel", "-n", namespace, "-o", "json")
    assert json.loads(status.stdout)["info"]["status"] == "deployed"


def test_install_defaults(
    helm: str, api_server: ApiServer, kube: client.ApiClient, render: Render, tmp_path: Path
):
    # the defaults (SQLite on the volume: no migration hook) with an API token, so the chart
    # makes its own Secret
    token = values_file(tmp_path, "token", {"auth": {"token": TOKEN}})
    installed(helm, api_server, "cq-defaults", "-f", CI["defaults"], "-f", token)
    rendered = render(CI["defaults"], {"auth": {"token": TOKEN}})
    apps, core = client.AppsV1Api(kube), client.CoreV1Api(kube)

    sts = apps.read_namespaced_stateful_set(NAME, "cq-defaults")
    assert_contains(as_dict(kube, sts)["spec"], rendered.one("StatefulSet")["spec"], "spec")
    worker = sts.spec.template.spec.containers[0]
    assert worker.name == "worker"
    assert worker.startup_probe.http_get.path == "/healthz"
    assert worker.liveness_probe.http_get.path == "/healthz"
    assert worker.readiness_probe.http_get.path == "/readyz"
    assert worker.readiness_probe.http_get.port == "http"
    pod_security = sts.spec.template.spec.security_context
    assert pod_security.run_as_non_root and pod_security.run_as_user == 10001
    assert pod_security.seccomp_profile.type == "RuntimeDefault"
    assert worker.security_context.allow_privilege_escalation is False
    assert worker.security_context.read_only_root_filesystem is True
    assert worker.security_context.capabilities.drop == ["ALL"]
    assert sts.spec.volume_claim_templates[0].spec.resources.requests["storage"]

    settings = core.read_namespaced_config_map(NAME, "cq-defaults")
    assert settings.data == rendered.one("ConfigMap", NAME)["data"]
    assert yaml.safe_load(settings.data["config.yaml"])["pipelines"]
    pipelines = core.read_namespaced_config_map(f"{NAME}-pipelines", "cq-defaults")
    assert set(pipelines.data) == {"web-proxy.yaml"}

    secret = core.read_namespaced_secret(NAME, "cq-defaults")
    assert set(secret.data) == set(rendered.one("Secret")["data"])
    token_key = next(iter(secret.data))
    assert base64.b64decode(secret.data[token_key]).decode() == TOKEN

    service = core.read_namespaced_service(NAME, "cq-defaults")
    assert service.spec.type == "ClusterIP"
    assert service.spec.cluster_ip.startswith("10.96.")  # allocated by the server
    assert [(p.name, p.target_port) for p in service.spec.ports] == [("http", "http")]
    headless = core.read_namespaced_service(f"{NAME}-headless", "cq-defaults")
    assert headless.spec.cluster_ip == "None"


def test_install_git_sync_and_its_hooks(
    helm: str, api_server: ApiServer, kube: client.ApiClient, render: Render
):
    # The git-sync values have a PostgreSQL catalog, so a pre-install hook Job migrates it (and
    # the Secret it reads is a hook before it). Helm waits for a hook Job to complete, which
    # needs a kubelet; here it would wait until its --timeout and fail the install. So the
    # release is installed with --no-hooks, and the hooks Helm recorded in it (`helm get
    # hooks`) are then created in Helm's order (by hook weight) through the API: the server
    # admits and stores them as it would for Helm; they only never run.
    installed(helm, api_server, "cq-git", "-f", CI["git-sync"], "--no-hooks")
    rendered = render(CI["git-sync"])
    apps, core, batch = client.AppsV1Api(kube), client.CoreV1Api(kube), client.BatchV1Api(kube)

    deployment = apps.read_namespaced_deployment(NAME, "cq-git")
    assert_contains(as_dict(kube, deployment)["spec"], rendered.one("Deployment")["spec"], "spec")
    containers = {c.name for c in deployment.spec.template.spec.containers}
    assert {"worker", "git-sync"} <= containers, containers
    with pytest.raises(ApiException) as absent:  # a hook, so not installed with --no-hooks
        core.read_namespaced_secret(NAME, "cq-git")
    assert absent.value.status == 404

    hooks = helm_on(helm, api_server, "get", "hooks", "rel", "-n", "cq-git")
    assert hooks.returncode == 0, hooks.stderr
    manifests = [d for d in yaml.safe_load_all(hooks.stdout) if d]
    manifests.sort(key=lambda d: int(d["metadata"]["annotations"]["helm.sh/hook-weight"]))
    assert [d["kind"] for d in manifests] == ["Secret", "Job"]
    for manifest in manifests:
        utils.create_from_dict(kube, manifest, namespace="cq-git")

    secret = core.read_namespaced_secret(NAME, "cq-git")
    assert set(secret.data) == set(rendered.one("Secret")["data"])
    job = batch.read_namespaced_job(f"{NAME}-migrate", "cq-git")
    assert job.metadata.annotations["helm.sh/hook"] == "pre-install,pre-upgrade"
    assert_contains(as_dict(kube, job)["spec"], rendered.one("Job")["spec"], "spec")
    assert job.spec.template.spec.containers[0].args == ["catalog", "upgrade"]


def test_upgrade_with_a_changed_value(
    helm: str, api_server: ApiServer, kube: client.ApiClient, tmp_path: Path
):
    installed(helm, api_server, "cq-upgrade", "-f", CI["defaults"])
    core, apps = client.CoreV1Api(kube), client.AppsV1Api(kube)
    before = apps.read_namespaced_stateful_set(NAME, "cq-upgrade")

    changed = values_file(
        tmp_path, "changed", {"worker": {"settings": {"checkpoint_interval": 7.5}}}
    )
    done = helm_into(helm, api_server, "upgrade", "cq-upgrade", "-f", CI["defaults"], "-f", changed)
    assert done.returncode == 0, done.stderr

    settings = core.read_namespaced_config_map(NAME, "cq-upgrade")
    assert yaml.safe_load(settings.data["config.yaml"])["checkpoint_interval"] == 7.5
    after = apps.read_namespaced_stateful_set(NAME, "cq-upgrade")
    # the changed configuration changes the pod template (its checksum): the worker restarts
    checksum = "checksum/config"
    assert (
        after.spec.template.metadata.annotations[checksum]
        != before.spec.template.metadata.annotations[checksum]
    )
    assert after.metadata.generation == before.metadata.generation + 1
    history = helm_on(helm, api_server, "history", "rel", "-n", "cq-upgrade", "-o", "json")
    assert [(r["revision"], r["status"]) for r in json.loads(history.stdout)] == [
        (1, "superseded"),
        (2, "deployed"),
    ]


def test_the_server_refuses_what_the_schema_lets_through(
    helm: str, api_server: ApiServer, render: Render, tmp_path: Path
):
    # values.schema.json types pod labels as strings; Kubernetes allows no spaces in a label
    bad = {"podLabels": {"team": "data platform"}}
    render(CI["defaults"], bad)  # the chart renders it
    done = helm_into(
        helm,
        api_server,
        "install",
        "cq-refused",
        "--create-namespace",
        "-f",
        CI["defaults"],
        "-f",
        values_file(tmp_path, "bad", bad),
    )
    assert done.returncode != 0
    assert 'Invalid value: "data platform"' in done.stderr, done.stderr
    assert "a valid label must" in done.stderr, done.stderr
