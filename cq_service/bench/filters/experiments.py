"""The four experiments of `cq bench filters` (thesis 003 §4.7), each on the engine.

(a) `by_n`: cost per tuple and wall time against the number of filters n, stable correlated
    filters (every drop probability 0.5, Γ = 2), for each adaptive orderer, the engine's
    ``static`` (the whole predicate at once), the written order one conjunct at a time
    (``written``, the thesis' static plan) and the exhaustive optimum (``optimum``: ``written``
    with the conjuncts in the optimal order, computed offline from the drop bits).
(b) `reconvergence`: drop probabilities spread around 0.5 and permuted every `period` tuples;
    cost per tuple per block of tuples for A-Greedy, Sweep and LocalSwaps, against the cost of
    each phase's optimal order on the same block, and the tuples each needs after a change to
    come (and stay, for `HOLD` blocks) within `WITHIN` × that optimum.
(c) `overhead` (Table 4.2): A-Greedy's filter time split into tuple processing, profile
    creation and re-optimization, for n = 3, 8 and p = 0.01, 0.05.
(d) `real`: the string match written first (real_case.py): rows per second (wall and
    CPU) under ``static``, the written order, A-Greedy and the best order in hindsight (the
    exhaustive optimum with the filters' per-row times as A-Greedy measured them), median of
    `repeat` runs, at each batch size given.

Every run of an experiment must write the same rows (the same jsonl bytes) and as many as the
generator says pass every filter; `run_all` raises otherwise.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np

from cq_service.bench.filters.engine_runs import ADAPTIVE, BATCH_ROWS, RunResult, run
from cq_service.bench.filters.optimum import cost_of, optimum
from cq_service.bench.filters.pipeline import pipeline_yaml, query_cql
from cq_service.bench.filters.real_case import real_pipeline, real_workload, write_real
from cq_service.bench.filters.workload import Workload, generate

__all__ = ["HOLD", "VARIANTS", "WITHIN", "by_n", "overhead", "real", "reconvergence", "same_output"]

# the runs of (a): name -> (order, orderer options); "a-greedy (unit)" is A-Greedy with every
# a_i = 1 (the thesis' unit costs) instead of measured times, to tell the algorithm from the
# timing of equal-cost filters on small batches
VARIANTS: dict[str, tuple[str, dict]] = {
    **{o: (o, {}) for o in ADAPTIVE},
    "a-greedy (unit)": ("a-greedy", {"unit_costs": True}),
    "static": ("static", {}),
    "written": ("fixed", {}),
}
AFTER = 100_000  # (b): the mean cost ratio over this many tuples after a change is reported
WITHIN = 1.2  # re-converged: a block's cost within this factor of the phase's optimum
HOLD = 3  # ... for this many consecutive blocks
Say = Callable[[str], None]


def same_output(results: Sequence[RunResult], expected: int | None = None) -> None:
    """Raise unless every run wrote the same rows (and `expected` of them)."""
    first = results[0]
    for r in results:
        if (r.output_rows, r.output_digest) != (first.output_rows, first.output_digest):
            raise RuntimeError(
                f"orders disagree: {first.order} wrote {first.output_rows} rows "
                f"({first.output_digest[:12]}), {r.order} {r.output_rows} ({r.output_digest[:12]})"
            )
    if expected is not None and first.output_rows != expected:
        raise RuntimeError(f"{first.output_rows} rows written, the generator says {expected}")


def _prepare(
    w: Workload, folder: Path, order: Sequence[int] | None = None, name: str = "written"
) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{name}.yaml"
    path.write_text(pipeline_yaml(w.n, query_cql(w.sets, order), out=f"out/{name}.jsonl"))
    return path


def _out(path: Path) -> Path:
    return path.parent / "out" / f"{path.stem}.jsonl"


def by_n(
    ns: Sequence[int],
    tuples: int,
    folder: Path,
    *,
    say: Say = lambda _: None,
    batch_rows: int = BATCH_ROWS,
) -> dict[int, dict]:
    """(a): {n: {"optimum_order", "optimum_model", "written_model", "runs": {order: json}}}."""
    out: dict[int, dict] = {}
    for n in ns:
        w = generate(n, tuples, seed=100 + n)
        sub = folder / f"n{n}"
        w.write(sub / "S0.parquet")
        best, best_cost = optimum(w.drops)
        written = _prepare(w, sub)
        opt = _prepare(w, sub, best, "optimum")
        runs_of = {
            name: run(written, o, out=_out(written), batch_rows=batch_rows, **opts)
            for name, (o, opts) in VARIANTS.items()
        }
        runs_of["optimum"] = run(opt, "fixed", out=_out(opt), batch_rows=batch_rows)
        same_output(list(runs_of.values()), w.passing())
        runs = {name: r.as_json() for name, r in runs_of.items()}
        out[n] = {
            "optimum_order": [f + 1 for f in best],
            "optimum_model": best_cost,
            "written_model": cost_of(w.drops, range(n)),
            "runs": runs,
        }
        say(
            f"n = {n}: "
            + ", ".join(f"{k} {v['cost_per_tuple']:.3f}" for k, v in runs.items())
            + f" (cost per tuple; {w.describe()})"
        )
    return out


def _blocks(batches: Sequence[tuple[int, int, int]], block: int, tuples: int) -> list[float]:
    """Cost per tuple per block of `block` tuples from a meter's batches."""
    evals = np.zeros(-(-tuples // block))
    rows = np.zeros_like(evals)
    seen = 0
    for t, e, p in batches:
        k = min(seen // block, len(evals) - 1)
        evals[k] += e + p
        rows[k] += t
        seen += t
    return (evals / np.maximum(rows, 1)).tolist()


def _settle(ratios: Sequence[float], start: int) -> int | None:
    """The first block from `start` opening `HOLD` blocks within `WITHIN` (None: never)."""
    for b in range(start, len(ratios) - HOLD + 1):
        if all(r <= WITHIN for r in ratios[b : b + HOLD]):
            return b
    return None


def reconvergence(
    n: int,
    tuples: int,
    period: int,
    block: int,
    folder: Path,
    *,
    say: Say = lambda _: None,
    batch_rows: int = BATCH_ROWS,
    orders: Sequence[str] = ("a-greedy", "sweep", "local-swaps", "a-greedy (unit)"),
) -> dict:
    """(b): per order the cost per tuple of each block, the ratio to the phase's optimum on the
    same block, and tuples to re-converge after each change."""
    rng = np.random.default_rng(200 + n)
    drop = rng.permutation(np.linspace(0.2, 0.8, n))
    w = generate(n, tuples, drop=drop, period=period, seed=200 + n)
    sub = folder / f"reconverge-n{n}"
    w.write(sub / "S0.parquet")
    best = [optimum(w.drops[k * period : (k + 1) * period])[0] for k in range(len(w.phases))]
    nblocks = -(-tuples // block)
    reference = [
        cost_of(w.drops[b * block : (b + 1) * block], best[w.phase_of(b * block)])
        for b in range(nblocks)
    ]
    written = _prepare(w, sub)
    results = [
        run(written, VARIANTS[o][0], out=_out(written), batch_rows=batch_rows, **VARIANTS[o][1])
        for o in orders
    ]
    same_output(results, w.passing())
    changes = [k * period for k in range(1, len(w.phases))]
    out: dict = {
        "n": n,
        "tuples": tuples,
        "period": period,
        "block": block,
        "phases": w.phases,
        "optimum_orders": [[f + 1 for f in o] for o in best],
        "optimum_blocks": reference,
        "runs": {},
    }
    for o, r in zip(orders, results, strict=True):
        costs = _blocks(r.batches, block, tuples)
        ratios = [c / max(ref, 1e-9) for c, ref in zip(costs, reference, strict=True)]
        settle, after = [], []
        for at in changes:
            b = _settle(ratios, at // block)
            settle.append(None if b is None or b * block >= at + period else (b + 1) * block - at)
            first = at // block
            after.append(float(np.mean(ratios[first : first + max(1, AFTER // block)])))
        out["runs"][o] = {
            **r.as_json(series=True),
            "blocks": costs,
            "ratios": ratios,
            "tuples_to_reconverge": settle,
            "ratio_after_change": after,
        }
        say(
            f"re-convergence n = {n}: {o} cost {r.cost_per_tuple:.3f}, tuples to come within "
            f"{WITHIN:g}x after each change: {settle}; mean ratio over the next "
            f"{AFTER:,} tuples: {[round(a, 3) for a in after]}"
        )
    return out


def overhead(
    ns: Sequence[int],
    ps: Sequence[float],
    tuples: int,
    folder: Path,
    *,
    say: Say = lambda _: None,
    batch_rows: int = BATCH_ROWS,
) -> list[dict]:
    """(c): A-Greedy's filter time split, per (n, p)."""
    rows = []
    for n in ns:
        w = generate(n, tuples, seed=300 + n)
        sub = folder / f"overhead-n{n}"
        w.write(sub / "S0.parquet")
        written = _prepare(w, sub)
        results = [
            run(written, "a-greedy", out=_out(written), batch_rows=batch_rows, timed=True, p=p)
            for p in ps
        ]
        same_output(results, w.passing())
        for p, r in zip(ps, results, strict=True):
            t = r.timings
            assert t is not None
            total = max(t.apply, 1e-12)
            row = {
                "n": n,
                "p": p,
                "filter_seconds": t.apply,
                "tuple_processing": 100 * (t.apply - t.profile - t.observe) / total,
                "profile_creation": 100 * t.profile / total,
                "reoptimization": 100 * t.observe / total,
                "profile_evaluations_share": 100
                * r.profile_evaluations
                / max(r.evaluations + r.profile_evaluations, 1),
                "cost_per_tuple": r.cost_per_tuple,
                "seconds": r.seconds,
            }
            rows.append(row)
            say(
                f"overhead n = {n}, p = {p:g}: tuple processing {row['tuple_processing']:.1f}%, "
                f"profile creation {row['profile_creation']:.1f}%, re-optimization "
                f"{row['reoptimization']:.1f}% of {t.apply:.3f} s in the selection"
            )
    return rows


def real(
    tuples: int,
    folder: Path,
    *,
    batch_sizes: Sequence[int],
    repeat: int = 3,
    say: Say = lambda _: None,
) -> dict:
    """(d): per batch size, rows per second (median of `repeat`) per order."""
    w = real_workload(tuples)
    sub = folder / "real"
    write_real(w, sub / "R.parquet")
    written = sub / "written.yaml"
    written.write_text(real_pipeline(out="out/written.jsonl"))
    out: dict = {"tuples": tuples, "repeat": repeat, "by_batch": {}}
    for rows in batch_sizes:
        # A first A-Greedy run warms the file cache and measures the per-row times the best
        # order in hindsight is computed with; then every order runs once per round, so a
        # change in the machine's load over the runs weighs on each alike.
        first = run(written, "a-greedy", out=_out(written), batch_rows=rows, whole_pass=True)
        best, _ = optimum(w.drops, first.costs)
        hindsight = sub / f"hindsight-{rows}.yaml"
        hindsight.write_text(real_pipeline(tuple(best), out=f"out/hindsight-{rows}.jsonl"))
        orders: dict[str, tuple[Path, str, dict]] = {
            "static": (written, "static", {}),
            "written": (written, "fixed", {}),
            # as the engine runs it: one pass whenever that measures cheaper than the order
            "a-greedy": (written, "a-greedy", {"whole_pass": True}),
            "a-greedy-ordered": (written, "a-greedy", {}),  # every batch in the order
            "hindsight": (hindsight, "fixed", {}),
        }
        runs: dict[str, list[RunResult]] = {o: [] for o in orders}
        for _ in range(repeat):
            for o, (path, order, options) in orders.items():
                runs[o].append(run(path, order, out=_out(path), batch_rows=rows, **options))
        median = statistics.median
        got = {}
        for o, rs in runs.items():
            same_output(rs, w.passing())
            got[o] = (rs[-1], median(r.seconds for r in rs), median(r.cpu_seconds for r in rs))
        same_output([r for r, _, _ in got.values()], w.passing())
        per = {
            o: {
                **r.as_json(),
                "median_seconds": s,
                "rows_per_second": tuples / s,
                "median_cpu_seconds": c,
                "rows_per_cpu_second": tuples / c,
            }
            for o, (r, s, c) in got.items()
        }
        per["hindsight"]["written_as"] = [f + 1 for f in best]
        out["by_batch"][rows] = per
        say(
            f"real case, batches of {rows:,}: "
            + ", ".join(f"{o} {v['rows_per_second']:,.0f} rows/s" for o, v in per.items())
        )
    return out
