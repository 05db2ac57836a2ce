"""An attempt whose pods stay Pending fails after the cluster's pending timeout, retries, and re-syncs the nodes
(kmock over real HTTP)."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from clusters.backends import observe_cluster
from clusters.backends.kubernetes.backend import KubernetesBackend
from clusters.models import Cluster, Node
from jobs import services as job_services
from jobs.models import Attempt, Job
from jobs.states import State
from tests.clusters.test_kubernetes_backend import pods_of, refresh, running, set_status
from tests.clusters.test_node_sync import node, pod
from tests.jobs.conftest import submit

UNSCHEDULABLE = {"phase": "Pending", "conditions": [{
    "type": "PodScheduled", "status": "False", "reason": "Unschedulable",
    "message": "0/2 nodes are available: 1 Insufficient nvidia.com/gpu."}]}


@pytest.fixture
def pending_job(tenant, kube_inventory, kube, cycle):
    """A 1-replica job dispatched to kmock whose pod the kube-scheduler cannot bind: a notebook took its node's
    8 GPUs since the last node sync (the kmock cluster holds both nodes and that foreign pod)."""
    job = submit(tenant, kube_inventory["h100"], replicas=1, retry_limit=1, retry_backoff=0)
    cycle()
    job = refresh(job)
    placed = job.current_attempt.placement[0]["node"]
    for name in ("gpu-1", "gpu-2"):
        kube.put("nodes", None, node(name, product="NVIDIA-H100-80GB-HBM3"))
    kube.put("pods", "ml", pod("notebook", placed, 8))
    stuck = set_status(kube, next(iter(pods_of(kube, job).values())), UNSCHEDULABLE)
    stuck["spec"]["nodeName"] = ""  # never bound: it takes nothing on the node
    kube.put("pods", stuck["metadata"]["namespace"], stuck)
    return job


def resync(cluster: Cluster, capture) -> None:
    with capture(execute=True):
        observe_cluster(cluster)


def age(job: Job, seconds: int) -> None:
    """kmock sets no creationTimestamp, so the wait counts from the admission (the attempt's dispatch)."""
    Attempt.objects.filter(job_id=job.pk, ended_at__isnull=True).update(
        admitted_at=timezone.now() - timedelta(seconds=seconds))


def test_pending_within_the_timeout_keeps_waiting(pending_job, kube_inventory,
                                                  django_capture_on_commit_callbacks) -> None:
    age(pending_job, 590)
    resync(kube_inventory["cluster"], django_capture_on_commit_callbacks)
    assert refresh(pending_job).state == State.DISPATCHING
    assert Node.objects.get(name=pending_job.current_attempt.placement[0]["node"]).foreign_used == 0  # no re-sync yet


def test_pending_past_the_timeout_fails_retryably_resyncs_nodes_and_retries_elsewhere(
        pending_job, kube_inventory, kube, cycle, django_capture_on_commit_callbacks) -> None:
    placed = pending_job.current_attempt.placement[0]["node"]
    age(pending_job, 700)
    resync(kube_inventory["cluster"], django_capture_on_commit_callbacks)
    job = refresh(pending_job)
    assert job.state == State.RETRYING and job.current_attempt.cause == "unschedulable"
    event = job.events.get(to_state=State.RETRYING)
    assert f"on {placed}: 0/2 nodes are available: 1 Insufficient nvidia.com/gpu." in event.reason
    details = job.current_attempt.details
    assert details["pending_seconds"] >= 700 and details["node"] == placed
    assert pods_of(kube, job) == {}  # the stuck gang is deleted
    assert Node.objects.get(name=placed).foreign_used == 8  # the node sync saw the notebook

    job_services.job_requeue_due_retries(now=timezone.now() + timedelta(seconds=1))
    cycle()
    job = refresh(job)
    assert (job.state, job.attempt) == (State.DISPATCHING, 2) and job.current_attempt.placement[0]["node"] != placed


def test_the_timeout_is_the_clusters_and_never_shorter_than_a_victims_grace_period(
        pending_job, kube_inventory, django_capture_on_commit_callbacks) -> None:
    cluster = kube_inventory["cluster"]
    Cluster.objects.filter(pk=cluster.pk).update(pending_timeout_seconds=1200)
    age(pending_job, 700)
    resync(Cluster.objects.get(pk=cluster.pk), django_capture_on_commit_callbacks)
    assert refresh(pending_job).state == State.DISPATCHING
    # 30 s asked, but a preemptor's pods wait up to the 45 s grace period for the victims: 45 + 60 s margin.
    Cluster.objects.filter(pk=cluster.pk).update(pending_timeout_seconds=30)
    assert KubernetesBackend(Cluster.objects.get(pk=cluster.pk)).pending_timeout() == 105
    age(pending_job, 100)
    resync(Cluster.objects.get(pk=cluster.pk), django_capture_on_commit_callbacks)
    assert refresh(pending_job).state == State.DISPATCHING
    age(pending_job, 110)
    resync(Cluster.objects.get(pk=cluster.pk), django_capture_on_commit_callbacks)
    assert refresh(pending_job).state == State.RETRYING


def test_a_replica_running_does_not_excuse_a_stuck_peer(
        tenant, kube_inventory, kube, cycle, django_capture_on_commit_callbacks) -> None:
    job = submit(tenant, kube_inventory["h100"], replicas=2, retry_limit=0)
    cycle()
    job = refresh(job)
    first, second = pods_of(kube, job).values()
    set_status(kube, first, running())
    set_status(kube, second, {"phase": "Pending", "containerStatuses": [{"name": "main", "state": {"waiting": {
        "reason": "ContainerCreating"}}}]})
    age(job, 700)
    resync(kube_inventory["cluster"], django_capture_on_commit_callbacks)
    job = refresh(job)
    assert job.state == State.FAILED and job.current_attempt.cause == "pending_timeout"  # retry limit 0
    assert "ContainerCreating" in job.events.get(to_state=State.FAILED).reason


def test_a_running_job_never_times_out(tenant, kube_inventory, kube, cycle,
                                       django_capture_on_commit_callbacks) -> None:
    other = submit(tenant, kube_inventory["h100"], replicas=1)
    cycle()
    other = refresh(other)
    set_status(kube, next(iter(pods_of(kube, other).values())), running())
    resync(kube_inventory["cluster"], django_capture_on_commit_callbacks)
    age(other, 7200)
    resync(kube_inventory["cluster"], django_capture_on_commit_callbacks)
    assert refresh(other).state == State.RUNNING
