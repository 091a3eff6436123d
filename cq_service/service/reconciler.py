"""GitOps: the pipelines folder is the source of truth (docs/service.md, "Deploying").

Every `*.yaml`/`*.yml` file under the folder (hidden files and folders skipped) is one pipeline.
`reconcile` applies each file whose bytes changed since it was last applied and stops the
pipelines whose files are gone. A file that does not load or compile, or whose sources or sinks
cannot be opened, is rejected: its errors are recorded in the catalog and kept for the API, and
the version already running keeps running.

A deployment that cannot be made or recorded because a dependency is unreachable (the catalog,
the brokers of a source) is not a rejection: nothing is recorded, the file *waits* (`waiting`,
shown by readiness) and is tried again after a backoff until it is applied or rejected. While
the catalog is known to be unreachable, no file is tried and no pipeline is stopped.
"""

from __future__ import annotations

import hashlib
import logging
import subprocess
import time
from pathlib import Path

from cq_service.compiler import compile_pipeline
from cq_service.errors import CQError, Outage, Unreachable
from cq_service.io.reachability import Backoff
from cq_service.service.dependencies import Dependencies
from cq_service.service.deployer import Deployer, DeployResult
from cq_service.service.running import Runtime, file_digest
from cq_service.spec import load_pipeline

__all__ = ["Reconciler"]

log = logging.getLogger("cq.worker")


class Reconciler:
    def __init__(
        self, rt: Runtime, deployer: Deployer, dependencies: Dependencies | None = None
    ):
        self.rt = rt
        self.deployer = deployer
        self.files: dict[str, str] = {}  # pipeline file -> content hash last applied
        self.file_pipeline: dict[str, str] = {}  # pipeline file -> pipeline name
        self.errors: dict[str, list[str]] = {}  # pipeline file -> errors of the last attempt
        self.waiting: dict[str, Outage] = {}  # pipeline file -> what its deployment waits for
        self._dependencies = dependencies
        self._backoff = Backoff(rt.config.retry_backoff, rt.config.retry_backoff_max)
        self._retry_at = 0.0  # monotonic: waiting files are not tried before

    def reconcile(self) -> list[DeployResult]:
        """Apply every pipeline file in the folder that changed since it was last seen (and
        those waiting for a dependency, when their retry is due); stop the pipelines whose
        files are gone."""
        folder = Path(self.rt.config.pipelines)
        results = []
        seen: set[str] = set()
        now = time.monotonic()
        away = self.rt.catalog.outage
        tried = False
        for path in sorted(folder.rglob("*.y*ml")) if folder.is_dir() else []:
            if any(part.startswith(".") for part in path.relative_to(folder).parts):
                continue
            key = str(path)
            seen.add(key)
            try:
                digest = file_digest_strict(path)
            except OSError:
                continue
            if self.files.get(key) == digest:
                continue
            if away is not None:
                self.waiting[key] = Outage(
                    away.dependency, f"deployment of {path.name}", away.reason, away.since
                )
                continue
            if key in self.waiting and now < self._retry_at:
                continue
            tried = True
            result = self.deploy_file(path, digest)
            if result.status != "waiting":
                self.files[key] = digest
            results.append(result)
        for key in [k for k in self.waiting if k not in seen]:
            del self.waiting[key]
        if tried and self.waiting:
            self._retry_at = now + self._backoff.next()
        elif not self.waiting:
            self._backoff.reset()
        if away is None:
            results.extend(self._stop_removed(seen))
        return results

    def _stop_removed(self, seen: set[str]) -> list[DeployResult]:
        """Stop the pipelines whose files are gone (later, if the catalog cannot be reached)."""
        results = []
        for key in [k for k in self.files if k not in seen]:
            name = self.file_pipeline.get(key)
            if name is not None and [k for k, n in self.file_pipeline.items() if n == name] == [key]:
                try:
                    results.append(self.deployer.undeploy(name))
                except Unreachable as e:
                    log.warning("stopping %s waits: %s", name, e.outage.describe())
                    continue
            del self.files[key]
            self.file_pipeline.pop(key, None)
        return results

    def deploy_file(self, path: Path, digest: str | None = None) -> DeployResult:
        """Validate and deploy one pipeline file (`digest`: its content hash, if known)."""
        digest = file_digest(path) if digest is None else digest
        revision = git_revision(path)
        name = self.file_pipeline.get(str(path), path.stem)
        try:
            compiled = compile_pipeline(load_pipeline(path))
            name = compiled.spec.name
            self.file_pipeline[str(path)] = name
            result = self.deployer.deploy(compiled, revision, digest)
        except Unreachable as e:  # the catalog or a source's brokers: not the file's fault
            return self._wait(path, name, e.outage)
        except CQError as e:  # invalid, or a source or sink that cannot be opened
            errors = e.lines()
            try:
                self.rt.catalog.record_deployment(
                    name, digest, revision, "rejected", "\n".join(errors)
                )
            except Unreachable as away:  # recorded when it is tried again
                return self._wait(path, name, away.outage)
            self.errors[str(path)] = errors
            self.waiting.pop(str(path), None)
            log.warning("rejected %s: %s", path, "; ".join(errors))
            return DeployResult(name, "rejected", errors=errors)
        self.errors.pop(str(path), None)
        self.waiting.pop(str(path), None)
        return result

    def _wait(self, path: Path, name: str, outage: Outage) -> DeployResult:
        """A deployment that a dependency's outage keeps from being made or recorded."""
        if str(path) not in self.waiting:
            log.warning("deploying %s waits (tried again with backoff): %s", path,
                        outage.describe())
        self.waiting[str(path)] = Outage(
            outage.dependency, f"deployment of {path.name}", outage.reason, outage.since
        )
        if self._dependencies is not None:
            self._dependencies.retried(outage.dependency)
        return DeployResult(name, "waiting", errors=[f"waiting for {outage.describe()}"])


def file_digest_strict(path: Path) -> str:
    """The SHA-256 of a file's bytes; OSError when it cannot be read."""
    return hashlib.sha256(path.read_bytes()).hexdigest()


def git_revision(path: Path) -> str | None:
    """The commit checked out where `path` lies, if it is in a git work tree."""
    try:
        out = subprocess.run(
            ["git", "-C", str(path.parent), "rev-parse", "HEAD"],
            capture_output=True,
            text=True,
            timeout=5,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return (out.stdout.strip() or None) if out.returncode == 0 else None
