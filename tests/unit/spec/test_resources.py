"""The optional `resources` section: the scheduling policy, its latency bound and its share."""

from __future__ import annotations

import dataclasses

import pytest

from cq_service.spec import pipeline_schema
from cq_service.spec.model import (
    DEFAULT_SCHEDULER,
    LATENCY_BOUNDED_SCHEDULER,
    SCHEDULERS,
    SHARE_SCHEDULER,
    PipelineSpec,
    ResourcesSpec,
    SinkSpec,
)

HEADER = "version: 1\nname: p\n"


def _resources_schema() -> dict:
    return pipeline_schema()["$defs"]["resources"]


# --- the schema and the model agree -----------------------------------------------------------


def test_schema_enum_is_the_scheduler_list():
    assert tuple(_resources_schema()["properties"]["scheduler"]["enum"]) == SCHEDULERS


def test_schema_default_is_the_model_default():
    assert _resources_schema()["properties"]["scheduler"]["default"] == DEFAULT_SCHEDULER
    assert ResourcesSpec().scheduler == DEFAULT_SCHEDULER
    assert DEFAULT_SCHEDULER in SCHEDULERS and LATENCY_BOUNDED_SCHEDULER in SCHEDULERS


def test_latency_bound_is_a_duration_like_max_delay():
    schema = pipeline_schema()
    max_delay = schema["$defs"]["stream"]["properties"]["max_delay"]
    bound = _resources_schema()["properties"]["latency_bound"]
    assert bound["$ref"] == max_delay["$ref"] == "#/$defs/duration"


def test_resources_is_a_top_level_key():
    assert pipeline_schema()["properties"]["resources"] == {"$ref": "#/$defs/resources"}


# --- valid files ------------------------------------------------------------------------------


def test_without_the_section_the_defaults(load):
    resources = load(HEADER).resources
    assert resources == ResourcesSpec(scheduler="chain", latency_bound=None)
    assert (resources.span.line, resources.span.col) == (1, 1)


def test_an_empty_mapping_means_the_defaults(load):
    assert load(HEADER + "resources: {}\n").resources == ResourcesSpec()


def test_a_valid_section(load):
    spec = load(
        HEADER + "time_unit: ms\nresources:\n  scheduler: chain_bounded\n  latency_bound: 50 ms\n"
    )
    assert spec.resources == ResourcesSpec(scheduler="chain_bounded", latency_bound=50)
    assert (spec.resources.span.line, spec.resources.span.col) == (4, 1)


@pytest.mark.parametrize(
    "scheduler", [s for s in SCHEDULERS if s not in (LATENCY_BOUNDED_SCHEDULER, SHARE_SCHEDULER)]
)
def test_every_scheduler_without_a_parameter(load, scheduler):
    resources = load(HEADER + f"resources:\n  scheduler: {scheduler}\n").resources
    assert (resources.scheduler, resources.latency_bound, resources.share) == (
        scheduler,
        None,
        None,
    )


@pytest.mark.parametrize(("written", "share"), [("0.3", 0.3), ("0", 0.0), ("1", 1.0), ("1.0", 1.0)])
def test_chain_share_with_its_share(load, written, share):
    text = HEADER + f"resources:\n  scheduler: chain_share\n  share: {written}\n"
    resources = load(text).resources
    assert resources == ResourcesSpec(scheduler="chain_share", share=share)
    assert isinstance(resources.share, float)


def test_share_schema_is_a_number_from_0_to_1():
    share = _resources_schema()["properties"]["share"]
    assert (share["type"], share["minimum"], share["maximum"]) == ("number", 0, 1)


