"""Failpoints: the N-th hit of an armed point kills the process with SIGKILL, nothing else
does, and a bad setting is a configuration error."""

from __future__ import annotations

import signal
import subprocess
import sys

import pytest

from cq_service.service.config import ConfigError, load_config
from cq_service.service.failpoints import FailpointError, check_failpoints


def run_hits(setting: str, hits: list[str]) -> tuple[int, str]:
    """Arm `setting` in a child process, hit `hits` in order printing each; (exit, output)."""
    code = (
        "from cq_service.service import failpoints\n"
        f"failpoints.arm({setting!r})\n"
        f"for name in {hits!r}:\n"
        "    failpoints.hit(name)\n"
        "    print(name, flush=True)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    return done.returncode, done.stdout


def test_the_nth_hit_kills_and_not_before():
    status, out = run_hits("checkpoint.saved=3", ["checkpoint.saved"] * 5)
    assert status == -signal.SIGKILL
    assert out.split() == ["checkpoint.saved"] * 2  # the third hit never returned


def test_other_points_and_no_setting_do_nothing():
    status, out = run_hits("deploy.started=1", ["checkpoint.saved", "deploy.stopped"] * 3)
    assert status == 0 and len(out.split()) == 6
    status, out = run_hits("", ["deploy.started"] * 3)
    assert status == 0 and len(out.split()) == 3


def test_settings_parse_into_points_and_counts():
    assert check_failpoints("checkpoint.flushed=2, deploy.stopped") == {
        "checkpoint.flushed": 2,
        "deploy.stopped": 1,
    }
    assert check_failpoints("") == {}
    for bad in ("nowhere=1", "checkpoint.saved=x", "checkpoint.saved=0"):
        with pytest.raises(FailpointError):
            check_failpoints(bad)


def test_a_bad_setting_is_a_configuration_error():
    with pytest.raises(ConfigError, match="setting failpoints: unknown failpoint 'x'"):
        load_config(environ={"CQ_FAILPOINTS": "x=1"})
    assert load_config(environ={"CQ_FAILPOINTS": "deploy.started=2"}).failpoints == "deploy.started=2"
