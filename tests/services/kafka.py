"""A single-node Apache Kafka broker (KRaft, broker+controller) for development and tests.

The jars come from Maven Central through Maven (`pom.xml` here) into ~/.m2; the broker runs as
`java -cp ... kafka.Kafka server.properties` with its data, config and logs under the state dir.
The shared broker listens on 127.0.0.1:19092 (controller 19093); `start` takes other ports for
a broker of one's own (tests/services/own.py), which `stop` and `start` again on the same ports
and data.
"""

from __future__ import annotations

import base64
import hashlib
import os
import signal
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Callable
from contextlib import suppress
from dataclasses import dataclass
from pathlib import Path
from string import Template

__all__ = [
    "BOOTSTRAP",
    "KAFKA_API_VERSION",
    "KAFKA_VERSION",
    "answers",
    "start",
    "stop",
]

KAFKA_VERSION = "4.4.0"
# kafka-python must not guess the protocol: Kafka 4 removed old request versions (KIP-896,
# DESIGN §9). With kafka-python 3.0.12 against Kafka 4.4, pins (3, 9) to (4, 3) pass producer,
# group consumer (commit, committed, seek_to_beginning, end_offsets) and admin; (3, 0) and (2, 8)
# break describe_cluster (a KeyError in kafka-python); (0, 10, 2) is disconnected by the broker.
# (3, 9) also speaks to a 3.9 KRaft broker, which (4, 0) would not.
KAFKA_API_VERSION: tuple[int, int] = (3, 9)

HOST = "127.0.0.1"
BROKER_PORT = 19092
CONTROLLER_PORT = 19093
BOOTSTRAP = f"{HOST}:{BROKER_PORT}"
JVM_OPTIONS = ("-Xms256m", "-Xmx512m", "-XX:+UseG1GC", "-Djava.awt.headless=true")
START_TIMEOUT_S = 120.0
STOP_TIMEOUT_S = 60.0

_HERE = Path(__file__).resolve().parent
_POM = _HERE / "pom.xml"


@dataclass(frozen=True)
class _Paths:
    """Where one broker keeps its things, under `root` (<state dir>/kafka)."""

    root: Path
    port: int = BROKER_PORT
    controller_port: int = CONTROLLER_PORT

    @property
    def bootstrap(self) -> str:
        return f"{HOST}:{self.port}"

    @property
    def data(self) -> Path:
        return self.root / "data"

    @property
    def config(self) -> Path:
        return self.root / "server.properties"

    @property
    def log4j(self) -> Path:
        return self.root / "log4j2.properties"

    @property
    def log(self) -> Path:
        return self.root / "server.log"

    @property
    def console(self) -> Path:
        return self.root / "console.log"

    @property
    def pid(self) -> Path:
        return self.root / "kafka.pid"

    @property
    def classpath(self) -> Path:
        return self.root / "classpath.txt"


def answers(bootstrap: str | None = None, timeout_s: float = 3.0) -> bool:
    """True when a broker at `bootstrap` (default: ours) returns cluster metadata to kafka-python."""
    from kafka import KafkaAdminClient
    from kafka.errors import KafkaError

    bootstrap = bootstrap or BOOTSTRAP
    host, _, port = bootstrap.rpartition(":")
    try:  # a refused connection is the common case: say so without a client's retries
        socket.create_connection((host, int(port)), timeout=timeout_s).close()
    except OSError:
        return False
    try:
        admin = KafkaAdminClient(
            bootstrap_servers=bootstrap,
            api_version=KAFKA_API_VERSION,
            bootstrap_timeout_ms=int(timeout_s * 1000),
            request_timeout_ms=int(timeout_s * 1000),
            client_id="cq-services-probe",
        )
    except (KafkaError, OSError):
        return False
    try:
        admin.list_topics()
        return True
    except (KafkaError, OSError):
        return False
    finally:
        admin.close()


def start(
    root: Path,
    port: int = BROKER_PORT,
    controller_port: int = CONTROLLER_PORT,
    classpath_cache: Path | None = None,
) -> str:
    """Ensure the broker runs with its state in `root`, listening on `port` (its controller
    on `controller_port`); return its bootstrap address. The jars' classpath is cached in
    `classpath_cache` (default: in `root`)."""
    paths = _Paths(root.resolve(), port, controller_port)
    if answers(paths.bootstrap, timeout_s=2.0):
        return paths.bootstrap
    pid = _running_pid(paths)
    if pid is not None and _wait_until_ready(paths, lambda: _is_ours(pid, paths)):
        return paths.bootstrap  # ours, and it was still starting
    paths.root.mkdir(parents=True, exist_ok=True)
    classpath = _classpath(classpath_cache or paths.classpath, paths.root)
    _write_config(paths)
    _format_storage(paths, classpath)
    process = _launch(paths, classpath)
    if not _wait_until_ready(paths, lambda: process.poll() is None):
        raise RuntimeError(f"kafka exited while starting:\n{_tail(paths)}")
    return paths.bootstrap


def stop(root: Path, kill: bool = False) -> bool:
    """Stop the broker started from `root` (SIGTERM, then SIGKILL after a minute; `kill`:
    SIGKILL at once, as a crash would). Returns whether one was running.
    """
    paths = _Paths(root.resolve())
    pid = _running_pid(paths)
    if pid is None:
        paths.pid.unlink(missing_ok=True)
        return False
    with suppress(ProcessLookupError):
        os.kill(pid, signal.SIGKILL if kill else signal.SIGTERM)
    if not _wait_for_exit(pid, STOP_TIMEOUT_S):
        print(f"kafka (pid {pid}) ignored SIGTERM for {STOP_TIMEOUT_S:.0f} s; killing it",
              file=sys.stderr)
        with suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
        _wait_for_exit(pid, 10.0)
    paths.pid.unlink(missing_ok=True)
    return True


