"""The SparkSession the batch jobs run on, and the jars Spark's Kafka connector needs.

`kafka_jars()` resolves ``org.apache.spark:spark-sql-kafka-0-10_2.13`` at the installed
PySpark's version, with its runtime dependencies (kafka-clients, commons-pool2,
spark-token-provider-kafka), through Maven (``mvn dependency:build-classpath``) into ~/.m2, on
first use; the jars PySpark already ships are left out. When Maven Central has no connector for
the installed version yet (PySpark can be ahead of it), the newest release of the same major
version up to it is used instead, with a warning. The resolved list is remembered in
``~/.m2/repository/.cq-service/`` so later runs do not start Maven.

`session()` builds (or returns the running) SparkSession: local mode by default
(``local[2]``), a cluster when `master` says so; the Python workers run this interpreter, the
session's time zone is UTC, and the Kafka jars are on its classpath. Jars can only be given to
a session when it starts: every batch job should get its session here.
"""

from __future__ import annotations

import logging
import os
import re
import subprocess
import sys
import tempfile
import urllib.request
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from cq_service.types import DataType

__all__ = [
    "KAFKA_CONNECTOR",
    "SCALA_VERSION",
    "SPARK_TYPES",
    "SparkSetupError",
    "kafka_jars",
    "session",
    "spark_version",
]

log = logging.getLogger(__name__)

SCALA_VERSION = "2.13"

# Spark SQL's DDL type of each engine type (timestamps are integers in the pipeline's unit).
SPARK_TYPES = {
    DataType.INT: "bigint",
    DataType.FLOAT: "double",
    DataType.STRING: "string",
    DataType.BOOL: "boolean",
    DataType.TIMESTAMP: "bigint",
    DataType.NULL: "string",
}
KAFKA_CONNECTOR = "org.apache.spark:spark-sql-kafka-0-10_{scala}:{version}"
CENTRAL = "https://repo1.maven.org/maven2"
_CACHE = ".cq-service"
_POM = """<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>cq-service</groupId><artifactId>spark-kafka-jars</artifactId><version>1</version>
  <packaging>pom</packaging>
  <dependencies>
    <dependency>
      <groupId>{group}</groupId><artifactId>{artifact}</artifactId><version>{version}</version>
    </dependency>
  </dependencies>
</project>
"""
_JAR_VERSION = re.compile(r"^(.*?)-\d[^/]*\.jar$")


class SparkSetupError(RuntimeError):
    """Spark or its connector jars could not be set up (Maven missing or failing, ...)."""


def spark_version() -> str:
    import pyspark

    return pyspark.__version__


def _repository(repo: Path | None) -> Path:
    return repo if repo is not None else Path.home() / ".m2" / "repository"


def kafka_jars(version: str | None = None, repo: Path | None = None) -> list[Path]:
    """The jars Spark's Kafka connector adds to PySpark (at `version`, default the installed
    PySpark's), resolved into the Maven repository `repo` (default ~/.m2/repository)."""
    version = version or spark_version()
    repo = _repository(repo)
    cache = repo / _CACHE / f"spark-sql-kafka-{SCALA_VERSION}-{version}.classpath"
    if cache.exists():
        jars = [Path(p) for p in cache.read_text().split("\n") if p]
        if jars and all(j.exists() for j in jars):
            return jars
    coordinate = KAFKA_CONNECTOR.format(scala=SCALA_VERSION, version=version)
    try:
        resolved = _resolve(coordinate, repo)
    except SparkSetupError as exact_failed:
        older = _newest_release(coordinate, version)
        if older is None:
            raise
        fallback = KAFKA_CONNECTOR.format(scala=SCALA_VERSION, version=older)
        try:
            resolved = _resolve(fallback, repo)
        except SparkSetupError:
            raise exact_failed from None
        log.warning("Maven Central has no %s; using %s instead", coordinate, fallback)
    jars = _not_in_pyspark(resolved)
    cache.parent.mkdir(parents=True, exist_ok=True)
    cache.write_text("\n".join(str(j) for j in jars) + "\n")
    return jars


