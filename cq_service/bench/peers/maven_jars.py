"""The Flink peers' jars from Maven Central, cached in ~/.m2 (standalone: standard library only,
so it runs in any interpreter, the PyFlink venv's included).

    python maven_jars.py            # fetch every jar flink-jars.txt lists (make bench-deps)

flink-jars.txt beside this file lists the coordinates (group:artifact:version); a missing jar
is fetched with `mvn dependency:get` (no transitive dependencies: the listed jars are shaded
or listed themselves). A jar already in ~/.m2 is used as it is.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

LISTED = Path(__file__).resolve().parent / "flink-jars.txt"
REPOSITORY = Path.home() / ".m2" / "repository"


def listed() -> list[str]:
    """The coordinates flink-jars.txt lists."""
    lines = (ln.strip() for ln in LISTED.read_text().splitlines())
    return [ln for ln in lines if ln and not ln.startswith("#")]


def coordinate(artifact: str) -> str:
    """The coordinate flink-jars.txt lists for `artifact`."""
    found = [c for c in listed() if c.split(":")[1] == artifact]
    if len(found) != 1:
        raise SystemExit(f"flink-jars.txt lists {artifact} {len(found)} times, not once")
    return found[0]


def ensure_jar(coordinate: str) -> Path:
    """The jar of group:artifact:version in ~/.m2, fetched from Maven Central if missing."""
    group, artifact, version = coordinate.split(":")
    jar = REPOSITORY / group.replace(".", "/") / artifact / version / f"{artifact}-{version}.jar"
    if not jar.exists():
        print(f"fetching {coordinate} into {REPOSITORY}", file=sys.stderr, flush=True)
        subprocess.run(
            ["mvn", "-q", "dependency:get", f"-Dartifact={coordinate}", "-Dtransitive=false",
             f"-Dmaven.repo.local={REPOSITORY}"],
            check=True,
            stdout=sys.stderr,
        )
    if not jar.exists():
        raise SystemExit(f"{jar} is missing after mvn dependency:get")
    return jar


if __name__ == "__main__":
    for c in listed():
        print(ensure_jar(c))
