"""The four experiments of `cq bench filters` (thesis 003 §4.7), each on the engine.

(a) `by_n`: cost per tuple and wall time against the number of filters n, stable correlated
    filters (every drop probability 0.5, Γ = 2), for each adaptive orderer, the engine's
    ``static`` (the whole predicate at once), the written order one conjunct at a time
    (``written``, the thesis' static plan) and the exhaustive optimum (``optimum``: ``written``
    with the conjuncts in the optimal order, computed offline from the drop bits). Averaged
    over `PLACEMENTS` instances, each with its own seed and its own placement of the filters
    into correlation groups (with every selectivity equal, an orderer that keeps ties in the
    written order depends on where the correlated filters happen to be written; the thesis
    averages over instances), with the spread.
(b) `reconvergence`: drop probabilities spread around 0.5 and permuted every `period` tuples;
    cost per tuple per block of tuples for A-Greedy, Sweep and LocalSwaps, against the cost of
    each phase's optimal order on the same tuples, and the tuples each needs after a change to
    come (and stay, for `HOLD` windows of `block` tuples) within `WITHIN` × that optimum, to
    the batch (aggregate.py). Repeated on `SEEDS` inputs; every order runs on each, and the
    change falls on a batch boundary, at the same tuple for every order.
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

from cq_service.bench.filters.aggregate import settle, spread, steps
from cq_service.bench.filters.engine_runs import ADAPTIVE, BATCH_ROWS, RunResult, run
from cq_service.bench.filters.optimum import cost_of, optimum
from cq_service.bench.filters.pipeline import pipeline_yaml, query_cql
from cq_service.bench.filters.real_case import real_pipeline, real_workload, write_real
from cq_service.bench.filters.workload import Workload, generate, random_placement

__all__ = [
    "HOLD",
    "PLACEMENTS",
    "SEEDS",
    "VARIANTS",
    "WITHIN",
    "by_n",
    "overhead",
    "real",
    "reconvergence",
    "same_output",
]

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
PLACEMENTS = 5  # (a): instances (seed and placement into correlation groups) per n
SEEDS = 5  # (b): inputs (selectivities, permutation, draws) the experiment is repeated on
QUICK_PLACEMENTS, QUICK_SEEDS = 2, 1  # `cq bench filters --quick`, the CI check
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


def _by_n_once(
    n: int, tuples: int, folder: Path, seed: int, placement: Sequence[int], batch_rows: int
) -> dict:
    """One instance of (a): every order of `VARIANTS` and the optimum on the same input."""
    w = generate(n, tuples, seed=seed, placement=placement)
    folder.mkdir(parents=True, exist_ok=True)
    w.write(folder / "S0.parquet")
    best, best_cost = optimum(w.drops)
    written = _prepare(w, folder)
    opt = _prepare(w, folder, best, "optimum")
    runs_of = {
        name: run(written, o, out=_out(written), batch_rows=batch_rows, **opts)
        for name, (o, opts) in VARIANTS.items()
    }
    runs_of["optimum"] = run(opt, "fixed", out=_out(opt), batch_rows=batch_rows)
    same_output(list(runs_of.values()), w.passing())
    return {
        "seed": seed,
        "groups": [[f + 1 for f in g] for g in w.groups],
        "optimum_order": [f + 1 for f in best],
        "optimum_model": best_cost,
        "written_model": cost_of(w.drops, range(n)),
        "runs": {name: r.as_json() for name, r in runs_of.items()},
    }


def by_n(
    ns: Sequence[int],
    tuples: int,
    folder: Path,
    *,
    say: Say = lambda _: None,
    batch_rows: int = BATCH_ROWS,
    placements: int = PLACEMENTS,
) -> dict[int, dict]:
    """(a), averaged over `placements` instances: instance k has its own seed and its own
    placement of the filters into correlation groups (k = 0: consecutive filters, the bench's
    single instance until 2026-11-29), and every order runs on it.

    {n: {"placements": [per instance: seed, groups, optimum_order, optimum_model,
    written_model, runs], "optimum_model", "written_model" (means), "runs": {order: the
    instances' mean cost per tuple and seconds, `spread` of the costs, output rows summed}}}."""
    out: dict[int, dict] = {}
    for n in ns:
        each = [
            _by_n_once(
                n,
                tuples,
                folder / f"n{n}" / f"p{k}",
                100 + n + 1000 * k,
                random_placement(n, k),
                batch_rows,
            )
            for k in range(placements)
        ]
        runs: dict[str, dict] = {}
        for name in each[0]["runs"]:
            costs = [e["runs"][name]["cost_per_tuple"] for e in each]
            runs[name] = {
                "order": each[0]["runs"][name]["order"],
                "cost_per_tuple": float(np.mean(costs)),
                "seconds": float(np.mean([e["runs"][name]["seconds"] for e in each])),
                "output_rows": sum(e["runs"][name]["output_rows"] for e in each),
                "spread": spread(costs),
            }
        out[n] = {
            "placements": each,
            "optimum_model": float(np.mean([e["optimum_model"] for e in each])),
            "written_model": float(np.mean([e["written_model"] for e in each])),
            "runs": runs,
        }
        say(
            f"n = {n}, mean of {placements} placements: "
            + ", ".join(
                f"{k} {v['cost_per_tuple']:.3f} [{v['spread']['min']:.3f}-{v['spread']['max']:.3f}]"
                for k, v in runs.items()
            )
        )
    return out


def _reconvergence_once(
    n: int,
    tuples: int,
    period: int,
    block: int,
    folder: Path,
    seed: int,
    batch_rows: int,
    orders: Sequence[str],
) -> dict:
    """One seed of (b): every order on the same input, changes at the same tuples."""
    if period % batch_rows:
        raise ValueError(f"a change ({period:,}) falls inside a batch of {batch_rows:,} rows")
    if block % batch_rows:
        raise ValueError(f"a block ({block:,}) is a whole number of {batch_rows:,}-row steps")
    rng = np.random.default_rng(seed)
    drop = rng.permutation(np.linspace(0.2, 0.8, n))
    w = generate(n, tuples, drop=drop, period=period, seed=seed)
    w.write(folder / "S0.parquet")
    best = [optimum(w.drops[k * period : (k + 1) * period])[0] for k in range(len(w.phases))]
    nsteps = -(-tuples // batch_rows)
    rows = np.array([min(batch_rows, tuples - s * batch_rows) for s in range(nsteps)], dtype=float)
    reference = (
        np.array(
            [
                cost_of(
                    w.drops[s * batch_rows : (s + 1) * batch_rows], best[w.phase_of(s * batch_rows)]
                )
                for s in range(nsteps)
            ]
        )
        * rows
    )  # the phase's optimal order's evaluations per step
    written = _prepare(w, folder)
    results = [
        run(written, VARIANTS[o][0], out=_out(written), batch_rows=batch_rows, **VARIANTS[o][1])
        for o in orders
    ]
    same_output(results, w.passing())
    changes = [k * period for k in range(1, len(w.phases))]
    per = block // batch_rows
    nblocks = -(-tuples // block)
    ref_blocks = [
        float(reference[b * per : (b + 1) * per].sum() / rows[b * per : (b + 1) * per].sum())
        for b in range(nblocks)
    ]
    out: dict = {
        "seed": seed,
        "phases": w.phases,
        "optimum_orders": [[f + 1 for f in o] for o in best],
        "optimum_blocks": ref_blocks,
        "runs": {},
    }
    for o, r in zip(orders, results, strict=True):
        if r.tuples != tuples or sum(b[0] for b in r.batches) != tuples:
            raise RuntimeError(f"{o} saw {r.tuples:,} tuples, not {tuples:,}")
        evals, got = steps(r.batches, batch_rows, tuples)
        if not np.array_equal(got, rows):
            raise RuntimeError(f"{o}'s batches are not {batch_rows:,}-row steps")
        settled, after = [], []
        for at in changes:
            s = settle(
                evals,
                reference,
                start=at // batch_rows,
                stop=min(at + period, tuples) // batch_rows,
                window=per,
                hold=HOLD,
                within=WITHIN,
            )
            settled.append(None if s is None else s * batch_rows)
            a, b = at // batch_rows, (at + AFTER) // batch_rows
            after.append(float(evals[a:b].sum() / reference[a:b].sum()))
        blocks = [
            float(evals[b * per : (b + 1) * per].sum() / rows[b * per : (b + 1) * per].sum())
            for b in range(nblocks)
        ]
        out["runs"][o] = {
            **r.as_json(series=True),
            "blocks": blocks,
            "ratios": [c / max(ref, 1e-9) for c, ref in zip(blocks, ref_blocks, strict=True)],
            "tuples_to_reconverge": settled,
            "ratio_after_change": after,
        }
    return out


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
    seeds: int = SEEDS,
) -> dict:
    """(b), repeated on `seeds` inputs (seed s: its own selectivities, permutation and draws;
    s = 0 the bench's single input until 2026-11-29); every order runs on each. Tuples to
    re-converge are measured to the batch (`batch_rows` tuples), with windows of `block`.

    {"n", "tuples", "period", "block", "step", "seeds": [per seed: phases, optimum_orders,
    optimum_blocks, runs], "optimum_blocks" (median per block), "runs": {order: per change
    the `spread` of tuples to re-converge and of the mean ratio over the next `AFTER` tuples,
    their medians as "tuples_to_reconverge" / "ratio_after_change", and the median, min and
    max ratio per block}}."""
    each = [
        _reconvergence_once(
            n,
            tuples,
            period,
            block,
            folder / f"reconverge-n{n}" / f"s{s}",
            200 + n + 1000 * s,
            batch_rows,
            orders,
        )
        for s in range(seeds)
    ]
    out: dict = {
        "n": n,
        "tuples": tuples,
        "period": period,
        "block": block,
        "step": batch_rows,
        "within": WITHIN,
        "hold": HOLD,
        "phases": each[0]["phases"],
        "seeds": each,
        "optimum_blocks": np.median([e["optimum_blocks"] for e in each], axis=0).tolist(),
        "runs": {},
    }
    for o in orders:
        rs = [e["runs"][o] for e in each]
        nchanges = len(rs[0]["tuples_to_reconverge"])
        settle_spread = [
            spread([r["tuples_to_reconverge"][c] for r in rs]) for c in range(nchanges)
        ]
        after_spread = [spread([r["ratio_after_change"][c] for r in rs]) for c in range(nchanges)]
        ratios = np.array([r["ratios"] for r in rs])
        out["runs"][o] = {
            "order": o,
            "output_rows": sum(r["output_rows"] for r in rs),
            "cost_per_tuple": float(np.mean([r["cost_per_tuple"] for r in rs])),
            "tuples_to_reconverge": [s["median"] for s in settle_spread],
            "reconverge_spread": settle_spread,
            "ratio_after_change": [s["median"] for s in after_spread],
            "after_spread": after_spread,
            "blocks": np.median([r["blocks"] for r in rs], axis=0).tolist(),
            "ratios": np.median(ratios, axis=0).tolist(),
            "ratios_min": ratios.min(axis=0).tolist(),
            "ratios_max": ratios.max(axis=0).tolist(),
        }
        say(
            f"re-convergence n = {n}, {seeds} seeds: {o} tuples to come within {WITHIN:g}x "
            f"after the change: {[s['values'] for s in settle_spread]}, median "
            f"{[s['median'] for s in settle_spread]}"
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
