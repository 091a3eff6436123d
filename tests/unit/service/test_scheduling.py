"""Scheduling per deployment: the scheduler's precedence (control > config > file), changes
through the API while the worker runs (results still equal `cq run`'s), the control surviving
a restart, and the scheduling metrics."""

from __future__ import annotations

import re
import shutil
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from cq_service.compiler import load_and_compile
from cq_service.engine.scheduler import (
    Chain,
    ChainBounded,
    ChainShare,
    Fifo,
    Greedy,
    RoundRobin,
)
from cq_service.runner import run_pipeline
from cq_service.service import views as w
from cq_service.service.api import make_app
from cq_service.service.config import ConfigError, ServiceConfig, load_config
from cq_service.service.metrics import parse_metrics, render_metrics
from cq_service.service.scheduling import SchedulerChoice
from tests.unit.service.conftest import TOKEN
from tests.unit.service.serving import serving
from tests.unit.service.workers import EXAMPLE, request_while_stepping, run_until_done

NAME = "web-proxy"
AUTH = {"Authorization": f"Bearer {TOKEN}"}


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    shutil.copytree(EXAMPLE, tmp_path / "p" / NAME, ignore=shutil.ignore_patterns("out"))
    return tmp_path / "p"


def reference_outputs(tmp_path: Path) -> list[Path]:
    """`cq run` of the example, with the file's own scheduler."""
    reference = tmp_path / "ref"
    shutil.copytree(EXAMPLE, reference, ignore=shutil.ignore_patterns("out"))
    run_pipeline(load_and_compile(reference / "pipeline.yaml"))
    outs = sorted((reference / "out").glob("*.jsonl"))
    assert len(outs) == 3
    return outs


def set_resources(folder: Path, resources: str) -> Path:
    path = folder / NAME / "pipeline.yaml"
    path.write_text(
        path.read_text().replace("queries:\n", f"resources: {resources}\nqueries:\n", 1)
    )
    return path


def test_an_api_change_takes_effect_at_once_and_results_equal_cq_run(
    tmp_path: Path, folder: Path, make_worker
) -> None:
    worker = make_worker(batch_rows=8)
    client = TestClient(make_app(worker))
    worker.reconcile()
    assert isinstance(worker.scheduling.policy_of(NAME), Chain)  # the file's default
    worker.step()
    url = f"/pipelines/{NAME}/control"
    got = request_while_stepping(
        worker, lambda: client.put(url, json={"scheduler": "fifo"}, headers=AUTH)
    )
    assert got.status_code == 200, got.text
    assert got.json()["effective"] == {
        "scheduler": "fifo",
        "latency_bound_ms": None,
        "share": None,
        "from": "control",
    }
    assert type(worker.scheduling.policy_of(NAME)) is Fifo
    assert not all(s.exhausted for s in worker.engine.executor.sources)  # changed mid-run
    worker.step()
    body = {"scheduler": "chain_bounded", "latency_bound_ms": 5}
    got = request_while_stepping(worker, lambda: client.patch(url, json=body, headers=AUTH))
    assert got.status_code == 200, got.text
    policy = worker.scheduling.policy_of(NAME)
    assert type(policy) is ChainBounded and policy.bound == pytest.approx(0.005)
    worker.step()
    body = {"scheduler": "chain_share", "share": 0.5}
    got = request_while_stepping(worker, lambda: client.put(url, json=body, headers=AUTH))
    assert got.status_code == 200, got.text
    assert got.json()["effective"] == {
        "scheduler": "chain_share",
        "latency_bound_ms": None,
        "share": 0.5,
        "from": "control",
    }
    policy = worker.scheduling.policy_of(NAME)
    assert type(policy) is ChainShare and policy.share == 0.5
    run_until_done(worker)
    for ref in reference_outputs(tmp_path):
        assert (folder / NAME / "out" / ref.name).read_text() == ref.read_text(), ref.name
    kinds = [(a.kind, a.detail["to"]["scheduler"]) for a in worker.catalog.adjustments(NAME)]
    assert kinds == [
        ("scheduler", "fifo"),
        ("scheduler", "chain_bounded"),
        ("scheduler", "chain_share"),
    ]


