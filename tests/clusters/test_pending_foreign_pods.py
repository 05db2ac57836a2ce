"""Pending pods Tidal did not create that ask for a pool's devices are that pool's demand (issue 30: "a foreign
pending pod on a pool node is demand"): node sync records them with the nodes that would admit them, the pool counts
those that would run on its nodes, and training borrowing there is given back."""

from __future__ import annotations

from clusters.backends.kubernetes import nodesync
from clusters.kube import names
from clusters.kube.pending import admits, pending_foreign
from clusters.models import Cluster
from jobs.models import Job
from pools.models import Pool
from quotas.models import Quota
from tests.clusters.test_node_sync import node


def waiting(name: str, gpus: int, *, selector: dict | None = None, affinity: list | None = None,
            tolerations: list | None = None, platform: bool = False) -> dict:
    """A pod the kube-scheduler has not bound yet (no nodeName, phase Pending)."""
    labels = {names.LABEL_MANAGED: "true", names.LABEL_INSTANCE: "ci"} if platform else {"app": "vllm"}
    spec: dict = {"containers": [{"name": "c", "resources": {"limits": {"nvidia.com/gpu": str(gpus)}}}]}
    if selector:
        spec["nodeSelector"] = selector
    if affinity:
        spec["affinity"] = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
            "nodeSelectorTerms": [{"matchExpressions": affinity}]}}}
    if tolerations:
        spec["tolerations"] = tolerations
    return {"metadata": {"name": name, "namespace": "serving", "labels": labels}, "spec": spec,
            "status": {"phase": "Pending"}}


def test_the_nodes_a_pending_pod_would_run_on():
    labels = {"tidal.dev/rack": "r1", "size": "8"}
    taint = [{"key": "serving", "value": "yes", "effect": "NoSchedule"}]
    assert admits(waiting("p", 1, selector={"tidal.dev/rack": "r1"}), labels, [])
    assert not admits(waiting("p", 1, selector={"tidal.dev/rack": "r2"}), labels, [])
    assert admits(waiting("p", 1, affinity=[{"key": "tidal.dev/rack", "operator": "In", "values": ["r1", "r3"]},
                                            {"key": "size", "operator": "Gt", "values": ["4"]}]), labels, [])
    assert not admits(waiting("p", 1, affinity=[{"key": "tidal.dev/rack", "operator": "NotIn", "values": ["r1"]}]),
                      labels, [])
    assert not admits(waiting("p", 1), labels, taint)  # the taint is not tolerated
    assert admits(waiting("p", 1, tolerations=[{"key": "serving", "operator": "Equal", "value": "yes"}]), labels, taint)
    assert admits(waiting("p", 1, tolerations=[{"operator": "Exists"}]), labels, taint)


def test_only_unbound_foreign_pods_that_ask_for_devices_are_recorded():
    nodes = [node("gpu-1", rack="r1"), node("gpu-2", rack="r2")]
    bound = {**waiting("bound", 2), "spec": {**waiting("bound", 2)["spec"], "nodeName": "gpu-1"}}
    pods = [waiting("vllm", 4, selector={"tidal.dev/rack": "r2"}), waiting("ours", 8, platform=True), bound,
            waiting("cpu-only", 0), waiting("anywhere", 1)]
    assert pending_foreign(nodes, pods, "ci", ["nvidia.com/gpu"]) == [
        {"pod": "serving/anywhere", "resource": "nvidia.com/gpu", "devices": 1, "nodes": ["gpu-1", "gpu-2"],
         "selector": False},
        {"pod": "serving/vllm", "resource": "nvidia.com/gpu", "devices": 4, "nodes": ["gpu-2"], "selector": True},
    ]


def test_a_foreign_pending_pod_on_a_pool_node_is_demand(tenant, kube_inventory, kube, cycle):
    cluster, h100 = kube_inventory["cluster"], kube_inventory["h100"]
    from tests.jobs.conftest import submit

    Quota.objects.filter(project=tenant.project, flavor=h100).update(guaranteed=0, borrow_limit=16)
    pool = Pool.objects.create(name="chat", cluster=cluster, flavor=h100, node_pattern="gpu-*", headroom_percent=0)
    for raw in (node("gpu-1", product="NVIDIA-H100-80GB-HBM3", rack="r1"),
                node("gpu-2", product="NVIDIA-H100-80GB-HBM3", rack="r2")):
        kube.put("nodes", None, raw)
    lent = submit(tenant, h100, priority="preemptible", devices=8)
    cycle()
    assert Job.objects.get(pk=lent.pk).state in ("admitted", "dispatching", "running")

    # Serving elsewhere, and serving pods that would run on any node: not this pool's demand (it did not opt in).
    kube.put("pods", "serving", waiting("elsewhere", 8, selector={"tidal.dev/rack": "r9"}))
    kube.put("pods", "serving", waiting("anywhere", 8))
    nodesync.cluster_sync_nodes(cluster)
    cycle()
    assert Job.objects.get(pk=lent.pk).state in ("admitted", "dispatching", "running")

    # Two vLLM replicas wait for the pool's nodes: 16 devices of demand, nothing left to lend.
    kube.put("pods", "serving", waiting("vllm-0", 8, selector={"tidal.dev/rack": "r1"}))
    kube.put("pods", "serving", waiting("vllm-1", 8, affinity=[{"key": "tidal.dev/rack", "operator": "In",
                                                                "values": ["r2"]}]))
    nodesync.cluster_sync_nodes(cluster)
    assert [p["pod"] for p in Cluster.objects.get(pk=cluster.pk).pending_foreign] == [
        "serving/anywhere", "serving/elsewhere", "serving/vllm-0", "serving/vllm-1"]
    cycle()
    job = Job.objects.get(pk=lent.pk)
    assert job.state in ("preempted", "queued")
    assert job.events.filter(to_state="preempted", reason__contains="pool chat took back").exists()
    assert pool.give_backs.get().devices == 8


def test_a_pool_that_opts_in_counts_pending_pods_without_a_selector(tenant, kube_inventory):
    from django.utils import timezone

    from jobs.snapshot import build_snapshot

    cluster, h100 = kube_inventory["cluster"], kube_inventory["h100"]
    Pool.objects.create(name="chat", cluster=cluster, flavor=h100, node_pattern="gpu-2", headroom_percent=0,
                        pending_without_selector=True)
    Cluster.objects.filter(pk=cluster.pk).update(pending_foreign=[
        {"pod": "s/a", "resource": "nvidia.com/gpu", "devices": 3, "nodes": ["gpu-1", "gpu-2"], "selector": False},
        {"pod": "s/b", "resource": "nvidia.com/gpu", "devices": 2, "nodes": ["gpu-1"], "selector": True},
        {"pod": "s/c", "resource": "amd.com/gpu", "devices": 4, "nodes": ["gpu-2"], "selector": True}])
    snap = build_snapshot(timezone.now().timestamp()).snapshot
    assert [(p.name, p.lendable) for p in snap.pools] == [("chat", 5)]  # 8 - 3: not gpu-1's pod, not amd's
