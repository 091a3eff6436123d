"""cq in `cq bench kafka`'s latency phase: a pipeline run on live Kafka readers.

    python -m cq_service.bench.kafka_live PIPELINE.yaml --messages Bids=N,Asks=M

`cq run` reads each topic up to its end offsets as of opening, so it cannot follow an input
that is still being produced. Here every source is opened live (it follows its topic, as under
`cq serve`) and ends once it has delivered its given number of messages (elements and malformed
records): the whole input the bench produces. The run then ends as `cq run` does (the end of
every stream closes the open windows, the sinks flush and wait for the broker's acks).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from cq_service.compiler import compile_pipeline
from cq_service.io import open_source
from cq_service.io.base import RawChunk, SourceReader
from cq_service.runner import run_pipeline
from cq_service.spec import load_pipeline

__all__ = ["Counted", "main"]


class Counted:
    """A live reader that ends (returns None) after `messages` messages."""

    def __init__(self, reader: SourceReader, messages: int) -> None:
        self._reader, self._left = reader, messages

    def read(self) -> RawChunk | None:
        if self._left <= 0:
            return None
        chunk = self._reader.read()
        if chunk is not None:
            self._left -= len(chunk) + len(chunk.dead)
        return chunk

    def __getattr__(self, name: str) -> object:
        return getattr(self._reader, name)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("pipeline", type=Path)
    ap.add_argument("--messages", required=True, help="STREAM=N,...: messages per stream")
    args = ap.parse_args(argv)
    quota = {k: int(v) for k, v in (p.split("=") for p in args.messages.split(","))}

    def open_live(stream, time_unit, batch_rows=65_536, columns=None):
        reader = open_source(stream, time_unit, batch_rows, columns=columns, live=True)
        return Counted(reader, quota[stream.name])

    run_pipeline(compile_pipeline(load_pipeline(args.pipeline)), open_reader=open_live)
    return 0


if __name__ == "__main__":
    sys.exit(main())