@pytest.mark.parametrize(
    ("time_unit", "bound", "expected"),
    [
        ("ms", "50 ms", 50),
        ("ms", "50", None),  # a bare number in a string is not a duration: see the errors below
        ("ms", 50, 50),
        ("ms", "1.5 s", 1_500),
        ("ms", "2 seconds", 2_000),
        ("us", "50 ms", 50_000),
        ("ns", "1 us", 1_000),
        ("s", "2 minutes", 120),
        ("s", "3", None),
        ("min", "1 hour", 60),
        ("s", 7, 7),  # an integer is already in time_unit
    ],
)
def test_latency_bound_converts_to_time_unit(load, problems, time_unit, bound, expected):
    value = f"'{bound}'" if isinstance(bound, str) else bound
    text = (
        HEADER
        + f"time_unit: {time_unit}\n"
        + f"resources:\n  scheduler: chain_bounded\n  latency_bound: {value}\n"
    )
    if expected is None:
        assert problems(text) == [
            f"6:18: latency_bound of resources '{bound}' is not a duration such as "
            "'5 seconds' or '500 ms'"
        ]
    else:
        assert load(text).resources.latency_bound == expected


def test_time_unit_defaults_to_ms(load):
    text = HEADER + "resources:\n  scheduler: chain_bounded\n  latency_bound: 1 second\n"
    assert load(text).resources.latency_bound == 1_000


def test_the_section_may_come_first(load):
    text = "resources: {scheduler: fifo}\n" + HEADER
    assert load(text).resources.scheduler == "fifo"


# --- errors, each at its line and column -------------------------------------------------------


@pytest.mark.parametrize(
    ("section", "expected"),
    [
        (
            "resources:\n  scheduler: lifo\n",
            "4:14: scheduler of resources must be one of fifo, round_robin, greedy, chain, "
            "chain_bounded, chain_share, got 'lifo'",
        ),
        (
            "resources:\n  scheduler: no\n",
            "4:14: scheduler of resources: no was read as a boolean; quote it (must be one of "
            "fifo, round_robin, greedy, chain, chain_bounded, chain_share)",
        ),
        (
            "resources:\n  scheduler: chain_bounded\n",
            "4:14: resources: scheduler chain_bounded needs a latency_bound, "
            "e.g. latency_bound: 50 ms",
        ),
        (
            "resources:\n  scheduler: greedy\n  latency_bound: 50 ms\n",
            "5:3: latency_bound in resources only applies to scheduler chain_bounded, "
            "but the scheduler is greedy",
        ),
        (
            "resources:\n  latency_bound: 50 ms\n",
            "4:3: latency_bound in resources only applies to scheduler chain_bounded, "
            "but the scheduler is chain (the default)",
        ),
        (
            "resources:\n  scheduler: chain_bounded\n  latency_bound: 0 ms\n",
            "5:18: latency_bound of resources must be > 0, got '0 ms'",
        ),
        (
            "resources:\n  scheduler: chain_bounded\n  latency_bound: 0\n",
            "5:18: latency_bound of resources must be > 0, got 0",
        ),
        (
            "resources:\n  scheduler: chain_bounded\n  latency_bound: -5\n",
            "5:18: latency_bound of resources must be > 0, got -5",
        ),
        (
            "resources:\n  scheduler: chain_bounded\n  latency_bound: 100 us\n",
            "5:18: latency_bound of resources: duration '100 us' is not a whole number of ms",
        ),
        (
            "resources:\n  scheduler: chain_bounded\n  latency_bound: 5 parsecs\n",
            "5:18: latency_bound of resources: unknown unit 'parsecs' in duration '5 parsecs' "
            "(use ns, us, ms, s, min, h, d or their names, e.g. 'seconds')",
        ),
        (
            "resources:\n  scheduler: chain_bounded\n  latency_bound: 1.5\n",
            "5:18: latency_bound of resources must be an integer or a duration such as "
            "'5 seconds', got 1.5",
        ),
        (
            "resources:\n  scheduler: chain_bounded\n  latency_bound: soon\n",
            "5:18: latency_bound of resources 'soon' is not a duration such as '5 seconds' or "
            "'500 ms'",
        ),
        (
            "resources:\n  memory: 1000\n",
            "4:3: unknown key 'memory' in resources (expected one of: scheduler, "
            "latency_bound, share, memory_budget, shared_join, filter_order, join, "
            "statistics_interval, runner)",
        ),
        (
            "resources:\n  scheduler: chain_share\n",
            "4:14: resources: scheduler chain_share needs a share of FIFO steps from 0 to 1, "
            "e.g. share: 0.3",
        ),
        (
            "resources:\n  scheduler: chain_share\n  share: 1.5\n",
            "5:10: share of resources must be <= 1, got 1.5",
        ),
        (
            "resources:\n  scheduler: chain_share\n  share: -0.1\n",
            "5:10: share of resources must be >= 0, got -0.1",
        ),
        (
            "resources:\n  scheduler: chain_share\n  share: .nan\n",
            "5:10: share of resources must be a number from 0 to 1, got nan",
        ),
        (
            "resources:\n  scheduler: chain_share\n  share: .inf\n",
            "5:10: share of resources must be <= 1, got .inf",
        ),
        (
            "resources:\n  scheduler: chain_share\n  share: true\n",
            "5:10: share of resources must be a number, got true",
        ),
        (
            "resources:\n  scheduler: chain_share\n  share: lots\n",
            "5:10: share of resources must be a number, got 'lots'",
        ),
        (
            "resources:\n  scheduler: chain_bounded\n  latency_bound: 5\n  share: 0.5\n",
            "6:3: share in resources only applies to scheduler chain_share, "
            "but the scheduler is chain_bounded",
        ),
        (
            "resources:\n  share: 0.5\n",
            "4:3: share in resources only applies to scheduler chain_share, "
            "but the scheduler is chain (the default)",
        ),
        (
            "resources:\n  scheduler: chain_share\n  share: 0.5\n  latency_bound: 5\n",
            "6:3: latency_bound in resources only applies to scheduler chain_bounded, "
            "but the scheduler is chain_share",
        ),
        ("resources:\n", "3:11: resources is empty"),
        ("resources: chain\n", "3:12: resources must be a mapping, got 'chain'"),
    ],
)
def test_single_problem(problems, section, expected):
    assert problems(HEADER + section) == [expected]


