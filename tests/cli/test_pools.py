"""`tidal pools` and `tidal pool NAME` against a live server: the figures, the borrower's own jobs only, and a pool
that never lent to you as a one-line not-found."""

from __future__ import annotations

import pytest

from pools.models import Pool
from quotas.models import ResourceFlavor
from tests.jobs.conftest import admit, submit

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def pool(demo_cluster):
    a100 = ResourceFlavor.objects.get(name="nvidia-a100-40gb")
    return Pool.objects.create(name="chat", cluster=demo_cluster, flavor=a100, node_pattern="rack-b2-*", demand=4,
                               headroom_percent=0, headroom_floor=2)


def test_pools_and_pool_show_the_figures_and_your_jobs(cli, tenant, demo_cluster, pool):
    a100 = ResourceFlavor.objects.get(name="nvidia-a100-40gb")
    job = submit(tenant, a100, name="night-run", priority="preemptible")
    admit(job, demo_cluster, ["rack-b2-n1"])
    listed = cli("pools", user="viewer")
    assert listed.code == 0, listed.err
    header, row = listed.out.splitlines()[:2]
    assert header.split()[:8] == ["POOL", "CLUSTER", "FLAVOR", "DEVICES", "DEMAND", "HEADROOM", "LENT", "USED"]
    assert row.split()[:8] == ["chat", "sim-1", "nvidia-a100-40gb", "16", "4", "2", "10", "8"]
    shown = cli("pool", "chat", user="viewer")
    assert shown.code == 0 and "night-run" in shown.out
    assert cli("pool", "chat", "--json", user="viewer").json()["jobs"][0]["id"] == job.pk


def test_a_pool_that_never_lent_to_you_is_not_found(cli, pool):
    assert cli("pools").out.strip() == "No pool lent to your projects in the last 24 h."
    missing = cli("pool", "chat")
    assert missing.code == 1 and "Pool chat not found" in missing.err


def test_pool_tells_what_borrowing_saved_and_the_interference(cli, tenant, demo_cluster, pool):
    import time
    from datetime import UTC, datetime
    from decimal import Decimal

    from costs import services
    from costs.models import DevicePrice, TidalRate, UsageSegment
    from jobs.models import Attempt
    from pools import interference

    a100 = ResourceFlavor.objects.get(name="nvidia-a100-40gb")
    since = datetime(2025, 1, 1, tzinfo=UTC)
    DevicePrice.objects.filter(flavor=a100).delete()
    services.price_save(actor=None, price=DevicePrice(flavor=a100, per_device_hour=Decimal("1.50"),
                                                      effective_from=since), backdate=True)
    services.price_save(actor=None, price=TidalRate(factor=Decimal("0.2"), effective_from=since), backdate=True)
    job = submit(tenant, a100, name="night-run", priority="normal")
    admit(job, demo_cluster, ["rack-b2-n1"])
    Attempt.objects.filter(job=job).update(placement=[{"role": "worker", "index": 0, "node": "rack-b2-n1",
                                                       "devices": 8, "pool": "chat"}], tidal_devices=8)
    end = int(time.time()) - 60
    UsageSegment.objects.create(attempt_number=1, job=job, organization=tenant.organization, project=tenant.project,
                                cluster=demo_cluster, flavor=a100, priority_class=job.priority_class, stage="other",
                                devices=8, cpu_millis=0, tidal_devices=8, start_ts=end - 3600, end_ts=end)
    interference.report_latency(pool, ["rack-b2-n2"], p99_ms=180.0, slo_ms=100.0)
    shown = cli("pool", "chat", user="viewer")
    assert shown.code == 0, shown.err
    # 8 devices for an hour at 1.50: 12.00 at the normal class's rate, 2.40 at the tidal rate (0.2).
    assert ("Training ran 8.0 device-hours on it: 2.40 USD at the tidal rate, 12.00 at the normal rate; borrowing "
            "saved 9.60 USD.") in shown.out
    assert "Serving p99 180 ms over its SLO 100 ms at " in shown.out
    assert "on rack-b2-n2: nothing lent there" in shown.out
