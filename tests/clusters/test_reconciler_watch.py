"""The watch loop: RELIST replaces the pod cache and observes every open attempt; events observe their attempt;
410 Gone re-lists. Over real HTTP against kmock (its watch streams a given tuple of events)."""

from __future__ import annotations

import copy
import threading

from clusters.backends.kubernetes.backend import KubernetesBackend
from clusters.backends.kubernetes.watch import PodWatch
from clusters.kube.client import WatchEvent
from jobs.models import Job
from jobs.states import State
from tests.clusters.test_kubernetes_backend import pods_of, running, seed_nodes, set_status, terminated
from tests.jobs.conftest import submit


def dispatched(tenant, kube_inventory, cycle, kube, **kwargs) -> Job:
    seed_nodes(kube)
    job = submit(tenant, kube_inventory["h100"], replicas=2, **kwargs)
    cycle()
    return Job.objects.get(pk=job.pk)


def test_relist_then_modified_event(tenant, kube_inventory, kube, cycle) -> None:
    job = dispatched(tenant, kube_inventory, cycle, kube, retry_limit=1)
    pods = [set_status(kube, pod, running()) for pod in pods_of(kube, job).values()]
    failed = copy.deepcopy(pods[1])
    failed["status"] = terminated(137, "OOMKilled")  # retried within the limit (a user error would not be)
    kube.handler[kube.handler.action.WATCH][:1] << ({"type": "MODIFIED", "object": failed},)
    watch = PodWatch(KubernetesBackend(kube_inventory["cluster"]), timeout_seconds=1)
    seen = []
    original = watch.handle

    def record(event):
        outcome = original(event)
        seen.append((event.type, Job.objects.get(pk=job.pk).state))
        return outcome

    watch.handle = record
    watch.run(threading.Event(), rounds=1)
    assert seen[0] == ("RELIST", State.RUNNING)  # every replica runs
    assert seen[-1] == ("MODIFIED", State.RETRYING)  # one failed: the attempt fails and retries
    assert watch.watcher.relists == 1


def test_410_gone_relists_and_reconciles(tenant, kube_inventory, kube, cycle) -> None:
    job = dispatched(tenant, kube_inventory, cycle, kube)
    for pod in pods_of(kube, job).values():
        set_status(kube, pod, running())
    kube.handler[kube.handler.action.WATCH][:1] << 410 << {"kind": "Status", "code": 410, "reason": "Expired"}
    watch = PodWatch(KubernetesBackend(kube_inventory["cluster"]), timeout_seconds=1)
    watch.watcher.resource_version = "123"  # resuming from a compacted version
    watch.run(threading.Event(), rounds=1)
    assert watch.watcher.relists == 1
    assert kube.handler[kube.handler.action.WATCH][0].params["resourceVersion"] == "123"
    assert Job.objects.get(pk=job.pk).state == State.RUNNING


def test_deleted_pod_of_a_running_job_fails_the_attempt(tenant, kube_inventory, kube, cycle) -> None:
    job = dispatched(tenant, kube_inventory, cycle, kube, retry_limit=1)
    pods = [set_status(kube, pod, running()) for pod in pods_of(kube, job).values()]
    watch = PodWatch(KubernetesBackend(kube_inventory["cluster"]))
    watch.handle(WatchEvent("RELIST", {"items": pods}))
    assert Job.objects.get(pk=job.pk).state == State.RUNNING
    assert watch.handle(WatchEvent("DELETED", pods[0])) == ["retrying"]
    assert Job.objects.get(pk=job.pk).state == State.RETRYING


def test_events_of_stale_attempts_and_foreign_pods_are_ignored(tenant, kube_inventory, kube, cycle) -> None:
    job = dispatched(tenant, kube_inventory, cycle, kube)
    pod = copy.deepcopy(next(iter(pods_of(kube, job).values())))
    watch = PodWatch(KubernetesBackend(kube_inventory["cluster"]))
    pod["metadata"]["labels"]["tidal.dev/attempt"] = "7"
    assert watch.handle(WatchEvent("MODIFIED", pod)) == []
    assert watch.handle(WatchEvent("ADDED", {"metadata": {"name": "x", "namespace": "y", "labels": {}}})) == []
    assert watch.handle(WatchEvent("BOOKMARK", {"metadata": {"resourceVersion": "9"}})) == []
    assert Job.objects.get(pk=job.pk).state == State.DISPATCHING
