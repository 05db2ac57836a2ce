"""A node NotReady loses the attempts on it only once that has lasted TIDAL_NODE_LOST_GRACE (40 s, as the
kubelet's node-monitor grace): after an API-server outage the node-lifecycle controller marks every node NotReady
for a few seconds, and one such observation must not fail every attempt. A node gone from the API loses them at
once. Each case plays what the API server says of the job's node over time (kmock), syncs the nodes and resyncs."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from clusters import services
from clusters.backends.kubernetes import nodesync
from clusters.models import Node
from jobs.models import Job
from jobs.states import State
from tests.clusters.test_kubernetes_backend import pods_of, running, set_status
from tests.jobs.conftest import submit

READY, NOT_READY, GONE = "Ready", "NotReady", "gone"

# Steps: (second, what the API server says of the job's node, since when it is NotReady by its Ready condition's
# lastTransitionTime: None gives no time), then the job's state after a node sync and a resync at that second.
CASES = {
    "NotReady shorter than the grace ends nothing": [
        (0, NOT_READY, 0, State.RUNNING), (39, NOT_READY, 0, State.RUNNING), (45, READY, None, State.RUNNING)],
    "NotReady past the grace loses the attempt": [
        (0, NOT_READY, 0, State.RUNNING), (41, NOT_READY, 0, State.RETRYING)],
    "NotReady since before the first sync counts from the API's time": [
        (0, NOT_READY, -41, State.RETRYING)],
    "without a transition time the grace counts from the first sync that saw it": [
        (0, NOT_READY, None, State.RUNNING), (39, NOT_READY, None, State.RUNNING),
        (41, NOT_READY, None, State.RETRYING)],
    "back to Ready restarts the grace": [
        (0, NOT_READY, 0, State.RUNNING), (30, READY, None, State.RUNNING), (35, NOT_READY, 35, State.RUNNING),
        (70, NOT_READY, 35, State.RUNNING), (76, NOT_READY, 35, State.RETRYING)],
    "a node gone from the API loses the attempt at once": [
        (0, GONE, None, State.RETRYING)],
    "NotReady, then gone: at once": [
        (0, NOT_READY, 0, State.RUNNING), (5, GONE, None, State.RETRYING)],
}


def api_node(name: str, condition: str, since) -> dict:
    ready = {"type": "Ready", "status": "True" if condition == READY else "False"}
    if condition == NOT_READY:
        ready["reason"] = "NodeStatusUnknown"
        if since is not None:
            ready["lastTransitionTime"] = since.strftime("%Y-%m-%dT%H:%M:%SZ")
    return {"apiVersion": "v1", "kind": "Node",
            "metadata": {"name": name, "labels": {"kubernetes.io/hostname": f"{name}.internal",
                                                  "nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"}},
            "status": {"allocatable": {"nvidia.com/gpu": "8", "cpu": "96", "memory": "1024Gi"},
                       "conditions": [ready]}}


def say(kube, name: str, condition: str, since) -> None:
    """What the API server lists for `name` (and gpu-2, always Ready)."""
    for key, obj in list(kube.handler.objects.items()):
        if key[2] == name:
            obj.delete()
    if condition != GONE:
        kube.put("nodes", None, api_node(name, condition, since))


@pytest.mark.parametrize("steps", list(CASES.values()), ids=list(CASES))
def test_a_node_not_ready_loses_its_attempts_only_past_the_grace(steps, tenant, kube_inventory, kube, cycle, resync,
                                                                 time_machine, settings) -> None:
    assert settings.TIDAL["NODE_LOST_GRACE"] == 40  # the default, as the kubelet's
    cluster = kube_inventory["cluster"]
    kube.put("nodes", None, api_node("gpu-2", READY, None))
    say(kube, "gpu-1", READY, None)
    job = submit(tenant, kube_inventory["h100"], replicas=1, retry_limit=1, retry_backoff=0)
    cycle()
    node = Job.objects.get(pk=job.pk).current_attempt.placement[0]["node"]
    say(kube, "gpu-2" if node == "gpu-1" else "gpu-1", READY, None)  # both nodes exist; the other stays Ready
    for pod in pods_of(kube, job).values():
        set_status(kube, pod, running())
    resync()
    assert Job.objects.get(pk=job.pk).state == State.RUNNING
    start = timezone.now().replace(microsecond=0)  # the API's times have whole seconds
    for second, condition, since, expected in steps:
        time_machine.move_to(start + timedelta(seconds=second), tick=False)
        say(kube, node, condition, None if since is None else start + timedelta(seconds=since))
        nodesync.cluster_sync_nodes(cluster)
        resync()
        job = Job.objects.select_related("current_attempt").get(pk=job.pk)
        assert job.state == expected, (second, condition, Node.objects.get(cluster=cluster, name=node).__dict__)
    if expected == State.RETRYING:
        assert job.current_attempt.cause == "node_lost" and job.avoid_nodes == [f"gpu/{node}"]


def test_an_admin_marking_a_node_not_ready_loses_its_attempts_at_once(tenant, kube_inventory, kube, cycle,
                                                                      resync) -> None:
    job = submit(tenant, kube_inventory["h100"], replicas=1, retry_limit=1, retry_backoff=0)
    cycle()
    for pod in pods_of(kube, job).values():
        set_status(kube, pod, running())
    resync()
    node = Node.objects.get(cluster=kube_inventory["cluster"],
                            name=Job.objects.get(pk=job.pk).current_attempt.placement[0]["node"])
    services.node_save(actor=tenant.users["owner"], node=node, values={"ready": False})
    resync()
    assert Job.objects.get(pk=job.pk).state == State.RETRYING
