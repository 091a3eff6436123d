"""`cq backfill` and the Spark runner on a real Spark standalone cluster (a master and two
workers on 127.0.0.1, tests/services/spark.py): the results equal `cq run`'s, the work runs in
executors of their own on both workers, their Python workers run the project's engine, a
worker killed and started again during a runner job loses nothing, and `cq serve` runs its
runner-spark jobs on the master of its setting (CQ_SPARK_MASTER).

Every driver is a `cq` process of its own (its own JVM: the test process may hold a local
SparkSession of other tests). What ran where comes from each application's Spark event log.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from contextlib import suppress
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest
from kafka import KafkaProducer

from cq_service.compiler import compile_pipeline
from cq_service.io.kafka import API_VERSION
from cq_service.runner import run_pipeline
from cq_service.spec import load_pipeline
from tests.integration.runner_outputs import MULTI, assert_same, lines, with_file_sinks
from tests.services.spark import SparkCluster

CQ = Path(sys.executable).parent / "cq"
NEXMARK = Path(__file__).resolve().parents[2] / "pipelines" / "nexmark" / "nexmark.yaml"
PYTHON_RETURNED = "data returned from Python workers"  # mapInArrow's SQL metric


def cq(cluster: SparkCluster, *args: str, timeout: float = 600) -> subprocess.CompletedProcess:
    """`cq ARGS` as a driver of `cluster`; fails the test on a non-zero exit."""
    done = subprocess.run([str(CQ), *args], env=cluster.driver_env(), capture_output=True,
                          text=True, timeout=timeout)
    assert done.returncode == 0, f"cq {' '.join(args)}:\n{done.stdout}\n{done.stderr[-6000:]}"
    return done


def new_app(cluster: SparkCluster, before: set[str]) -> list[dict[str, Any]]:
    """The event log of the one application that started since `before` (app ids)."""
    apps = {app: events for app, events in cluster.events().items() if app not in before}
    assert len(apps) == 1, f"expected one new application, found {sorted(apps)}"
    return next(iter(apps.values()))


def executors(cluster: SparkCluster, events: list[dict[str, Any]]) -> dict[str, int]:
    """Executor id -> the worker (index) that launched it, from the executors' log URLs."""
    found = {}
    for e in events:
        if e["Event"] == "SparkListenerExecutorAdded":
            url = next(iter(e["Executor Info"]["Log Urls"].values()))
            web_port = int(url.split("://", 1)[1].split("/", 1)[0].rsplit(":", 1)[1])
            worker = cluster.worker_of_web_port(web_port)
            assert worker is not None, url
            found[e["Executor ID"]] = worker
    return found


def python_executors(events: list[dict[str, Any]]) -> Counter[str]:
    """Executor id -> how many of its tasks ran the project's Python: tasks of a stage whose
    RDDs include a PythonRDD (backfill's tasks), or tasks that got data back from Python
    workers (mapInArrow: the runner's decoder and engine steps), all of it imported from
    cq_service by the executor's Python."""
    python_stages = {
        e["Stage Info"]["Stage ID"] for e in events
        if e["Event"] == "SparkListenerStageCompleted"
        and any(r.get("Name", "").startswith("PythonRDD") for r in e["Stage Info"]["RDD Info"])
    }
    counts: Counter[str] = Counter()
    for e in events:
        if e["Event"] == "SparkListenerTaskEnd" and e["Task End Reason"]["Reason"] == "Success":
            info = e["Task Info"]
            if e["Stage ID"] in python_stages or any(
                    a.get("Name") == PYTHON_RETURNED and int(a.get("Update", 0)) > 0
                    for a in info.get("Accumulables", [])):
                counts[info["Executor ID"]] += 1
    return counts


# -- backfill -------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def nexmark_data(tmp_path_factory) -> Path:
    from cq_service.io import nexmark

    d = tmp_path_factory.mktemp("nexmark")
    nexmark.write(d / "data", 6_000, rate=0.2)
    return d


