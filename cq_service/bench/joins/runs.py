"""Runs of the joins benchmark: each case (workload.py) under each `resources.join` setting,
through `run_pipeline` as `cq run` runs it, to completion. Per run: wall-clock seconds, input
tuples per second, results, the peak state of the join operators (binary joins' synopses and
intermediate results, MJoins' synopses and caches; sampled every `SAMPLE` executor steps),
and for MJoins the caches in use at the end and their hit rate; under ``auto``, the form its
cost model chose. Each setting's results must equal the tree's (a count and an order-free
checksum of the sink's rows are compared), and auto's throughput is reported next to the best
of the three forms' (issue 25: never more than 10% behind)."""

from __future__ import annotations

import os
import statistics
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from cq_service.bench.joins.workload import CASES, write_case
from cq_service.compiler import load_and_compile, run_plan
from cq_service.engine.executor import Executor
from cq_service.runner import run_pipeline

__all__ = ["SETTINGS", "run_all", "run_one"]

SETTINGS = ("tree", "mjoin", "mjoin-caching", "auto")
FORMS = ("tree", "mjoin", "mjoin-caching")
AUTO_SLACK = 0.10  # auto may be this far behind the best form's throughput
THROUGHPUT = "tuples_per_cpu_s"  # what the checks compare (medians over rounds)
SAMPLE = 8
JOIN_KINDS = ("join", "mjoin")


# Rows a source reads at a time: small, so the join sees a stream of batches, as it would live.
BATCH_ROWS = 512


def run_one(template: Path, setting: str, batch_rows: int = BATCH_ROWS) -> dict:
    """One case under one setting."""
    path = template.with_name(f"{setting}.yaml")
    path.write_text(template.read_text().replace("@JOIN@", setting))
    compiled = load_and_compile(path)
    peak = [0, 0]
    steps = [0]
    joins: list = []

    def after(ex: Executor) -> None:
        steps[0] += 1
        if steps[0] % SAMPLE:
            return
        if not joins:
            joins.extend(o for o in ex.operators if o.kind in JOIN_KINDS)
        rows = nbytes = 0
        for o in joins:
            r, b = o.state_size()
            rows += r
            nbytes += b
        peak[0] = max(peak[0], rows)
        peak[1] = max(peak[1], nbytes)

    start, cpu_start = time.perf_counter(), time.process_time()
    report = run_pipeline(compiled, batch_rows=batch_rows, after_step=after)
    seconds = time.perf_counter() - start
    cpu = time.process_time() - cpu_start
    ex = report.executor
    tuples = sum(s["elements"] for s in report.sources.values())
    out = {
        "seconds": seconds,
        "cpu_seconds": cpu,
        "tuples_per_s": tuples / seconds if seconds else 0.0,
        "tuples_per_cpu_s": tuples / cpu if cpu else 0.0,
        "tuples": tuples,
        "results": sum(report.sinks.values()),
        "peak_state_rows": peak[0],
        "peak_state_bytes": peak[1],
    }
    if setting == "auto":
        notes = [n for n in run_plan(compiled).notes if n.startswith("join auto:")]
        out["join_form"] = notes[0].split(" runs as ")[1].split()[0] if notes else "tree"
    mj = [o for o in ex.operators if o.kind == "mjoin"]
    if mj:
        out["reorders"] = sum(o.reorders for o in mj)
        if any(o.cache_selector is not None for o in mj):
            stats = [s for o in mj for s in o._seg_stats.values()]
            out["caches"] = [o.describe_caches() for o in mj]
            out["cache_choices"] = sum(o.cache_choices for o in mj)
            looked = sum(s.lookups for s in stats if s.state == "used")
            out["cache_hit_rate"] = (
                sum(s.hits for s in stats if s.state == "used") / looked if looked else None
            )
    return out


