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
