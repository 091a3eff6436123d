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


def checks(results: Mapping[str, Any]) -> dict[str, dict]:
    """{claim: {"holds": bool, "detail": str}} for the parts present in `results`."""
    out: dict[str, dict] = {}
    for n, r in results.get("by_n", {}).items():
        runs = r["runs"]
        ag, ind, opt = (runs[k]["cost_per_tuple"] for k in ("a-greedy", "independent", "optimum"))
        if int(n) >= 3:
            out[f"n = {n}: A-Greedy below Independent"] = {
                "holds": ag < ind,
                "detail": f"{ag:.3f} vs {ind:.3f} evaluations per tuple",
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
            out[f"re-convergence: A-Greedy faster than {other}"] = {
                "holds": holds,
                "detail": f"tuples after each change: {ag} vs {theirs} "
                "(None: not within the phase)",
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
        lines.append("(a) evaluations per tuple (profiling included), wall seconds in ()")
        lines.append(f"{'n':>3} " + " ".join(f"{o:>17}" for o in orders))
        for n, r in by_n.items():
            cells = [
                f"{v['cost_per_tuple']:8.3f} ({v['seconds']:5.2f}s)" for v in r["runs"].values()
            ]
            lines.append(f"{n:>3} " + " ".join(f"{c:>17}" for c in cells))
        lines.append("")
    rc = results.get("reconvergence")
    if rc:
        lines.append(
            f"(b) n = {rc['n']}, permuted every {rc['period']:,} tuples, blocks of "
            f"{rc['block']:,}: tuples to come within 1.2x of the new optimum"
        )
        for o, r in rc["runs"].items():
            lines.append(
                f"  {o:16} {r['tuples_to_reconverge']}  (cost per tuple "
                f"{r['cost_per_tuple']:.3f}; over the next {AFTER:,} tuples "
                f"{[round(a, 2) for a in r['ratio_after_change']]}x the optimum)"
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