def _resolve(coordinate: str, repo: Path) -> list[Path]:
    """The runtime classpath of `coordinate` (group:artifact:version or a version range)."""
    group, artifact, version = coordinate.split(":")
    with tempfile.TemporaryDirectory(prefix="cq-spark-jars-") as tmp:
        pom = Path(tmp) / "pom.xml"
        pom.write_text(_POM.format(group=group, artifact=artifact, version=version))
        out = Path(tmp) / "classpath.txt"
        command = [
            "mvn", "-q", "-B", "-f", str(pom),
            "dependency:build-classpath",
            f"-Dmdep.outputFile={out}",
            "-Dmdep.includeScope=runtime",
            f"-Dmaven.repo.local={repo}",
        ]  # fmt: skip
        log.info("resolving %s into %s", coordinate, repo)
        try:
            done = subprocess.run(command, capture_output=True, text=True, timeout=900)
        except FileNotFoundError:
            raise SparkSetupError(
                "mvn (Maven) is needed to fetch Spark's Kafka connector; install it"
            ) from None
        except subprocess.TimeoutExpired:
            raise SparkSetupError(f"mvn took too long resolving {coordinate}") from None
        if done.returncode != 0 or not out.exists():
            tail = "\n".join((done.stdout + done.stderr).strip().splitlines()[-5:])
            raise SparkSetupError(f"mvn could not resolve {coordinate}:\n{tail}")
        return [Path(p) for p in out.read_text().strip().split(os.pathsep) if p]


def _newest_release(coordinate: str, up_to: str) -> str | None:
    """The newest release (no preview) of `coordinate`'s artifact on Maven Central with the
    major version of `up_to` and not newer than it; None if none or Central cannot be read."""
    group, artifact, _ = coordinate.split(":")
    url = f"{CENTRAL}/{group.replace('.', '/')}/{artifact}/maven-metadata.xml"
    try:
        with urllib.request.urlopen(url, timeout=30) as response:
            text = response.read().decode("utf-8")
    except OSError:
        return None
    limit = _release_key(up_to)
    if limit is None:
        return None
    releases = [
        (key, v)
        for v in re.findall(r"<version>([^<]+)</version>", text)
        if (key := _release_key(v)) is not None and key[0] == limit[0] and key <= limit
    ]
    return max(releases)[1] if releases else None


def _release_key(version: str) -> tuple[int, ...] | None:
    """(major, minor, patch) of a release version such as 4.2.0; None for previews."""
    match = re.fullmatch(r"(\d+)\.(\d+)\.(\d+)", version)
    return tuple(int(g) for g in match.groups()) if match else None


def _not_in_pyspark(jars: Sequence[Path]) -> list[Path]:
    """`jars` without the artifacts PySpark already ships (in any version)."""
    import pyspark

    shipped = Path(pyspark.__file__).parent / "jars"
    names = {m.group(1) for p in shipped.glob("*.jar") if (m := _JAR_VERSION.match(p.name))}
    # In ~/.m2 a jar sits in <group path>/<artifact>/<version>/: its artifact is the grandparent.
    return [j for j in jars if j.parent.parent.name not in names]


def session(
    master: str = "local[2]",
    app_name: str = "cq-batch",
    conf: Mapping[str, Any] | None = None,
    kafka: bool = True,
) -> Any:
    """The SparkSession batch jobs run on (created if none runs; see the module doc)."""
    from pyspark.sql import SparkSession

    # The Python workers must be this interpreter (the one with pyarrow and cq_service).
    os.environ["PYSPARK_PYTHON"] = sys.executable
    builder = (
        SparkSession.builder.master(master)
        .appName(app_name)
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "4")
        .config("spark.sql.execution.arrow.pyspark.enabled", "true")
    )
    if kafka:
        builder = builder.config("spark.jars", ",".join(str(j) for j in kafka_jars()))
    for key, value in (conf or {}).items():
        builder = builder.config(key, str(value))
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    return spark