def test_the_control_survives_a_restart(make_worker) -> None:
    first = make_worker()
    first.reconcile()
    first.set_scheduler(NAME, "greedy", None)
    assert type(first.scheduling.policy_of(NAME)) is Greedy
    first._shutdown()
    second = make_worker()  # same catalog and folder
    second.reconcile()
    assert type(second.scheduling.policy_of(NAME)) is Greedy
    [p] = w.describe(second)["pipelines"]
    assert p["scheduling"] == {
        "scheduler": "greedy",
        "latency_bound_ms": None,
        "share": None,
        "from": "control",
    }
    assert p["control"]["scheduler"] == "greedy"
    assert "scheduler greedy" in w.explain_pipeline(second, NAME).splitlines()[0]


def test_chain_share_from_the_file(folder: Path, make_worker) -> None:
    set_resources(folder, "{scheduler: chain_share, share: 0.25}")
    worker = make_worker()
    worker.reconcile()
    assert worker.schedulers[NAME] == SchedulerChoice("chain_share", None, "file", 0.25)
    policy = worker.scheduling.policy_of(NAME)
    assert type(policy) is ChainShare and policy.share == 0.25
    run_until_done(worker)


def test_precedence_control_then_config_then_file(folder: Path, make_worker) -> None:
    set_resources(folder, "{scheduler: chain_bounded, latency_bound: 20 ms}")
    from_file = make_worker()
    from_file.reconcile()
    assert from_file.schedulers[NAME] == SchedulerChoice("chain_bounded", 0.02, "file")
    assert from_file.scheduling.policy_of(NAME).bound == pytest.approx(0.02)
    configured = make_worker(policy="round_robin")
    configured.reconcile()
    assert configured.schedulers[NAME].origin == "config"
    assert type(configured.scheduling.policy_of(NAME)) is RoundRobin
    configured.set_scheduler(NAME, "fifo", None)
    assert (configured.schedulers[NAME].origin, type(configured.scheduling.policy_of(NAME))) == (
        "control",
        Fifo,
    )
    configured.set_scheduler(NAME, None, None)  # back to the configuration's
    assert configured.schedulers[NAME].origin == "config"
    assert type(configured.scheduling.policy_of(NAME)) is RoundRobin


def test_a_redeploy_keeps_the_policy_unless_the_choice_changes(folder: Path, make_worker) -> None:
    worker = make_worker()
    worker.reconcile()
    learned = worker.scheduling.policy_of(NAME)
    path = folder / NAME / "pipeline.yaml"
    assert worker.deploy_file(path).status == "unchanged"
    assert worker.scheduling.policy_of(NAME) is learned  # Chain's statistics kept
    worker.set_scheduler(NAME, "chain", None)  # same policy, another origin
    assert worker.scheduling.policy_of(NAME) is learned
    worker.set_scheduler(NAME, None, None)
    set_resources(folder, "{scheduler: greedy}")
    [result] = worker.reconcile()
    assert sorted(result.kept) == ["commerce_urls", "domain_load", "loyal_clients"]
    assert type(worker.scheduling.policy_of(NAME)) is Greedy


def test_a_removed_deployment_drops_its_policy(folder: Path, make_worker) -> None:
    worker = make_worker()
    worker.reconcile()
    assert NAME in worker.scheduling.policies
    (folder / NAME / "pipeline.yaml").unlink()
    worker.reconcile()
    assert NAME not in worker.scheduling.policies and NAME not in worker.schedulers
    assert worker.catalog.pipeline_control(NAME) is None  # nothing was set; nothing made up


