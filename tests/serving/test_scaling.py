"""Services in the platform: they scale up at once and down after the window; their replicas are the pool's demand,
so a scale-up takes lent devices back from training (the give-back) and the replicas then get them."""

from __future__ import annotations

import time
from datetime import UTC, datetime

from jobs.models import Job
from pools.models import GiveBack, Pool
from serving import scaler, services
from serving.models import ScaleEvent, Service
from tests.jobs.conftest import submit


def test_a_service_scales_up_takes_its_devices_back_from_training_and_its_replicas_get_them(
        tenant, inventory, pool, service, cycle, django_capture_on_commit_callbacks):
    t0 = time.time() - 120
    ScaleEvent.objects.filter(service=service).update(at=datetime.fromtimestamp(t0 - 1, UTC))  # created before t0
    borrower = submit(tenant, inventory["a100"], name="borrower", priority="preemptible", devices=8)
    cycle()  # the pool lends 16 - 4 (one replica of 4 devices): the borrower runs on it
    borrower.refresh_from_db()
    assert borrower.state in ("admitted", "dispatching", "running")
    assert {a["node"] for a in borrower.current_attempt.placement} <= {"a-n1", "a-n2"}

    scaler.tick(t0)  # no metric yet: kept at 1, and it fits beside the borrower
    service.refresh_from_db()
    assert (service.replicas, service.ready_replicas, service.state) == (1, 1, "running")

    services.metric_set(service=service, value=40.0)  # 40 requests/s at 10 a replica: 4 wanted
    with django_capture_on_commit_callbacks(execute=True):
        scaler.tick(t0 + 1)
    service.refresh_from_db()
    assert service.replicas == 2  # up at once, but at most doubling within a minute
    with django_capture_on_commit_callbacks(execute=True):
        scaler.tick(t0 + 62)
    service.refresh_from_db()
    assert service.replicas == 4 and service.ready_replicas < 4  # the borrower still holds 8 of the 16
    assert [e.after for e in ScaleEvent.objects.filter(service=service).order_by("id")] == [1, 2, 4]

    cycle()  # the pool's demand is now 16: the scheduler takes the borrower's devices back
    borrower.refresh_from_db()
    assert borrower.state in ("preempted", "queued")
    assert borrower.events.filter(reason__contains="pool chat took back").exists()
    scaler.tick(t0 + 63)
    service.refresh_from_db()
    assert (service.ready_replicas, service.state) == (4, "running")
    cycle()
    back = GiveBack.objects.get(pool=pool)
    assert back.freed_at is not None
    assert back.started_at == datetime.fromtimestamp(t0 + 62, UTC)  # from the scale-up that caused it

    # Down only after the 300 s window: the last recommendation of 4 (at t0 + 63) holds the replicas until it is
    # 300 s old, at t0 + 363.
    services.metric_set(service=service, value=0.0)
    for at, expected in ((t0 + 100, 4), (t0 + 362, 4), (t0 + 363, 1)):
        Service.objects.filter(pk=service.pk).update(metric_at=datetime.fromtimestamp(at, UTC))
        scaler.tick(at)
        service.refresh_from_db()
        assert service.replicas == expected, at
    assert "the highest of the last 300 s" in ScaleEvent.objects.filter(service=service).latest("id").reason
    assert Job.objects.get(pk=borrower.pk).pk == borrower.pk


def test_the_pool_lends_what_its_services_leave(tenant, inventory, pool, service):
    from django.utils import timezone

    from jobs.snapshot import build_snapshot

    Service.objects.filter(pk=service.pk).update(replicas=3)  # 12 devices
    snap = build_snapshot(timezone.now().timestamp()).snapshot
    assert [(p.name, p.lendable) for p in snap.pools] == [("chat", 4)]
    services.service_delete(actor=tenant.users["member"], service=service)
    snap = build_snapshot(timezone.now().timestamp()).snapshot
    assert [(p.name, p.lendable) for p in snap.pools] == [("chat", 16)]
    assert Pool.objects.get().demand is None  # the demand API was never a source


def test_a_stale_or_missing_metric_keeps_the_replicas_and_says_why(tenant, pool, service):
    now = time.time()
    scaler.tick(now)
    services.metric_set(service=service, value=40.0)
    Service.objects.filter(pk=service.pk).update(metric_at=datetime.fromtimestamp(now - 181, UTC))
    assert scaler.tick(now) == 0
    sample = service.samples.order_by("-at", "-id").first()
    assert sample.recommendation is None and sample.replicas == 1
    service.refresh_from_db()
    assert service.scale_reason == "the last metric is 181 s old: kept 1"


def test_ready_replicas_fit_one_per_node():
    free = [8, 3, 8]
    assert scaler.fit(free, 4, 10) == 4 and free == [0, 3, 0]
    assert scaler.fit([8, 8], 4, 1) == 1


def test_the_autoscaler_runs_in_beat_and_in_embedded_mode():
    from django.conf import settings

    from core.embedded import EMBEDDED_LOOPS
    from mlplatform.celery import app

    assert {"serving-autoscale", "serving-demo-traffic"} <= {loop.name for loop in EMBEDDED_LOOPS}
    task = settings.CELERY_BEAT_SCHEDULE["serving-autoscale"]["task"]
    app.loader.import_default_modules()
    assert task in app.tasks


def test_samples_older_than_a_day_are_forgotten(tenant, pool, service):
    from datetime import timedelta

    from serving.models import ServiceSample

    now = time.time()
    old = datetime.fromtimestamp(now, UTC) - timedelta(hours=24, seconds=1)
    ServiceSample.objects.create(service=service, at=old, replicas=1, ready=0)
    scaler.tick(now)
    assert not ServiceSample.objects.filter(at=old).exists()
    assert ServiceSample.objects.filter(service=service).count() == 1


def test_a_prometheus_source_reads_the_sum_of_the_last_values_or_keeps_the_replicas(tenant, pool, service,
                                                                                     settings, monkeypatch):
    from telemetry import prometheus

    settings.TIDAL = {**settings.TIDAL, "PROMETHEUS_URL": "http://prometheus:9090"}
    Service.objects.filter(pk=service.pk).update(source="prometheus", query="sum(rate(requests_total[1m]))")
    answers = iter([[{"values": [[0, "5"], [15, "12.5"]]}, {"values": [[15, "7.5"]]}],  # 20 in all: 2 replicas
                    prometheus.PrometheusError("Prometheus at http://prometheus:9090 could not be reached")])

    def query_range(url, query, start, end, step, **kwargs):
        answer = next(answers)
        if isinstance(answer, Exception):
            raise answer
        assert query == "sum(rate(requests_total[1m]))" and end - start == 60
        return answer

    monkeypatch.setattr(prometheus, "query_range", query_range)
    now = time.time()
    scaler.tick(now)
    service.refresh_from_db()
    assert (service.replicas, service.metric_value) == (2, 20.0)
    scaler.tick(now + 5)
    service.refresh_from_db()
    assert (service.replicas, service.scale_reason) == (
        2, "Prometheus at http://prometheus:9090 could not be reached: kept 2")
