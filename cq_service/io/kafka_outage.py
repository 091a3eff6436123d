"""Whether the brokers a Kafka reader (kafka.py) reads from are away, and when to read again.

A call that fails for a retriable reason makes the brokers *away* (`BrokerWatch.went_away`:
the reader's `outage`). While away, a TCP probe tells when they accept connections again;
then, after a backoff, the end offsets are asked afresh and taken as the partitions' ends
until a fetch knows newer ones, so no partition counts as caught up (and turns idle) on what
was known before the outage. docs/kafka.md, "When the brokers are away".
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence

from cq_service.errors import Outage, Unreachable
from cq_service.io.kafka_client import KafkaCallError, outage_of
from cq_service.io.reachability import Backoff, Probe

__all__ = ["BrokerWatch"]


class BrokerWatch:
    """The outage of the brokers `servers`, reported with `role` (``source topic t``)."""

    def __init__(self, servers: Sequence[str], role: str):
        self.servers = servers
        self.role = role
        self.outage: Outage | None = None
        self.probe = Probe(servers)
        self._retry = Backoff(first=0.5, cap=5.0)
        self._retry_at = 0.0
        self._end_hint: dict[int, int] = {}  # end offsets asked when the brokers came back

    def outage_for(self, reason: str) -> Outage:
        """The outage for `reason` (keeping the start of the current one)."""
        return outage_of(reason, self.servers, self.role, None, self.outage)

    def refused_now(self) -> Outage | None:
        """The outage (not counted as one yet) when the brokers do not accept connections now
        (a blocking probe); None when they do."""
        if self.probe.check_now():
            return None
        return self.outage_for(self.probe.reason)

    def went_away(self, reason: str) -> Outage:
        """Count the brokers as away (for `reason`); try them again after a backoff."""
        self.outage = self.outage_for(reason)
        self._end_hint.clear()
        self._retry_at = time.monotonic() + self._retry.next()
        return self.outage

    def failed(self, error: KafkaCallError) -> Outage:
        """A call failed for a retriable `error`: the brokers are away — in plainer words when
        the probe finds they do not even accept connections."""
        reason = error.reason
        if not self.probe.check_now():
            reason = self.probe.reason
        return self.went_away(reason)

    def available(self, delivering: bool, end_offsets: Callable[[], Mapping[int, int]]) -> bool:
        """Live: whether the brokers can be read now (`delivering`: the last poll returned
        messages). While away, they are tried again (after the backoff) once the probe finds
        them accepting connections, by asking `end_offsets` (which raises Unreachable when it
        cannot): the ends they give then are taken as fresh."""
        now = time.monotonic()
        if self.outage is None and delivering:
            return True
        reachable = self.probe.check(now)
        if self.outage is None:
            if reachable is False:
                self.went_away(self.probe.reason)
                return False
            return True
        if reachable is False:
            self.outage = self.outage.again(self.probe.reason)
            return False
        if reachable is None or now < self._retry_at:
            return False
        try:
            ends = end_offsets()
        except Unreachable:
            return False
        self._end_hint = dict(ends)
        self.outage = None
        self._retry.reset()
        return True

    def end_after_outage(self, partition: int, highwater: int | None) -> int | None:
        """The partition's end offset as asked when the brokers came back, until a fetch knows
        one as new (`highwater`); None then, or when there was none."""
        hint = self._end_hint.get(partition)
        if hint is not None and highwater is not None and highwater >= hint:
            del self._end_hint[partition]
            hint = None
        return hint

    def close(self) -> None:
        self.probe.close()