def test_metrics_of_queues_latency_and_schedulers(make_worker) -> None:
    worker = make_worker()
    run_until_done(worker)
    text = render_metrics(w.metrics_snapshot(worker)).decode()
    values = parse_metrics(text)
    for query in ("commerce_urls", "domain_load", "loyal_clients"):
        labels = f'pipeline="{NAME}",query="{query}"'
        written = worker.engine.sinks[f"{NAME}/{query}"].written
        assert written > 0
        assert values[f"cq_result_latency_seconds_count{{{labels}}}"] == written
        p50 = values[
            f'cq_result_latency_seconds{{pipeline="{NAME}",quantile="0.5",query="{query}"}}'
        ]
        p99 = values[
            f'cq_result_latency_seconds{{pipeline="{NAME}",quantile="0.99",query="{query}"}}'
        ]
        largest = values[f"cq_result_latency_max_seconds{{{labels}}}"]
        assert 0 < p50 <= p99 <= largest < 60
    assert values["cq_queued_rows"] == 0  # everything ran
    assert values["cq_queued_peak_rows"] > 0 and values["cq_queued_peak_bytes"] > 0
    assert 0 < values["cq_queued_average_rows"] <= values["cq_queued_peak_rows"]
    assert 0 < values["cq_queued_average_bytes"] <= values["cq_queued_peak_bytes"]
    assert (
        values[f'cq_pipeline_scheduler{{origin="file",pipeline="{NAME}",scheduler="chain"}}'] == 1
    )
    assert not any(k.startswith("cq_pipeline_latency_bound_seconds{") for k in values)
    worker.set_scheduler(NAME, "chain_bounded", 250)
    text = render_metrics(w.metrics_snapshot(worker)).decode()
    assert re.search(rf'cq_pipeline_latency_bound_seconds{{pipeline="{NAME}"}} 0\.25\b', text)
    assert f'cq_pipeline_scheduler_share{{pipeline="{NAME}"}}' not in text
    worker.set_scheduler(NAME, "chain_share", None, 0.3)
    text = render_metrics(w.metrics_snapshot(worker)).decode()
    assert re.search(rf'cq_pipeline_scheduler_share{{pipeline="{NAME}"}} 0\.3\b', text)
    assert f'cq_pipeline_latency_bound_seconds{{pipeline="{NAME}"}}' not in text


def test_the_configured_policy_is_checked() -> None:
    assert ServiceConfig().policy == ""  # each pipeline's own
    assert load_config(environ={"CQ_POLICY": "fifo"}).policy == "fifo"
    with pytest.raises(ConfigError, match="unknown scheduler 'lifo'"):
        load_config(environ={"CQ_POLICY": "lifo"})
    with pytest.raises(ConfigError, match="chain_bounded needs a latency bound per pipeline"):
        ServiceConfig(policy="chain_bounded")
    with pytest.raises(ConfigError, match="chain_share needs a share of FIFO steps per pipeline"):
        ServiceConfig(policy="chain_share")


def test_the_step_length_is_configured_and_reaches_the_engine(make_worker) -> None:
    assert load_config(environ={"CQ_STEP_SECONDS": "0.01"}).step_seconds == 0.01
    with pytest.raises(ConfigError, match=r"step_seconds: 0\.0 is not positive"):
        load_config(environ={"CQ_STEP_SECONDS": "0"})
    assert make_worker().engine.executor.step_seconds == ServiceConfig().step_seconds


@pytest.fixture
def running(make_worker):
    """A worker running in its own thread, with its API."""
    worker = make_worker()
    with serving(worker) as api:
        yield api, worker


@pytest.mark.parametrize(
    ("method", "body", "reason"),
    [
        ("put", {"scheduler": "lifo"}, "unknown scheduler 'lifo'"),
        (
            "put",
            {"scheduler": "chain", "latency_bound_ms": 5},
            "applies to scheduler chain_bounded only",
        ),
        ("patch", {"latency_bound_ms": 5}, "applies to scheduler chain_bounded only"),
        ("put", {"scheduler": "chain_bounded"}, "chain_bounded needs latency_bound_ms"),
        (
            "put",
            {"scheduler": "chain_bounded", "latency_bound_ms": -1},
            "latency_bound_ms: Input should be greater than 0",
        ),
        ("put", {"scheduler": "chain", "share": 0.5}, "applies to scheduler chain_share only"),
        ("patch", {"share": 0.5}, "share applies to scheduler chain_share only"),
        ("put", {"scheduler": "chain_share"}, "chain_share needs share"),
        (
            "put",
            {"scheduler": "chain_share", "share": 1.5},
            "share: Input should be less than or equal to 1",
        ),
        (
            "put",
            {"scheduler": "chain_share", "share": -0.5},
            "share: Input should be greater than or equal to 0",
        ),
        (
            "put",
            {"scheduler": "chain_bounded", "latency_bound_ms": 5, "share": 0.5},
            "share applies to scheduler chain_share only, but the scheduler is chain_bounded",
        ),
        ("put", {"scheduler": "fifo", "weight": 2}, "weight: Extra inputs are not permitted"),
    ],
)
def test_bad_controls_are_422_with_the_reason(running, method: str, body: Any, reason: str) -> None:
    client, worker = running
    got = getattr(client, method)(f"/pipelines/{NAME}/control", json=body, headers=AUTH)
    assert got.status_code == 422
    assert reason in got.json()["detail"]
    assert worker.catalog.pipeline_control(NAME) is None  # nothing stored


