"""Whether a service's servers accept TCP connections, found out without blocking, and when
to try a failed call again.

A Kafka client left to itself says little when its broker goes away: a consumer's poll just
returns nothing, a producer's messages wait. `Probe` answers the plain question — does any of
these ``host:port`` addresses accept a connection? — with non-blocking connects, so a reader
can ask it on every read: `check()` starts a probe when one is due, looks (without waiting) at
the one under way, and returns what the last finished probe found. `Backoff` spaces retries.
"""

from __future__ import annotations

import errno
import os
import random
import select
import socket
import time
from collections.abc import Callable, Sequence

__all__ = ["Backoff", "Probe", "describe_os_error"]

INTERVAL_S = 0.5  # between probes
TIMEOUT_S = 3.0  # a connect that has not finished by then failed ("timed out")


def describe_os_error(error: BaseException) -> str:
    """A short, lower-case reason for a failed connection: ``connection refused``."""
    code = getattr(error, "errno", None)
    if isinstance(error, socket.timeout | TimeoutError) or code == errno.ETIMEDOUT:
        return "connection timed out"
    if isinstance(error, socket.gaierror):
        return f"cannot resolve the host ({error.strerror or error})"
    if code:
        return os.strerror(code).lower()
    return str(error) or type(error).__name__


class Probe:
    """Non-blocking TCP probes of `servers` (``host:port`` each), every `interval` seconds.

    `reachable` is None until the first probe finished, then whether any server accepted a
    connection in the last one; `reason` says why not (the first server's failure)."""

    def __init__(
        self, servers: Sequence[str], interval: float = INTERVAL_S, timeout: float = TIMEOUT_S
    ):
        self.servers = list(servers)
        self.interval = interval
        self.timeout = timeout
        self.reachable: bool | None = None
        self.reason = ""
        self._started = 0.0  # monotonic time of the probe under way (or of the last one)
        self._pending: list[tuple[socket.socket | None, str]] = []  # (socket, failure)

    def check(self, now: float | None = None) -> bool | None:
        """Start a probe if one is due, look at the one under way; `reachable`."""
        now = time.monotonic() if now is None else now
        if self._pending:
            self._look(now)
        elif now - self._started >= self.interval:
            self._start(now)
            self._look(now)
        return self.reachable

    def check_now(self, wait: float = 1.0) -> bool:
        """Probe now and wait up to `wait` seconds for the answer (an address that neither
        accepts nor refuses by then counts as unreachable); whether any server answered."""
        self._close()
        now = time.monotonic()
        self._start(now)
        deadline = now + wait
        while self._pending:
            self._look(time.monotonic(), wait=max(0.0, deadline - time.monotonic()))
            if self._pending and time.monotonic() >= deadline:
                self._finish([f or "connection timed out" for _, f in self._pending])
        return bool(self.reachable)

    def close(self) -> None:
        self._close()

    def _start(self, now: float) -> None:
        self._started = now
        self._pending = []
        for server in self.servers:
            host, _, port = server.rpartition(":")
            try:
                family, kind, proto, _, address = socket.getaddrinfo(
                    host.strip("[]"), int(port), type=socket.SOCK_STREAM
                )[0]
                sock = socket.socket(family, kind, proto)
            except (OSError, ValueError) as e:
                self._pending.append((None, describe_os_error(e)))
                continue
            sock.setblocking(False)
            code = sock.connect_ex(address)
            if code in (0, errno.EINPROGRESS, errno.EAGAIN, errno.EWOULDBLOCK, errno.EALREADY):
                self._pending.append((sock, ""))
            else:
                sock.close()
                self._pending.append((None, os.strerror(code).lower()))

    def _look(self, now: float, wait: float = 0.0) -> None:
        """See which connects finished; settle the probe once one succeeded or all failed."""
        open_ = [s for s, _ in self._pending if s is not None]
        done: set[socket.socket] = set()
        if open_:
            _, writable, broken = select.select([], open_, open_, wait)
            done = set(writable) | set(broken)
        failures = []
        still = []
        for sock, failure in self._pending:
            if sock is None:
                failures.append(failure)
                continue
            if sock not in done:
                still.append((sock, ""))
                continue
            code = sock.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
            sock.close()
            if code == 0:
                self._pending = [(s, f) for s, f in self._pending if s is not sock]
                self._finish([])
                return
            failures.append(os.strerror(code).lower())
        if still and now - self._started >= self.timeout:
            failures.extend("connection timed out" for _ in still)
            for sock, _ in still:
                sock.close()
            still = []
        if still:
            self._pending = [(None, f) for f in failures] + still
            return
        self._finish(failures)

    def _finish(self, failures: list[str]) -> None:
        self._close()
        self.reachable = not failures
        self.reason = failures[0] if failures else ""

    def _close(self) -> None:
        for sock, _ in self._pending:
            if sock is not None:
                sock.close()
        self._pending = []


class Backoff:
    """When to try again after a failure: capped exponential backoff with jitter. The n-th
    delay in a row is drawn from [d/2, d] with d = min(`cap`, `first` · 2ⁿ); `reset` after a
    success starts again from `first`."""

    def __init__(
        self, first: float = 0.5, cap: float = 10.0, rng: Callable[[], float] = random.random
    ):
        if first <= 0 or cap < first:
            raise ValueError(f"backoff needs 0 < first <= cap (got {first}, {cap})")
        self.first = first
        self.cap = cap
        self.failures = 0  # in a row
        self._rng = rng

    def next(self) -> float:
        """The delay before the next attempt, after one more failure."""
        d = min(self.cap, self.first * 2.0 ** min(self.failures, 62))
        self.failures += 1
        return d * (0.5 + 0.5 * self._rng())

    def reset(self) -> None:
        self.failures = 0
