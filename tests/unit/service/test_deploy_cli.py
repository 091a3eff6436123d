"""`cq deploy` against a real worker API: the worker's refusal is printed as its `detail`
(exit 1 for a credential problem), a file outside the worker's folder is deployed by its text."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.unit.service.serving import serving_http
from tests.unit.service.workers import EXAMPLE, sqlite_worker

CQ = Path(sys.executable).with_name("cq")
TOKEN = "s3cret"


@pytest.fixture(scope="module")
def worker_url(tmp_path_factory: pytest.TempPathFactory):
    tmp = tmp_path_factory.mktemp("deploy")
    (tmp / "p").mkdir()
    worker = sqlite_worker(tmp, tmp / "p", token=TOKEN, checkpoint_interval=0.5)
    with serving_http(worker) as url:
        yield url


def deploy(file: Path, url: str, token: str) -> subprocess.CompletedProcess:
    return subprocess.run([str(CQ), "deploy", str(file), "--server", url, "--token", token],
                          capture_output=True, text=True, timeout=120)


def test_a_wrong_token_is_exit_1_with_the_workers_reason(worker_url: str) -> None:
    r = deploy(EXAMPLE / "pipeline.yaml", worker_url, "wrong")
    assert r.returncode == 1
    assert r.stderr.strip() == (
        f"{EXAMPLE / 'pipeline.yaml'}: the worker refused the deployment (401): "
        "the token is not valid"
    )


def test_a_file_outside_the_workers_folder_is_deployed_by_its_text(
    worker_url: str, tmp_path: Path
) -> None:
    # The worker deploys the text sent, not the file (outside its folder, it never reads it);
    # the file's folder, which it has, is where the text's relative paths lead.
    shutil.copytree(EXAMPLE, tmp_path / "web-proxy", ignore=shutil.ignore_patterns("out"))
    r = deploy(tmp_path / "web-proxy" / "pipeline.yaml", worker_url, TOKEN)
    assert r.returncode == 0, r.stderr
    assert "web-proxy" in r.stdout
    assert not list(tmp_path.rglob(".deployed-*"))  # nothing staged beside it
