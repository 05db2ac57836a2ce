"""The backend under the RBAC of docs/kubernetes.md, enforced by the API emulator (tests/clusters/kube/apiserver.py):
a run of every operation (dispatch, adoption, logs, resync, watch, node sync, a failure's evidence, cordon, stop,
orphan sweep, a service's apply, update, scale, readiness and delete) is never refused, uses exactly the rights
"Test connection" checks, and the sweep goes namespace by namespace."""

from __future__ import annotations

import logging
from dataclasses import replace

import pytest

from clusters.backends.kubernetes import clients, nodesync, sweep
from clusters.backends.kubernetes.backend import KubernetesBackend
from clusters.backends.kubernetes.watch import PodWatch
from clusters.kube import serving
from clusters.kube.client import CORDON_PERMISSIONS, REQUIRED_PERMISSIONS, Permission
from clusters.kube.dispatch import dispatch
from clusters.kube.render import render
from clusters.kube.spec import ClusterSettings, Placement, RenderJob, ReplicaGroup, ReplicaPlacement
from jobs.logs import job_logs
from jobs.models import Job
from jobs.ports import Phase
from jobs.selectors import attempt_with_job
from quotas.models import Quota
from tests.clusters.kube.apiserver import ApiServerGate, Policy, documented_rbac
from tests.clusters.test_kube_serving import make_spec
from tests.clusters.test_kubernetes_backend import NS, pods_of, set_status, terminated
from tests.clusters.test_node_sync import node
from tests.jobs.conftest import submit

OTHER_NS = "tidal-secret"  # the namespace of the tenant's other project (first by slug)


def orphan(namespace: str = NS) -> list[dict]:
    """An attempt of a job Tidal no longer runs, with a run-token Secret (the renderer adds one for a tracking
    token), as a crash between dispatch and the database commit would leave it."""
    job = RenderJob(job_id=99999, name="ghost", project="vision", namespace=namespace, attempt=3, launcher="command",
                    image="x:1", command=("true",), replica_groups=(ReplicaGroup("worker", 1, 0),),
                    secret_env={"TIDAL_RUN_TOKEN": "t"})
    return render(job, Placement((ReplicaPlacement("worker", 0, "gpu-2"),)),
                  ClusterSettings(namespace=namespace, instance="ci"))


@pytest.fixture
def gate(kube) -> ApiServerGate:
    """The documented RBAC, with the per-project RoleBinding in both project namespaces."""
    kube.gate.policy = Policy(documented_rbac([NS, OTHER_NS]))
    return kube.gate