def run_all(
    cases: Sequence[str],
    folder: Path,
    settings: Sequence[str] = SETTINGS,
    scale: float = 1.0,
    say: Callable[[str], None] = lambda _: None,
    repeats: int = 3,
) -> dict[str, dict]:
    """{case: {"setting": {...medians of run_one..., "rounds": [...]}, ..., "checks": {...},
    "load": {"before": ..., "after": ...}}}."""
    out: dict[str, dict] = {}
    for k, name in enumerate(cases):
        case = CASES[name]
        template = write_case(case, folder / name, scale=scale)
        if k == 0:
            # discarded: a process's first runs are slower (imports, kernels, allocator), which
            # would be charged to whichever setting runs first
            run_one(template, settings[0])
        load_before = os.getloadavg()
        rounds: dict[str, list[dict]] = {s: [] for s in settings}
        for r in range(max(1, repeats)):
            for setting in settings[r % len(settings) :] + settings[: r % len(settings)]:
                rounds[setting].append(run_one(template, setting))
        runs = {s: _median_run(rs) for s, rs in rounds.items()}
        for setting, rr in runs.items():
            say(
                f"{name:10} {setting:14} {rr['tuples_per_cpu_s']:9.0f} tuples/cpu-s "
                f"{rr['tuples_per_s']:9.0f} tuples/s  state peak {rr['peak_state_rows']:7d} rows "
                f"{rr['peak_state_bytes'] / 2**20:6.2f} MiB  results {rr['results']}"
                + (f"  caches {rr['caches']} hit {rr['cache_hit_rate']}" if "caches" in rr else "")
                + (f"  chose {rr['join_form']}" if "join_form" in rr else "")
            )
        base = runs[settings[0]]
        checks = {
            f"{s}_same_results_as_{settings[0]}": all(
                x["results"] == base["results"] for x in rounds[s]
            )
            for s in settings[1:]
        }
        if "tree" in runs and "mjoin" in runs:
            checks["mjoin_less_state_than_tree"] = (
                runs["mjoin"]["peak_state_rows"] < runs["tree"]["peak_state_rows"]
            )
        if "tree" in runs and "mjoin-caching" in runs:
            checks["caching_less_state_than_tree"] = (
                runs["mjoin-caching"]["peak_state_rows"] < runs["tree"]["peak_state_rows"]
            )
        if "mjoin" in runs and "mjoin-caching" in runs:
            checks["caching_speedup_over_mjoin"] = _ratio(runs, "mjoin-caching", "mjoin")
        if "tree" in runs and "mjoin-caching" in runs:
            checks["caching_speedup_over_tree"] = _ratio(runs, "mjoin-caching", "tree")
        checks.update(_auto_checks(runs))
        if "auto_vs_best" in checks:
            say(
                f"{name:10} auto ({runs['auto']['join_form']}) at {checks['auto_vs_best']:.2f} "
                f"of the best ({checks['best_form']}); its form's own runs at "
                f"{checks.get('auto_form_vs_best', 0):.2f}"
            )
        load = {"before": list(load_before), "after": list(os.getloadavg())}
        out[name] = {**runs, "checks": checks, "load": load, "repeats": max(1, repeats)}
    return out


MEASURES = ("seconds", "cpu_seconds", "tuples_per_s", "tuples_per_cpu_s")


def _median_run(rounds: list[dict]) -> dict:
    """One setting's rounds as one run: the medians of the timings (with every round's kept
    under "rounds"), the largest state peak, the rest from the last round."""
    out = dict(rounds[-1])
    for m in MEASURES:
        out[m] = statistics.median(r[m] for r in rounds)
    out["peak_state_rows"] = max(r["peak_state_rows"] for r in rounds)
    out["peak_state_bytes"] = max(r["peak_state_bytes"] for r in rounds)
    out["rounds"] = [{m: r[m] for m in MEASURES} for r in rounds]
    return out


def _ratio(runs: dict[str, dict], a: str, b: str, measure: str = THROUGHPUT) -> float:
    return runs[a][measure] / runs[b][measure] if runs[b][measure] else 0.0


def _auto_checks(runs: dict[str, dict]) -> dict:
    """auto's throughput as a share of the best form's, and whether it is within the slack."""
    forms = [f for f in FORMS if f in runs]
    if "auto" not in runs or not forms:
        return {}
    best = max(forms, key=lambda f: runs[f][THROUGHPUT])
    top = runs[best][THROUGHPUT]
    ratio = runs["auto"][THROUGHPUT] / top if top else 0.0
    chosen = runs["auto"].get("join_form")
    out = {
        "best_form": best,
        "auto_vs_best": ratio,
        "auto_within_10pct_of_best": ratio >= 1 - AUTO_SLACK,
    }
    if chosen in runs and top:
        # the chosen form's own run against the best: auto's run less the run-to-run noise of
        # running one plan twice on a shared machine
        out["auto_form_vs_best"] = runs[chosen][THROUGHPUT] / top
        # auto's runs against its own form's: 1 but for noise (the same plan run twice)
        out["auto_vs_own_form"] = _ratio(runs, "auto", chosen)
    return out
