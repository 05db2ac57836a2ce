"""Pending timeout, pure: how long a replica has waited, and the cause and reason an attempt fails with."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from clusters.kube import names
from clusters.kube.failures import pending_failure
from clusters.kube.status import attempt_status, replica_state, stuck_pending
from jobs.failures import is_retryable

NOW = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
UNSCHEDULABLE = {"type": "PodScheduled", "status": "False", "reason": "Unschedulable",
                 "message": "0/3 nodes are available: 1 Insufficient nvidia.com/gpu."}


def pending_pod(rank: int, *, created: datetime | None = None, conditions: list | None = None,
                waiting: dict | None = None, phase: str = "Pending") -> dict:
    meta = {"name": f"p{rank}", "labels": {names.LABEL_ROLE: "worker", names.LABEL_INDEX: str(rank),
                                           names.LABEL_RANK: str(rank)},
            "annotations": {names.ANNOTATION_NODE: f"gpu-{rank}"}}
    if created:
        meta["creationTimestamp"] = created.strftime("%Y-%m-%dT%H:%M:%SZ")
    status: dict = {"phase": phase, "conditions": conditions or []}
    if waiting:
        status["containerStatuses"] = [{"name": "main", "state": {"waiting": waiting}}]
    return {"metadata": meta, "spec": {}, "status": status}


def test_unschedulable_pod_carries_the_schedulers_message_and_its_node_from_the_annotation() -> None:
    replica = replica_state(pending_pod(0, created=NOW, conditions=[UNSCHEDULABLE]))
    assert (replica.state, replica.reason, replica.unschedulable) == ("pending", "Unschedulable", True)
    assert replica.message.startswith("0/3 nodes are available") and replica.node == "gpu-0"
    assert replica.created == NOW
    scheduled = replica_state(pending_pod(1, waiting={"reason": "ContainerCreating"}, conditions=[
        {"type": "PodScheduled", "status": "True"}]))
    assert (scheduled.reason, scheduled.unschedulable, scheduled.created) == ("ContainerCreating", False, None)


def test_stuck_only_past_the_timeout_counting_from_the_pods_creation() -> None:
    replicas = attempt_status([pending_pod(0, created=NOW - timedelta(seconds=599)),
                               pending_pod(1, created=NOW - timedelta(seconds=100))],
                              expected=2, launcher="pytorch").replicas
    assert stuck_pending(replicas, now=NOW, since=NOW - timedelta(hours=1), timeout_seconds=600) is None
    replica, seconds = stuck_pending(replicas, now=NOW + timedelta(seconds=2), since=NOW, timeout_seconds=600)
    assert (replica.pod, seconds) == ("p0", 601.0)  # the longest waiter, not the attempt's start


def test_dispatch_time_stands_in_for_a_missing_creation_timestamp_and_running_replicas_never_count() -> None:
    replicas = attempt_status([pending_pod(0), pending_pod(1, phase="Running")], expected=2,
                              launcher="pytorch").replicas
    replica, seconds = stuck_pending(replicas, now=NOW, since=NOW - timedelta(seconds=700), timeout_seconds=600)
    assert (replica.pod, seconds) == ("p0", 700.0)
    running = attempt_status([pending_pod(0, phase="Running")], expected=1, launcher="pytorch").replicas
    assert stuck_pending(running, now=NOW, since=NOW - timedelta(days=1), timeout_seconds=600) is None


def test_pending_failure_is_classified_and_retryable() -> None:
    failure = pending_failure(pod="p0", node="gpu-3", seconds=612.4, unschedulable=True, reason="Unschedulable",
                              message="0/3 nodes are available: 3 Insufficient nvidia.com/gpu.")
    assert (failure.cause, is_retryable(failure.cause)) == ("unschedulable", True)
    assert failure.summary == ("pod p0 pending for 612 s on gpu-3: 0/3 nodes are available: 3 Insufficient "
                               "nvidia.com/gpu.")
    slow = pending_failure(pod="p1", node="", seconds=900, unschedulable=False, reason="ContainerCreating")
    assert (slow.cause, slow.summary) == ("pending_timeout", "pod p1 pending for 900 s: ContainerCreating")