def _classpath(cache: Path, workdir: Path) -> str:
    """The broker's classpath, resolved by Maven once per (version, pom) and cached in `cache`."""
    key = hashlib.sha256(_POM.read_bytes() + KAFKA_VERSION.encode()).hexdigest()[:16]
    if cache.exists():
        cached_key, _, classpath = cache.read_text().partition("\n")
        jars = classpath.strip().split(os.pathsep)
        if cached_key == key and jars and all(Path(jar).is_file() for jar in jars):
            return classpath.strip()
    print(f"resolving Kafka {KAFKA_VERSION} jars with Maven (into ~/.m2)", file=sys.stderr)
    output = workdir / f"classpath.mvn.{os.getpid()}.txt"
    _run([
        "mvn", "-q", "-B", "-f", str(_POM), "dependency:build-classpath",
        f"-Dkafka.version={KAFKA_VERSION}", "-Dmdep.includeScope=runtime",
        f"-Dmdep.outputFile={output}",
    ])
    classpath = output.read_text().strip()
    output.unlink()
    cache.parent.mkdir(parents=True, exist_ok=True)
    staged = cache.with_name(f"{cache.name}.{os.getpid()}")
    staged.write_text(f"{key}\n{classpath}\n")
    staged.replace(cache)  # whole or not at all: brokers may start in parallel
    return classpath


def _write_config(paths: _Paths) -> None:
    values = {
        "host": HOST,
        "broker_port": paths.port,
        "controller_port": paths.controller_port,
        "log_dirs": paths.data,
        "log_file": paths.log,
    }
    for template, target in (("server.properties.template", paths.config),
                             ("log4j2.properties.template", paths.log4j)):
        text = Template((_HERE / template).read_text()).substitute(values)
        target.write_text(text)


def _format_storage(paths: _Paths, classpath: str) -> None:
    """Format the KRaft log dir once (it then holds meta.properties)."""
    if (paths.data / "meta.properties").exists():
        return
    _run([
        "java", *_logging_options(paths), "-cp", classpath, "kafka.tools.StorageTool",
        "format", "--ignore-formatted", "-t", _new_cluster_id(), "-c", str(paths.config),
    ])


def _new_cluster_id() -> str:
    """A random Kafka Uuid in its base64 form (what `kafka-storage random-uuid` prints)."""
    while True:
        text = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
        if not text.startswith("-"):
            return text


def _launch(paths: _Paths, classpath: str) -> subprocess.Popen[bytes]:
    print(f"starting kafka {KAFKA_VERSION} on {paths.bootstrap} (logs: {paths.log})",
          file=sys.stderr)
    with paths.console.open("ab") as console:
        process = subprocess.Popen(
            ["java", *JVM_OPTIONS, *_logging_options(paths), "-cp", classpath,
             "kafka.Kafka", str(paths.config)],
            stdin=subprocess.DEVNULL, stdout=console, stderr=subprocess.STDOUT,
            start_new_session=True, cwd=paths.root,
        )
    paths.pid.write_text(f"{process.pid}\n")
    return process


def _logging_options(paths: _Paths) -> list[str]:
    return [f"-Dlog4j2.configurationFile={paths.log4j}", f"-Dkafka.logs.dir={paths.root}"]


def _wait_until_ready(paths: _Paths, running: Callable[[], bool]) -> bool:
    """Wait until the broker answers (True) or stops `running` (False); raise on timeout."""
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        if not running():
            return False
        if answers(paths.bootstrap, timeout_s=2.0):
            return True
        time.sleep(0.5)
    raise RuntimeError(f"kafka did not answer within {START_TIMEOUT_S:.0f} s:\n{_tail(paths)}")


def _running_pid(paths: _Paths) -> int | None:
    """The pid in the pid file if that process is still this broker, else None."""
    try:
        pid = int(paths.pid.read_text().strip())
    except (FileNotFoundError, ValueError):
        return None
    return pid if _is_ours(pid, paths) else None


def _is_ours(pid: int, paths: _Paths) -> bool:
    """Whether `pid` is a live kafka.Kafka process using our config (not a recycled pid)."""
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return False
    return _alive(pid) and b"kafka.Kafka" in cmdline and str(paths.config).encode() in cmdline


def _alive(pid: int) -> bool:
    """Whether process `pid` still runs any thread.

    The JVM's main thread may exit (and show as a zombie) while shutdown hooks still run in
    other threads; the process has exited only once its main thread is the last one left.
    """
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0]
        threads = len(os.listdir(f"/proc/{pid}/task"))
    except OSError:
        return False
    return state != "Z" or threads > 1


def _wait_for_exit(pid: int, timeout_s: float) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if not _alive(pid):
            return True
        time.sleep(0.2)
    return False


def _tail(paths: _Paths, lines: int = 40) -> str:
    text = ""
    for log in (paths.console, paths.log):
        if log.exists():
            last = log.read_text(errors="replace").splitlines()[-lines:]
            text += f"--- {log}\n" + "\n".join(last) + "\n"
    return text


def _run(command: list[str]) -> None:
    result = subprocess.run(command, capture_output=True, text=True)
    if result.returncode != 0:
        raise RuntimeError(
            f"{' '.join(command[:4])} ... failed ({result.returncode}):\n"
            f"{result.stdout[-4000:]}{result.stderr[-4000:]}"
        )
