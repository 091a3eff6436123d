"""The Helm chart (helm/cq-service): it lints, renders valid Kubernetes objects for every
example values file (ci/), refuses bad values by name, and renders what the values ask for."""

from __future__ import annotations

import base64
import json
import shutil
from dataclasses import fields
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
import yaml

from cq_service.service.config import ServiceConfig, load_config
from cq_service.spec.loader import load_pipeline_text
from tests.deploy.conftest import Render
from tests.deploy.helm import CHART, CI_VALUES, KUBE_VERSION, Rendered, run_helm

CI = {p.name.removesuffix("-values.yaml"): p for p in CI_VALUES}
# Kinds from CRDs, which kubernetes-validate has no schema for (checked field by field below).
CRD_KINDS = {"ServiceMonitor"}
# The oldest Kubernetes the chart supports (Chart.yaml kubeVersion), the one it renders for,
# and the newest kubernetes-validate knows.
KUBE_VERSIONS = sorted(
    {"1.25", KUBE_VERSION.rsplit(".", 1)[0], kubernetes_validate.latest_version()},
    key=lambda v: tuple(map(int, v.split("."))),
)
# values.yaml alone (None), then each example.
ALL_VALUES = [None, *CI_VALUES]


def values_id(values: Path | None) -> str:
    return "values.yaml" if values is None else values.name


# Settings of the worker's configuration the chart sets itself, rather than worker.settings.
CHART_SETTINGS = {
    "pipelines",
    "catalog",
    "host",
    "port",
    "name",
    "kafka_bootstrap",
    "snapshots",
    "spark_checkpoints",
}


def test_the_example_values_files_are_there():
    assert set(CI) == {"defaults", "git-sync", "existing-secret", "monitoring"}


@pytest.mark.parametrize("values", ALL_VALUES, ids=values_id)
def test_lint_strict(helm: str, values: Path | None):
    files = [] if values is None else ["-f", values]
    done = run_helm(helm, "lint", "--strict", CHART, *files, "--kube-version", KUBE_VERSION)
    assert done.returncode == 0, done.stdout + done.stderr


def test_it_packages(helm: str, tmp_path: Path):
    done = run_helm(helm, "package", CHART, "--destination", tmp_path)
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "cq-service-0.1.0.tgz").is_file()


@pytest.mark.parametrize("version", KUBE_VERSIONS)
@pytest.mark.parametrize("values", ALL_VALUES, ids=values_id)
def test_every_object_is_valid_kubernetes(render: Render, values: Path | None, version: str):
    rendered = render() if values is None else render(values)
    assert rendered.objects
    for obj in rendered.objects:
        if obj["kind"] in CRD_KINDS:
            continue
        try:
            kubernetes_validate.validate(obj, version, strict=True)
        except kubernetes_validate.ValidationError as e:
            pytest.fail(f"{obj['kind']}/{obj['metadata']['name']} (Kubernetes {version}): {e}")


@pytest.mark.parametrize("values", CI_VALUES, ids=lambda p: p.name)
def test_notes_render(helm: str, tmp_path: Path, values: Path):
    # `helm template` leaves NOTES.txt out: render it as a template of a copy of the chart.
    chart = tmp_path / "cq-service"
    shutil.copytree(CHART, chart)
    notes = (chart / "templates" / "NOTES.txt").read_text()
    (chart / "templates" / "notes-as-template.yaml").write_text(
        "notes: |\n" + "".join(f"  {line}\n" for line in notes.splitlines())
    )
    done = run_helm(
        helm, "template", "rel", chart, "-f", values, "-s", "templates/notes-as-template.yaml"
    )
    assert done.returncode == 0, done.stderr
    text = yaml.safe_load(done.stdout)["notes"]
    assert "rel-cq-service" in text
    assert "port-forward svc/rel-cq-service 8080" in text


