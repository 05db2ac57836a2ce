"""Pools in the platform: the snapshot marks pool nodes and what each pool lends, the loop lends only to
preemptible work, takes it back when demand rises and records each give-back."""

from __future__ import annotations

from datetime import timedelta

from django.utils import timezone

from clusters.models import Node
from jobs.models import Job
from jobs.snapshot import build_snapshot
from pools import services
from pools.models import GiveBack, PoolSample
from tests.jobs.conftest import submit


def test_the_snapshot_marks_pool_nodes_and_what_the_pool_lends(pool):
    services.demand_set(pool=pool, devices=4)
    Node.objects.filter(name="a-n2").update(foreign_used=6)  # serving pods Tidal did not create: demand too
    snap = build_snapshot(timezone.now().timestamp()).snapshot
    pooled = {n.name: n.pool for n in snap.nodes if n.pool}
    assert pooled == {"sim/a-n1": "chat", "sim/a-n2": "chat"}  # the a100 nodes; not the h100 ones
    assert [(p.name, p.lendable) for p in snap.pools] == [("chat", 10)]  # 16 - max(4, 6)


def test_devices_a_service_replica_holds_stay_the_pools_and_count_as_no_foreign_demand(pool):
    services.demand_set(pool=pool, devices=4)
    # Node sync found a replica of one of Tidal's services holding 4 devices of a-n2: the pool still has 16 devices
    # (the replica is serving's own demand, which the services' source counts), and nothing is placed on them.
    Node.objects.filter(name="a-n2").update(serving_used=4)
    snap = build_snapshot(timezone.now().timestamp()).snapshot
    a_n2, = (n for n in snap.nodes if n.name == "sim/a-n2")
    assert (a_n2.devices, a_n2.serving, a_n2.foreign) == (4, 4, 0)
    assert [(p.name, p.lendable) for p in snap.pools] == [("chat", 12)]  # 16 - 4 demanded, not 16 - 4 - 4


def test_only_preemptible_work_borrows_and_a_rising_demand_takes_it_back(tenant, inventory, pool, cycle):
    rigid = submit(tenant, inventory["a100"], name="rigid")
    lent = submit(tenant, inventory["a100"], name="lent", priority="preemptible")
    cycle()
    rigid.refresh_from_db()
    lent.refresh_from_db()
    assert rigid.state == "queued" and "pool chat" in rigid.wait_reason
    assert lent.state in ("admitted", "dispatching", "running")

    services.demand_set(pool=pool, devices=16)
    cycle()  # the pool takes its capacity back
    lent.refresh_from_db()
    assert lent.state in ("preempted", "queued")
    assert Job.objects.get(pk=lent.pk).events.filter(to_state="preempted",
                                                     reason__contains="pool chat took back").exists()
    cycle()  # the next cycle sees the devices free: the give-back ends
    back = GiveBack.objects.get(pool=pool)
    assert back.devices == 8 and back.freed_at is not None
    assert back.started_at == pool.__class__.objects.get(pk=pool.pk).demand_at
    assert PoolSample.objects.filter(pool=pool).count() == 1  # once a minute at most


def test_a_pool_lends_nothing_while_lending_is_off(tenant, inventory, pool, cycle):
    pool.lending = False
    pool.save()
    job = submit(tenant, inventory["a100"], priority="preemptible")
    cycle()
    job.refresh_from_db()
    assert job.state == "queued"


def test_a_give_back_lasts_from_the_demand_change_to_the_cycle_that_saw_it_done(pool):
    from jobs.ports import PoolReading
    from jobs.scheduling import Pool as CorePool
    from pools.demand import Figures
    from pools.source import Row, record

    now = timezone.now()
    changed = now - timedelta(seconds=30)

    def reading(held, lendable):
        figures = Figures(16 - lendable, 0, lendable, changed.timestamp(), None)
        return PoolReading({}, (CorePool("chat", lendable),), (Row(pool.pk, 16, figures, held),))

    record(now.timestamp(), reading(8, 0))
    record(now.timestamp() + 12, reading(0, 0))
    back = GiveBack.objects.get()
    assert back.seconds == 42.0


def test_an_attempt_on_a_pools_nodes_is_marked_tidal_for_costs(tenant, inventory, pool, cycle):
    from jobs.models import Attempt

    lent = submit(tenant, inventory["a100"], name="lent", priority="preemptible")
    own = submit(tenant, inventory["h100"], name="own")
    cycle()
    on_pool = Attempt.objects.get(job=lent)
    assert [r.get("pool") for r in on_pool.placement] == ["chat"] and on_pool.tidal_devices == 8
    elsewhere = Attempt.objects.get(job=own)
    assert [r.get("pool") for r in elsewhere.placement] == [None] and elsewhere.tidal_devices == 0
