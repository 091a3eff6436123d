"""Each deployment's scheduler: its control in the catalog, else the worker's `policy`, else the
pipeline file's `resources` (docs/service.md, "Scheduling per deployment").

A policy object is replaced only when that choice changes, so a redeploy keeps what Chain and
Greedy have measured; every change is logged in the catalog's adjustments (kind `scheduler`).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

from cq_service.catalog import PipelineControlRecord
from cq_service.engine.scheduler import SchedulingPolicy
from cq_service.engine.scheduler import policy as make_policy
from cq_service.runner import scheduler_of
from cq_service.service.running import Runtime
from cq_service.spec.model import PipelineSpec

__all__ = ["SchedulerChoice", "Schedulers"]

log = logging.getLogger("cq.worker")


@dataclass(frozen=True)
class SchedulerChoice:
    """A deployment's scheduler, its latency bound (seconds; chain_bounded only), where the
    choice came from: ``control`` (the catalog), ``config`` (the worker's `policy`) or ``file``,
    and its share of FIFO steps (chain_share only)."""

    name: str
    latency_bound: float | None
    origin: str
    share: float | None = None

    def same_policy(self, policy: SchedulingPolicy) -> bool:
        found = (policy.name, getattr(policy, "bound", None), getattr(policy, "share", None))
        return found == (self.name, self.latency_bound, self.share)

    def make(self) -> SchedulingPolicy:
        """A fresh policy for this choice."""
        return make_policy(self.name, self.latency_bound, self.share)

    def to_json(self) -> dict[str, Any]:
        bound = self.latency_bound
        return {
            "scheduler": self.name,
            "latency_bound_ms": None if bound is None else round(bound * 1000, 6),
            "share": self.share,
            "from": self.origin,
        }


class Schedulers:
    """The running deployments' scheduler choices, applied to the engine's `ByOwner`."""

    def __init__(self, rt: Runtime):
        self.rt = rt
        self.choices: dict[str, SchedulerChoice] = {}  # running deployments' schedulers

    def choice(self, pipeline: str, spec: PipelineSpec) -> SchedulerChoice:
        """The deployment's control, else the worker's `policy`, else the file's resources."""
        control = self.rt.catalog.pipeline_control(pipeline)
        if control is not None and control.scheduler is not None:
            ms = control.latency_bound_ms
            bound = None if ms is None else ms / 1000
            return SchedulerChoice(control.scheduler, bound, "control", control.share)
        if self.rt.config.policy:
            return SchedulerChoice(self.rt.config.policy, None, "config")
        name, bound, share = scheduler_of(spec)
        return SchedulerChoice(name, bound, "file", share)

    def apply(self, pipeline: str, spec: PipelineSpec) -> None:
        """Schedule the deployment by its current choice; its policy object (and what it has
        learned) is kept while the choice is the same."""
        choice = self.choice(pipeline, spec)
        current = self.rt.scheduling.policies.get(pipeline)
        if current is None or not choice.same_policy(current):
            self.rt.scheduling.set(pipeline, choice.make())
        previous = self.choices.get(pipeline)
        self.choices[pipeline] = choice
        if previous is not None and previous != choice:
            self.rt.catalog.log_adjustment(
                pipeline, "scheduler", {"from": previous.to_json(), "to": choice.to_json()}
            )
            log.info("%s: scheduler %s (%s)", pipeline, choice.name, choice.origin)

    def set(
        self,
        pipeline: str,
        scheduler: str | None,
        latency_bound_ms: float | None,
        share: float | None = None,
    ) -> PipelineControlRecord:
        """Store a deployment's scheduler control (None: back to the configuration's or the
        file's) and, if it runs, schedule it so from the next step on."""
        record = self.rt.catalog.set_pipeline_control(
            pipeline, scheduler=scheduler, latency_bound_ms=latency_bound_ms, share=share
        )
        spec = self.rt.pipelines.get(pipeline)
        if spec is not None:
            self.apply(pipeline, spec)
        return record

    def forget(self, pipeline: str) -> None:
        """The deployment no longer runs on the engine (its policy went with its operators)."""
        self.choices.pop(pipeline, None)
