"""The three locally built images tests/containers runs, and their builds:
`python -m tests.containers.images build BASE` (`make containers`) builds the worker
(docker/Dockerfile), Kafka (docker/kafka) and PostgreSQL (docker/postgres) on the local Debian
image BASE (docker/debian-base.sh), all three at once; `... images wheels` builds the worker's
wheels alone (`make containers` runs it while the base is bootstrapped).

The worker's dependencies are wheels built on the host by this interpreter's pip into
docker/wheels, pinned to the versions installed here (the venv the tests run), so pip's cache
(~/.cache/pip, filled when `make` installed the venv) serves them; the image installs them with
no index. When BASE's Python is not this one's (their wheels would differ), the image takes its
dependencies from PyPI instead.

The Kafka image holds the same jars as the local broker of `make services`: Maven resolves them
into ~/.m2 (tests/services/pom.xml) and they are hard-linked (or copied) into DIR/libs with the
image's start script, so Docker's layer cache reuses the layers while the jars stay the same.
"""

from __future__ import annotations

import importlib.metadata
import os
import shutil
import subprocess
import sys
import tempfile
import time
import tomllib
from pathlib import Path

from tests.services import STATE_DIR, kafka

__all__ = [
    "IMAGES",
    "KAFKA_IMAGE",
    "POSTGRES_IMAGE",
    "WORKER_IMAGE",
    "build",
    "kafka_context",
    "wheels",
]

WORKER_IMAGE = os.environ.get("CQ_WORKER_IMAGE", "cq-service:0.1.0")
KAFKA_IMAGE = os.environ.get("CQ_KAFKA_IMAGE", f"cq-kafka:{kafka.KAFKA_VERSION}")
POSTGRES_IMAGE = os.environ.get("CQ_POSTGRES_IMAGE", "cq-postgres:15")
IMAGES = (WORKER_IMAGE, KAFKA_IMAGE, POSTGRES_IMAGE)

_ROOT = Path(__file__).resolve().parents[2]
_DOCKER = _ROOT / "docker"
_WHEELS = _DOCKER / "wheels"
_DOCKER_KAFKA = _DOCKER / "kafka"
_CLASSPATH_CACHE = STATE_DIR / "containers-kafka-classpath.txt"


def kafka_context(target: Path) -> Path:
    """Fill `target` with the Kafka image's build context: libs/ (the broker's jars), the start
    script and the log configuration. Jars no longer on the classpath are removed."""
    STATE_DIR.mkdir(exist_ok=True)
    jars = [Path(jar) for jar in kafka._classpath(_CLASSPATH_CACHE, STATE_DIR).split(os.pathsep)]
    libs = target / "libs"
    libs.mkdir(parents=True, exist_ok=True)
    wanted = {jar.name: jar for jar in jars}
    if len(wanted) != len(jars):
        raise RuntimeError("two jars on Kafka's classpath share a file name")
    for stale in set(os.listdir(libs)) - set(wanted):
        (libs / stale).unlink()
    for name, jar in wanted.items():
        _place(jar, libs / name)
    for name in ("kafka.sh", "log4j2.properties"):
        _place(_DOCKER_KAFKA / name, target / name)
    return target


def wheels(target: Path) -> None:
    """Fill `target` with wheels of the package's dependencies and build requirements, at the
    versions installed in this interpreter's environment, from pip's cache where it has them
    (kept while those stay the same). They fit an image whose Python is this one's."""
    project = tomllib.loads((_ROOT / "pyproject.toml").read_text())
    requirements = [*project["project"]["dependencies"], *project["build-system"]["requires"]]
    build_tools = {"pip", "setuptools", "wheel"}  # the build's own: as pyproject.toml asks
    pins: dict[str, str] = {}
    for dist in importlib.metadata.distributions():  # the first of a name is the one imported
        name = (dist.metadata["Name"] or "").lower()
        if name and name not in build_tools | {"cq-service"}:
            pins.setdefault(name, f"{name}=={dist.version}")
    wanted = {
        "requirements.txt": "".join(f"{line}\n" for line in requirements),
        "constraints.txt": "".join(f"{pin}\n" for pin in sorted(pins.values())),
    }
    if any(target.glob("*.whl")) and all(
        (target / name).is_file() and (target / name).read_text() == text
        for name, text in wanted.items()
    ):
        return  # built from the same requirements and pins before
    for old in [*target.glob("*.whl"), *(target / name for name in wanted)]:
        old.unlink(missing_ok=True)
    with tempfile.NamedTemporaryFile("w", suffix=".txt") as constraints:
        constraints.write(wanted["constraints.txt"])
        constraints.flush()
        pip = [sys.executable, "-m", "pip", "wheel", "-q", "--disable-pip-version-check"]
        pip += ["-w", str(target), "-c", constraints.name, *requirements]
        subprocess.run(pip, check=True)
    for name, text in wanted.items():  # written last: they say the wheels are complete
        (target / name).write_text(text)


