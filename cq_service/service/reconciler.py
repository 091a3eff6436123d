"""GitOps: the pipelines folder is the source of truth (docs/service.md, "Deploying").

Every `*.yaml`/`*.yml` file under the folder (hidden files and folders skipped) is one pipeline.
`reconcile` applies each file whose bytes changed since it was last applied and stops the
pipelines whose files are gone. A file that does not load or compile, or whose sources or sinks
cannot be opened, is rejected: its errors are recorded in the catalog and kept for the API, and
the version already running keeps running.
"""

from __future__ import annotations

import hashlib
import logging
import subprocess
from pathlib import Path

from cq_service.compiler import compile_pipeline
from cq_service.errors import CQError
from cq_service.service.deployer import Deployer, DeployResult
from cq_service.service.running import Runtime, file_digest
from cq_service.spec import load_pipeline

__all__ = ["Reconciler"]

log = logging.getLogger("cq.worker")


class Reconciler:
    def __init__(self, rt: Runtime, deployer: Deployer):
        self.rt = rt
        self.deployer = deployer
        self.files: dict[str, str] = {}  # pipeline file -> content hash last applied
        self.file_pipeline: dict[str, str] = {}  # pipeline file -> pipeline name
        self.errors: dict[str, list[str]] = {}  # pipeline file -> errors of the last attempt

    def reconcile(self) -> list[DeployResult]:
        """Apply every pipeline file in the folder that changed since it was last seen; stop
        the pipelines whose files are gone."""
        folder = Path(self.rt.config.pipelines)
        results = []
        seen: set[str] = set()
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
            self.files[key] = digest
            results.append(self.deploy_file(path, digest))
        for key in [k for k in self.files if k not in seen]:
            del self.files[key]
            name = self.file_pipeline.pop(key, None)
            if name is not None and name not in self.file_pipeline.values():
                results.append(self.deployer.undeploy(name))
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
        except CQError as e:  # invalid, or a source or sink that cannot be opened
            errors = e.lines()
            self.errors[str(path)] = errors
            self.rt.catalog.record_deployment(name, digest, revision, "rejected", "\n".join(errors))
            log.warning("rejected %s: %s", path, "; ".join(errors))
            return DeployResult(name, "rejected", errors=errors)
        self.errors.pop(str(path), None)
        return result


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
