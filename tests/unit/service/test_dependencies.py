"""service/dependencies.py: outages gathered into readiness reasons and counters."""

from __future__ import annotations

from cq_service.errors import Outage
from cq_service.service.dependencies import Dependencies, DependencyState

KAFKA = "kafka 127.0.0.1:9092"
CATALOG = "catalog postgresql+psycopg://cq:***@db:5432/cq"


def outage(dependency: str = KAFKA, role: str = "sink topic out", since: float = 0.0) -> Outage:
    return Outage(dependency, role, "connection refused", since)


def test_an_outage_is_described_with_who_needs_what_since_when() -> None:
    assert outage(since=43384.0).describe() == (
        "kafka 127.0.0.1:9092: sink topic out: connection refused since 12:03:04 UTC"
    )
    assert Outage(CATALOG, "", "connection refused", 0.0).describe() == (
        f"{CATALOG}: connection refused since 00:00:00 UTC"
    )
    later = outage(since=5.0).again("connection timed out")
    assert (later.reason, later.since) == ("connection timed out", 5.0)


def test_outages_become_readiness_reasons_and_counters() -> None:
    deps = Dependencies()
    deps.observe({KAFKA, CATALOG}, [])
    assert deps.reasons() == []
    assert deps.states() == {
        CATALOG: DependencyState(True, 0, 0), KAFKA: DependencyState(True, 0, 0)
    }

    sink, source = outage(), outage(role="source topic in")
    deps.observe({KAFKA, CATALOG}, [sink, source])
    deps.observe({KAFKA, CATALOG}, [sink, source, sink])  # the same outage goes on
    deps.retried(KAFKA)
    deps.retried(KAFKA)
    assert deps.reasons() == [sink.describe(), source.describe()]  # by dependency and role
    assert deps.states()[KAFKA] == DependencyState(up=False, outages=1, retries=2)
    assert deps.states()[CATALOG].up

    deps.observe({KAFKA, CATALOG}, [source])  # the sink flushed; the source still waits
    assert deps.states()[KAFKA] == DependencyState(up=False, outages=1, retries=2)
    deps.observe({KAFKA, CATALOG}, [])  # over
    assert deps.reasons() == []
    assert deps.states()[KAFKA] == DependencyState(up=True, outages=1, retries=2)
    deps.observe({KAFKA, CATALOG}, [outage(since=9.0)])  # a second outage
    assert deps.states()[KAFKA].outages == 2


def test_a_dependency_only_seen_down_is_known() -> None:
    deps = Dependencies()
    deps.observe(set(), [outage(CATALOG, "deployment of p.yaml")])
    assert deps.states() == {CATALOG: DependencyState(False, 1, 0)}