@pytest.mark.parametrize("query, path", [("q8", "key"), ("q7", "single")])
def test_backfill_on_the_cluster_equals_cq_run(spark_cluster, nexmark_data, tmp_path, query,
                                               path):
    """q8 (a join, on the key path: hashed over 4 partitions) and q7 (a global aggregate, on
    the single path): `cq backfill --master spark://…` writes exactly `cq run`'s file, with
    an executor on each worker and the engine run by the executors' Python workers."""
    from cq_service.bench.cq_nexmark import one_query
    from tests.unit.batch.archive_fixture import write_archive

    one = one_query(load_pipeline(NEXMARK), query, tmp_path / "expected.parquet",
                    data=nexmark_data / "data")
    run_pipeline(compile_pipeline(one))
    expected = pq.read_table(tmp_path / "expected.parquet")
    assert expected.num_rows > 0
    end = write_archive(one, tmp_path / "archive", files_per_hour=2)

    before = set(spark_cluster.events())
    done = cq(spark_cluster, "backfill", str(NEXMARK), "--query", query, "--to", str(end),
              "--archive", str(tmp_path / "archive"), "--out", str(tmp_path / "out"),
              "--partitions", "4", "--master", spark_cluster.master_url, "--no-progress")
    assert f"{path}" in done.stdout.splitlines()[0], done.stdout
    assert pq.read_table(tmp_path / "out" / "part-0.parquet").equals(expected)

    events = new_app(spark_cluster, before)
    placed = executors(spark_cluster, events)
    assert sorted(placed.values()) == [0, 1], placed  # one executor JVM on each worker
    ran_python = python_executors(events)
    assert ran_python and set(ran_python) <= set(placed)
    if path == "key":  # four engine tasks: both executors' Python workers ran the engine
        assert len(ran_python) == 2, ran_python


# -- the Spark runner -----------------------------------------------------------------------------

# The Spark runner tests' two-query pipeline (runner_outputs.MULTI) on the runner, writing
# under {out}.
RUNNER = (MULTI.replace("name: multi\n", "name: cluster\n")
          .replace("time_unit: ms\n", "time_unit: ms\nresources: {{runner: spark}}\n")
          .replace("path: out/", "path: {out}/")
          + "dead_letter: {{type: file, path: {out}/dead.jsonl}}\n")
QUERIES = ("counts", "pairs")
SENTINEL_TS = 1_000_000  # far past every real element: every real instant's results are final


class Records:
    """Records of S on a two-partition topic, key k on partition k % 2; within a partition
    the timestamps increase (so nothing is late but what is sent late on purpose)."""

    def __init__(self, bootstrap: str, topic: str) -> None:
        import random

        self.topic = topic
        self.rnd = random.Random(7)
        self.producer = KafkaProducer(bootstrap_servers=bootstrap, api_version=API_VERSION,
                                      acks="all")

    def send(self, first: int, last: int) -> None:
        for i in range(first, last):
            k = self.rnd.randrange(9)
            record = {"k": k, "v": self.rnd.randrange(50), "ts": 5 * i + self.rnd.randrange(3)}
            self.producer.send(self.topic, json.dumps(record).encode(), partition=k % 2)
        self.producer.flush()

    def send_raw(self, value: bytes, partition: int) -> None:
        self.producer.send(self.topic, value, partition=partition)
        self.producer.flush()

    def close(self) -> None:
        self.producer.close()


def runner_pipeline(tmp_path: Path, name: str, topic: str, bootstrap: str) -> Path:
    out = tmp_path / f"{name}-out"
    path = tmp_path / f"{name}.yaml"
    path.write_text(RUNNER.format(topic=topic, bootstrap=bootstrap, out=out))
    return path


def embedded(pipeline: Path, out: Path) -> dict[str, list[str]]:
    """`cq run` on the embedded engine: the same file, its sinks moved to `out`."""
    spec = with_file_sinks(load_pipeline(pipeline), out)
    run_pipeline(compile_pipeline(spec))
    return {n: lines(out / f"{n}.jsonl") for n in QUERIES}