def test_every_operation_runs_under_the_documented_rbac_with_exactly_the_checked_rights(
        gate, tenant, kube_inventory, kube, cycle, settings) -> None:
    cluster = kube_inventory["cluster"]
    backend = KubernetesBackend(cluster)
    report = clients.cluster_test_connection(cluster)
    assert report.ok and report.missing == [] and report.namespace == OTHER_NS

    job = submit(tenant, kube_inventory["h100"], replicas=2)
    cycle()  # admitted and dispatched: the parent, the Service, two pods
    job = Job.objects.get(pk=job.pk)
    attempt = attempt_with_job(job.current_attempt_id)
    assert len(pods_of(kube, job)) == 2
    assert backend.create(attempt)  # a redelivered dispatch adopts every object (get on 409)
    ghost = orphan()
    dispatch(backend.client, ghost, workers=1)
    dispatch(backend.client, ghost, workers=1)  # its Secret too is created, then adopted

    pod = next(iter(pods_of(kube, job)))
    kube.handler[f"get /api/v1/namespaces/{NS}/pods/{pod}/log"] << b"step 1\n"
    assert job_logs(job, replica="worker-0")["source"] == "pod"  # log tail
    assert list(backend.follow(attempt, "worker", 0, 10, 30.0))  # log follow (what it reads is another test's)

    list(backend.observe([attempt]))  # status: every platform pod, one cluster-wide list
    watch = PodWatch(backend)
    events = watch.watcher.events()
    assert next(events).type == "RELIST" and next(events).type == "ADDED"  # the cluster-wide pod watch
    watch.watcher.close()
    events.close()

    kube.put("nodes", None, node("gpu-1", product="NVIDIA-H100-80GB-HBM3", rack="r1"))
    nodesync.cluster_sync_nodes(cluster)  # nodes, and pods of every namespace

    set_status(kube, kube.objects("pods")[(NS, pod)], terminated(1, "Error"))
    failed = [o for o in backend.observe([attempt]) if o.phase == Phase.FAILED]  # its evidence: events, nodes
    assert failed and "node_conditions" not in failed[0].details  # gpu-1 is healthy
    settings.TIDAL = {**settings.TIDAL, "QUARANTINE_CORDON": True}
    assert clients.cluster_test_connection(cluster).missing == []  # the cordon's right is checked too, and granted
    backend.cordon("gpu-1", True)
    backend.cordon("gpu-1", False)

    backend.stop(attempt, "cancelled")
    assert pods_of(kube, job) == {}
    deleted = sweep.cluster_sweep_orphans(cluster)
    assert sorted(deleted) == sorted(f"{m['kind']}/{NS}/{m['metadata']['name']}" for m in ghost)

    service = make_spec(namespace=NS)  # a Tidal-run inference service (clusters/kube/serving.py)
    serving.apply(backend.client, service)
    serving.apply(backend.client, replace(service, image="registry.example.com/vllm:0.7", port=9000))
    serving.scale(backend.client, NS, service.key, 3)
    assert serving.ready_replicas(backend.client, NS, service.key) == 0
    serving.delete(backend.client, NS, service.key)

    assert gate.denied == []
    used = {Permission(a.verb, a.resource, a.subresource, bool(a.namespace), a.group) for a in gate.authorized}
    # every right checked is used, and every right used is checked
    assert used == set(REQUIRED_PERMISSIONS) | set(CORDON_PERMISSIONS)


def test_the_sweep_lists_only_in_the_namespaces_of_projects_with_jobs(gate, tenant, kube_inventory, kube) -> None:
    cluster = kube_inventory["cluster"]
    assert sweep.cluster_namespaces(cluster) == []  # no job yet: nothing of Tidal's can be anywhere
    submit(tenant, kube_inventory["h100"])
    assert sweep.cluster_namespaces(cluster) == [NS]
    Quota.objects.create(project=tenant.other_project, flavor=kube_inventory["h100"], guaranteed=8)
    submit(tenant, kube_inventory["h100"], project=tenant.other_project, user="outsider")
    assert sweep.cluster_namespaces(cluster) == sorted([NS, OTHER_NS])
    sweep.cluster_sweep_orphans(cluster)
    assert gate.denied == [] and {a.namespace for a in gate.authorized} == {NS, OTHER_NS}


def test_a_namespace_without_its_rolebinding_is_skipped_with_a_warning(tenant, kube_inventory, kube, caplog) -> None:
    Quota.objects.create(project=tenant.other_project, flavor=kube_inventory["h100"], guaranteed=8)
    submit(tenant, kube_inventory["h100"])
    submit(tenant, kube_inventory["h100"], project=tenant.other_project, user="outsider")
    client = KubernetesBackend(kube_inventory["cluster"]).client
    for namespace in (NS, OTHER_NS):
        dispatch(client, orphan(namespace), workers=1)
    kube.gate.policy = Policy(documented_rbac([NS]))  # the other project's namespace was never bound
    with caplog.at_level(logging.WARNING, logger="clusters.backends.kubernetes.sweep"):
        deleted = sweep.cluster_sweep_orphans(kube_inventory["cluster"])
    assert deleted and all(f"/{NS}/" in d for d in deleted)  # the bound namespace is still swept
    assert f"skipped namespace {OTHER_NS}" in caplog.text and "forbidden" in caplog.text
