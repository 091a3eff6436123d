"""The joins benchmark's workloads: a fast stream F and slow streams joined to it in a chain
(3-way: F.a = S1.a AND S1.b = S2.a; 4-way adds S2.b = S3.a), each under a Range window.

F's pipeline probes S1 then S2 (then S3): what the slow streams add to an F tuple depends on
F.a alone and changes only when a slow stream does, so a cache of that segment keyed by F.a
is hit whenever a key comes back before the slow streams change. In the uniform and skewed
cases the windows are small (S1 holds 40 rows, S2 4) and S1's keys follow F's distribution:
the segment is cheap and S1's and S2's updates drop most entries every batch, so a cache has
little to save. `residual-3` is the thesis' setting (§5.8.3): large, rarely updated slow
windows with uniform S1 keys and a residual S1.c + S2.c < band over the segment, so F's
pipeline builds many S1 ⋈ S2 rows per F row to keep few, for F's skewed keys to come back to."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

__all__ = ["CASES", "Case", "write_case"]


@dataclass(frozen=True)
class Case:
    name: str
    ways: int  # inputs of the join
    skew: float | None  # Zipf exponent of F's keys, None for uniform
    keys: int  # F.k and S1.k values
    fast: int  # F tuples
    ratio: int  # F tuples per S1 tuple
    deep_ratio: int  # F tuples per tuple of each later stream (S2, S3)
    window: int  # Range of every window, in time units (one F tuple per unit)
    slow_window: int | None = None  # Range of the slow streams' windows (None: `window`)
    s_keys: int = 8  # values of S1.b = S2.a (and of S2.b = S3.a)
    s1_uniform: bool = False  # S1's keys uniform even when F's are skewed
    band: int | None = None  # a residual S1.c + S2.c < band (c uniform in 0..999)


CASES = {
    "uniform-3": Case("uniform-3", 3, None, 200, 40_000, 10, 100, 400),
    "skewed-3": Case("skewed-3", 3, 1.3, 200, 40_000, 10, 100, 400),
    "uniform-4": Case("uniform-4", 4, None, 200, 40_000, 10, 100, 400),
    "skewed-4": Case("skewed-4", 4, 1.3, 200, 40_000, 10, 100, 400),
    # the thesis' setting (§5.8.3): the slow inputs' join is large and costly (a residual
    # over both), changes rarely, and F's skewed keys come back to it
    "residual-3": Case(
        "residual-3",
        3,
        1.3,
        50,
        40_000,
        40,
        400,
        400,
        slow_window=40_000,
        s_keys=8,
        s1_uniform=True,
        band=150,
    ),
}


def _keys(rng: np.random.Generator, case: Case, n: int) -> np.ndarray:
    if case.skew is None:
        return rng.integers(0, case.keys, n)
    return (rng.zipf(case.skew, n) - 1) % case.keys


def write_case(case: Case, folder: Path, scale: float = 1.0, seed: int = 1) -> Path:
    """Write the inputs and the pipeline (`@JOIN@` for the join setting)
    under `folder`; the pipeline template's path."""
    folder.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(seed)
    nf = max(100, int(case.fast * scale))
    ns = max(10, nf // case.ratio)
    ts_f = np.arange(nf)
    streams = {"F": [ts_f, _keys(rng, case, nf), rng.integers(0, 1000, nf)]}
    ts_s = np.sort(rng.integers(0, nf, ns))
    s1_keys = rng.integers(0, case.keys, ns) if case.s1_uniform else _keys(rng, case, ns)
    streams["S1"] = [ts_s, s1_keys, rng.integers(0, case.s_keys, ns)]
    nd = max(4, nf // case.deep_ratio)
    for k in range(2, case.ways):
        ts = np.sort(rng.integers(0, nf, nd))
        streams[f"S{k}"] = [ts, rng.integers(0, case.s_keys, nd), rng.integers(0, 8, nd)]
    header = "ts,a,b"
    if case.band is not None:  # drawn last: the other cases' inputs stay as they were
        header += ",c"
        for cols in streams.values():
            cols.append(rng.integers(0, 1000, len(cols[0])))
    for name, cols in streams.items():
        lines = [header] + [",".join(map(str, row)) for row in zip(*cols, strict=True)]
        (folder / f"{name}.csv").write_text("\n".join(lines) + "\n")
    names = list(streams)
    slow = case.slow_window or case.window
    frm = ", ".join(f"{n} [Range {case.window if n == 'F' else slow}]" for n in names)
    where = ["F.a = S1.a"] + [f"S{k - 1}.b = S{k}.a" for k in range(2, case.ways)]
    if case.band is not None:
        where.append(f"S1.c + S2.c < {case.band}")
    cols = ", ".join(f"{n}.b AS {n.lower()}" for n in names)
    schema = "{a: int, b: int" + (", c: int}" if case.band is not None else "}")
    stream_yaml = "".join(
        f"  {n}:\n    schema: {schema}\n    timestamp: ts\n"
        f"    source: {{type: file, path: {n}.csv, format: csv}}\n"
        for n in names
    )
    text = (
        f"version: 1\nname: bench-joins-{case.name}\ntime_unit: ms\n"
        "resources: {join: @JOIN@}\n"
        f"streams:\n{stream_yaml}"
        "queries:\n  q:\n"
        f"    cql: SELECT Istream({cols}) FROM {frm} WHERE {' AND '.join(where)}\n"
        "    sink: {type: blackhole}\n"
    )
    path = folder / "pipeline.yaml.in"
    path.write_text(text)
    return path
