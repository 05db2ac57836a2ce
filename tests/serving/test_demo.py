"""The demo's service: its requests/s follow the synthetic day, so it scales with the day and the demo pool lends at
night and takes it back at the peak (the tide on the Pools page is the service's)."""

from __future__ import annotations

import time
from datetime import UTC, datetime
from unittest import mock

from clusters.demo import seed_cluster
from clusters.models import Node
from jobs.models import Job
from pools import demo as pool_demo
from quotas.demo import seed_quotas
from serving import demo, scaler
from serving.models import Service
from tenancy.demo import seed_tenants
from tests.conftest import ensure_default_priority_classes


def test_the_demo_service_scales_with_the_day_and_the_pool_follows_it(db, django_capture_on_commit_callbacks):
    from jobs.loop import forget_forecasts, run_once

    ensure_default_priority_classes()
    seed_tenants()
    seed_cluster()
    seed_quotas()
    pool_demo.seed_pool()
    service = demo.seed_service()
    assert demo.seed_service() == service and Service.objects.count() == 1  # once
    assert pool_demo.seed_borrower() == 1
    Node.objects.filter(rack__in=["rack-b1", "rack-b2"]).update(cordoned=True)  # the demo's other A100 work
    forget_forecasts()
    day = pool_demo.DAY_SECONDS
    clock = time.time()

    def at_hour(hour, ticks=1):
        nonlocal clock
        for _ in range(ticks):
            clock += 61  # over a minute apart: each may double the replicas
            with mock.patch.object(demo.time, "time", return_value=(clock // day) * day + hour / 24 * day):
                demo.traffic()
            Service.objects.filter(pk=service.pk).update(metric_at=datetime.fromtimestamp(clock, UTC))
            with django_capture_on_commit_callbacks(execute=True):
                scaler.tick(clock)
                run_once()
        service.refresh_from_db()
        return Job.objects.get(name=pool_demo.JOB)

    night = at_hour(3)
    assert service.replicas == 2  # under a fifth of the peak: 2 replicas of 2 devices, 12 lent
    assert night.state in ("admitted", "dispatching", "running")
    assert {a["node"] for a in night.current_attempt.placement} <= {"rack-s1-n1", "rack-s1-n2"}
    peak = at_hour(15, ticks=4)
    assert service.replicas == 8  # all 16 devices
    assert peak.state in ("preempted", "queued")
    assert peak.events.filter(reason__contains="pool chat took back").exists()
