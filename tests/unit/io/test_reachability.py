"""io/reachability.py: the TCP probe (against a listening and a closed local port) and the
retry backoff."""

from __future__ import annotations

import socket
from collections.abc import Iterator

import pytest

from cq_service.io.reachability import Backoff, Probe


@pytest.fixture
def listening() -> Iterator[str]:
    """``host:port`` of a socket that accepts connections."""
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        yield f"127.0.0.1:{server.getsockname()[1]}"


@pytest.fixture
def closed() -> str:
    """``host:port`` nothing listens on (connections are refused)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    return f"127.0.0.1:{port}"


def test_a_listening_server_is_reachable(listening: str) -> None:
    probe = Probe([listening])
    assert probe.reachable is None  # nothing probed yet
    assert probe.check_now(wait=5.0)
    assert (probe.reachable, probe.reason) == (True, "")


def test_a_refused_connection_is_the_reason(closed: str) -> None:
    probe = Probe([closed])
    assert not probe.check_now(wait=5.0)
    assert probe.reason == "connection refused"


def test_one_server_answering_is_enough(listening: str, closed: str) -> None:
    assert Probe([closed, listening]).check_now(wait=5.0)


def test_an_unknown_host_is_named() -> None:
    probe = Probe(["no-such-host.invalid:9092"])
    assert not probe.check_now(wait=5.0)
    assert probe.reason.startswith("cannot resolve the host")


def test_check_settles_on_a_later_look(closed: str) -> None:
    probe = Probe([closed], interval=0.0)
    for _ in range(1000):  # a refused connect settles on a later look at the latest
        if probe.check() is not None:
            break
    assert (probe.reachable, probe.reason) == (False, "connection refused")


def test_backoff_doubles_up_to_its_cap_with_jitter() -> None:
    draws = iter([1.0, 0.0, 1.0, 1.0, 0.5, 1.0])
    backoff = Backoff(first=0.5, cap=2.0, rng=lambda: next(draws))
    assert [backoff.next() for _ in range(5)] == [0.5, 0.5, 2.0, 2.0, 1.5]
    backoff.reset()
    assert backoff.next() == 0.5


def test_backoff_delays_stay_within_half_and_all_of_the_doubling() -> None:
    backoff = Backoff(first=0.1, cap=10.0)
    for n in range(12):
        full = min(10.0, 0.1 * 2**n)
        assert full / 2 <= backoff.next() <= full


def test_backoff_needs_a_positive_first_delay_below_its_cap() -> None:
    with pytest.raises(ValueError, match="0 < first <= cap"):
        Backoff(first=0.0)
    with pytest.raises(ValueError, match="0 < first <= cap"):
        Backoff(first=2.0, cap=1.0)
