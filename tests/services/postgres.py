"""A PostgreSQL server from Debian's packages for development and tests.

One cluster in <state dir>/postgres, listening on 127.0.0.1:15432 (socket in that dir too), with
a role `cq` (password `cq`, may create databases) owning a database `cq`. PostgreSQL refuses to
run as root, so as root the server runs as the `postgres` OS user (and the state dir must be
where that user can reach it). `start` takes another port for a server of one's own
(tests/services/own.py), which `stop` and `start` again on the same port and data.
"""

from __future__ import annotations

import os
import pwd
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

__all__ = ["DATABASE_URL", "answers", "database_url", "start", "stop"]

HOST = "127.0.0.1"
PORT = 15432
USER = PASSWORD = DATABASE = "cq"
DATABASE_URL = f"postgresql+psycopg://{USER}:{PASSWORD}@{HOST}:{PORT}/{DATABASE}"


def database_url(port: int = PORT) -> str:
    """The SQLAlchemy URL of the `cq` database of the server on `port`."""
    return f"postgresql+psycopg://{USER}:{PASSWORD}@{HOST}:{port}/{DATABASE}"

OS_USER = "postgres"  # the server's owner when we are root
START_TIMEOUT_S = 60

# Test-server settings, rewritten at every start (postgresql.conf includes this file).
_SETTINGS = {
    "listen_addresses": HOST,
    "max_connections": 200,  # parallel test workers, each with pools
    "fsync": "off",  # a crash may lose test data: nothing here is worth an fsync
    "synchronous_commit": "off",
    "full_page_writes": "off",
    "logging_collector": "off",
}
_INCLUDE = "cq_services.conf"

_BOOTSTRAP_SQL = f"""
SELECT 'CREATE ROLE {USER} LOGIN CREATEDB PASSWORD ''{PASSWORD}'''
WHERE NOT EXISTS (SELECT FROM pg_roles WHERE rolname = '{USER}') \\gexec
SELECT 'CREATE DATABASE {DATABASE} OWNER {USER}'
WHERE NOT EXISTS (SELECT FROM pg_database WHERE datname = '{DATABASE}') \\gexec
"""


@dataclass(frozen=True)
class _Cluster:
    """One cluster under `root` (<state dir>/postgres), run by the binaries in `bin`."""

    root: Path
    bin: Path
    port: int = PORT

    @property
    def data(self) -> Path:
        return self.root / "data"

    @property
    def log(self) -> Path:
        return self.root / "postgresql.log"

    def tool(self, name: str, *args: str) -> list[str]:
        """A command line running a PostgreSQL program as the cluster's owner."""
        command = [str(self.bin / name), *args]
        return ["runuser", "-u", OS_USER, "--", *command] if os.geteuid() == 0 else command


def answers(timeout_s: int = 2, port: int = PORT) -> bool:
    """True when the `cq` role can log in to the `cq` database and run SELECT 1."""
    import psycopg

    try:
        with psycopg.connect(host=HOST, port=port, user=USER, password=PASSWORD,
                             dbname=DATABASE, connect_timeout=timeout_s) as connection:
            connection.execute("SELECT 1").fetchone()
        return True
    except psycopg.Error:
        return False


def start(root: Path, port: int = PORT) -> str:
    """Ensure the server runs with its cluster in `root`, listening on `port`; return the
    SQLAlchemy URL of `cq`."""
    url = database_url(port)
    if answers(port=port):
        return url
    cluster = _Cluster(root.resolve(), _binaries(), port)
    _prepare_dirs(cluster)
    if not (cluster.data / "PG_VERSION").exists():
        _initdb(cluster)
    _write_settings(cluster)
    if not _running(cluster):
        print(f"starting postgresql on {HOST}:{port} (log: {cluster.log})", file=sys.stderr)
        _run(cluster.tool("pg_ctl", "start", "-w", "-t", str(START_TIMEOUT_S),
                          "-D", str(cluster.data), "-l", str(cluster.log)), cluster)
    _run(cluster.tool("psql", "-X", "-q", "-v", "ON_ERROR_STOP=1", "-h", str(cluster.root),
                      "-p", str(port), "-U", OS_USER, "-d", "postgres"),
         cluster, stdin=_BOOTSTRAP_SQL)
    if not answers(timeout_s=5, port=port):
        raise RuntimeError(f"postgresql started but {url} does not answer")
    return url


