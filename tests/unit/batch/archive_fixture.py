"""Archives in the layout of `cq_service.batch.layout`, written from a pipeline's file sources
(what `cq archive` produces for files), and `cq run` outputs to compare backfills with.

`write_archive(spec, root)` writes every stream's elements as the engine reads them (late
elements left out) under ``root/<stream>/date=…/hour=…/part-0.parquet`` and returns the end of
the pipeline's input (the largest timestamp on any of its sources, where `cq run` ends).
"""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from cq_service.batch.engine_in_spark import source_table
from cq_service.batch.layout import archive_schema, hour_of, stream_dir
from cq_service.spec.model import PipelineSpec

__all__ = ["by_instant", "write_archive"]


def write_archive(spec: PipelineSpec, root: Path, files_per_hour: int = 1) -> int:
    end = np.iinfo(np.int64).min
    for s in list(spec.streams.values()) + list(spec.relations.values()):
        table = source_table(s, spec.time_unit)
        if table.num_rows:
            end = max(end, int(table.column("_ts").to_numpy().max()))
        if s.is_relation:
            continue
        schema = archive_schema(s)
        table = table.select(schema.names).cast(schema)
        groups: dict[tuple[str, str], list[int]] = defaultdict(list)
        for k, t in enumerate(table.column("_ts").to_pylist()):
            groups[hour_of(t, spec.time_unit)].append(k)
        for (date, hour), idx in groups.items():
            folder = stream_dir(root, s.name) / f"date={date}" / f"hour={hour}"
            folder.mkdir(parents=True, exist_ok=True)
            part = table.take(pa.array(idx))
            # Several files per folder, rows shuffled: readers must sort in replay order.
            order = np.random.default_rng(len(idx)).permutation(len(idx))
            part = part.take(pa.array(order))
            for f, chunk in enumerate(np.array_split(np.arange(len(idx)), files_per_hour)):
                pq.write_table(part.take(pa.array(chunk)), folder / f"part-{f}.parquet")
    return int(end)


def by_instant(elements) -> dict[int, list]:
    """Elements (ts, op, row) grouped per instant, each instant's as a sorted bag."""
    out: dict[int, list] = defaultdict(list)
    for ts, op, row in elements:
        out[ts].append((op, row))
    return {t: sorted(v, key=repr) for t, v in out.items()}