def test_the_runner_on_the_cluster_equals_cq_run(spark_cluster, kafka_bootstrap, new_topic,
                                                 tmp_path):
    """`cq run --master spark://…` of a runner-spark pipeline (a sliding-window aggregate and
    a self-join on the key, a two-partition topic, a late and a malformed record) writes what
    the embedded `cq run` writes; both workers' executors decode and run the engine."""
    topic = new_topic(2)
    records = Records(kafka_bootstrap, topic)
    try:
        records.send(0, 600)
        records.send_raw(b"{not json", 0)
        records.send_raw(json.dumps({"k": 0, "v": 1, "ts": 7}).encode(), 0)  # late
    finally:
        records.close()
    pipeline = runner_pipeline(tmp_path, "run", topic, kafka_bootstrap)
    expected = embedded(pipeline, tmp_path / "embedded")

    before = set(spark_cluster.events())
    done = cq(spark_cluster, "run", str(pipeline), "--master", spark_cluster.master_url)
    assert "S: 1 late, 1 malformed record(s)" in done.stderr, done.stderr
    for n in QUERIES:
        got = lines(tmp_path / "run-out" / f"{n}.jsonl")
        assert expected[n] and len(got) == len(expected[n]), n
        assert_same(expected[n], got)
    assert len(lines(tmp_path / "run-out" / "dead.jsonl")) == 2

    events = new_app(spark_cluster, before)
    placed = executors(spark_cluster, events)
    assert sorted(placed.values()) == [0, 1], placed
    assert set(python_executors(events)) == set(placed)


