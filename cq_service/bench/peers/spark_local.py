"""The Spark session every Spark peer of the benchmarks runs in (NEXMark, Kafka, many groups):
`local[2]` like cq's 2 cores, two shuffle partitions, UTC, no UI or progress bars, errors only
in the log. Imported by the peer scripts, which run in the project's venv."""

from __future__ import annotations

from pyspark.sql import SparkSession

__all__ = ["local_session"]


def local_session(app: str, memory: str = "8g", config: dict[str, str] | None = None) -> SparkSession:
    """A local[2] session named `app` with `memory` for the driver and `config` on top."""
    builder = (SparkSession.builder
               .master("local[2]")
               .appName(app)
               .config("spark.driver.memory", memory)
               .config("spark.ui.enabled", "false")
               .config("spark.ui.showConsoleProgress", "false")
               .config("spark.sql.shuffle.partitions", "2")
               .config("spark.sql.session.timeZone", "UTC"))  # fmt: skip
    for key, value in (config or {}).items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    return spark