@pytest.mark.parametrize(
    ("values", "message"),
    [
        ({"replicas": 2}, "additional properties 'replicas' not allowed"),
        ({"worker": {"port": 0}}, "at '/worker/port': minimum"),
        ({"worker": {"port": "8080"}}, "at '/worker/port': got string, want integer"),
        ({"worker": {"settings": {"memory_reserve": 1.5}}}, "at '/worker/settings/memory_reserve'"),
        (
            {"worker": {"settings": {"checkpoint_intervall": 1}}},
            "'checkpoint_intervall' not allowed",
        ),
        ({"worker": {"settings": {"snapshot_keep": 0}}}, "at '/worker/settings/snapshot_keep'"),
        ({"pipelines": {"source": "svn"}}, "at '/pipelines/source': value must be one of"),
        ({"pipelines": {"source": "git"}}, "at '/pipelines/git/repo': minLength"),
        # (Helm's validator reports a wrong location for a property name: the name is right)
        ({"pipelines": {"configMap": {"files": {"a.txt": "x"}}}}, "invalid propertyName 'a.txt'"),
        ({"pipelines": {"git": {"period": "often"}}}, "at '/pipelines/git/period'"),
        ({"catalog": {"url": "mysql://db/cq"}}, "at '/catalog/url'"),
        ({"image": {"pullPolicy": "Sometimes"}}, "at '/image/pullPolicy'"),
        ({"persistence": {"size": "lots"}}, "at '/persistence/size'"),
        ({"serviceMonitor": {"enabled": "yes"}}, "at '/serviceMonitor/enabled': got string"),
        ({"auth": {"existingSecret": "Not_A_Name"}}, "at '/auth/existingSecret'"),
        ({"resources": {"requests": {"cpu": "fast"}}}, "at '/resources/requests/cpu'"),
    ],
    ids=lambda v: json.dumps(v) if isinstance(v, dict) else "",
)
def test_bad_values_are_refused_by_name(render_error, values: dict[str, Any], message: str):
    error = render_error(values)
    assert "don't meet the specifications of the schema" in error
    assert message in error, error


def test_no_volume_and_no_catalog_url_is_refused(render_error):
    error = render_error({"persistence": {"enabled": False}})
    assert "persistence.enabled=false keeps no SQLite catalog" in error
    assert "catalog.url" in error


def test_the_schema_knows_every_setting_of_the_worker():
    schema = json.loads((CHART / "values.schema.json").read_text())
    settings = set(schema["properties"]["worker"]["properties"]["settings"]["properties"])
    worker = {f.name for f in fields(ServiceConfig)} - {"token", "failpoints"}
    assert settings | CHART_SETTINGS == worker
    assert not settings & CHART_SETTINGS


def test_every_value_is_typed_in_the_schema():
    values = yaml.safe_load((CHART / "values.yaml").read_text())
    schema = json.loads((CHART / "values.schema.json").read_text())

    def check(value: Any, node: dict[str, Any], at: str) -> None:
        assert "type" in node, f"{at}: no type in values.schema.json"
        if isinstance(value, dict) and "properties" in node:
            for key, inner in value.items():
                assert key in node["properties"], f"{at}.{key}: not in values.schema.json"
                check(inner, node["properties"][key], f"{at}.{key}")

    check(values, schema, "values")
    assert schema["additionalProperties"] is False


def config_of(rendered: Rendered, tmp_path: Path) -> tuple[dict[str, Any], ServiceConfig]:
    """The worker's configuration file as rendered, and as the worker itself reads it."""
    text = rendered.one("ConfigMap", "rel-cq-service")["data"]["config.yaml"]
    path = tmp_path / "config.yaml"
    path.write_text(text)
    return yaml.safe_load(text), load_config(path, environ={})


def worker_container(workload: dict[str, Any]) -> dict[str, Any]:
    return workload["spec"]["template"]["spec"]["containers"][0]


def env_of(container: dict[str, Any]) -> dict[str, Any]:
    return {e["name"]: e.get("value", e.get("valueFrom")) for e in container.get("env", [])}


@pytest.mark.parametrize("values", CI_VALUES, ids=lambda p: p.name)
def test_the_worker_reads_the_rendered_configuration(render: Render, tmp_path: Path, values):
    raw, config = config_of(render(values), tmp_path)
    assert (config.host, config.port, config.name) == ("0.0.0.0", 8080, "rel-cq-service")
    assert config.snapshot_folder == Path("/data/snapshots/rel-cq-service")
    assert config.spark_checkpoints == "/data/spark"
    assert config.kafka_bootstrap == "kafka.data.svc:9092"
    assert set(raw) <= {f.name for f in fields(ServiceConfig)}