def test_a_worker_restart_during_a_runner_job_loses_nothing(spark_cluster, kafka_bootstrap,
                                                            new_topic, tmp_path):
    """`cq spark-submit --master spark://…` running micro-batches every second: one worker
    (and its executor) is killed while input keeps coming, then started again. The results
    up to the last heartbeat equal the embedded `cq run`'s, element for element: nothing lost,
    nothing twice (the driver lived on, so no micro-batch was replayed)."""
    topic = new_topic(2)
    records = Records(kafka_bootstrap, topic)
    pipeline = runner_pipeline(tmp_path, "submit", topic, kafka_bootstrap)
    out = tmp_path / "submit-out"

    def produced() -> int:
        return sum(len(lines(out / f"{n}.jsonl")) for n in QUERIES)

    before = set(spark_cluster.events())
    log = tmp_path / "spark-submit.log"
    with log.open("wb") as console:
        job = subprocess.Popen(
            [str(CQ), "spark-submit", str(pipeline), "--checkpoint", str(tmp_path / "ckpt"),
             "--master", spark_cluster.master_url, "--trigger", "1 second"],
            env=spark_cluster.driver_env(), stdout=console, stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    try:
        records.send(0, 400)
        wait_for(lambda: produced() > 0, job, log, "the first results")
        first = produced()
        # More records, until worker 1's executor runs Python (a task of the micro-batch
        # reading them): then SIGKILL that worker and its executor. Mostly the kill lands in
        # the micro-batch (its event log then shows an ExecutorLostFailure or a FetchFailed
        # that Spark recovers from), but the task may finish first: that is not asserted.
        sent = 400
        while True:
            idle = spark_cluster.python_cpu(1)
            records.send(sent, sent + 1800)
            sent += 1800
            if until(lambda idle=idle: spark_cluster.python_cpu(1) > idle + 0.05, job, log, 20):
                break
            assert sent < 20_000, "worker 1's executor never ran a task"
        spark_cluster.stop_worker(1)
        try:
            wait_for(lambda: produced() > first, job, log, "results with one worker")
        finally:
            spark_cluster.start_worker(1)
        records.send(sent, sent + 400)
        for p in (0, 1):  # moves the heartbeat of both partitions past every real instant
            records.send_raw(json.dumps({"k": p, "v": 0, "ts": SENTINEL_TS}).encode(), p)
        expected = embedded(pipeline, tmp_path / "embedded")
        expected = {n: [x for x in v if json.loads(x)["_ts"] < SENTINEL_TS]
                    for n, v in expected.items()}
        total = sum(len(v) for v in expected.values())
        wait_for(lambda: produced() >= total, job, log, f"all {total} results")
        time.sleep(3)  # a few more micro-batches: nothing more may come
    finally:
        records.close()
        stop(job)
    output = log.read_text(errors="replace")[-6000:]
    for n in QUERIES:
        assert_same(expected[n], lines(out / f"{n}.jsonl"))

    events = new_app(spark_cluster, before)
    placed = executors(spark_cluster, events)
    removed = {e["Executor ID"] for e in events if e["Event"] == "SparkListenerExecutorRemoved"}
    lost = [x for x in removed if placed.get(x) == 1]
    assert lost, f"no executor of worker 1 was lost: {placed}, {removed}\n{output}"
    assert sorted(placed.values()) == [0, 1, 1], placed  # worker 1 gave the job a new one


def test_the_worker_runs_its_spark_jobs_on_the_master_of_its_setting(
    spark_cluster, kafka_bootstrap, new_topic, tmp_path
):
    """`cq serve` with CQ_SPARK_MASTER=spark://…: the worker's job for a runner-spark pipeline
    runs on the cluster (executors on both workers) and writes the embedded `cq run`'s results
    up to its heartbeat."""
    topic = new_topic(2)
    folder = tmp_path / "pipelines"
    folder.mkdir()
    out = tmp_path / "serve-out"
    (folder / "p.yaml").write_text(RUNNER.format(topic=topic, bootstrap=kafka_bootstrap,
                                                 out=out))
    records = Records(kafka_bootstrap, topic)
    try:
        records.send(0, 600)
        for p in (0, 1):
            records.send_raw(json.dumps({"k": p, "v": 0, "ts": SENTINEL_TS}).encode(), p)
    finally:
        records.close()
    expected = embedded(folder / "p.yaml", tmp_path / "embedded")
    expected = {n: [x for x in v if json.loads(x)["_ts"] < SENTINEL_TS]
                for n, v in expected.items()}
    total = sum(len(v) for v in expected.values())

    env = spark_cluster.driver_env()
    env.update({"CQ_SPARK_MASTER": spark_cluster.master_url, "CQ_SPARK_TRIGGER": "1 second",
                "CQ_SPARK_CHECKPOINTS": str(tmp_path / "spark"), "CQ_PIPELINES": str(folder),
                "CQ_CATALOG": f"sqlite:///{tmp_path / 'catalog.db'}", "CQ_PORT": "0",
                "CQ_RECONCILE_INTERVAL": "0.5", "CQ_MANAGE_INTERVAL": "0"})
    before = set(spark_cluster.events())
    log = tmp_path / "serve.log"
    with log.open("wb") as console:
        worker = subprocess.Popen([str(CQ), "serve"], env=env, stdout=console,
                                  stderr=subprocess.STDOUT, start_new_session=True,
                                  cwd=tmp_path)
    try:
        wait_for(lambda: sum(len(lines(out / f"{n}.jsonl")) for n in QUERIES) >= total,
                 worker, log, f"all {total} results")
        time.sleep(3)  # a few more micro-batches: nothing more may come
    finally:
        stop(worker)
    for n in QUERIES:
        assert_same(expected[n], lines(out / f"{n}.jsonl"))
    placed = executors(spark_cluster, new_app(spark_cluster, before))
    assert sorted(placed.values()) == [0, 1], placed


def until(condition, job: subprocess.Popen, log: Path, timeout: float) -> bool:
    """Poll `condition` every 50 ms for `timeout` seconds: whether it came true. Fails if
    `job` exits meanwhile (with its log)."""
    deadline = time.monotonic() + timeout
    while not condition():
        if job.poll() is not None:
            tail = log.read_text(errors="replace")[-6000:]
            pytest.fail(f"{job.args[1]} exited ({job.returncode}):\n{tail}")
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


def wait_for(condition, job: subprocess.Popen, log: Path, what: str,
             timeout: float = 300) -> None:
    """`until` `condition`, failing after `timeout` seconds."""
    if not until(condition, job, log, timeout):
        tail = log.read_text(errors="replace")[-6000:]
        pytest.fail(f"no {what} within {timeout:.0f} s:\n{tail}")


def stop(job: subprocess.Popen) -> None:
    """Stop `cq spark-submit` and its driver JVM: SIGTERM to their process group (the JVM's
    shutdown hook stops the SparkContext and closes its event log), SIGKILL after a minute."""
    with suppress(ProcessLookupError):
        os.killpg(job.pid, signal.SIGTERM)
    try:
        job.wait(60)
    except subprocess.TimeoutExpired:
        with suppress(ProcessLookupError):
            os.killpg(job.pid, signal.SIGKILL)
        job.wait(30)
