"""A failing attempt on Kubernetes (kmock over real HTTP) is diagnosed with what the cluster says beside its pods:
the events of its pods and nodes, its nodes' unhealthy conditions, and the Xid errors GPU telemetry stored for its
GPUs. An NCCL timeout on a node whose GPU 3 reported Xid 79 40 s earlier is the Xid's, not the network's."""

from __future__ import annotations

import copy
import re
from datetime import UTC, datetime, timedelta

from django.utils import timezone

from clusters.backends.kubernetes import evidence
from clusters.models import Node
from jobs.models import Attempt
from jobs.states import State
from reliability.models import Diagnosis
from telemetry.attribution import Attribution
from telemetry.fields import Sample
from telemetry.store import store
from tests.clusters.test_kubernetes_backend import NS, pods_of, refresh, running, seed_nodes, set_status, terminated
from tests.jobs.conftest import submit

NCCL_TIMEOUT = (b"[rank0]:[E ProcessGroupNCCL.cpp:616] [Rank 0] Watchdog caught collective operation timeout: "
                b"WorkNCCL(SeqNum=88, OpType=ALLREDUCE) ran for 600000 milliseconds before timing out.\n")


def at(seconds_ago: float) -> str:
    return (timezone.now() - timedelta(seconds=seconds_ago)).astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def event(name: str, kind: str, involved: str, reason: str, message: str, when: str, count: int = 1,
          namespace: str = NS) -> dict:
    return {"apiVersion": "v1", "kind": "Event", "metadata": {"name": name, "namespace": namespace},
            "involvedObject": {"kind": kind, "name": involved, "namespace": namespace if kind == "Pod" else ""},
            "reason": reason, "message": message, "count": count, "lastTimestamp": when, "type": "Warning"}


def started_minutes_ago(job, minutes: int) -> None:
    past = timezone.now() - timedelta(minutes=minutes)
    Attempt.objects.filter(job_id=job.pk, ended_at__isnull=True).update(admitted_at=past, started_at=past)


def dcgm_xid(kube, job, node: str, gpu: int, xid: int, seconds_ago: int) -> None:
    """What the telemetry reader stores from DCGM_FI_DEV_XID_ERRORS for one GPU of the job's pod on `node`: no Xid
    (0) until `seconds_ago`, then `xid`, through telemetry's own attribution and store."""
    attempt = refresh(job).current_attempt
    pod = next(p for p in pods_of(kube, job).values() if p["spec"]["nodeName"] == node)
    now = int(timezone.now().timestamp())
    samples = [Sample(node, gpu, f"GPU-{gpu}", pod["metadata"]["name"], NS, "xid", now - back,
                      float(xid if back <= seconds_ago else 0)) for back in (120, 90, 60, seconds_ago, 20, 5)]
    attribution = Attribution(attempt.cluster, now - 600, now)
    assert all(attribution.holder_of(s) is not None for s in samples)
    store(attribution.holders, {attempt.pk: samples})


