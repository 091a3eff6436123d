"""Running the Helm binary on the chart: where it is, rendering, linting.

`make test` builds Helm into .tools/ and passes it as ``$HELM``; run alone, the tests look for
the newest ``.tools/helm-*/helm``, then ``helm`` on the PATH, and are skipped without one.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

__all__ = ["CHART", "CI_VALUES", "KUBE_VERSION", "ROOT", "Rendered", "find_helm", "run_helm"]

ROOT = Path(__file__).resolve().parents[2]
CHART = ROOT / "helm" / "cq-service"
CI_VALUES = sorted((CHART / "ci").glob("*-values.yaml"))
KUBE_VERSION = "1.33.0"  # what `helm template` and `lint` assume the cluster runs


def find_helm() -> str | None:
    """The Helm binary: ``$HELM``, else the newest one built into .tools/, else the PATH's."""
    if os.environ.get("HELM"):
        return os.environ["HELM"]
    built = sorted((ROOT / ".tools").glob("helm-*/helm"))
    if built:
        return str(built[-1])
    return shutil.which("helm")


def run_helm(helm: str, *args: str | Path) -> subprocess.CompletedProcess[str]:
    """`helm ARGS…`, its output captured (never raises on a non-zero exit)."""
    return subprocess.run([helm, *map(str, args)], capture_output=True, text=True, check=False)


@dataclass(frozen=True)
class Rendered:
    """The objects `helm template` rendered, with lookups by kind and name."""

    objects: tuple[dict[str, Any], ...]

    @classmethod
    def parse(cls, text: str) -> Rendered:
        return cls(tuple(d for d in yaml.safe_load_all(text) if d))

    def kinds(self) -> list[str]:
        return sorted(o["kind"] for o in self.objects)

    def all(self, kind: str) -> list[dict[str, Any]]:
        return [o for o in self.objects if o["kind"] == kind]

    def one(self, kind: str, name: str | None = None) -> dict[str, Any]:
        found = [o for o in self.all(kind) if name is None or o["metadata"]["name"] == name]
        assert len(found) == 1, f"{len(found)} {kind} named {name!r} in {self.kinds()}"
        return found[0]
