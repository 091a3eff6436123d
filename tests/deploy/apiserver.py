"""A real Kubernetes API server on 127.0.0.1 for installing the chart: etcd and kube-apiserver.

`make test` builds kube-apiserver into .tools/ (tools/kube-apiserver, a wrapper Go module) and
installs Debian's etcd-server, and passes ``$KUBE_APISERVER`` (and ``$ETCD`` where set); run
alone, the tests look for the newest ``.tools/kube-apiserver-*/kube-apiserver``, then the
PATH's, and are skipped without both binaries.

There is no kubelet, scheduler or controller manager: nothing runs, but every object is
admitted, defaulted and validated by the server exactly as in a cluster.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import ssl
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import yaml

from tests.deploy.helm import ROOT

__all__ = ["ApiServer", "find_etcd", "find_kube_apiserver", "running_api_server"]

# How long etcd and the API server may take to answer before the fixture gives up (a hang
# guard: on 2 busy cores the API server's first start takes some seconds).
START_TIMEOUT = 180.0
ADMIN = "admin"


def find_kube_apiserver() -> str | None:
    """``$KUBE_APISERVER``, else the newest one built into .tools/, else the PATH's."""
    if os.environ.get("KUBE_APISERVER"):
        return os.environ["KUBE_APISERVER"]
    built = sorted((ROOT / ".tools").glob("kube-apiserver-*/kube-apiserver"))
    if built:
        return str(built[-1])
    return shutil.which("kube-apiserver")


def find_etcd() -> str | None:
    """``$ETCD``, else the PATH's (Debian's etcd-server installs /usr/bin/etcd)."""
    return os.environ.get("ETCD") or shutil.which("etcd")


@dataclass(frozen=True)
class ApiServer:
    """A running API server: its address, an admin token and a kubeconfig for both."""

    url: str
    token: str
    ca_file: Path
    kubeconfig: Path


class _Process:
    """A child in a process group of its own, its output in a log file."""

    def __init__(self, name: str, args: list[str], log: Path) -> None:
        self.name, self.log = name, log
        with log.open("wb") as out:
            self.popen = subprocess.Popen(
                args, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
            )

    def check_alive(self) -> None:
        if self.popen.poll() is not None:
            raise RuntimeError(f"{self.name} exited ({self.popen.returncode}):\n{self.tail()}")

    def tail(self, lines: int = 40) -> str:
        return "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:])

    def stop(self) -> None:
        """SIGTERM to the whole group, SIGKILL if it has not gone after 20 s."""
        for sig, wait in ((signal.SIGTERM, 20.0), (signal.SIGKILL, 10.0)):
            try:
                os.killpg(self.popen.pid, sig)
            except ProcessLookupError:
                break
            try:
                self.popen.wait(wait)
                break
            except subprocess.TimeoutExpired:
                continue


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _wait_until(what: str, ok: Callable[[], bool], process: _Process) -> None:
    deadline = time.monotonic() + START_TIMEOUT
    while not ok():
        process.check_alive()
        if time.monotonic() > deadline:
            raise RuntimeError(f"{what} not ready after {START_TIMEOUT:.0f} s:\n{process.tail()}")
        time.sleep(0.5)


def _answers(url: str, context: ssl.SSLContext | None = None, token: str = "") -> bool:
    request = urllib.request.Request(url, headers={"Authorization": f"Bearer {token}"})
    try:
        with urllib.request.urlopen(request, timeout=5, context=context) as response:
            return response.status == 200
    except (OSError, urllib.error.URLError):
        return False


def _start_etcd(etcd: str, workdir: Path) -> tuple[_Process, str]:
    client, peer = f"http://127.0.0.1:{_free_port()}", f"http://127.0.0.1:{_free_port()}"
    args = [
        etcd,
        "--name=cq-test",
        f"--data-dir={workdir / 'etcd'}",
        f"--listen-client-urls={client}",
        f"--advertise-client-urls={client}",
        f"--listen-peer-urls={peer}",
        f"--initial-advertise-peer-urls={peer}",
        f"--initial-cluster=cq-test={peer}",
    ]
    process = _Process("etcd", args, workdir / "etcd.log")
    _wait_until("etcd", lambda: _answers(f"{client}/health"), process)
    return process, client


