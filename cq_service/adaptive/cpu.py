"""What the engine's operators cost in CPU, per read and per row, as calibrated on this machine.

The paper prices elementary steps (a hash, a heap operation, a predicate) one by one. The
engine works on Arrow batches, where those steps are not separable, so its model is per batch
and per row (the project's own): an operator of kind K spends

    C = per_read[K] · reads + per_in[K] · rows in + per_out[K] · rows out
        + per_pair[K] · candidate pairs

seconds, where reads are the batches its stream sources read (each read sends a batch and a
heartbeat down the plan, and every operator it reaches runs at least once for it: the Python
and Arrow calls of a run cost the same for 10 rows as for 1 000), a relation's rows are its
`+` and `−` deltas and candidate pairs are a nested-loop join's (each arrival against the other
side's contents). `cq calibrate`
(`adaptive.calibrate`) measures the constants by running each kind of operator over Poisson
streams and fitting them by least squares; they are read from the file it writes, else from
the constants measured on the project's reference machine (``costs.json`` beside this module).
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass, field
from pathlib import Path

__all__ = ["BATCH_ROWS", "DEFAULT_PATH", "EngineCosts", "KindCost", "user_path"]

DEFAULT_PATH = Path(__file__).with_name("costs.json")
BATCH_ROWS = 1_024  # rows per source read when nothing else is known (`cq explain --costs`)


def user_path() -> Path:
    """Where `cq calibrate` writes: $CQ_COSTS, else ~/.config/cq-service/costs.json."""
    env = os.environ.get("CQ_COSTS")
    if env:
        return Path(env)
    base = Path(os.environ.get("XDG_CONFIG_HOME") or Path.home() / ".config")
    return base / "cq-service" / "costs.json"


@dataclass(frozen=True)
class KindCost:
    """Seconds per row in, per row out, per candidate pair and per source read reaching the
    operator (its fixed cost per batch)."""

    per_in: float = 1e-6
    per_out: float = 1e-6
    per_pair: float = 0.0
    per_read: float = 0.0


@dataclass(frozen=True)
class EngineCosts:
    """Per-read and per-row constants of each kind of plan node (the logical operator's class
    name)."""

    kinds: dict[str, KindCost] = field(default_factory=dict)
    machine: str = ""  # where they were measured

    def cpu(
        self, kind: str, rows_in: float, rows_out: float, pairs: float = 0.0, reads: float = 0.0
    ) -> float:
        """Seconds of CPU for the given rows and source reads (per time unit when they are
        rates)."""
        c = self.kinds.get(kind, KindCost())
        return c.per_in * rows_in + c.per_out * rows_out + c.per_pair * pairs + c.per_read * reads

    @classmethod
    def load(cls, path: Path | None = None) -> EngineCosts:
        """The calibrated constants: `path`, else the user's file, else the shipped ones."""
        for p in (path,) if path else (user_path(), DEFAULT_PATH):
            if p.exists():
                return cls.from_json(json.loads(p.read_text()))
        return cls()

    @classmethod
    def from_json(cls, data: dict) -> EngineCosts:
        kinds = {k: KindCost(**v) for k, v in data.get("kinds", {}).items()}
        return cls(kinds, data.get("machine", ""))

    def to_json(self) -> dict:
        return {"machine": self.machine, "kinds": {k: asdict(v) for k, v in self.kinds.items()}}

    def save(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(self.to_json(), indent=2) + "\n")