def build(base: str) -> None:
    """Build the worker, Kafka and PostgreSQL images from `base` at once ($DOCKER: a client
    with BuildKit), each reusing Docker's cached layers while its inputs stay the same; each
    build's output goes to a log file, shown when it fails."""
    docker = os.environ.get("DOCKER", "docker")
    logs = STATE_DIR / "containers"
    logs.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    builds = {
        KAFKA_IMAGE: _start(docker, base, KAFKA_IMAGE, kafka_context(logs / "kafka"), logs),
        POSTGRES_IMAGE: _start(docker, base, POSTGRES_IMAGE, _DOCKER / "postgres", logs),
    }
    ours = f"{sys.version_info[0]}.{sys.version_info[1]}"
    version = "import sys; print('%d.%d' % sys.version_info[:2])"
    run = [docker, "run", "--rm", "--entrypoint", "python3", base, "-c", version]
    theirs = subprocess.run(run, check=True, capture_output=True, text=True).stdout.strip()
    args: list[str] = []
    if theirs == ours:
        wheels(_WHEELS)
        args += ["--build-arg", "WHEELS=yes"]
    else:
        print(f"{base} has Python {theirs}, this is {ours}: the worker's image uses PyPI")
    if os.environ.get("PIP_CERT"):  # for PyPI behind a TLS-intercepting proxy, as `make image`
        args += ["--secret", f"id=pip-cert,src={os.environ['PIP_CERT']}"]
    print(f"worker's wheels ready, {time.monotonic() - started:.1f} s after the start")
    builds[WORKER_IMAGE] = _start(docker, base, WORKER_IMAGE, _ROOT, logs, args)
    failed = []
    for image, (process, log) in builds.items():
        if process.wait() != 0:
            failed.append(image)
            print(f"{image}: build failed; the end of {log}:", file=sys.stderr)
            print(*log.read_text().splitlines()[-40:], sep="\n", file=sys.stderr)
        else:
            print(f"{image}: built, {time.monotonic() - started:.1f} s after the start")
    if failed:
        raise RuntimeError(f"could not build {', '.join(failed)}")


def _start(
    docker: str, base: str, image: str, context: Path, logs: Path, args: list[str] | None = None
) -> tuple[subprocess.Popen[bytes], Path]:
    """Start `docker build` of `image` (the Dockerfile of `context`'s name under docker/, or
    docker/Dockerfile for the worker) in the background, its output to a log under `logs`."""
    name = "worker" if context == _ROOT else context.name
    dockerfile = _DOCKER / "Dockerfile" if context == _ROOT else _DOCKER / name / "Dockerfile"
    log = logs / f"{name}.log"
    command = [docker, "build", "--progress=plain", "-f", str(dockerfile)]
    command += ["--build-arg", f"BASE={base}", *(args or []), "-t", image, str(context)]
    with log.open("wb") as out:
        process = subprocess.Popen(
            command,
            env={**os.environ, "DOCKER_BUILDKIT": "1"},
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
        )
    return process, log


def _place(source: Path, target: Path) -> None:
    """Make `target` a hard link to (or, across file systems, a copy of) `source`."""
    if target.exists() and os.path.samefile(source, target):
        return
    if target.exists():
        same = target.stat().st_size == source.stat().st_size
        if same and target.read_bytes() == source.read_bytes():
            return
        target.unlink()
    try:
        os.link(source, target)
    except OSError:
        shutil.copy2(source, target)


if __name__ == "__main__":
    if sys.argv[1:] == ["wheels"]:
        wheels(_WHEELS)
    elif len(sys.argv) == 3 and sys.argv[1] == "build":
        build(sys.argv[2])
    else:
        sys.exit("usage: python -m tests.containers.images wheels | build BASE")
