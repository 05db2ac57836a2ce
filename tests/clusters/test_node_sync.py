"""Node inventory sync: node and pod dicts -> Node rows (flavor rules, foreign devices, topology, gone nodes)."""

from __future__ import annotations

from clusters.backends.kubernetes import nodesync
from clusters.kube import names
from clusters.models import Cluster, FlavorRule, Node
from quotas.models import ResourceFlavor


def node(name: str, *, product: str = "", gpus: int = 8, rack: str = "", ready: bool = True,
         unschedulable: bool = False, taints: list | None = None, extra: dict | None = None) -> dict:
    labels = {"kubernetes.io/hostname": f"{name}.internal", "kubernetes.io/arch": "amd64"}
    if product:
        labels["nvidia.com/gpu.product"] = product
    if rack:
        labels["tidal.dev/rack"] = rack
        labels["tidal.dev/block"] = "b1"
    allocatable = {"cpu": "96", "memory": "1024Gi", "nvidia.com/gpu": str(gpus), **(extra or {})}
    return {"metadata": {"name": name, "labels": labels},
            "spec": {"unschedulable": unschedulable, "taints": taints or []},
            "status": {"allocatable": allocatable,
                       "conditions": [{"type": "Ready", "status": "True" if ready else "False"}]}}


def pod(name: str, node_name: str, gpus: int, *, platform: bool = False, phase: str = "Running") -> dict:
    labels = {names.LABEL_MANAGED: "true", names.LABEL_INSTANCE: "ci"} if platform else {"app": "notebook"}
    return {"metadata": {"name": name, "namespace": "ml", "labels": labels},
            "spec": {"nodeName": node_name, "containers": [{"name": "c", "resources": {
                "requests": {"cpu": "2", "memory": "8Gi"}, "limits": {"nvidia.com/gpu": str(gpus)}}}]},
            "status": {"phase": phase}}


