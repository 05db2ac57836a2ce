"""The snapshot builder from database rows: nodes' allocatable CPU and memory, what the replicas of jobs holding
capacity request of them, and what queued jobs' replicas request; submission and the cycle then count them."""

from __future__ import annotations

import time

import pytest

from clusters.models import Node
from core.errors import DomainError
from jobs import scheduling as core
from jobs.services import job_submit
from jobs.snapshot import build_snapshot
from jobs.states import State
from tests.jobs.conftest import admit, spec

GIB = 1024  # MiB


def submit_with(tenant, flavor, *, cpu: int, memory: int, **kwargs):
    """A job whose replicas request `cpu` millicores and `memory` MiB."""
    body = spec(flavor, **kwargs)
    body["groups"][0].update(cpu_millis=cpu, memory_mib=memory)
    return job_submit(actor=tenant.users["member"], project=tenant.project, spec=body).job


def snapshot_node(snapshot: core.Snapshot, name: str) -> core.Node:
    return next(n for n in snapshot.nodes if n.name == f"sim/{name}")


def test_cpu_and_memory_come_from_nodes_groups_and_running_replicas(tenant, inventory):
    Node.objects.filter(name="a-n1").update(cpu_millis=64_000, memory_mib=512 * GIB)  # a-n2 does not model them
    held = submit_with(tenant, inventory["a100"], devices=4, cpu=24_000, memory=100 * GIB, name="held")
    admit(held, inventory["cluster"], ["a-n1"])
    submit_with(tenant, inventory["a100"], devices=2, cpu=8000, memory=32 * GIB, name="queued")

    snap = build_snapshot(time.time()).snapshot

    n1, n2 = snapshot_node(snap, "a-n1"), snapshot_node(snap, "a-n2")
    assert (n1.free, n1.cpu_millis, n1.free_cpu_millis, n1.memory_mib, n1.free_memory_mib) == (
        4, 64_000, 40_000, 512 * GIB, 412 * GIB)
    assert (n2.free, n2.cpu_millis, n2.memory_mib) == (8, 0, 0)
    (running,) = snap.running
    assert running.placement == (core.Assignment("worker", 0, "sim/a-n1", 4, 24_000, 100 * GIB),)
    (pending,) = snap.pending
    assert pending.groups == (core.ReplicaGroup("worker", 1, 2, "nvidia-a100-40gb", 8000, 32 * GIB),)


def test_a_job_waits_for_the_cpu_running_replicas_hold(tenant, inventory, cycle):
    Node.objects.filter(flavor=inventory["a100"]).update(cpu_millis=64_000, memory_mib=512 * GIB)
    held = submit_with(tenant, inventory["a100"], devices=2, cpu=40_000, memory=16 * GIB, name="held")
    admit(held, inventory["cluster"], ["a-n1"])
    Node.objects.filter(name="a-n2").update(cordoned=True)
    waiting = submit_with(tenant, inventory["a100"], devices=4, cpu=32_000, memory=16 * GIB, name="waiting")

    cycle()

    waiting.refresh_from_db()
    assert waiting.state == State.QUEUED and waiting.wait_code == "capacity"
    assert waiting.wait_reason.startswith("waiting for CPU: needs 1 x 32 cores with 4 nvidia-a100-40gb each; "
                                          "24 cores free")


def test_a_replica_bigger_than_any_nodes_cpu_is_refused_at_submission(tenant, inventory):
    Node.objects.filter(flavor=inventory["a100"]).update(cpu_millis=64_000, memory_mib=512 * GIB)
    with pytest.raises(DomainError) as refused:
        submit_with(tenant, inventory["a100"], devices=1, cpu=96_000, memory=16 * GIB)
    assert refused.value.code == "never_fits"
    assert "needs 96 cores per replica; the largest schedulable nvidia-a100-40gb node has 64 cores" in str(
        refused.value)
    # Nodes that do not model CPU (h100 here) never refuse it.
    submit_with(tenant, inventory["h100"], devices=1, cpu=96_000, memory=16 * GIB)


