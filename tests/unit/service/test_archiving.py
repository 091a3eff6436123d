"""The worker's archive schedule: each deployed pipeline with archive.every, when due."""

from __future__ import annotations

from types import SimpleNamespace

from cq_service.service.archiving import ArchiveSchedule
from cq_service.spec.model import ArchiveSpec


def spec(name: str, every: float | None, archived: bool = True):
    archive = ArchiveSpec(path=f"/a/{name}", every=every) if archived else None
    return SimpleNamespace(name=name, archive=archive)


def test_due_pipelines_are_archived_on_their_schedule():
    now = [1000.0]
    calls: list[str] = []

    def archive(s, catalog):
        calls.append(s.name)
        return SimpleNamespace(streams=[SimpleNamespace(rows=3, files=1, dead_letters=0)])

    pipelines = {
        "hourly": spec("hourly", 3600.0),
        "minutely": spec("minutely", 60.0),
        "on-demand": spec("on-demand", None),
        "none": spec("none", None, archived=False),
    }
    schedule = ArchiveSchedule(lambda: pipelines, catalog=None, archive=archive,
                               clock=lambda: now[0])
    schedule.tick()
    assert calls == ["hourly", "minutely"]  # first time: at once
    now[0] += 59
    schedule.tick()
    assert calls == ["hourly", "minutely"]
    now[0] += 1
    schedule.tick()
    assert calls == ["hourly", "minutely", "minutely"]
    assert schedule.last["minutely"].rows == 3 and schedule.last["minutely"].error is None


def test_a_failed_run_is_recorded_and_retried_when_due_again():
    now = [0.0]

    def archive(s, catalog):
        raise RuntimeError("Kafka is down")

    schedule = ArchiveSchedule(lambda: {"p": spec("p", 10.0)}, catalog=None, archive=archive,
                               clock=lambda: now[0])
    schedule.tick()
    assert schedule.last["p"].error == "RuntimeError: Kafka is down"
    assert schedule.due() == []
    now[0] = 10.0
    assert [s.name for s in schedule.due()] == ["p"]


def test_the_worker_owns_a_schedule(tmp_path):
    from cq_service.catalog import Catalog
    from cq_service.service.config import ServiceConfig
    from cq_service.service.worker import Worker

    catalog = Catalog(f"sqlite:///{tmp_path / 'c.db'}")
    catalog.upgrade()
    worker = Worker(ServiceConfig(catalog=catalog.url), catalog)
    worker.pipelines["p"] = spec("p", 5.0)
    assert [s.name for s in worker.archives.due()] == ["p"]
    worker.archives.start(check_seconds=3600)
    worker.archives.stop()
    catalog.close()


def test_the_last_scheduled_run_is_in_the_status(tmp_path):
    from cq_service.catalog import Catalog
    from cq_service.service.archiving import ArchiveOutcome
    from cq_service.service.config import ServiceConfig
    from cq_service.service.views import describe
    from cq_service.service.worker import Worker

    catalog = Catalog(f"sqlite:///{tmp_path / 'c.db'}")
    catalog.upgrade()
    worker = Worker(ServiceConfig(catalog=catalog.url), catalog)
    p = spec("p", 5.0)
    p.path = "/p/p.yaml"
    worker.pipelines["p"] = p
    worker.archives.last["p"] = ArchiveOutcome(started=1.0, seconds=2.5, rows=7, files=1)
    [entry] = describe(worker)["pipelines"]
    assert entry["archive"]["rows"] == 7 and entry["archive"]["error"] is None
    assert entry["spark"] is None  # not a runner-spark pipeline
    catalog.close()