def test_nccl_timeout_after_an_xid_79_is_diagnosed_from_the_clusters_evidence(tenant, kube_inventory, kube, cycle,
                                                                                resync) -> None:
    seed_nodes(kube)
    job = submit(tenant, kube_inventory["h100"], replicas=2, retry_limit=0)
    cycle()
    rank0, rank1 = sorted(pods_of(kube, job).values(), key=lambda p: p["metadata"]["name"])
    rank0, rank1 = (set_status(kube, pod, running()) for pod in (rank0, rank1))
    resync()
    started_minutes_ago(job, 10)
    sick = rank1["spec"]["nodeName"]
    dcgm_xid(kube, job, sick, 3, 79, seconds_ago=40)
    kube.put("events", NS, event("e1", "Pod", rank1["metadata"]["name"], "BackOff", "Back-off restarting failed "
                                 "container main", at(30), count=3))
    kube.put("events", "default", event("e2", "Node", sick, "NodeNotReady", f"Node {sick} status is now: "
                                        "NodeNotReady", at(20), namespace="default"))
    kube.put("events", "default", event("old", "Node", sick, "Rebooted", "before the attempt", at(3600),
                                        namespace="default"))
    kube.put("events", NS, event("other", "Pod", "someone-elses-pod", "Killing", "not ours", at(10)))
    node = copy.deepcopy(kube.objects("nodes")[(None, sick)])
    node["status"]["conditions"] = [{"type": "Ready", "status": "False", "reason": "KubeletNotReady",
                                     "message": "PLEG is not healthy"}, {"type": "MemoryPressure", "status": "False"}]
    kube.put("nodes", None, node)
    kube.handler[f"get /api/v1/namespaces/{NS}/pods/{rank0['metadata']['name']}/log"] << NCCL_TIMEOUT
    set_status(kube, rank0, terminated(1, "Error"))
    resync()

    job = refresh(job)
    failed = job.current_attempt
    assert failed.details["node_conditions"] == [
        {"node": sick, "condition": "Ready=False (KubeletNotReady: PLEG is not healthy)"}]
    assert [line.split(" (x")[0] for line in failed.details["events"]] == [
        f"Pod {rank1['metadata']['name']}: Warning BackOff", f"Node {sick}: Warning NodeNotReady"]
    assert "(x3, " in failed.details["events"][0]
    diagnosis = Diagnosis.objects.get(attempt=failed)
    assert diagnosis.cause == "xid_bus" and diagnosis.nodes == [sick]
    texts = [item["text"] for item in diagnosis.evidence]
    [xid] = [text for text in texts if text.startswith("Xid")]  # the reading stayed 79: one event, not three
    assert re.fullmatch(r"Xid 79 on .* GPU 3, 4[012] s before the attempt ended: DCGM_FI_DEV_XID_ERRORS", xid)
    assert any("Watchdog caught collective operation timeout" in text for text in texts)  # the symptom, kept
    assert failed.cause == "xid_bus" and job.state == State.RETRYING  # the platform's failure: retried all the same
    assert Node.objects.get(name=sick).quarantined_at is not None


def test_the_events_and_conditions_kept_are_those_of_the_attempts_pods_and_nodes() -> None:
    since = datetime(2026, 12, 5, 16, 0, tzinfo=UTC)
    events = [
        {"involvedObject": {"kind": "Pod", "name": "p1"}, "reason": "FailedMount", "message": "MountVolume.SetUp "
         "failed  for volume \"data\"", "count": 2, "lastTimestamp": "2026-12-05T16:05:00Z", "type": "Warning"},
        {"involvedObject": {"kind": "Pod", "name": "p1"}, "reason": "Scheduled", "message": "early",
         "lastTimestamp": "2026-12-05T15:59:00Z"},
        {"regarding": {"kind": "Node", "name": "n1"}, "reason": "OOMKilling", "note": "Memory cgroup out of memory",
         "eventTime": "2026-12-05T16:01:00Z"},
        {"involvedObject": {"kind": "Node", "name": "n2"}, "reason": "NodeNotReady", "message": "another node",
         "lastTimestamp": "2026-12-05T16:02:00Z"},
    ]
    assert evidence.event_lines(events, pods={"p1"}, nodes={"n1"}, since=since) == [
        "Node n1: Normal OOMKilling (x1, 2026-12-05T16:01:00Z): Memory cgroup out of memory",
        'Pod p1: Warning FailedMount (x2, 2026-12-05T16:05:00Z): MountVolume.SetUp failed for volume "data"']
    nodes = [{"metadata": {"name": "n1"}, "status": {"conditions": [
        {"type": "Ready", "status": "True"}, {"type": "KernelDeadlock", "status": "True", "reason": "DockerHung"},
        {"type": "DiskPressure", "status": "False"}, {"type": "NetworkUnavailable", "status": "Unknown"}]}},
        {"metadata": {"name": "n2"}, "status": {"conditions": [{"type": "Ready", "status": "False"}]}}]
    assert evidence.unhealthy_conditions(nodes, {"n1"}) == [
        {"node": "n1", "condition": "KernelDeadlock=True (DockerHung)"},
        {"node": "n1", "condition": "NetworkUnavailable=Unknown"}]
