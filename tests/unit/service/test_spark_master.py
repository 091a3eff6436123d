"""The worker's Spark master (`spark_master`, CQ_SPARK_MASTER): the runner-spark jobs and the
scheduled archives get their sessions on it (tests/integration/test_spark_cluster.py runs them
on a real cluster)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from cq_service.service.config import ServiceConfig, load_config


def test_the_setting_comes_from_the_environment_and_defaults_to_local(tmp_path):
    assert load_config(environ={}).spark_master == ""
    config = load_config(environ={"CQ_SPARK_MASTER": "spark://10.0.0.5:7077"})
    assert config.spark_master == "spark://10.0.0.5:7077"
    (tmp_path / "w.yaml").write_text("spark_master: spark://h:7077\n")
    assert load_config(tmp_path / "w.yaml", environ={}).spark_master == "spark://h:7077"


@pytest.mark.parametrize("master", ["", "spark://127.0.0.1:7077"])
def test_the_worker_hands_the_master_to_its_spark_jobs_and_archives(tmp_path, monkeypatch,
                                                                    master):
    import cq_service.batch.archive as archive
    import cq_service.batch.streaming as streaming
    from cq_service.catalog import Catalog
    from cq_service.service.worker import Worker

    asked: list[tuple[str, str | None]] = []
    monkeypatch.setattr(streaming, "spark_session",
                        lambda master=None, partitions=2: asked.append(("job", master)))

    def archive_pipeline(spec, catalog, *, master=None, **_):
        asked.append(("archive", master))
        return SimpleNamespace(streams=[])

    monkeypatch.setattr(archive, "archive_pipeline", archive_pipeline)
    catalog = Catalog(f"sqlite:///{tmp_path / 'c.db'}")
    catalog.upgrade()
    try:
        worker = Worker(ServiceConfig(catalog=catalog.url, spark_master=master), catalog)
        worker.spark_jobs._spark()
        worker.archives._run(SimpleNamespace(name="p"))
    finally:
        catalog.close()
    assert asked == [("job", master or None), ("archive", master or None)]
