"""Scalability of the resource manager in the spirit of the paper's Fig. 12 (brief-costmodel §5).

The paper's random plan mix (`querymix`: 50 Poisson sources, joins, aggregations, QoS ranges,
weights) on the paper's timeline × `scale`: the initial queries, a trickle of new ones from
1 h, a burst at 2 h; memory over time against the budget. Two modes:

**Engine mode** (`run_engine`, `scalability_engine`, hundreds of queries): the real `Worker`
runs the generated pipeline file with `resources.memory_budget`, the queries deployed as they
arrive, the manager on application time, the operators' state sampled.

**Model mode** (`run_model`, `scalability_model`, the paper's 5,000 queries): no engine, the
manager's `admit` and `decide` over one `ManagedQuery` per query, memory following each
query's settings with the engine's delays. How long `decide` takes is the scalability figure.

In both, the budget is a share of what the initial queries need at full precision by the
model (the generator's rates, selectivities and keys); every setting on record is checked
against its query's ranges, and every rejection is kept with its reason. This module is the
experiment as `cq bench costmodel` runs it; the summary, text, JSON and chart are in
`scalability_report`.
"""

from __future__ import annotations

import tempfile
from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path
from typing import Any

from cq_service.bench.costmodel.querymix import (
    NESTED_LOOPS,
    Timeline,
    generate,
    managed_queries,
    need,
    write_streams,
)
from cq_service.bench.costmodel.scalability_engine import run_engine
from cq_service.bench.costmodel.scalability_model import run_model
from cq_service.bench.costmodel.scalability_report import as_json, chart, summary, text

__all__ = [
    "ENGINE",
    "MODEL",
    "as_json",
    "chart",
    "run",
    "run_engine",
    "run_mode",
    "run_model",
    "summary",
    "text",
]

# -- the experiment as `cq bench costmodel` runs it --------------------------------------------

SCALE = 0.1  # every duration of the paper's × this: 2 h 30 min become 15 min
QUICK_SCALE = 0.02
ENGINE = Timeline(initial=120, trickle=2, burst=60, scale=SCALE)
ENGINE_QUICK = Timeline(initial=24, trickle=1, burst=12, scale=QUICK_SCALE)
MODEL = Timeline(manage_every=600_000, scale=SCALE)  # the paper's 5,000, 10 per 72 s and 500
MODEL_QUICK = Timeline(initial=1_000, trickle=2, burst=100, manage_every=600_000, scale=SCALE)
# The budget: this share of what the initial queries need at full precision. Shorter windows
# (the quick run's) make the multi-way joins' full need less extreme, so the minimum settings
# are a larger share of it.
ENGINE_SHARE = 0.5
ENGINE_QUICK_SHARE = 0.7
MODEL_SHARE = 0.2


def run_mode(
    mode: str,
    timeline: Timeline,
    share: float,
    seed: int = 0,
    nested_loops: float = NESTED_LOOPS,
    progress: Callable[[str], None] | None = None,
) -> dict[str, Any]:
    """One mode ("engine" or "model") over the mix of `timeline`, with a budget of `share` of
    what its initial queries need at full precision (by the model)."""
    mix = generate(timeline, seed, nested_loops=nested_loops)
    with tempfile.TemporaryDirectory(prefix="cq-scalability-") as tmp:
        folder = Path(tmp)
        (folder / "need").mkdir()
        write_streams(mix, folder / "need", 0)
        initial = managed_queries(mix, mix.arrived(0), folder / "need")
        full, least = need(initial, 1.0), need(initial, 0.0)
        budget = share * full
        runner = run_engine if mode == "engine" else run_model
        result = runner(mix, folder / mode, budget, progress=progress)
    result.update(
        seed=seed,
        timeline=asdict(timeline),
        arrivals=timeline.arrivals(),
        kinds=mix.kinds,
        nested_loops=nested_loops,
        streams=len(mix.rates),
        share=share,
        need_full=full,
        need_least=least,
    )
    result["summary"] = summary(result)
    return result


def run(
    quick: bool = False,
    seed: int = 0,
    nested_loops: float = NESTED_LOOPS,
    progress: Callable[[str], None] | None = None,
) -> dict[str, dict[str, Any]]:
    """Both modes: the engine's hundreds of queries and the model's 5,000 (`quick`: fewer,
    and the engine's times × QUICK_SCALE)."""
    engine = (ENGINE_QUICK, ENGINE_QUICK_SHARE) if quick else (ENGINE, ENGINE_SHARE)
    model = MODEL_QUICK if quick else MODEL
    return {
        "engine": run_mode("engine", *engine, seed, nested_loops, progress),
        "model": run_mode("model", model, MODEL_SHARE, seed, nested_loops, progress),
    }

