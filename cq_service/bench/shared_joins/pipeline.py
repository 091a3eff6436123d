"""The pipeline file of one shared-join run (paper 002 §5): seven queries joining A and B on
the key, each with its own window, and the shared-join policy in `resources`.

Each query is ``SELECT Istream(*) FROM A [Range T], B [Range T] WHERE A.k = B.k``: the
windowed join is a relation, Istream makes it the stream of new pairs, each emitted at
max(ts(a), ts(b)) — the paper's output order (§3). The paper's window condition is strict,
|ts(a) − ts(b)| < w (§3.1.1), and a CQL ``[Range T]`` holds timestamps in [τ − T, τ]
(DESIGN §4), so T = W − 1 for a window of W time units. Each query writes
``out/<name>.jsonl``; queries are named ``w<seconds>`` after their paper window.

``resources: {shared_join: mqt | swf | lwo | off}`` (DESIGN §3.1) picks the policy; ``off``
plans each query alone (the paper's "isolated execution"). The value is quoted: a bare
``off`` is a YAML boolean, which the spec loader rejects.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from cq_service.spec.model import SHARED_JOINS

__all__ = ["POLICIES", "pipeline_yaml", "query_cql", "query_name"]

POLICIES = SHARED_JOINS


def query_name(seconds: float) -> str:
    """``w600`` for 600 s, ``w0_5`` for 0.5 s."""
    return "w" + f"{seconds:g}".replace(".", "_")


def query_cql(window_units: int) -> str:
    """The query of a window of `window_units` time units (pairs less than that apart)."""
    if window_units < 1:
        raise ValueError(f"a window is at least one time unit (got {window_units})")
    t = window_units - 1
    return f"SELECT Istream(*) FROM A [Range {t}], B [Range {t}] WHERE A.k = B.k"


def pipeline_yaml(
    windows: Sequence[float],
    window_units: Sequence[int],
    policy: str,
    *,
    name: str = "shared-joins",
    time_unit: str = "ms",
    sources: Mapping[str, str] | None = None,
    out_dir: str = "out",
    sink: str = "file",
) -> str:
    """The pipeline text: streams A and B read `sources` ({stream: CSV path relative to the
    file}, default ``A.csv`` and ``B.csv``); one query per window; `sink` is ``file`` (jsonl
    under `out_dir`) or ``blackhole``."""
    if policy not in POLICIES:
        raise ValueError(f"unknown shared_join policy {policy!r} (known: {', '.join(POLICIES)})")
    if len(windows) != len(window_units) or not windows:
        raise ValueError("one window in time units per window in seconds")
    if sink not in ("file", "blackhole"):
        raise ValueError(f"sink is file or blackhole (got {sink!r})")
    paths = dict(sources or {"A": "A.csv", "B": "B.csv"})
    lines = [
        "version: 1",
        f"name: {name}",
        f"time_unit: {time_unit}",
        f'resources: {{shared_join: "{policy}"}}',
        "streams:",
    ]
    for s in ("A", "B"):
        lines.append(
            f"  {s}: {{schema: {{k: int, v: int}}, timestamp: ts, "
            f"source: {{type: file, path: {paths[s]}, format: csv}}}}"
        )
    lines.append("queries:")
    for seconds, units in zip(windows, window_units, strict=True):
        q = query_name(seconds)
        target = (
            f"{{type: file, path: {out_dir}/{q}.jsonl, format: jsonl}}"
            if sink == "file"
            else "{type: blackhole}"
        )
        lines += [f"  {q}:", f"    cql: {query_cql(units)}", f"    sink: {target}"]
    return "\n".join(lines) + "\n"