def stop(root: Path, kill: bool = False) -> bool:
    """Stop the server of the cluster in `root` (pg_ctl stop -m fast; `kill`: -m immediate,
    as a crash would); whether one ran."""
    data = root.resolve() / "data"
    if not (data / "postmaster.pid").exists():
        return False
    cluster = _Cluster(root.resolve(), _binaries())
    if not _running(cluster):
        return False
    mode = "immediate" if kill else "fast"
    _run(cluster.tool("pg_ctl", "stop", "-w", "-m", mode, "-D", str(cluster.data)), cluster)
    return True


def _binaries() -> Path:
    """The newest installed server's bin dir, installing Debian's `postgresql` if none is."""
    found = _installed()
    if found is None:
        _apt_install()
        found = _installed()
    if found is None:
        raise RuntimeError("no /usr/lib/postgresql/*/bin/postgres after installing postgresql")
    return found


def _installed() -> Path | None:
    servers = sorted(Path("/usr/lib/postgresql").glob("*/bin/postgres"),
                     key=lambda path: int(path.parts[-3]) if path.parts[-3].isdigit() else 0)
    return servers[-1].parent if servers else None


def _apt_install() -> None:
    if os.geteuid() != 0:
        raise RuntimeError("PostgreSQL is not installed: run `apt-get install postgresql` as root")
    print("installing postgresql with apt-get", file=sys.stderr)
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    for command in (["apt-get", "update", "-q"],
                    ["apt-get", "install", "-y", "-q", "--no-install-recommends", "postgresql"]):
        result = subprocess.run(command, env=env, capture_output=True, text=True)
        if result.returncode != 0:
            raise RuntimeError(f"{' '.join(command)} failed:\n{result.stdout[-3000:]}"
                               f"{result.stderr[-3000:]}")


def _prepare_dirs(cluster: _Cluster) -> None:
    """The cluster's dirs exist, belong to the server's owner and are private (initdb insists)."""
    cluster.root.mkdir(parents=True, exist_ok=True)
    cluster.data.mkdir(mode=0o700, exist_ok=True)
    if os.geteuid() == 0:
        owner = pwd.getpwnam(OS_USER)
        for path in (cluster.root, cluster.data):
            if path.stat().st_uid != owner.pw_uid:
                shutil.chown(path, owner.pw_uid, owner.pw_gid)
    cluster.data.chmod(0o700)


def _initdb(cluster: _Cluster) -> None:
    print(f"creating a postgresql cluster in {cluster.data}", file=sys.stderr)
    _run(cluster.tool("initdb", "-D", str(cluster.data), "-U", OS_USER, "--no-sync",
                      "--encoding=UTF8", "--locale=C", "--auth-local=peer",
                      "--auth-host=scram-sha-256"), cluster)
    conf = cluster.data / "postgresql.conf"
    with conf.open("a") as file:
        file.write(f"\ninclude_if_exists = '{_INCLUDE}'\n")


def _write_settings(cluster: _Cluster) -> None:
    settings = {**_SETTINGS, "port": cluster.port, "unix_socket_directories": str(cluster.root)}
    lines = [f"{name} = '{value}'" for name, value in settings.items()]
    target = cluster.data / _INCLUDE
    target.write_text("# Written by tests/services/postgres.py at every start.\n"
                      + "\n".join(lines) + "\n")
    if os.geteuid() == 0:
        owner = pwd.getpwnam(OS_USER)
        os.chown(target, owner.pw_uid, owner.pw_gid)


def _running(cluster: _Cluster) -> bool:
    """pg_ctl status: 0 when a server runs on this data dir, 3 when none does."""
    result = subprocess.run(cluster.tool("pg_ctl", "status", "-D", str(cluster.data)),
                            capture_output=True, text=True)
    return result.returncode == 0


def _run(command: list[str], cluster: _Cluster, stdin: str | None = None) -> None:
    result = subprocess.run(command, input=stdin, capture_output=True, text=True,
                            cwd=cluster.root)
    if result.returncode != 0:
        log = cluster.log.read_text(errors="replace")[-3000:] if cluster.log.exists() else ""
        raise RuntimeError(f"{' '.join(command)} failed ({result.returncode}):\n"
                           f"{result.stdout[-3000:]}{result.stderr[-3000:]}\n{log}")