def test_resources_problems_come_with_the_others_in_file_order(problems):
    text = """\
version: 1
name: p
resources:
  latency_bound: 5 ms
streams:
  S:
    schema: {ts: int}
    source: {type: file, path: data/nope.csv}
"""
    found = problems(text)
    assert [p.split(": ", 1)[0] for p in found] == ["4:3", "8:32"]
    assert "latency_bound in resources only applies" in found[0]
    assert "source file 'data/nope.csv' of stream 'S' does not exist" in found[1]


# --- the model --------------------------------------------------------------------------------


def test_the_model_is_immutable():
    resources = ResourcesSpec()
    with pytest.raises(dataclasses.FrozenInstanceError):
        resources.scheduler = "fifo"  # type: ignore[misc]


def test_pipeline_spec_defaults_to_the_default_resources():
    spec = PipelineSpec(1, "p", "ms", {}, {}, {}, SinkSpec("stdout"))
    assert spec.resources == ResourcesSpec()


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"scheduler": "lifo"}, "unknown scheduler 'lifo'"),
        ({"scheduler": "chain_bounded"}, "needs a latency_bound > 0"),
        ({"scheduler": "chain_bounded", "latency_bound": 0}, "needs a latency_bound > 0"),
        ({"scheduler": "fifo", "latency_bound": 5}, "only applies to scheduler chain_bounded"),
        ({"scheduler": "chain_share"}, "needs a share from 0 to 1"),
        ({"scheduler": "chain_share", "share": 1.5}, "needs a share from 0 to 1"),
        ({"scheduler": "chain", "share": 0.5}, "only applies to scheduler chain_share"),
    ],
)
def test_the_model_checks_its_invariants(kwargs, message):
    with pytest.raises(ValueError, match=message):
        ResourcesSpec(**kwargs)
