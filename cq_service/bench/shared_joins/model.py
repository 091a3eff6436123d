"""The analytical response-time model of paper 002 (Hammad et al., Purdue TR 03-001, §3.1.1
and §3.2.1): m tuples arrive together on one stream, each must be checked against S_i = λ·w_i
tuples of the other stream for window w_i, one pair test costs t_p, selectivity α = 1.

- LWO, equation (1): AvgRT(Q_i) = (t_p/2)·((S_i + 1) + (m − 1)·S_max).
- Alone (footnote 2: equation (1) with S_max replaced by S_i): (t_p/2)·(m·S_i + 1).
  The extracted text prints it as "(1/2)(mS_i + 1)²"; that is an extraction error — the
  footnote's substitution gives the formula above, and so do the brief's values.
- SWF, equation (2): AvgRT'(Q_i) = m·S_{i−1}·t_p + ((m + 1)/2)·(S_i − S_{i−1})·t_p, S_0 = 0.

The two equations measure differently: (1) averages over output tuples, each released as it is
produced (the j-th pair of a scan at j·t_p), while (2) counts an outer tuple's results at the end
of its scan of w_i (SWF holds them until then). So SWF's value for w_1 (2.55e−5 s) is slightly
above "alone" (2.5005e−5 s) although SWF serves w_1 first.

The paper gives no formula for Greedy (§3.3; MQT in the VLDB'03 version): its order depends on
the partial windows' sizes, and the report only compares it experimentally (§5).

With the paper's parameters (t_p = 0.01 µs, λ = 100/s, m = 50, Uniform windows 1, 100, …, 600 s)
the values for w = 1 s are LWO 0.0147, alone 2.5005e−5, SWF 2.55e−5, and for w = 600 s LWO 0.0150,
alone 0.0150, SWF 0.02755 seconds.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

__all__ = [
    "PAPER",
    "ModelParams",
    "alone_avg_rt",
    "buffer_sizes",
    "lwo_avg_rt",
    "model_table",
    "swf_avg_rt",
]


@dataclass(frozen=True)
class ModelParams:
    """t_p: seconds per pair test; lam: tuples per second per stream; m: tuples arriving together."""

    t_p: float = 0.01e-6
    lam: float = 100.0
    m: int = 50


PAPER = ModelParams()


def buffer_sizes(windows: Sequence[float], lam: float) -> list[float]:
    """S_i = λ·w_i: the tuples of one stream inside window w_i (seconds), in the given order."""
    if any(w <= 0 for w in windows):
        raise ValueError(f"windows must be positive: {list(windows)}")
    return [lam * w for w in windows]


def _sorted(windows: Sequence[float]) -> list[float]:
    ws = list(windows)
    if ws != sorted(ws) or len(set(ws)) != len(ws):
        raise ValueError(f"windows must be distinct and increasing: {ws}")
    return ws


def lwo_avg_rt(windows: Sequence[float], p: ModelParams = PAPER) -> list[float]:
    """Equation (1): the average response time (seconds) of each window's query under LWO."""
    s = buffer_sizes(_sorted(windows), p.lam)
    s_max = s[-1]
    return [p.t_p / 2 * ((si + 1) + (p.m - 1) * s_max) for si in s]


def alone_avg_rt(windows: Sequence[float], p: ModelParams = PAPER) -> list[float]:
    """Footnote 2: each query run in isolation, (t_p/2)·(m·S_i + 1)."""
    return [p.t_p / 2 * (p.m * si + 1) for si in buffer_sizes(_sorted(windows), p.lam)]


def swf_avg_rt(windows: Sequence[float], p: ModelParams = PAPER) -> list[float]:
    """Equation (2): m·S_{i−1}·t_p + ((m + 1)/2)·(S_i − S_{i−1})·t_p, with S_0 = 0."""
    s = [0.0, *buffer_sizes(_sorted(windows), p.lam)]
    return [
        p.m * s[i - 1] * p.t_p + (p.m + 1) / 2 * (s[i] - s[i - 1]) * p.t_p for i in range(1, len(s))
    ]


def model_table(windows: Sequence[float], p: ModelParams = PAPER) -> dict[str, dict[float, float]]:
    """{"lwo" | "alone" | "swf": {window: seconds}}, for the bench's JSON and plots."""
    ws = _sorted(windows)
    return {
        name: dict(zip(ws, f(ws, p), strict=True))
        for name, f in (("lwo", lwo_avg_rt), ("alone", alone_avg_rt), ("swf", swf_avg_rt))
    }
