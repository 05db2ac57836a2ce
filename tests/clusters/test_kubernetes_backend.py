"""KubernetesBackend against kmock over real HTTP: dispatch, adoption, permanent failure, reconcile, recovery,
node loss, cancellation and the orphan sweep."""

from __future__ import annotations

import copy
from datetime import timedelta

import pytest
from django.utils import timezone

from clusters import services as cluster_services
from clusters.backends.kubernetes import KubernetesBackend, group_pods
from clusters.kube import names
from clusters.kube.render import render
from clusters.kube.spec import ClusterSettings, Placement, RenderJob, ReplicaGroup, ReplicaPlacement
from clusters.models import Node
from jobs import services as job_services
from jobs.models import Job
from jobs.states import State
from tests.jobs.conftest import submit

NS = "tidal-vision"


def pods_of(kube, job: Job, attempt: int | None = None) -> dict[str, dict]:
    attempt = job.attempt if attempt is None else attempt
    return {name: obj for (ns, name), obj in kube.objects("pods").items()
            if obj["metadata"].get("labels", {}).get(names.LABEL_JOB) == str(job.pk)
            and obj["metadata"].get("labels", {}).get(names.LABEL_ATTEMPT) == str(attempt)}


def live_names(kube) -> set[str]:
    out = set()
    for plural in ("pods", "services", "configmaps", "secrets"):
        out |= {name for (_, name) in kube.objects(plural)}
    return out


def forget(kube, name: str) -> None:
    """Make an object vanish as if deleted by someone else."""
    for key, obj in list(kube.handler.objects.items()):
        if key[2] == name:
            obj.delete()


def set_status(kube, pod: dict, status: dict, node: str | None = None) -> dict:
    """Play the kubelet: give a stored pod a status (and a node)."""
    pod = copy.deepcopy(pod)
    pod["status"] = status
    pod["spec"]["nodeName"] = node or pod["metadata"]["annotations"][names.ANNOTATION_NODE]
    kube.put("pods", pod["metadata"]["namespace"], pod)
    return pod


def running() -> dict:
    return {"phase": "Running", "containerStatuses": [{"name": "main", "state": {"running": {}}}]}


def terminated(exit_code: int, reason: str, phase: str = "Failed") -> dict:
    return {"phase": phase, "containerStatuses": [
        {"name": "main", "state": {"terminated": {"exitCode": exit_code, "reason": reason}}}]}


def refresh(job: Job) -> Job:
    return Job.objects.get(pk=job.pk)


@pytest.fixture
def dispatched(tenant, kube_inventory, cycle):
    """A 2-replica pytorch job admitted by the scheduler and dispatched to kmock."""
    def make(**kwargs) -> Job:
        kwargs.setdefault("replicas", 2)
        job = submit(tenant, kube_inventory["h100"], **kwargs)
        cycle()
        return refresh(job)
    return make


