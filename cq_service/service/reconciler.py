"""GitOps: the pipelines folder, and the pipelines deployed through the API, are the source
of truth (docs/service.md, "Deploying").

Every `*.yaml`/`*.yml` file under the folder (hidden files and folders skipped) is one pipeline;
so is every pipeline text the API kept in the catalog (`deploy_text`, table
``stored_pipelines``). `reconcile` applies each file and stored text whose bytes changed since
it was last applied and stops the pipelines whose files are gone. A file that cannot be read,
does not load or compile, or whose sources or sinks cannot be opened — or whose deployment
fails for any other reason — is rejected: its errors are recorded in the catalog, kept for the
API and counted by reason (`rejections`), and the version already running keeps running. No
error ends `reconcile`.

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
from collections import Counter
from collections.abc import Callable
from contextlib import suppress
from functools import partial
from pathlib import Path

from cq_service.compiler import CompiledPipeline, compile_pipeline
from cq_service.errors import CQError, Outage, Unreachable
from cq_service.io.reachability import Backoff
from cq_service.service.dependencies import Dependencies
from cq_service.service.deployer import Deployer, DeployErrors, DeployResult
from cq_service.service.running import Runtime, hash_text
from cq_service.spec import load_pipeline_text

__all__ = ["REJECTION_REASONS", "Reconciler", "Unreadable", "api_key", "read_file"]

# Why a deployment was rejected: a file that cannot be read (or is not UTF-8), a pipeline that
# does not load or compile, a source or sink that cannot be opened, an error of the worker.
REJECTION_REASONS = ("unreadable", "invalid", "source_or_sink", "internal")

log = logging.getLogger("cq.worker")


class Unreadable(CQError):
    """A pipeline file whose bytes cannot be read, or are not UTF-8 text."""


class Reconciler:
    def __init__(
        self, rt: Runtime, deployer: Deployer, dependencies: Dependencies | None = None
    ):
        self.rt = rt
        self.deployer = deployer
        self.files: dict[str, str] = {}  # pipeline file -> content hash last applied
        self.file_pipeline: dict[str, str] = {}  # pipeline file -> pipeline name
        self.stored: dict[str, str] = {}  # pipeline deployed through the API -> hash applied
        self.errors: dict[str, list[str]] = {}  # pipeline file -> errors of the last attempt
        self.waiting: dict[str, Outage] = {}  # pipeline file -> what its deployment waits for
        self.rejections: Counter[str] = Counter()  # why -> deployments this worker rejected
        self._dependencies = dependencies
        self._backoff = Backoff(rt.config.retry_backoff, rt.config.retry_backoff_max)
        self._retry_at = 0.0  # monotonic: waiting files are not tried before
        self._staged_moved = False
        self.failure: str | None = None  # why the last reconcile failed outside any pipeline

    def reconcile(self) -> list[DeployResult]:
        """Apply every pipeline file in the folder, and every pipeline deployed through the
        API, that changed since it was last seen (and those waiting for a dependency, when
        their retry is due); stop the pipelines whose files are gone. An error that is not
        the files' is logged and counted (`rejections["internal"]`): the worker goes on."""
        try:
            results = self._reconcile()
        except Exception as e:
            log.exception("reconciling the pipelines failed; tried again at the next interval")
            self.rejections["internal"] += 1
            self.failure = f"internal error: {type(e).__name__}: {e}"
            return []
        self.failure = None
        return results

    def _reconcile(self) -> list[DeployResult]:
        folder = Path(self.rt.config.pipelines)
        results = []
        seen: set[str] = set()
        now = time.monotonic()
        away = self.rt.catalog.outage
        if away is None and not self._staged_moved:
            self._move_staged(folder)
        tried = False
        for path in sorted(folder.rglob("*.y*ml")) if folder.is_dir() else []:
            if any(part.startswith(".") for part in path.relative_to(folder).parts):
                continue
            key = str(path)
            seen.add(key)
            data, digest = read_file(path)
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
            result = self.deploy_file(path, data, digest)
            if result.status != "waiting":
                self.files[key] = digest
            results.append(result)
        if away is None:
            results.extend(self._deploy_stored(seen))
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
            others = [k for k, n in self.file_pipeline.items() if n == name and k != key]
            if name is not None and not others and name not in self.stored:
                try:
                    results.append(self.deployer.undeploy(name))
                except Unreachable as e:
                    log.warning("stopping %s waits: %s", name, e.outage.describe())
                    continue
            del self.files[key]
            self.file_pipeline.pop(key, None)
            self.errors.pop(key, None)
        return results

    def deploy_file(
        self, path: Path, data: bytes | None = None, digest: str | None = None
    ) -> DeployResult:
        """Validate and deploy one pipeline file (`data`, `digest`: its bytes and their hash,
        read now if not given)."""
        if data is None or digest is None:
            data, digest = read_file(path)
        revision = git_revision(path)
        name = self.file_pipeline.get(str(path), path.stem)

        def compiled() -> CompiledPipeline:
            if data is None:
                raise Unreadable(f"cannot read pipeline file: {digest[1:]}", file=str(path))
            try:
                text = data.decode("utf-8-sig")
            except UnicodeDecodeError as e:
                raise Unreadable(f"pipeline file is not UTF-8 text: {e.reason}",
                                 file=str(path)) from None
            return compile_pipeline(load_pipeline_text(text, path))

        return self._attempt(str(path), name, digest, revision, compiled)

    def deploy_text(self, text: str, filename: str, at: Path | None = None) -> DeployResult:
        """Deploy pipeline `text` sent through the API as `filename` (its relative paths are
        taken from the pipelines folder — or from the folder of `at`, the file outside the
        folder it was read from); once running, it is kept in the catalog and deployed again
        at every start-up, like a file."""
        folder = Path(self.rt.config.pipelines).resolve()
        path = at.resolve() if at is not None else folder / Path(filename).name
        digest = hash_text(text)
        name = path.stem
        with suppress(CQError):  # if it does not load, it is rejected below with every error
            name = load_pipeline_text(text, path).name
        key = api_key(name)
        try:
            stored = self.rt.catalog.stored_pipeline(name)
        except Unreachable as e:
            return self._wait(key, name, e.outage)
        if stored is None:
            revision = 1
        else:
            revision = stored.revision + (stored.spec_hash != digest)
        result = self._attempt(
            key, name, digest, f"api:{revision}",
            partial(compile_text, text, path),
        )
        if result.status in ("applied", "unchanged"):
            try:
                kept_as = path.name if path.parent == folder else str(path)
                self.rt.catalog.store_pipeline(result.pipeline, kept_as, text, digest)
            except Unreachable as e:  # it runs, but a restart would not bring it back
                log.warning("%s runs but is not kept in the catalog: %s", name,
                            e.outage.describe())
                result.errors.append(f"not kept in the catalog ({e.outage.describe()}): "
                                     "deploy it again once the catalog answers")
            else:
                self.stored[result.pipeline] = digest
        return result

    def _deploy_stored(self, seen: set[str]) -> list[DeployResult]:
        """Deploy the pipelines kept in the catalog that changed since this worker applied
        them (at start-up: every one); their keys join `seen`."""
        results = []
        try:
            records = self.rt.catalog.stored_pipelines()
        except Unreachable as e:
            log.warning("the pipelines deployed through the API wait: %s", e.outage.describe())
            return []
        for record in records:
            seen.add(api_key(record.pipeline))
            if self.stored.get(record.pipeline) == record.spec_hash:
                continue
            path = Path(self.rt.config.pipelines).resolve() / record.filename
            result = self._attempt(
                api_key(record.pipeline), record.pipeline, record.spec_hash,
                f"api:{record.revision}", partial(compile_text, record.text, path),
            )
            if result.status != "waiting":
                self.stored[record.pipeline] = record.spec_hash
            results.append(result)
        return results

    def _attempt(
        self,
        key: str,
        name: str,
        digest: str,
        revision: str | None,
        compiled: Callable[[], CompiledPipeline],
    ) -> DeployResult:
        """Deploy what `compiled` gives (a file's or a stored text's pipeline, `key` naming
        it); a failure is recorded as a rejected deployment with its reason."""
        try:
            pipeline = compiled()
            name = pipeline.spec.name
            if not key.startswith(API):
                self.file_pipeline[key] = name
            result = self.deployer.deploy(pipeline, revision, digest)
        except Unreachable as e:  # the catalog or a source's brokers: not the file's fault
            return self._wait(key, name, e.outage)
        except CQError as e:  # unreadable, invalid, or a source or sink that cannot be opened
            reason = (
                "unreadable" if isinstance(e, Unreadable)
                else "source_or_sink" if isinstance(e, DeployErrors) else "invalid"
            )
            return self._reject(key, name, digest, revision, e.lines(), reason)
        except Exception as e:  # a bug: the worker goes on, the deployment is rejected
            log.exception("deploying %s failed", key)
            error = f"{key}: internal error: {type(e).__name__}: {e}"
            return self._reject(key, name, digest, revision, [error], "internal")
        self.errors.pop(key, None)
        self.waiting.pop(key, None)
        return result

    def _reject(
        self, key: str, name: str, digest: str, revision: str | None, errors: list[str],
        reason: str,
    ) -> DeployResult:
        """Record a rejected deployment (kept for the API, counted for /metrics)."""
        try:
            self.rt.catalog.record_deployment(name, digest, revision, "rejected",
                                              "\n".join(errors))
        except Unreachable as away:  # recorded when it is tried again
            return self._wait(key, name, away.outage)
        self.errors[key] = errors
        self.waiting.pop(key, None)
        self.rejections[reason] += 1
        log.warning("rejected %s (%s): %s", key, reason, "; ".join(errors))
        return DeployResult(name, "rejected", errors=errors)

    def _wait(self, key: str, name: str, outage: Outage) -> DeployResult:
        """A deployment that a dependency's outage keeps from being made or recorded."""
        if key not in self.waiting:
            log.warning("deploying %s waits (tried again with backoff): %s", key,
                        outage.describe())
        self.waiting[key] = Outage(
            outage.dependency, f"deployment of {Path(key).name}", outage.reason, outage.since
        )
        if self._dependencies is not None:
            self._dependencies.retried(outage.dependency)
        return DeployResult(name, "waiting", errors=[f"waiting for {outage.describe()}"])

    def _move_staged(self, folder: Path) -> None:
        """Pipelines an earlier version staged as hidden ``.deployed-*`` files: kept in the
        catalog instead (deployed below, like every stored pipeline), the files removed."""
        staged = list(folder.glob(".deployed-*.y*ml")) if folder.is_dir() else []
        for path in sorted(staged, key=lambda p: p.stat().st_mtime_ns):  # the newest kept
            try:
                text = path.read_text(encoding="utf-8-sig")
                name = load_pipeline_text(text, path).name
            except (OSError, UnicodeDecodeError, CQError) as e:
                log.warning("left %s where it is: %s", path, e)
                continue
            stem = path.stem.removeprefix(".deployed-").rsplit("-", 1)[0] or name
            self.rt.catalog.store_pipeline(name, f"{stem}.yaml", text, hash_text(text))
            path.unlink()
            log.info("moved the staged pipeline %s into the catalog", path)
        self._staged_moved = True


API = "api:"


def api_key(pipeline: str) -> str:
    """How a pipeline deployed through the API is named among the files (errors, waiting)."""
    return f"{API}{pipeline}"


def compile_text(text: str, path: Path) -> CompiledPipeline:
    """Pipeline `text`, compiled as if read from `path`."""
    return compile_pipeline(load_pipeline_text(text, path))


def read_file(path: Path) -> tuple[bytes | None, str]:
    """A file's bytes and their SHA-256 — or None and ``!reason`` when it cannot be read (the
    same reason again is not tried again)."""
    try:
        data = path.read_bytes()
    except OSError as e:
        return None, f"!{e.strerror or e}"
    return data, hashlib.sha256(data).hexdigest()


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
