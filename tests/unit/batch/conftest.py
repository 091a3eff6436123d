"""A local SparkSession shared by the backfill tests (started once per test process)."""

from __future__ import annotations

import pytest


@pytest.fixture(scope="session")
def spark():
    from cq_service.batch.backfill import spark_session

    session = spark_session(2)
    session.sparkContext.setLogLevel("ERROR")
    yield session
    session.stop()