def test_upsert_creates_updates_and_marks_gone_nodes(kube_inventory) -> None:
    cluster = kube_inventory["cluster"]
    a100 = ResourceFlavor.objects.create(name="nvidia-a100-80gb", vendor="nvidia", device_resource="nvidia.com/gpu")
    FlavorRule.objects.create(cluster=cluster, pattern="*a100*80gb*", flavor=a100, position=1)
    nodes = [
        node("gpu-1", product="NVIDIA-H100-80GB-HBM3", rack="r1", unschedulable=True,
             taints=[{"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}]),
        node("gpu-3", product="NVIDIA-A100-SXM4-80GB", rack="r3", ready=False),
        node("cpu-1", gpus=0),  # no product, no device: no rule matches
        node("gpu-4", product="Tesla-T4"),  # no rule for it
    ]
    pods = [pod("jupyter", "gpu-1", 2), pod("ours", "gpu-1", 4, platform=True), pod("done", "gpu-1", 8,
                                                                                     phase="Succeeded")]
    report = nodesync.nodes_upsert(cluster, nodes, pods)
    assert report.created == ["gpu-3"] and report.updated == ["gpu-1"] and report.gone == ["gpu-2"]
    assert sorted(report.unmatched) == ["cpu-1", "gpu-4"]

    gpu1 = Node.objects.get(cluster=cluster, name="gpu-1")
    assert (gpu1.devices, gpu1.foreign_used) == (8, 2)  # only the foreign running pod's GPUs are subtracted
    assert gpu1.cordoned and gpu1.ready and gpu1.rack == "r1" and gpu1.block == "b1"
    assert gpu1.hostname == "gpu-1.internal" and gpu1.product == "NVIDIA-H100-80GB-HBM3"
    assert gpu1.taints == [{"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}]
    assert gpu1.cpu_millis == 94000 and gpu1.memory_mib == 1024 * 1024 - 8 * 1024
    gpu3 = Node.objects.get(cluster=cluster, name="gpu-3")
    assert gpu3.flavor == a100 and not gpu3.ready and gpu3.position == 3  # appended after the existing nodes
    gpu2 = Node.objects.get(cluster=cluster, name="gpu-2")  # left the cluster: kept, not ready
    assert not gpu2.ready
    cluster.refresh_from_db()
    assert cluster.last_sync_at is not None and cluster.last_sync_error == ""

    again = nodesync.nodes_upsert(cluster, nodes, pods)
    assert again.created == again.updated == again.gone == []  # idempotent


def test_cluster_rules_come_before_global_rules(kube_inventory) -> None:
    cluster = kube_inventory["cluster"]
    special = ResourceFlavor.objects.create(name="h100-special", vendor="nvidia", device_resource="nvidia.com/gpu")
    FlavorRule.objects.create(cluster=cluster, pattern="NVIDIA-H100*", flavor=special, position=5)
    other = Cluster.objects.create(name="other")
    FlavorRule.objects.create(cluster=other, pattern="*", flavor=special)
    from clusters.selectors import flavor_rules_for

    assert flavor_rules_for(cluster) == [("NVIDIA-H100*", "h100-special"), ("nvidia-h100*", "nvidia-h100-80gb")]
    nodesync.nodes_upsert(cluster, [node("gpu-7", product="NVIDIA-H100-80GB-HBM3")], [])
    assert Node.objects.get(name="gpu-7").flavor == special


def test_sync_over_http_from_kmock(kube_inventory, kube) -> None:
    kube.put("nodes", None, node("gpu-1", product="NVIDIA-H100-80GB-HBM3", rack="r7"))
    kube.put("pods", "ml", pod("jupyter", "gpu-1", 3))
    report = nodesync.cluster_sync_nodes(kube_inventory["cluster"])
    assert report.updated == ["gpu-1"] and report.gone == ["gpu-2"]
    gpu1 = Node.objects.get(name="gpu-1")
    assert gpu1.rack == "r7" and gpu1.foreign_used == 3


def test_sync_task_is_a_noop_without_kubernetes_clusters(db) -> None:
    from clusters.backends.kubernetes.tasks import kube_resync_task, kube_sweep_orphans_task, kube_sync_nodes_task

    Cluster.objects.create(name="sim")
    kube_sync_nodes_task()
    kube_resync_task()
    kube_sweep_orphans_task()
    assert not Node.objects.exists()


def cpu_node(name: str, *, arch: str = "amd64") -> dict:
    """A node without accelerators: no product label, no device resource."""
    raw = node(name)
    raw["metadata"]["labels"]["kubernetes.io/arch"] = arch
    del raw["status"]["allocatable"]["nvidia.com/gpu"]
    return raw


def test_nodes_without_accelerators_become_the_cpu_flavor_of_their_arch(kube_inventory) -> None:
    cluster = kube_inventory["cluster"]
    cpu = ResourceFlavor.objects.create(name="cpu", vendor="none", device_resource="cpu")
    ascend = ResourceFlavor.objects.create(name="ascend-910b", vendor="huawei", device_resource="huawei.com/Ascend910",
                                           arch="arm64")
    FlavorRule.objects.create(pattern="huawei.com/ascend910", flavor=ascend)
    npu = cpu_node("npu-1", arch="arm64")
    npu["status"]["allocatable"]["huawei.com/Ascend910"] = "8"
    bare_gpu = node("gpu-9")  # GPUs, but GFD did not label it: its product is the device resource name
    nodes = [cpu_node("cpu-1"), cpu_node("cpu-arm", arch="arm64"), node("gpu-4", product="Tesla-T4"), npu, bare_gpu]
    report = nodesync.nodes_upsert(cluster, nodes, [pod("etl", "cpu-1", 0)])

    assert sorted(report.created) == ["cpu-1", "npu-1"]
    cpu1 = Node.objects.get(cluster=cluster, name="cpu-1")
    assert cpu1.flavor == cpu and (cpu1.devices, cpu1.foreign_used) == (0, 0) and cpu1.cpu_millis == 94000
    # A CPU flavor's `cpu` resource is not a device: the unlabelled Ascend node still matches its rule.
    assert Node.objects.get(name="npu-1").flavor == ascend
    assert report.unmatched == {
        "cpu-arm": "no accelerator, and no CPU flavor (device resource empty or cpu) for arm64",
        "gpu-4": "Tesla-T4: no flavor rule matches",  # GPUs no rule knows are never taken for CPU nodes
        "gpu-9": "nvidia.com/gpu: no flavor rule matches",
    }
    cluster.refresh_from_db()
    assert "gpu-4 (Tesla-T4: no flavor rule matches)" in cluster.last_sync_skipped
    assert "3 not imported: cpu-arm (no accelerator" in report.summary()


def test_without_a_cpu_flavor_cpu_nodes_are_skipped_and_a_known_gpu_node_keeps_its_flavor(kube_inventory) -> None:
    cluster = kube_inventory["cluster"]
    plugin_restarting = cpu_node("gpu-1")  # no GPUs advertised, no product label for a moment
    report = nodesync.nodes_upsert(cluster, [plugin_restarting, cpu_node("cpu-1")], [])
    assert report.unmatched == {"cpu-1": "no accelerator, and no CPU flavor (device resource empty or cpu) for amd64"}
    gpu1 = Node.objects.get(cluster=cluster, name="gpu-1")
    assert gpu1.flavor == kube_inventory["h100"] and gpu1.devices == 0
    ResourceFlavor.objects.create(name="cpu", vendor="none", device_resource="")  # empty counts as CPU too
    again = nodesync.nodes_upsert(cluster, [plugin_restarting, cpu_node("cpu-1")], [])
    assert again.created == ["cpu-1"] and again.unmatched == {}
    assert Node.objects.get(name="gpu-1").flavor == kube_inventory["h100"]  # still not a CPU node
    cluster.refresh_from_db()
    assert cluster.last_sync_skipped == ""


def test_a_cpu_job_is_placed_on_a_synced_cpu_node_and_asks_no_device(tenant, kube_inventory, kube, cycle) -> None:
    from jobs.models import Job
    from quotas.models import Quota
    from tests.jobs.conftest import submit

    cpu = ResourceFlavor.objects.create(name="cpu", vendor="none", device_resource="cpu")
    Quota.objects.create(project=tenant.project, flavor=cpu)
    nodesync.nodes_upsert(kube_inventory["cluster"], [node("gpu-1", product="NVIDIA-H100-80GB-HBM3"),
                                                      node("gpu-2", product="NVIDIA-H100-80GB-HBM3"),
                                                      cpu_node("cpu-1")], [])
    job = submit(tenant, cpu, replicas=2, devices=0)
    cycle()
    job = Job.objects.get(pk=job.pk)
    assert job.state == "dispatching" and {row["node"] for row in job.current_attempt.placement} == {"cpu-1"}
    pods = [p for (_, _), p in kube.objects("pods").items()]
    assert len(pods) == 2
    for manifest in pods:
        resources = manifest["spec"]["containers"][0]["resources"]
        assert set(resources["requests"]) == {"cpu", "memory"} and set(resources["limits"]) == {"memory"}


def test_cpu_jobs_fill_synced_nodes_by_the_cpu_their_pods_request(tenant, kube_inventory, kube, cycle) -> None:
    """What the scheduler counts is what the pods request: node sync leaves out what other pods request (never
    down to 0, which would read as "not modelled"), the scheduler counts each replica's group's requests against
    the rest, and the pods it creates request exactly those."""
    from jobs.models import Job
    from quotas.models import Quota
    from tests.jobs.conftest import submit

    cpu = ResourceFlavor.objects.create(name="cpu", vendor="none", device_resource="cpu")
    Quota.objects.create(project=tenant.project, flavor=cpu)
    hog = pod("etl", "cpu-1", 0)
    hog["spec"]["containers"][0]["resources"]["requests"] = {"cpu": "96", "memory": "1024Gi"}
    nodesync.nodes_upsert(kube_inventory["cluster"], [node("gpu-1", product="NVIDIA-H100-80GB-HBM3"),
                                                      node("gpu-2", product="NVIDIA-H100-80GB-HBM3"),
                                                      cpu_node("cpu-1"), cpu_node("cpu-2")], [hog])
    cpu1, cpu2 = (Node.objects.get(cluster=kube_inventory["cluster"], name=n) for n in ("cpu-1", "cpu-2"))
    assert (cpu1.cpu_millis, cpu1.memory_mib) == (1, 1)  # taken by another pod, still modelled
    assert (cpu2.cpu_millis, cpu2.memory_mib) == (96_000, 1024 * 1024)

    jobs = [submit(tenant, cpu, devices=0, name=f"etl-{i}") for i in range(4)]
    for j in jobs:
        j.groups.update(cpu_millis=32_000, memory_mib=65_536)
    cycle()

    placed = Job.objects.filter(pk__in=[j.pk for j in jobs], state="dispatching").order_by("pk")
    assert [row["node"] for j in placed for row in j.current_attempt.placement] == ["cpu-2"] * 3
    waiting = Job.objects.get(pk=jobs[3].pk)
    assert waiting.state == "queued" and waiting.wait_reason.startswith(
        "waiting for CPU: needs 1 x 32 cores on cpu nodes")
    pods = [p for (_, _), p in kube.objects("pods").items()]
    assert len(pods) == 3
    for manifest in pods:
        assert manifest["spec"]["containers"][0]["resources"]["requests"] == {"cpu": "32000m", "memory": "65536Mi"}


def test_every_scheduled_task_is_registered_by_the_modules_the_worker_imports(settings) -> None:
    """The Kubernetes tasks moved out of `clusters.tasks` keep their names, which beat and queued messages carry."""
    from mlplatform.celery import app

    app.loader.import_default_modules()
    registered = set(app.tasks)
    assert {entry["task"] for entry in settings.CELERY_BEAT_SCHEDULE.values()} <= registered
    assert {"clusters.tasks.kube_resync_task", "clusters.tasks.kube_sync_nodes_task",
            "clusters.tasks.kube_sweep_orphans_task"} <= registered
