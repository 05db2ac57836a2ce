"""A service's pushed p99 latency over its SLO goes to the pools' interference rule (pools/interference.py): training
lent its pool's nodes is moved off them, with the reason; where node sync saw the service's replicas (Kubernetes), only
those nodes close. Without an SLO, or within it, nothing moves."""

from __future__ import annotations

from django.urls import reverse

from clusters.models import Node
from jobs.models import Attempt
from pools.models import Interference
from serving.models import Service
from tests.jobs.conftest import submit


def borrowers(tenant, inventory, cycle):
    """Two preemptible 4-device jobs lent part of the pool (its service's one replica holds 4 of its 16)."""
    jobs = [submit(tenant, inventory["a100"], name=name, priority="preemptible", devices=4)
            for name in ("first", "second")]
    cycle()
    for job in jobs:
        job.refresh_from_db()
        assert job.state in ("admitted", "dispatching", "running"), job.state
    return jobs


def node_of(job) -> str:
    return Attempt.objects.get(pk=job.current_attempt_id).placement[0]["node"]


def push(clients, service, **body):
    url = reverse("service-metric", kwargs={"pk": service.pk})
    return clients["member"].put(url, {"value": 0, **body}, format="json")


def test_a_missed_slo_moves_the_training_on_the_pool_off(tenant, inventory, pool, service, clients, cycle,
                                                          django_capture_on_commit_callbacks):
    first, second = borrowers(tenant, inventory, cycle)
    Service.objects.filter(pk=service.pk).update(latency_slo_ms=500)
    with django_capture_on_commit_callbacks(execute=True):
        assert push(clients, service, p99_latency_ms=720).status_code == 200
    miss, = Interference.objects.all()
    assert sorted(miss.nodes) == ["a-n1", "a-n2"]  # where replicas are is not known: the whole pool
    cycle()
    for job in (first, second):
        job.refresh_from_db()
        assert job.state in ("preempted", "queued")
        assert job.events.filter(reason__contains="serving p99 720 ms over its SLO 500 ms").exists()


def test_only_the_nodes_holding_replicas_close_where_node_sync_saw_them(tenant, inventory, pool, service, clients,
                                                                        cycle, django_capture_on_commit_callbacks):
    first, second = borrowers(tenant, inventory, cycle)
    Node.objects.filter(name=node_of(first)).update(serving_used=4)  # a replica of the service holds 4 there
    Service.objects.filter(pk=service.pk).update(latency_slo_ms=500)
    with django_capture_on_commit_callbacks(execute=True):
        push(clients, service, p99_latency_ms=720)
    assert Interference.objects.get().nodes == [node_of(first)]


def test_within_or_without_an_slo_nothing_moves(tenant, inventory, pool, service, clients, cycle,
                                                 django_capture_on_commit_callbacks):
    first, second = borrowers(tenant, inventory, cycle)
    with django_capture_on_commit_callbacks(execute=True):
        assert push(clients, service, p99_latency_ms=720).json()["p99_latency_ms"] == 720.0  # no SLO: kept only
    Service.objects.filter(pk=service.pk).update(latency_slo_ms=500)
    with django_capture_on_commit_callbacks(execute=True):
        push(clients, service, p99_latency_ms=480)
    cycle()
    assert not Interference.objects.exists()
    for job in (first, second):
        job.refresh_from_db()
        assert job.state in ("admitted", "dispatching", "running")