def test_scheduler_admits_and_dispatch_creates_the_objects(dispatched, kube) -> None:
    job = dispatched(checkpoint_path="s3://ckpt/run1")
    assert job.state == State.DISPATCHING
    pods = pods_of(kube, job)
    assert sorted(p["metadata"]["labels"][names.LABEL_RANK] for p in pods.values()) == ["0", "1"]
    assert all(p["metadata"]["namespace"] == NS for p in pods.values())
    placed = {row["node"] for row in job.placement}
    hosts = {p["spec"]["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
             ["nodeSelectorTerms"][0]["matchExpressions"][0]["values"][0] for p in pods.values()}
    assert hosts == {f"{n}.internal" for n in placed}  # pinned by the node's hostname label
    pod = next(iter(pods.values()))
    env = {e["name"]: e.get("value") for e in pod["spec"]["containers"][0]["env"]}
    assert env["TIDAL_CHECKPOINT_PATH"] == "s3://ckpt/run1" and env["TIDAL_ATTEMPT"] == "1"
    assert env["NCCL_SOCKET_IFNAME"] == "ib0" and env["NCCL_DEBUG"] == "INFO"
    assert pod["spec"]["imagePullSecrets"] == [{"name": "regcred"}]
    assert pod["spec"]["terminationGracePeriodSeconds"] == 45
    note = job.events.filter(kind="note").last()
    assert note.reason.startswith("created 4 objects in namespace tidal-vision")  # parent, service, 2 pods


def test_redispatch_adopts_existing_objects_on_409(dispatched, kube, kube_inventory) -> None:
    job = dispatched()
    before = live_names(kube)
    victim = next(iter(pods_of(kube, job)))
    forget(kube, victim)  # a half-done first try
    KubernetesBackend(kube_inventory["cluster"]).dispatch(job.pk)
    job = refresh(job)
    assert job.state == State.DISPATCHING
    assert live_names(kube) == before
    note = job.events.filter(kind="note").last()
    assert note.reason == "created 1 objects in namespace tidal-vision, adopted 3 that already existed"
    assert note.details["created"] == [f"Pod/{victim}"]


def test_dispatch_claims_exactly_once(dispatched, kube, kube_inventory) -> None:
    job = dispatched()
    claims = job.events.filter(to_state=State.DISPATCHING).count()
    job_services.job_mark_running(job)
    KubernetesBackend(kube_inventory["cluster"]).dispatch(job.pk)  # a late duplicate task: nothing happens
    assert job.events.filter(to_state=State.DISPATCHING).count() == claims == 1
    assert refresh(job).state == State.RUNNING


def test_permanent_error_fails_the_job_with_the_reason(tenant, kube_inventory, kube, cycle) -> None:
    kube.handler[f"post /api/v1/namespaces/{NS}/pods"] << 403 << {
        "kind": "Status", "code": 403, "reason": "Forbidden",
        "message": "pods is forbidden: exceeded quota: gpu-quota, requested: nvidia.com/gpu=8"}
    job = submit(tenant, kube_inventory["h100"], retry_limit=3)
    cycle()
    job = refresh(job)
    assert job.state == State.FAILED  # not retryable, whatever the retry limit
    assert job.failure_cause == "invalid_spec"
    assert "exceeded quota: gpu-quota" in job.events.filter(to_state=State.FAILED).get().reason
    assert not any(n.startswith(f"tidal-{job.pk}-") for n in live_names(kube))  # what was created is cleaned up


def test_render_error_fails_the_job(tenant, kube_inventory, kube, cycle) -> None:
    job = submit(tenant, kube_inventory["h100"], replicas=1, launcher="megatron")
    Job.objects.filter(pk=job.pk).update(launcher_options={"tensor_parallel": 3})  # 3 does not divide 8
    cycle()
    job = refresh(job)
    assert job.state == State.FAILED and job.failure_cause == "invalid_spec"
    assert "cannot be rendered" in job.events.filter(to_state=State.FAILED).get().reason
    assert live_names(kube) == set()


def test_transient_errors_leave_the_job_dispatching_for_the_resync(tenant, kube_inventory, kube, kube_client,
                                                                    sleeps) -> None:
    job = submit(tenant, kube_inventory["h100"], replicas=1)
    Job.objects.filter(pk=job.pk).update(state=State.ADMITTED, cluster=kube_inventory["cluster"], admitted_at=(
        timezone.now() - timedelta(minutes=5)), placement=[{"role": "worker", "index": 0, "node": "gpu-1",
                                                            "devices": 8}])
    unavailable = {"kind": "Status", "code": 503, "reason": "ServiceUnavailable"}
    # kmock stores an object even when a reaction answers 5xx, so the retried POST meets 409 and reads it back:
    # make that read fail too until the client gives up.
    kube.handler[f"post /api/v1/namespaces/{NS}/configmaps"][:1] << 503 << unavailable
    kube.handler[f"get /api/v1/namespaces/{NS}/configmaps/tidal-{job.pk}-train-a1"][:3] << 503 << unavailable
    backend = KubernetesBackend(kube_inventory["cluster"], client=kube_client)
    backend.dispatch(job.pk)
    job = refresh(job)
    assert job.state == State.DISPATCHING and len(sleeps) == 3  # retried with backoff, then given up
    assert "Kubernetes API is unavailable" in job.events.filter(kind="note").last().reason
    backend.resync()  # the API is back: the resync creates the missing objects
    assert len(pods_of(kube, job)) == 1


def test_reconcile_running_then_succeeded_keeps_rank0_log_and_cleans_up(dispatched, kube, kube_inventory) -> None:
    job = dispatched()
    backend = KubernetesBackend(kube_inventory["cluster"])
    pods = pods_of(kube, job)
    first, second = sorted(pods.values(), key=lambda p: p["metadata"]["labels"][names.LABEL_RANK])
    set_status(kube, first, running())
    backend.resync()
    assert refresh(job).state == State.DISPATCHING  # one replica still pending
    set_status(kube, second, running())
    backend.resync()
    assert refresh(job).state == State.RUNNING
    kube.handler[f"get /api/v1/namespaces/{NS}/pods/{first['metadata']['name']}/log"] << b"epoch 9\ndone\n"
    set_status(kube, first, terminated(0, "Completed", phase="Succeeded"))
    backend.resync()
    job = refresh(job)
    assert job.state == State.SUCCEEDED
    assert job.events.get(kind="log").details["logs"] == {"worker-0": ["epoch 9", "done"]}
    assert not any(n.startswith(f"tidal-{job.pk}-") for n in live_names(kube))


def test_oomkilled_retries_from_the_checkpoint_with_a_new_attempt(dispatched, kube, kube_inventory, cycle) -> None:
    job = dispatched(retry_limit=2, retry_backoff=10, checkpoint_path="s3://ckpt/bert")
    backend = KubernetesBackend(kube_inventory["cluster"])
    rank0, rank1 = sorted(pods_of(kube, job).values(), key=lambda p: p["metadata"]["labels"][names.LABEL_RANK])
    set_status(kube, rank0, running())
    oom = set_status(kube, rank1, terminated(137, "OOMKilled"))
    kube.handler[f"get /api/v1/namespaces/{NS}/pods/{oom['metadata']['name']}/log"] << b"loading shard 7\nKilled\n"
    backend.resync()
    job = refresh(job)
    assert job.state == State.RETRYING and job.failure_cause == "host_oom"
    failure = job.events.get(to_state=State.RETRYING)
    assert failure.details["cause"] == "host_oom" and failure.details["exit_code"] == 137
    assert failure.details["logs"]["worker-1"] == ["loading shard 7", "Killed"]
    assert failure.details["rack"] in ("r1", "r2")
    assert pods_of(kube, job, attempt=1) == {}  # the whole gang is stopped

    job_services.job_requeue_due_retries(now=timezone.now() + timedelta(seconds=11))
    cycle()
    job = refresh(job)
    assert (job.state, job.attempt) == (State.DISPATCHING, 2)
    new = pods_of(kube, job)
    assert len(new) == 2 and all("-a2-" in name for name in new)
    env = {e["name"]: e.get("value") for e in next(iter(new.values()))["spec"]["containers"][0]["env"]}
    assert env["TIDAL_ATTEMPT"] == "2" and env["TIDAL_CHECKPOINT_PATH"] == "s3://ckpt/bert"


def test_image_pull_failure_is_not_retried(dispatched, kube, kube_inventory) -> None:
    job = dispatched(replicas=1, retry_limit=3)
    pod = next(iter(pods_of(kube, job).values()))
    set_status(kube, pod, {"phase": "Pending", "containerStatuses": [{"name": "main", "state": {"waiting": {
        "reason": "ImagePullBackOff", "message": "manifest unknown"}}}]})
    KubernetesBackend(kube_inventory["cluster"]).resync()
    job = refresh(job)
    assert job.state == State.FAILED and job.failure_cause == "image_pull"


def test_node_not_ready_under_a_running_job_retries_avoiding_the_node(dispatched, kube, kube_inventory,
                                                                        cycle) -> None:
    job = dispatched(replicas=1, retry_limit=1, retry_backoff=0)
    backend = KubernetesBackend(kube_inventory["cluster"])
    pod = next(iter(pods_of(kube, job).values()))
    set_status(kube, pod, running())
    backend.resync()
    node = refresh(job).placement[0]["node"]
    Node.objects.filter(cluster=kube_inventory["cluster"], name=node).update(ready=False)  # as node sync writes it
    backend.resync()
    job = refresh(job)
    assert job.state == State.RETRYING and job.failure_cause == "node_lost"
    assert job.avoid_nodes == [f"gpu/{node}"]
    Node.objects.filter(name=node).update(ready=True)  # it comes back, but the retry still avoids it
    job_services.job_requeue_due_retries(now=timezone.now() + timedelta(seconds=1))
    cycle()
    job = refresh(job)
    assert job.state == State.DISPATCHING and job.placement[0]["node"] != node


def test_pods_disappearing_under_a_running_job_fail_the_attempt(dispatched, kube, kube_inventory) -> None:
    job = dispatched(replicas=2, retry_limit=1)
    backend = KubernetesBackend(kube_inventory["cluster"])
    for pod in pods_of(kube, job).values():
        set_status(kube, pod, running())
    backend.resync()
    assert refresh(job).state == State.RUNNING
    gone = next(iter(pods_of(kube, job)))
    forget(kube, gone)
    backend.resync()
    assert refresh(job).state == State.RETRYING


def test_cancellation_deletes_the_objects_with_the_grace_period(tenant, dispatched, kube,
                                                                django_capture_on_commit_callbacks) -> None:
    job = dispatched()
    assert pods_of(kube, job)
    with django_capture_on_commit_callbacks(execute=True):
        job_services.job_cancel(actor=tenant.users["member"], job=job)
    assert refresh(job).state == State.CANCELLED
    assert not any(n.startswith(f"tidal-{job.pk}-") for n in live_names(kube))
    pod_deletes = [r for r in kube.handler[kube.handler.action.DELETE] if "/pods/" in r.url.path]
    assert len(pod_deletes) == 2 and {r.data["gracePeriodSeconds"] for r in pod_deletes} == {45}
    assert "stopped attempt 1 (cancelled)" in job.events.filter(kind="note").last().reason


def test_preemption_stop_deletes_the_old_attempt(dispatched, kube, kube_inventory) -> None:
    job = dispatched(replicas=1)
    KubernetesBackend(kube_inventory["cluster"]).stop(job.pk, 1, "preempted")
    assert pods_of(kube, job, attempt=1) == {}


def test_orphan_sweep_deletes_objects_of_no_active_attempt(dispatched, kube, kube_inventory) -> None:
    job = dispatched(replicas=1)
    stale = RenderJob(job_id=99999, name="ghost", project="vision", namespace=NS, attempt=3, launcher="command",
                      image="x:1", command=("true",), replica_groups=(ReplicaGroup("worker", 1, 0),))
    manifests = render(stale, Placement((ReplicaPlacement("worker", 0, "gpu-2"),)),
                       ClusterSettings(namespace=NS, instance="ci"))
    backend = KubernetesBackend(kube_inventory["cluster"])
    for manifest in manifests:
        backend.client.create(manifest)
    foreign = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "notebook", "namespace": NS}}
    kube.put("pods", NS, foreign)
    deleted = cluster_services.cluster_sweep_orphans(kube_inventory["cluster"])
    assert sorted(deleted) == sorted(f"{m['kind']}/{NS}/{m['metadata']['name']}" for m in manifests)
    assert pods_of(kube, job) and "notebook" in live_names(kube)


def test_group_pods_ignores_other_instances_and_unlabelled_pods(settings) -> None:
    settings.TIDAL = {**settings.TIDAL, "KUBE_INSTANCE": "ci"}

    def pod(**labels):
        return {"metadata": {"name": "p", "labels": labels}}

    own = {names.LABEL_MANAGED: "true", names.LABEL_INSTANCE: "ci"}
    grouped = group_pods([
        pod(**own, **{names.LABEL_JOB: "5", names.LABEL_ATTEMPT: "2"}),
        pod(**{**own, names.LABEL_INSTANCE: "staging"}, **{names.LABEL_JOB: "5", names.LABEL_ATTEMPT: "2"}),
        pod(**own),
    ])
    assert list(grouped) == [("5", 2)] and len(grouped[("5", 2)]) == 1