@pytest.mark.parametrize("values", CI_VALUES, ids=lambda p: p.name)
def test_the_example_pipelines_are_valid(values: Path):
    files = yaml.safe_load(values.read_text()).get("pipelines", {}).get("configMap", {})
    for name, text in files.get("files", {}).items():
        load_pipeline_text(text, name)  # raises SpecErrors with FILE:LINE:COL otherwise


def test_defaults(render: Render, tmp_path: Path):
    r = render(CI["defaults"])
    assert r.kinds() == sorted(
        ["ConfigMap", "ConfigMap", "Service", "Service", "ServiceAccount", "StatefulSet"]
    )  # no Secret (no token, no URL), no Job (SQLite), no ServiceMonitor or NetworkPolicy
    _, config = config_of(r, tmp_path)
    assert config.catalog == "sqlite:////data/catalog.db"
    assert config.pipelines == "/pipelines"

    sts = r.one("StatefulSet", "rel-cq-service")
    assert sts["spec"]["replicas"] == 1
    assert sts["spec"]["serviceName"] == "rel-cq-service-headless"
    claim = sts["spec"]["volumeClaimTemplates"][0]
    assert claim["metadata"]["name"] == "data"
    assert claim["spec"]["resources"]["requests"]["storage"] == "5Gi"
    pod = sts["spec"]["template"]["spec"]
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert pod["automountServiceAccountToken"] is False
    worker = worker_container(sts)
    assert worker["args"] == ["serve", "--config", "/etc/cq/config.yaml"]
    assert worker["securityContext"]["readOnlyRootFilesystem"] is True
    assert worker["resources"]["requests"] == {"cpu": "500m", "memory": "1Gi"}
    assert worker["livenessProbe"]["httpGet"]["path"] == "/healthz"
    assert worker["startupProbe"]["httpGet"]["path"] == "/healthz"
    assert worker["readinessProbe"]["httpGet"]["path"] == "/readyz"
    mounts = {m["name"]: m["mountPath"] for m in worker["volumeMounts"]}
    assert mounts == {
        "config": "/etc/cq",
        "data": "/data",
        "tmp": "/tmp",
        "pipelines": "/pipelines",
    }
    assert [c["name"] for c in pod["containers"]] == ["worker"]
    secret_env = env_of(worker)["CQ_CATALOG"]["secretKeyRef"]
    assert secret_env["optional"] is True  # SQLite: the URL is the file's
    pipelines = r.one("ConfigMap", "rel-cq-service-pipelines")
    assert set(pipelines["data"]) == {"web-proxy.yaml"}
    labels = sts["metadata"]["labels"]
    assert labels["app.kubernetes.io/name"] == "cq-service"
    assert labels["app.kubernetes.io/instance"] == "rel"
    for obj in r.objects:
        assert "namespace" not in obj["metadata"], obj["kind"]


def test_git_sync(render: Render, tmp_path: Path):
    r = render(CI["git-sync"])
    deployment = r.one("Deployment", "rel-cq-service")
    assert not r.all("StatefulSet")
    assert deployment["spec"]["strategy"]["type"] == "Recreate"
    pod = deployment["spec"]["template"]["spec"]
    assert [c["name"] for c in pod["containers"]] == ["worker", "git-sync"]
    sidecar = pod["containers"][1]
    assert sidecar["image"] == "registry.k8s.io/git-sync/git-sync:v4.4.0"
    env = env_of(sidecar)
    assert env["GITSYNC_REPO"] == "https://git.example.com/data/pipelines.git"
    assert (env["GITSYNC_REF"], env["GITSYNC_PERIOD"]) == ("main", "30s")
    assert env["GITSYNC_PASSWORD"]["secretKeyRef"]["name"] == "pipelines-git-credentials"
    _, config = config_of(r, tmp_path)
    assert config.pipelines == "/git/current/pipelines/prod"
    assert (config.checkpoint_interval, config.snapshot_interval) == (2.0, 60.0)
    assert config.policy == "chain"
    volumes = {v["name"]: v for v in pod["volumes"]}
    assert "emptyDir" in volumes["git"] and "emptyDir" in volumes["data"]
    assert "pipelines" not in volumes

    secret = r.one("Secret", "rel-cq-service")
    data = {k: base64.b64decode(v).decode() for k, v in secret["data"].items()}
    assert data == {
        "token": "change-me",
        "catalog-url": "postgresql+psycopg://cq:secret@postgres.data.svc:5432/cq",
    }
    # The Job runs before the release's objects: the Secret it reads is a hook made first.
    job = r.one("Job", "rel-cq-service-migrate")
    hooks = {o["kind"]: o["metadata"]["annotations"] for o in (secret, job)}
    assert (
        hooks["Job"]["helm.sh/hook"] == hooks["Secret"]["helm.sh/hook"] == "pre-install,pre-upgrade"
    )
    assert int(hooks["Secret"]["helm.sh/hook-weight"]) < int(hooks["Job"]["helm.sh/hook-weight"])
    migrate = job["spec"]["template"]["spec"]["containers"][0]
    assert migrate["args"] == ["catalog", "upgrade"]
    ref = env_of(migrate)["CQ_CATALOG"]["secretKeyRef"]
    assert ref == {"name": "rel-cq-service", "key": "catalog-url", "optional": False}
    assert "CQ_TOKEN" not in env_of(migrate)
    worker_env = env_of(worker_container(deployment))
    assert worker_env["CQ_TOKEN"]["secretKeyRef"]["key"] == "token"
    assert worker_env["CQ_CATALOG"]["secretKeyRef"]["optional"] is False