def _service_account_keys(workdir: Path) -> tuple[Path, Path]:
    """An RSA key pair the API server signs and checks service-account tokens with."""
    key, pub = workdir / "sa.key", workdir / "sa.pub"
    openssl = ["openssl", "genpkey", "-algorithm", "RSA", "-pkeyopt", "rsa_keygen_bits:2048"]
    subprocess.run([*openssl, "-out", key], check=True, capture_output=True)
    subprocess.run(
        ["openssl", "pkey", "-in", key, "-pubout", "-out", pub], check=True, capture_output=True
    )
    return key, pub


def _kubeconfig(path: Path, url: str, ca_file: Path, token: str) -> None:
    path.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [
                    {
                        "name": "local",
                        "cluster": {"server": url, "certificate-authority": str(ca_file)},
                    }
                ],
                "users": [{"name": ADMIN, "user": {"token": token}}],
                "contexts": [{"name": "local", "context": {"cluster": "local", "user": ADMIN}}],
                "current-context": "local",
            }
        )
    )
    path.chmod(0o600)


@contextmanager
def running_api_server(kube_apiserver: str, etcd: str, workdir: Path) -> Iterator[ApiServer]:
    """etcd, then kube-apiserver on free 127.0.0.1 ports, both ready; on leaving, both process
    groups are stopped (the API server first). Logs and data stay in `workdir`."""
    processes: list[_Process] = []
    try:
        etcd_process, etcd_url = _start_etcd(etcd, workdir)
        processes.append(etcd_process)
        key, pub = _service_account_keys(workdir)
        token = os.urandom(16).hex()
        # static tokens: token,user,uid,"groups"; system:masters passes every RBAC check
        tokens = workdir / "tokens.csv"
        tokens.write_text(f'{token},{ADMIN},{ADMIN},"system:masters"\n')
        port, certs = _free_port(), workdir / "certs"
        args = [
            kube_apiserver,
            f"--etcd-servers={etcd_url}",
            "--bind-address=127.0.0.1",
            "--advertise-address=127.0.0.1",
            # the `kubernetes` Service's endpoints may not name a loopback address: keep none
            "--endpoint-reconciler-type=none",
            f"--secure-port={port}",
            # no --tls-cert-file: the server writes a self-signed CA and serving cert here
            f"--cert-dir={certs}",
            f"--token-auth-file={tokens}",
            "--authorization-mode=RBAC",
            f"--service-account-key-file={pub}",
            f"--service-account-signing-key-file={key}",
            "--service-account-issuer=https://kubernetes.default.svc.cluster.local",
            # Services get a cluster IP from this range (an allocation in etcd, no routing)
            "--service-cluster-ip-range=10.96.0.0/16",
            "--profiling=false",
            # no --enable-admission-plugins: the default ones each act on the request alone
            # (defaults, quotas, Pod Security on pods) and none waits for a controller manager
        ]
        api = _Process("kube-apiserver", args, workdir / "kube-apiserver.log")
        processes.append(api)
        url = f"https://127.0.0.1:{port}"
        ca_file = certs / "apiserver.crt"
        insecure = ssl.create_default_context()
        insecure.check_hostname, insecure.verify_mode = False, ssl.CERT_NONE
        _wait_until("kube-apiserver", lambda: _answers(f"{url}/readyz", insecure, token), api)
        # from here on the server is trusted through its own certificate, as clients would
        verified = ssl.create_default_context(cafile=str(ca_file))
        if not _answers(f"{url}/readyz", verified, token):
            raise RuntimeError(f"{url} does not verify with its certificate {ca_file}")
        kubeconfig = workdir / "kubeconfig"
        _kubeconfig(kubeconfig, url, ca_file, token)
        yield ApiServer(url, token, ca_file, kubeconfig)
    finally:
        for process in reversed(processes):
            process.stop()
