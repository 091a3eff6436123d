"""The three locally built images tests/containers runs, and the builds of two of them:
`python -m tests.containers.images build BASE` (`make containers`, after the worker's image)
builds Kafka (docker/kafka) and PostgreSQL (docker/postgres) on the local Debian image BASE.

The Kafka image holds the same jars as the local broker of `make services`: Maven resolves them
into ~/.m2 (tests/services/pom.xml) and they are hard-linked (or copied) into DIR/libs with the
image's start script, so Docker's layer cache reuses the layers while the jars stay the same.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

from tests.services import STATE_DIR, kafka

__all__ = ["IMAGES", "KAFKA_IMAGE", "POSTGRES_IMAGE", "WORKER_IMAGE", "build", "kafka_context"]

WORKER_IMAGE = os.environ.get("CQ_WORKER_IMAGE", "cq-service:0.1.0")
KAFKA_IMAGE = os.environ.get("CQ_KAFKA_IMAGE", f"cq-kafka:{kafka.KAFKA_VERSION}")
POSTGRES_IMAGE = os.environ.get("CQ_POSTGRES_IMAGE", "cq-postgres:15")
IMAGES = (WORKER_IMAGE, KAFKA_IMAGE, POSTGRES_IMAGE)

_DOCKER = Path(__file__).resolve().parents[2] / "docker"
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


def build(base: str) -> None:
    """Build the Kafka and PostgreSQL images from `base` ($DOCKER: a client with BuildKit),
    each reusing Docker's cached layers while its inputs stay the same."""
    docker = os.environ.get("DOCKER", "docker")
    contexts = {
        KAFKA_IMAGE: kafka_context(STATE_DIR / "containers" / "kafka"),
        POSTGRES_IMAGE: _DOCKER / "postgres",
    }
    for image, context in contexts.items():
        dockerfile = _DOCKER / context.name / "Dockerfile"
        started = time.monotonic()
        subprocess.run(
            [
                docker,
                "build",
                "-q",
                "-f",
                str(dockerfile),
                "--build-arg",
                f"BASE={base}",
                "-t",
                image,
                str(context),
            ],
            check=True,
            env={**os.environ, "DOCKER_BUILDKIT": "1"},
            stdout=subprocess.DEVNULL,
        )
        print(f"{image}: built in {time.monotonic() - started:.1f} s")


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
    if len(sys.argv) != 3 or sys.argv[1] != "build":
        sys.exit("usage: python -m tests.containers.images build BASE")
    build(sys.argv[2])