def test_existing_secret_and_configmap(render: Render, tmp_path: Path):
    r = render(CI["existing-secret"])
    assert not r.all("Secret")
    assert [c["metadata"]["name"] for c in r.all("ConfigMap")] == ["rel-cq-service"]
    sts = r.one("StatefulSet", "rel-cq-service")
    env = env_of(worker_container(sts))
    assert env["CQ_TOKEN"]["secretKeyRef"] == {
        "name": "cq-credentials",
        "key": "api-token",
        "optional": True,
    }
    assert env["CQ_CATALOG"]["secretKeyRef"]["name"] == "cq-credentials"
    assert env["CQ_CATALOG"]["secretKeyRef"]["key"] == "catalog"
    job = r.one("Job", "rel-cq-service-migrate")
    migrate = job["spec"]["template"]["spec"]["containers"][0]
    assert env_of(migrate)["CQ_CATALOG"]["secretKeyRef"]["name"] == "cq-credentials"
    volumes = {v["name"]: v for v in sts["spec"]["template"]["spec"]["volumes"]}
    assert volumes["pipelines"]["configMap"]["name"] == "cq-pipelines"
    claim = sts["spec"]["volumeClaimTemplates"][0]["spec"]
    assert (claim["storageClassName"], claim["resources"]["requests"]["storage"]) == (
        "fast-ssd",
        "20Gi",
    )
    raw, _ = config_of(r, tmp_path)
    assert "catalog" not in raw  # from the Secret (CQ_CATALOG) only


def test_monitoring(render: Render):
    r = render(CI["monitoring"])
    monitor = r.one("ServiceMonitor", "rel-cq-service")
    assert monitor["apiVersion"] == "monitoring.coreos.com/v1"
    assert monitor["metadata"]["labels"]["release"] == "kube-prometheus-stack"
    assert monitor["spec"]["endpoints"] == [
        {"port": "http", "path": "/metrics", "interval": "15s", "scrapeTimeout": "10s"}
    ]
    service = r.one("Service", "rel-cq-service")
    assert monitor["spec"]["selector"]["matchLabels"] == service["spec"]["selector"]
    assert service["spec"]["ports"][0]["name"] == "http"
    policy = r.one("NetworkPolicy", "rel-cq-service")
    assert policy["spec"]["podSelector"]["matchLabels"] == service["spec"]["selector"]
    rule = policy["spec"]["ingress"][0]
    assert rule["ports"] == [{"port": "http", "protocol": "TCP"}]
    assert len(rule["from"]) == 2


def test_a_changed_configuration_restarts_the_worker(render: Render):
    def checksum(values: dict[str, Any]) -> str:
        sts = render(CI["defaults"], values).one("StatefulSet")
        return sts["spec"]["template"]["metadata"]["annotations"]["checksum/config"]

    assert checksum({}) != checksum({"worker": {"settings": {"snapshot_keep": 5}}})


def test_migrations_can_be_turned_off(render: Render):
    r = render(CI["git-sync"], {"migrations": {"enabled": False}})
    assert not r.all("Job")
    assert "helm.sh/hook" not in r.one("Secret").get("metadata", {}).get("annotations", {})
