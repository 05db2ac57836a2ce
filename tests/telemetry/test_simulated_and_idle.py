"""The simulated clusters' telemetry (what `make run` shows with no Prometheus) and the idle-GPU rule."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from jobs.states import State
from telemetry import simulated, store
from telemetry.models import AttemptGpu, AttemptTelemetry
from tests.jobs.conftest import run, submit
from tests.telemetry.conftest import points
from tracking.models import Alert, AlertRule


@pytest.fixture
def started(tenant, inventory):
    """A job of two 8-GPU replicas running on the simulated cluster for ten minutes."""
    def start(minutes=10, **labels):
        job = submit(tenant, inventory["h100"], replicas=2, devices=8, labels=labels)
        return run(job, inventory["cluster"], ["r1-n1", "r1-n2"], now=timezone.now() - timedelta(minutes=minutes))
    return start


def test_a_busy_simulated_job_reads_like_a_real_one(started):
    job = started()
    assert simulated.tick() > 0
    gpus = list(AttemptGpu.objects.filter(attempt=job.current_attempt).order_by("ordinal"))
    assert [(g.node, g.gpu) for g in gpus] == [("r1-n1", i) for i in range(8)] + [("r1-n2", i) for i in range(8)]
    sm = points(job, "system/gpu.9.sm_active")
    utilization = points(job, "system/gpu.9.utilization")
    assert len(sm) == 120  # ten minutes at one sample each 5 s (the most one tick makes)
    # High utilization but a lower SM activity, as on real clusters.
    assert min(utilization.values()) > 90 and 20 < sum(sm.values()) / len(sm) < 75
    tally = AttemptTelemetry.objects.get(attempt=job.current_attempt)
    assert 20 < tally.sm_active < 75 and tally.idle_since is None
    # The next tick continues where this one stopped: nothing twice.
    simulated.tick(timezone.now() + timedelta(seconds=10))
    assert len(points(job, "system/gpu.9.sm_active")) in (121, 122, 123)


def test_an_idle_job_gets_an_alert_and_a_project_that_opted_in_stops_it(tenant, started):
    AlertRule.objects.create(project=tenant.project, rule="gpu_idle", params={"minutes": 5}, action="stop")
    busy = started()
    idle = started(**{simulated.IDLE_LABEL: "true"})

    simulated.tick()

    alert = Alert.objects.get(rule="gpu_idle")
    assert alert.run.job_id == idle.pk and "idle" in alert.message
    idle.refresh_from_db()
    busy.refresh_from_db()
    assert idle.state == State.CANCELLED and busy.state == State.RUNNING
    assert "gpu_idle" in idle.events.last().reason


def test_idle_shorter_than_the_window_is_no_alert_and_activity_clears_it(tenant, started):
    job = started(minutes=3, **{simulated.IDLE_LABEL: "true"})  # the default window: 15 minutes
    simulated.tick()
    tally = AttemptTelemetry.objects.get(attempt=job.current_attempt)
    assert tally.idle_since is not None and not Alert.objects.exists()

    AlertRule.objects.create(project=tenant.project, rule="gpu_idle", params={"minutes": 1})
    simulated.tick(timezone.now() + timedelta(seconds=10))
    assert Alert.objects.get(rule="gpu_idle").resolved_at is None
    job.labels = {}
    job.save(update_fields=["labels"])  # the job starts working
    simulated.tick(timezone.now() + timedelta(seconds=20))
    alert = Alert.objects.get(rule="gpu_idle")
    assert alert.resolved_at is not None and alert.resolution == "cleared"
    assert AttemptTelemetry.objects.get(attempt=job.current_attempt).idle_since is None


def test_idle_follows_the_busiest_gpu():
    from datetime import UTC, datetime

    from telemetry.fields import Sample

    def s(gpu, t, v):
        return Sample("n", gpu, "", "", "", "sm_active", t, v)

    # Both GPUs idle from t=10; GPU 1 works at t=30; both idle again from t=40.
    readings = [s(0, 10, 1), s(1, 10, 2), s(0, 20, 1), s(1, 20, 1), s(0, 30, 1), s(1, 30, 50), s(0, 40, 0),
                s(1, 40, 3)]
    assert store.idle_after(None, readings, 5.0) == datetime.fromtimestamp(40, tz=UTC)
    assert store.idle_after(None, readings[:4], 5.0) == datetime.fromtimestamp(10, tz=UTC)
    assert store.idle_after(None, readings, 60.0) == datetime.fromtimestamp(10, tz=UTC)
