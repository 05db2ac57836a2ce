"""The demo's pool: a synthetic day (low at night, a daytime peak), seeded once, whose demand the embedded loop puts
and whose preemptible borrower runs at night and is given back at the peak."""

from __future__ import annotations

from unittest import mock

from clusters.demo import seed_cluster
from clusters.models import Node
from jobs.models import Job
from pools import demo
from pools.models import Pool
from quotas.demo import seed_quotas
from tenancy.demo import seed_tenants
from tests.conftest import ensure_default_priority_classes


def test_the_synthetic_day_is_low_at_night_and_peaks_in_the_afternoon():
    night, peak = demo.demand_share(3.0), demo.demand_share(15.0)
    assert night < 0.2 < 0.85 < peak
    assert all(0.0 <= demo.demand_share(h / 4) <= 1.0 for h in range(96))
    assert demo.demo_hour(demo.DAY_SECONDS * 10 + demo.DAY_SECONDS / 2) == 12.0  # time compressed: a day a cycle


def test_the_demo_pool_lends_at_night_and_takes_it_back_at_the_peak(db, django_capture_on_commit_callbacks):
    from jobs.loop import forget_forecasts, run_once

    ensure_default_priority_classes()
    seed_tenants()
    seed_cluster()
    seed_quotas()
    pool = demo.seed_pool()
    assert demo.seed_pool() == pool and Pool.objects.count() == 1  # once
    assert demo.seed_borrower() == 1 and demo.seed_borrower() == 0
    Node.objects.filter(rack__in=["rack-b1", "rack-b2"]).update(cordoned=True)  # the demo's other A100 work
    forget_forecasts()

    def at_hour(hour):
        with mock.patch.object(demo.time, "time", return_value=hour / 24 * demo.DAY_SECONDS):
            demo.tide()
        with django_capture_on_commit_callbacks(execute=True):
            run_once()
        return Job.objects.get(name=demo.JOB)

    night = at_hour(3)
    assert Pool.objects.get().demand == round(16 * demo.demand_share(3))
    assert night.state in ("admitted", "dispatching", "running")
    assert {a["node"] for a in night.current_attempt.placement} <= {"rack-s1-n1", "rack-s1-n2"}
    peak = at_hour(15)
    assert Pool.objects.get().demand >= 14  # with its headroom, all 16: the pool lends nothing
    assert peak.state in ("preempted", "queued")
    assert peak.events.filter(reason__contains="pool chat took back").exists()