def test_a_control_body_that_is_not_an_object_is_400(running) -> None:
    client, worker = running
    got = client.put(f"/pipelines/{NAME}/control", json=["fifo"], headers=AUTH)
    assert got.status_code == 400
    assert got.json() == {
        "detail": "the body must be a JSON object (Content-Type: application/json)"
    }
    assert worker.catalog.pipeline_control(NAME) is None


def test_the_control_endpoint(running) -> None:
    client, worker = running
    url = f"/pipelines/{NAME}/control"
    got = client.get(url).json()
    assert (got["scheduler"], got["latency_bound_ms"]) == (None, None)
    assert got["effective"] == {
        "scheduler": "chain",
        "latency_bound_ms": None,
        "share": None,
        "from": "file",
    }
    assert client.put(url, json={"scheduler": "fifo"}).status_code == 401
    assert client.put("/pipelines/nope/control", json={}, headers=AUTH).status_code == 404
    assert client.get("/pipelines/nope/control").status_code == 404
    body = {"scheduler": "chain_bounded", "latency_bound_ms": 40}
    assert client.put(url, json=body, headers=AUTH).status_code == 200
    got = client.patch(url, json={"latency_bound_ms": 80}, headers=AUTH).json()  # keeps the name
    assert got["effective"] == {
        "scheduler": "chain_bounded",
        "latency_bound_ms": 80,
        "share": None,
        "from": "control",
    }
    got = client.patch(url, json={"scheduler": "greedy"}, headers=AUTH).json()  # drops the bound
    assert (got["scheduler"], got["latency_bound_ms"], got["share"]) == ("greedy", None, None)
    got = client.patch(url, json={"scheduler": "chain_share", "share": 0.25}, headers=AUTH).json()
    assert (got["scheduler"], got["latency_bound_ms"], got["share"]) == ("chain_share", None, 0.25)
    got = client.patch(url, json={"share": 0.75}, headers=AUTH).json()  # keeps the name
    assert got["effective"] == {
        "scheduler": "chain_share",
        "latency_bound_ms": None,
        "share": 0.75,
        "from": "control",
    }
    assert type(worker.call(lambda: worker.scheduling.policy_of(NAME))) is ChainShare
    got = client.patch(url, json={"scheduler": "greedy"}, headers=AUTH).json()  # drops the share
    assert (got["scheduler"], got["latency_bound_ms"], got["share"]) == ("greedy", None, None)
    described = client.get(f"/pipelines/{NAME}").json()
    assert (
        described["scheduling"]["from"] == "control"
        and described["control"]["scheduler"] == "greedy"
    )
    assert "scheduler greedy" in client.get(f"/pipelines/{NAME}/explain").text
    got = client.put(url, json={"scheduler": None}, headers=AUTH).json()  # back to the file's
    assert got["effective"] == {
        "scheduler": "chain",
        "latency_bound_ms": None,
        "share": None,
        "from": "file",
    }
    assert type(worker.call(lambda: worker.scheduling.policy_of(NAME))) is Chain
    metrics = client.get("/metrics").text
    assert (
        f'cq_pipeline_scheduler{{origin="file",pipeline="{NAME}",scheduler="chain"}} 1.0' in metrics
    )
    assert "cq_result_latency_seconds_count{" in metrics and "cq_queued_average_bytes " in metrics