def test_the_lend_hold_reads_attempts_ended_and_jobs_submitted_within_its_window(tenant, inventory):
    from datetime import timedelta

    from django.utils import timezone

    from jobs.lifecycle import transition
    from tests.jobs.conftest import run

    now = timezone.now()
    cluster, a100 = inventory["cluster"], inventory["a100"]
    recent = run(submit_with(tenant, a100, devices=4, cpu=0, memory=0, name="recent"), cluster, ["a-n1"],
                 now=now - timedelta(seconds=60))
    transition(recent, State.SUCCEEDED, reason="test", actor="system", now=now - timedelta(seconds=2))
    old = run(submit_with(tenant, a100, devices=8, cpu=0, memory=0, name="old"), cluster, ["a-n2"],
              now=now - timedelta(seconds=90))
    transition(old, State.SUCCEEDED, reason="test", actor="system", now=now - timedelta(seconds=30))
    queued = submit_with(tenant, a100, devices=2, cpu=0, memory=0, name="queued")

    snap = build_snapshot(timezone.now().timestamp()).snapshot  # TIDAL_LEND_HOLD: 5 s

    slug = tenant.project.slug
    assert snap.ended == (core.EndedUse(slug, "nvidia-a100-40gb", 4, (now - timedelta(seconds=60)).timestamp(),
                                        (now - timedelta(seconds=2)).timestamp()),)
    assert snap.arrivals == (core.Arrival(slug, "nvidia-a100-40gb", 2, queued.submitted_at.timestamp()),)


def test_arrival_rates_count_the_last_hours_submissions_whatever_became_of_them(tenant, inventory):
    """The late end of an estimated start's range adds jobs at the rates of the last hour's submissions, per
    project, priority and shape: a job cancelled or finished since still arrived."""
    from datetime import timedelta

    from django.utils import timezone

    from jobs.models import Job
    from jobs.services import job_cancel
    from jobs.snapshot import recent_arrival_rates

    a100 = inventory["a100"]
    jobs = [submit_with(tenant, a100, devices=4, cpu=1000, memory=GIB, max_runtime=600 * k, name=f"j{k}")
            for k in (1, 2, 3)]
    job_cancel(actor=tenant.users["member"], job=jobs[0])
    submit_with(tenant, a100, devices=8, cpu=1000, memory=GIB, name="big")
    stale = submit_with(tenant, a100, devices=4, cpu=1000, memory=GIB, name="stale")
    Job.objects.filter(pk=stale.pk).update(submitted_at=timezone.now() - timedelta(hours=2))

    rates = recent_arrival_rates(timezone.now().timestamp())

    priority = jobs[0].priority_class.value
    four, eight = (core.ReplicaGroup("worker", 1, 4, a100.name, 1000, GIB),), \
        (core.ReplicaGroup("worker", 1, 8, a100.name, 1000, GIB),)
    assert set(rates) == {core.ArrivalRate(tenant.project.slug, priority, four, 3.0, max_runtime=1200.0),
                          core.ArrivalRate(tenant.project.slug, priority, eight, 1.0)}


def test_a_running_job_carries_its_attempts_last_checkpoint(tenant, inventory):
    """The core counts the work a preemption would throw away from the current attempt's last reported checkpoint
    (preemption's victim order): a job that reported none carries None, a later report moves it."""
    from jobs.lifecycle import record_checkpoint

    held = admit(submit_with(tenant, inventory["a100"], devices=4, cpu=0, memory=0, name="held"),
                 inventory["cluster"], ["a-n1"])
    (running,) = build_snapshot(time.time()).snapshot.running
    assert running.checkpointed_at is None
    reported = record_checkpoint(held.current_attempt, "s3://ckpt/step-100", step=100).checkpoint_at
    (running,) = build_snapshot(time.time()).snapshot.running
    assert running.checkpointed_at == pytest.approx(reported.timestamp())
