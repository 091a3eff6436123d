"""The source of SysStream (spec/sys_stream.py): nothing to read from outside.

Its elements are the engine's own statistics, which the engine publishes as its clock moves
(engine/operators/sys_stream.py). This reader only carries the publishing interval to the
engine and ends at once; the engine recognises it by `statistics_interval`.
"""

from __future__ import annotations

from collections.abc import Collection

from cq_service.io.base import RawChunk, SourceReader, register_source
from cq_service.spec.model import StreamSpec
from cq_service.spec.sys_stream import SYSTEM_SOURCE

__all__ = ["StatisticsReader"]


@register_source(SYSTEM_SOURCE)
class StatisticsReader(SourceReader):
    def __init__(
        self,
        stream: StreamSpec,
        time_unit: str,
        batch_rows: int = 65536,
        columns: Collection[str] | None = None,
    ):
        super().__init__(stream, time_unit, batch_rows, columns)
        self.statistics_interval = int(stream.source.options["interval"])

    def read(self) -> RawChunk | None:
        return None
