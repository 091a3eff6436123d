"""`cq bench filters`' verdicts and text: issue 24's bars, checked on a run.

Each check compares figures measured in the same run and is printed as it came out; the bench
asserts none of them (a failing one is reported with its numbers, not hidden).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from cq_service.bench.filters.experiments import AFTER

__all__ = ["checks", "text"]

NEAR_OPTIMUM = 1.5  # A-Greedy within this factor of the optimum ...
NEAR_N = 6  # ... for n up to this
REAL_SPEEDUP = 2.0  # the real case: A-Greedy at least this many times static's rows per second


def _never(t: int | None) -> float:
    return math.inf if t is None else float(t)


def _wins(a: list[float | None], b: list[float | None]) -> int:
    """How many paired runs `a` is strictly below `b` in (None: never, above any number)."""
    return sum(_never(x) < _never(y) for x, y in zip(a, b, strict=True))


def _cost_check(r: Mapping[str, Any], ag: float, ind: float) -> str:
    """The detail of "A-Greedy below Independent": means, ranges, instances won."""
    runs = r["runs"]
    detail = f"{ag:.3f} vs {ind:.3f} evaluations per tuple"
    each = r.get("placements")
    if each:
        a = [e["runs"]["a-greedy"]["cost_per_tuple"] for e in each]
        b = [e["runs"]["independent"]["cost_per_tuple"] for e in each]
        sa, sb = runs["a-greedy"]["spread"], runs["independent"]["spread"]
        detail += (
            f" (mean of {len(each)} placements; range {sa['min']:.3f}-{sa['max']:.3f} vs "
            f"{sb['min']:.3f}-{sb['max']:.3f}; A-Greedy below in {_wins(a, b)} of {len(each)})"
        )
    return detail


def checks(results: Mapping[str, Any]) -> dict[str, dict]:
    """{claim: {"holds": bool, "detail": str}} for the parts present in `results`.

    With several placements (a) compares the means over them; with several seeds (b) compares
    the medians of the tuples to re-converge (None, never, above any number) and says in how
    many seeds A-Greedy was strictly faster."""
    out: dict[str, dict] = {}
    for n, r in results.get("by_n", {}).items():
        runs = r["runs"]
        ag, ind, opt = (runs[k]["cost_per_tuple"] for k in ("a-greedy", "independent", "optimum"))
        if int(n) >= 3:
            out[f"n = {n}: A-Greedy below Independent"] = {
                "holds": ag < ind,
                "detail": _cost_check(r, ag, ind),
            }
        if int(n) <= NEAR_N:
            out[f"n = {n}: A-Greedy within {NEAR_OPTIMUM:g}x the optimum"] = {
                "holds": ag <= NEAR_OPTIMUM * opt,
                "detail": f"{ag:.3f} vs {opt:.3f} ({ag / opt:.2f}x)",
            }
    rc = results.get("reconvergence")
    if rc:
        runs = rc["runs"]
        ag = runs["a-greedy"]["tuples_to_reconverge"]
        for other in ("sweep", "local-swaps"):
            if other not in runs:
                continue
            theirs = runs[other]["tuples_to_reconverge"]
            holds = all(_never(a) < _never(b) for a, b in zip(ag, theirs, strict=True))
            detail = f"tuples after each change: {ag} vs {theirs} (None: not within the phase)"
            seeds = rc.get("seeds")
            if seeds:
                won = [
                    _wins(
                        [s["runs"]["a-greedy"]["tuples_to_reconverge"][c] for s in seeds],
                        [s["runs"][other]["tuples_to_reconverge"][c] for s in seeds],
                    )
                    for c in range(len(ag))
                ]
                spreads = [
                    (runs["a-greedy"]["reconverge_spread"][c], runs[other]["reconverge_spread"][c])
                    for c in range(len(ag))
                ]
                detail = (
                    f"median tuples after each change over {len(seeds)} seeds: {ag} vs {theirs} "
                    f"(None: not within the phase); per seed "
                    + "; ".join(f"{a['values']} vs {b['values']}" for a, b in spreads)
                    + "; A-Greedy strictly faster in "
                    + ", ".join(f"{w} of {len(seeds)}" for w in won)
                )
            out[f"re-convergence: A-Greedy faster than {other}"] = {
                "holds": holds,
                "detail": detail,
            }
    for rows, per in results.get("real", {}).get("by_batch", {}).items():
        ag, st = per["a-greedy"]["rows_per_second"], per["static"]["rows_per_second"]
        out[f"real case (batches of {int(rows):,}): A-Greedy ≥ {REAL_SPEEDUP:g}x static"] = {
            "holds": ag >= REAL_SPEEDUP * st,
            "detail": f"{ag:,.0f} vs {st:,.0f} rows/s ({ag / st:.2f}x)" + _cpu_detail(per),
        }
    return out


def text(results: Mapping[str, Any], verdicts: Mapping[str, dict]) -> str:
    """Tables of the four experiments, then the checks."""
    lines: list[str] = []
    by_n = results.get("by_n", {})
    if by_n:
        orders = list(next(iter(by_n.values()))["runs"])
        lines.append(
            "(a) evaluations per tuple (profiling included), mean over placements, [min-max] below"
        )
        lines.append(f"{'n':>3} " + " ".join(f"{o:>15}" for o in orders))
        for n, r in by_n.items():
            lines.append(
                f"{n:>3} " + " ".join(f"{v['cost_per_tuple']:>15.3f}" for v in r["runs"].values())
            )
            if "spread" in next(iter(r["runs"].values())):
                cells = [
                    f"[{v['spread']['min']:.3f}-{v['spread']['max']:.3f}]"
                    for v in r["runs"].values()
                ]
                lines.append("    " + " ".join(f"{c:>15}" for c in cells))
        lines.append("")
        lines.append("(a) per placement (groups of correlated filters: cost per tuple)")
        for n, r in by_n.items():
            for e in r.get("placements", []):
                lines.append(
                    f"  n = {n}, groups {e['groups']}, seed {e['seed']}: "
                    + ", ".join(
                        f"{o} {v['cost_per_tuple']:.3f}"
                        for o, v in e["runs"].items()
                        if o != "static"
                    )
                )
        lines.append("")
    rc = results.get("reconvergence")
    if rc:
        lines.append(
            f"(b) n = {rc['n']}, permuted every {rc['period']:,} tuples: tuples to come within "
            f"1.2x of the new optimum (windows of {rc['block']:,}, measured to "
            f"{rc.get('step', rc['block']):,} tuples), median [min-max] over "
            f"{len(rc.get('seeds', [rc]))} seed(s)"
        )
        for o, r in rc["runs"].items():
            spreads = r.get("reconverge_spread") or [
                {"values": [t], "min": t, "max": t} for t in r["tuples_to_reconverge"]
            ]
            cells = ", ".join(
                f"{m} [{s['min']}-{s['max']}] per seed {s['values']}"
                for m, s in zip(r["tuples_to_reconverge"], spreads, strict=True)
            )
            lines.append(
                f"  {o:16} {cells}  (cost per tuple {r['cost_per_tuple']:.3f}; over the next "
                f"{AFTER:,} tuples {[round(a, 2) for a in r['ratio_after_change']]}x the optimum)"
            )
        lines.append("")
    ov = results.get("overhead")
    if ov:
        lines.append("(c) A-Greedy's time in the selection, % (Table 4.2)")
        lines.append(
            f"{'n':>3} {'p':>5} {'tuples':>8} {'profiles':>9} {'re-opt':>7} {'profile evals':>14}"
        )
        for r in ov:
            lines.append(
                f"{r['n']:>3} {r['p']:>5g} {r['tuple_processing']:8.1f} "
                f"{r['profile_creation']:9.1f} {r['reoptimization']:7.1f} "
                f"{r['profile_evaluations_share']:13.1f}%"
            )
        lines.append("")
    rl = results.get("real")
    if rl:
        lines.append(
            f"(d) real case, {rl['tuples']:,} tuples, rows per second (median of {rl['repeat']})"
        )
        for rows, per in rl["by_batch"].items():
            lines.append(
                f"  batches of {int(rows):,}: "
                + ", ".join(f"{o} {v['rows_per_second']:,.0f}" for o, v in per.items())
            )
            lines.append(
                "    per CPU second: "
                + ", ".join(f"{o} {v.get('rows_per_cpu_second', 0):,.0f}" for o, v in per.items())
            )
        lines.append("")
    lines += [
        f"{'pass' if v['holds'] else 'FAIL'}: {claim} — {v['detail']}"
        for claim, v in verdicts.items()
    ]
    return "\n".join(lines)


def _cpu_detail(per: Mapping[str, Any]) -> str:
    """The same ratio per CPU second (less sensitive to a shared machine), when measured."""
    ag, st = per["a-greedy"].get("rows_per_cpu_second"), per["static"].get("rows_per_cpu_second")
    return f"; per CPU second {ag / st:.2f}x" if ag and st else ""
