"""A Spark standalone cluster on 127.0.0.1 for the tests: one master and N workers, started
from PySpark's own launch classes (``bin/spark-class`` of the installed pyspark package).

    with SparkCluster(workers=2) as cluster:   # started; every worker ALIVE at the master
        cluster.master_url                      # spark://127.0.0.1:7077 (or free ports)
        env = cluster.driver_env()              # for a driver: `cq backfill --master URL`, ...
        cluster.stop_worker(1)                  # SIGKILL the worker and its executors
        cluster.start_worker(1)                 # the same ports, ALIVE again
        cluster.events()                        # each application's Spark event log
    # every process stopped, the temporary folder removed

The master listens on 7077 when that port is free, else on a free port; web UIs on free ports.
A daemon never moves to another port on its own (spark.port.maxRetries 0): one whose port was
taken meanwhile (another test process starting a cluster) exits, and is started again on other
free ports.
Each worker offers `cores` cores and `memory` of memory, with its work folder (executors' logs,
their files) under the cluster's temporary folder. Daemons, executors and drivers started with
`driver_env()` bind 127.0.0.1 (SPARK_LOCAL_IP) and run Python workers on this interpreter
(PYSPARK_PYTHON), which imports the project from the checkout (an editable install).

Readiness is the master's own JSON (``http://127.0.0.1:<web port>/json/``): the master answers
ALIVE and lists each worker ALIVE at its address. `driver_env()` also points SPARK_CONF_DIR at
a spark-defaults.conf that writes event logs (per application, under `events_dir`) and makes
the scheduler wait for every worker's executor before it runs a task, so tasks spread over all
the workers' executors.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request
from contextlib import suppress
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Any, Self

__all__ = ["MASTER_PORT", "SparkCluster", "spark_home"]

HOST = "127.0.0.1"
MASTER_PORT = 7077
START_TIMEOUT_S = 120.0
STOP_TIMEOUT_S = 30.0
DAEMON_MEMORY = "512m"  # the master's and workers' own heaps (SPARK_DAEMON_MEMORY)
# No port search (a master on 7078 would not be the one its URL names), no REST server (6066).
DAEMON_OPTIONS = "-Dspark.port.maxRetries=0 -Dspark.master.rest.enabled=false"
LAUNCH_ATTEMPTS = 5
MASTER_CLASS = "org.apache.spark.deploy.master.Master"
WORKER_CLASS = "org.apache.spark.deploy.worker.Worker"


def spark_home() -> Path:
    """The installed pyspark package: its jars/ and bin/spark-class make a Spark home."""
    import pyspark

    return Path(pyspark.__file__).resolve().parent


@dataclass
class _Daemon:
    """One master or worker JVM: its ports, log and process (None when stopped)."""

    name: str
    port: int
    web_port: int
    log: Path
    process: subprocess.Popen[bytes] | None = None


class SparkCluster:
    """A standalone master and `workers` workers (see the module doc)."""

    def __init__(self, workers: int = 2, cores: int = 1, memory: str = "2g",
                 executor_memory: str = "1g") -> None:
        from tests.services.own import free_port

        self.root = Path(tempfile.mkdtemp(prefix="cq-spark-cluster-"))
        self.cores = cores
        self.memory = memory
        self.events_dir = self.root / "events"
        self.events_dir.mkdir()
        self._daemon_conf = self.root / "conf"  # spark-env for the daemons: none needed
        self._daemon_conf.mkdir()
        self._driver_conf = self.root / "driver-conf"
        self._driver_conf.mkdir()
        (self._driver_conf / "spark-defaults.conf").write_text(
            f"spark.eventLog.enabled true\n"
            f"spark.eventLog.dir file://{self.events_dir}\n"
            f"spark.eventLog.compress false\n"
            f"spark.eventLog.rolling.enabled false\n"
            f"spark.executor.memory {executor_memory}\n"
            f"spark.scheduler.minRegisteredResourcesRatio 1.0\n"
            f"spark.scheduler.maxRegisteredResourcesWaitingTime 120s\n"
        )
        master_port = MASTER_PORT if _port_free(MASTER_PORT) else free_port()
        self.master = _Daemon("master", master_port, free_port(), self.root / "master.log")
        self.workers = [
            _Daemon(f"worker-{i}", free_port(), free_port(), self.root / f"worker-{i}.log")
            for i in range(workers)
        ]
        self._web_ports = {w.web_port: i for i, w in enumerate(self.workers)}  # every one used

    @property
    def master_url(self) -> str:
        return f"spark://{HOST}:{self.master.port}"

    @property
    def web_url(self) -> str:
        return f"http://{HOST}:{self.master.web_port}"

    # -- lifecycle ------------------------------------------------------------------------------

    def start(self) -> None:
        """Start the master, then every worker; return once all are ALIVE at the master."""
        from tests.services.own import free_port

        for _ in range(LAUNCH_ATTEMPTS):
            self._launch(self.master, [
                MASTER_CLASS, "--host", HOST, "--port", str(self.master.port),
                "--webui-port", str(self.master.web_port),
            ])  # fmt: skip
            if self._wait(lambda s: s.get("status") == "ALIVE" and s.get("url") == self.master_url,
                          "the master to answer") is None:
                break
            self.master.process = None  # it exited: a port was taken meanwhile
            self.master.port, self.master.web_port = free_port(), free_port()
        else:
            raise RuntimeError(f"the spark master did not start:\n{self.log_tail()}")
        for i in range(len(self.workers)):
            self._launch_worker(i)
        self.wait_for_workers()

    def stop_worker(self, i: int, kill: bool = True) -> None:
        """Stop worker `i` and the executors it launched: SIGKILL to its process group, as a
        machine failing would (`kill=False`: SIGTERM, the worker then kills its executors)."""
        _stop(self.workers[i], kill)

    def start_worker(self, i: int) -> None:
        """Start worker `i` again (the same ports, a fresh work folder) and wait until the
        master lists it ALIVE."""
        self._launch_worker(i)
        self.wait_for_workers()

    def close(self) -> None:
        """Stop the workers, then the master, and remove the temporary folder."""
        try:
            for worker in self.workers:
                _stop(worker, kill=False)
            _stop(self.master, kill=False)
        finally:
            shutil.rmtree(self.root, ignore_errors=True)

    def __enter__(self) -> Self:
        try:
            self.start()
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()

    # -- what it says ---------------------------------------------------------------------------

    def state(self) -> dict[str, Any]:
        """The master's JSON: status, workers (id, host, port, state, cores, ...), apps."""
        with urllib.request.urlopen(f"{self.web_url}/json/", timeout=5) as response:
            return json.loads(response.read())

    def alive_workers(self) -> set[int]:
        """Which of our workers the master lists ALIVE (by their ports)."""
        ports = {w["port"] for w in self.state().get("workers", []) if w["state"] == "ALIVE"}
        return {i for i, w in enumerate(self.workers) if w.port in ports}

    def wait_for_workers(self) -> None:
        """Wait until every running worker is ALIVE at the master; one that exits (its port
        taken meanwhile) is started again on other free ports."""
        from tests.services.own import free_port

        want = {i for i, w in enumerate(self.workers) if w.process is not None}
        for _ in range(LAUNCH_ATTEMPTS):
            exited = self._wait(lambda _: self.alive_workers() >= want,
                                f"workers {sorted(want)} to be ALIVE")
            if exited is None:
                return
            if exited is self.master:
                break
            i = self.workers.index(exited)
            exited.process = None
            exited.port, exited.web_port = free_port(), free_port()
            self._web_ports[exited.web_port] = i
            self._launch_worker(i)
        raise RuntimeError(f"spark workers did not start:\n{self.log_tail()}")

    def worker_of_web_port(self, web_port: int) -> int | None:
        """The worker whose web UI is (or was) at `web_port` (executors' log URLs name it)."""
        return self._web_ports.get(web_port)

    def python_cpu(self, i: int) -> float:
        """CPU seconds used so far by the Python processes under worker `i` (its executors'
        Python workers, and those they reaped): it grows only while a task runs Python there."""
        process = self.workers[i].process
        if process is None:
            return 0.0
        ticks = 0
        for entry in Path("/proc").iterdir():
            if not entry.name.isdigit():
                continue
            try:
                stat = (entry / "stat").read_text().rpartition(")")[2].split()
                if int(stat[2]) != process.pid:  # the process group: the worker's session
                    continue
                if b"python" not in (entry / "cmdline").read_bytes():
                    continue
            except (OSError, IndexError, ValueError):
                continue
            ticks += sum(int(x) for x in stat[11:15])  # utime stime cutime cstime
        return ticks / os.sysconf("SC_CLK_TCK")

    def driver_env(self, base: dict[str, str] | None = None) -> dict[str, str]:
        """The environment of a driver process using this cluster (see the module doc)."""
        env = dict(os.environ if base is None else base)
        env.update(self._common_env())
        env["SPARK_CONF_DIR"] = str(self._driver_conf)
        return env

    def events(self) -> dict[str, list[dict[str, Any]]]:
        """Each finished or running application's event log: app id -> its events."""
        logs: dict[str, list[dict[str, Any]]] = {}
        for path in sorted(self.events_dir.iterdir()):
            app = path.name.removesuffix(".inprogress")
            lines = path.read_text(errors="replace").splitlines()
            events = []
            for line in lines:
                with suppress(json.JSONDecodeError):  # a last line being written
                    events.append(json.loads(line))
            logs[app] = events
        return logs

    def log_tail(self, lines: int = 30) -> str:
        text = ""
        for d in (self.master, *self.workers):
            if d.log.exists():
                tail = d.log.read_text(errors="replace").splitlines()[-lines:]
                text += f"--- {d.log.name}\n" + "\n".join(tail) + "\n"
        return text

    # -- internals ------------------------------------------------------------------------------

    def _common_env(self) -> dict[str, str]:
        return {
            "SPARK_HOME": str(spark_home()),
            "SPARK_LOCAL_IP": HOST,
            "SPARK_LOCAL_DIRS": str(self.root / "local"),
            "PYSPARK_PYTHON": sys.executable,
            "PYSPARK_DRIVER_PYTHON": sys.executable,
        }

    def _launch_worker(self, i: int) -> None:
        worker = self.workers[i]
        work = self.root / f"work-{i}"
        self._launch(worker, [
            WORKER_CLASS, "--host", HOST, "--port", str(worker.port),
            "--webui-port", str(worker.web_port), "--cores", str(self.cores),
            "--memory", self.memory, "--work-dir", str(work), self.master_url,
        ])  # fmt: skip

    def _launch(self, daemon: _Daemon, arguments: list[str]) -> None:
        env = dict(os.environ)
        env.update(self._common_env())
        env.update({"SPARK_CONF_DIR": str(self._daemon_conf), "SPARK_DAEMON_MEMORY": DAEMON_MEMORY,
                    "SPARK_DAEMON_JAVA_OPTS": DAEMON_OPTIONS, "SPARK_NO_DAEMONIZE": "1"})
        spark_class = spark_home() / "bin" / "spark-class"
        with daemon.log.open("ab") as log:
            # spark-class execs the JVM: the process is the daemon itself. Its own session, so
            # a worker's executors (its children) are stopped with it.
            daemon.process = subprocess.Popen(
                ["bash", str(spark_class), *arguments], stdin=subprocess.DEVNULL,
                stdout=log, stderr=subprocess.STDOUT, env=env, cwd=self.root,
                start_new_session=True,
            )

    def _wait(self, ready: Any, what: str) -> _Daemon | None:
        """Poll the master's JSON until `ready(state)` (None), or until a daemon exits (that
        daemon); raise after START_TIMEOUT_S."""
        deadline = time.monotonic() + START_TIMEOUT_S
        while time.monotonic() < deadline:
            for d in (self.master, *self.workers):
                if d.process is not None and d.process.poll() is not None:
                    return d
            try:
                if ready(self.state()):
                    return None
            except OSError:  # not listening yet (URLError is an OSError)
                pass
            time.sleep(0.3)
        raise RuntimeError(f"timed out after {START_TIMEOUT_S:.0f} s waiting for {what}:\n"
                           f"{self.log_tail()}")


def _port_free(port: int) -> bool:
    import socket

    with socket.socket() as s:
        try:
            s.bind((HOST, port))
        except OSError:
            return False
    return True


def _stop(daemon: _Daemon, kill: bool) -> None:
    """Signal the daemon's process group and wait for it (SIGKILL after STOP_TIMEOUT_S)."""
    process = daemon.process
    if process is None:
        return
    daemon.process = None
    with suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGKILL if kill else signal.SIGTERM)
    try:
        process.wait(STOP_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        with suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
        process.wait(10)
    if not kill:  # executors a SIGTERM'd worker had not yet reaped
        with suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
