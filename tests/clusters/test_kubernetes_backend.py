"""KubernetesBackend against kmock over real HTTP: dispatch, adoption, permanent failure, reconcile, recovery,
node loss, cancellation and the orphan sweep."""

from __future__ import annotations

import copy
from datetime import timedelta

import pytest
from django.utils import timezone

from clusters.backends.kubernetes import nodesync, sweep
from clusters.backends.kubernetes.backend import KubernetesBackend, group_pods
from clusters.kube import names
from clusters.kube.render import render
from clusters.kube.spec import ClusterSettings, Placement, RenderJob, ReplicaGroup, ReplicaPlacement
from clusters.models import Node
from jobs import services as job_services
from jobs.lifecycle import transition
from jobs.models import Attempt, Job
from jobs.selectors import attempt_with_job
from jobs.states import State
from tests.jobs.conftest import admit, submit

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
    return Job.objects.select_related("current_attempt").get(pk=job.pk)


def attempt(job: Job) -> Attempt:
    return attempt_with_job(refresh(job).current_attempt_id)


def seed_nodes(kube) -> None:
    """The kubelets' nodes as the API server lists them (Ready, and as `kube_inventory` has them, so a node sync
    keeps the inventory), for the backend's check of nodes gone."""
    for name, rack in (("gpu-1", "r1"), ("gpu-2", "r2")):
        kube.put("nodes", None, {
            "apiVersion": "v1", "kind": "Node",
            "metadata": {"name": name, "labels": {"kubernetes.io/hostname": f"{name}.internal", "tidal.dev/rack": rack,
                                                  "tidal.dev/block": "b1",
                                                  "nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"}},
            "status": {"allocatable": {"nvidia.com/gpu": "8", "cpu": "96", "memory": "1024Gi"},
                       "conditions": [{"type": "Ready", "status": "True"}]}})


@pytest.fixture
def dispatched(tenant, kube_inventory, kube, cycle):
    """A 2-replica pytorch job admitted by the scheduler and dispatched to kmock (whose nodes are Ready)."""
    seed_nodes(kube)

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
    placed = {row["node"] for row in job.current_attempt.placement}
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
    # parent, service, the run-token Secret, 2 pods
    assert note.reason.startswith("created 5 objects in namespace tidal-vision")
    assert job.current_attempt.log_location == "pods of attempt 1 in namespace tidal-vision on cluster gpu"


def test_redispatch_adopts_existing_objects_on_409(dispatched, kube, kube_inventory) -> None:
    job = dispatched()
    before = live_names(kube)
    victim = next(iter(pods_of(kube, job)))
    forget(kube, victim)  # a half-done first try
    KubernetesBackend(kube_inventory["cluster"]).dispatch(attempt(job))
    job = refresh(job)
    assert job.state == State.DISPATCHING
    assert live_names(kube) == before
    note = job.events.filter(kind="note").last()
    assert note.reason == "created 1 objects in namespace tidal-vision, adopted 4 that already existed"
    assert note.details["created"] == [f"Pod/{victim}"]


def test_dispatch_claims_exactly_once(dispatched, kube, kube_inventory) -> None:
    job = dispatched()
    claims = job.events.filter(to_state=State.DISPATCHING).count()
    transition(job, State.RUNNING, reason="all replicas running", actor="backend")
    KubernetesBackend(kube_inventory["cluster"]).dispatch(attempt(job))  # a late duplicate task: nothing happens
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
    assert job.current_attempt.cause == "invalid_spec"
    assert "exceeded quota: gpu-quota" in job.events.filter(to_state=State.FAILED).get().reason
    assert not any(n.startswith(f"tidal-{job.pk}-") for n in live_names(kube))  # what was created is cleaned up


def test_render_error_fails_the_job(tenant, kube_inventory, kube, cycle) -> None:
    job = submit(tenant, kube_inventory["h100"], replicas=1, launcher="megatron")
    Job.objects.filter(pk=job.pk).update(launcher_options={"tensor_parallel": 3})  # 3 does not divide 8
    cycle()
    job = refresh(job)
    assert job.state == State.FAILED and job.current_attempt.cause == "invalid_spec"
    assert "cannot be rendered" in job.events.filter(to_state=State.FAILED).get().reason
    assert live_names(kube) == set()


def test_transient_errors_leave_the_job_dispatching_for_the_resync(tenant, kube_inventory, kube, kube_client,
                                                                    sleeps) -> None:
    job = admit(submit(tenant, kube_inventory["h100"], replicas=1), kube_inventory["cluster"], ["gpu-1"],
                now=timezone.now() - timedelta(minutes=5))
    unavailable = {"kind": "Status", "code": 503, "reason": "ServiceUnavailable"}
    # kmock stores an object even when a reaction answers 5xx, so the retried POST meets 409 and reads it back:
    # make that read fail too until the client gives up.
    kube.handler[f"post /api/v1/namespaces/{NS}/configmaps"][:1] << 503 << unavailable
    kube.handler[f"get /api/v1/namespaces/{NS}/configmaps/tidal-{job.pk}-train-a1"][:3] << 503 << unavailable
    backend = KubernetesBackend(kube_inventory["cluster"], client=kube_client)
    backend.dispatch(attempt(job))
    job = refresh(job)
    assert job.state == State.DISPATCHING and len(sleeps) == 3  # retried with backoff, then given up
    assert "Kubernetes API is unavailable" in job.events.filter(kind="note").last().reason
    list(backend.observe([attempt(job)]))  # the API is back: the resync creates the missing objects
    assert len(pods_of(kube, job)) == 1


def test_reconcile_running_then_succeeded_keeps_rank0_log_and_cleans_up(dispatched, kube, resync) -> None:
    job = dispatched()
    pods = pods_of(kube, job)
    first, second = sorted(pods.values(), key=lambda p: p["metadata"]["labels"][names.LABEL_RANK])
    set_status(kube, first, running())
    resync()
    assert refresh(job).state == State.DISPATCHING  # one replica still pending
    set_status(kube, second, running())
    resync()
    job = refresh(job)
    assert job.state == State.RUNNING and job.current_attempt.started_at is not None
    kube.handler[f"get /api/v1/namespaces/{NS}/pods/{first['metadata']['name']}/log"] << b"epoch 9\ndone\n"
    set_status(kube, first, terminated(0, "Completed", phase="Succeeded"))
    resync()
    job = refresh(job)
    assert job.state == State.SUCCEEDED and job.current_attempt.outcome == "succeeded"
    assert job.current_attempt.logs == {"worker-0": ["epoch 9", "done"]}
    assert not any(n.startswith(f"tidal-{job.pk}-") for n in live_names(kube))


def test_oomkilled_retries_from_the_checkpoint_with_a_new_attempt(dispatched, kube, resync, cycle) -> None:
    job = dispatched(retry_limit=2, retry_backoff=10, checkpoint_path="s3://ckpt/bert")
    rank0, rank1 = sorted(pods_of(kube, job).values(), key=lambda p: p["metadata"]["labels"][names.LABEL_RANK])
    set_status(kube, rank0, running())
    oom = set_status(kube, rank1, terminated(137, "OOMKilled"))
    kube.handler[f"get /api/v1/namespaces/{NS}/pods/{oom['metadata']['name']}/log"] << b"loading shard 7\nKilled\n"
    resync()
    job = refresh(job)
    failed = job.current_attempt
    assert job.state == State.RETRYING and failed.cause == "host_oom" and failed.outcome == "failed"
    assert failed.exit_code == 137 and failed.details["rack"] in ("r1", "r2")
    assert failed.logs["worker-1"] == ["loading shard 7", "Killed"]
    assert job.events.get(to_state=State.RETRYING).details["cause"] == "host_oom"
    assert pods_of(kube, job, attempt=1) == {}  # the whole gang is stopped

    job_services.job_requeue_due_retries(now=timezone.now() + timedelta(seconds=11))
    cycle()
    job = refresh(job)
    assert (job.state, job.attempt, job.current_attempt.number) == (State.DISPATCHING, 2, 2)
    new = pods_of(kube, job)
    assert len(new) == 2 and all("-a2-" in name for name in new)
    env = {e["name"]: e.get("value") for e in next(iter(new.values()))["spec"]["containers"][0]["env"]}
    assert env["TIDAL_ATTEMPT"] == "2" and env["TIDAL_CHECKPOINT_PATH"] == "s3://ckpt/bert"


def test_image_pull_failure_is_not_retried(dispatched, kube, resync) -> None:
    job = dispatched(replicas=1, retry_limit=3)
    pod = next(iter(pods_of(kube, job).values()))
    set_status(kube, pod, {"phase": "Pending", "containerStatuses": [{"name": "main", "state": {"waiting": {
        "reason": "ImagePullBackOff", "message": "manifest unknown"}}}]})
    resync()
    job = refresh(job)
    assert job.state == State.FAILED and job.current_attempt.cause == "image_pull"


def test_a_permanent_exit_code_is_not_retried(dispatched, kube, resync) -> None:
    job = dispatched(replicas=1, retry_limit=3, permanent_exit_codes=[3])
    set_status(kube, next(iter(pods_of(kube, job).values())), terminated(3, "Error"))
    resync()
    job = refresh(job)
    assert job.state == State.FAILED and job.current_attempt.exit_code == 3
    assert "not retried" in job.events.get(to_state=State.FAILED).reason


def test_node_not_ready_under_a_running_job_retries_avoiding_the_node(dispatched, kube, kube_inventory, resync,
                                                                        cycle) -> None:
    job = dispatched(replicas=1, retry_limit=1, retry_backoff=0)
    pod = next(iter(pods_of(kube, job).values()))
    set_status(kube, pod, running())
    resync()
    node = refresh(job).current_attempt.placement[0]["node"]
    Node.objects.filter(cluster=kube_inventory["cluster"], name=node).update(ready=False)  # as node sync writes it
    resync()
    job = refresh(job)
    assert job.state == State.RETRYING and job.current_attempt.cause == "node_lost"
    assert job.current_attempt.outcome == "lost" and job.avoid_nodes == [f"gpu/{node}"]
    Node.objects.filter(name=node).update(ready=True)  # it comes back, but the retry still avoids it
    cycle()  # requeues the due retry and admits it
    job = refresh(job)
    assert job.state == State.DISPATCHING and job.current_attempt.placement[0]["node"] != node


def test_pods_disappearing_under_a_running_job_fail_the_attempt(dispatched, kube, resync) -> None:
    job = dispatched(replicas=2, retry_limit=1)
    for pod in pods_of(kube, job).values():
        set_status(kube, pod, running())
    resync()
    assert refresh(job).state == State.RUNNING
    gone = next(iter(pods_of(kube, job)))
    forget(kube, gone)
    resync()
    job = refresh(job)
    assert job.state == State.RETRYING and job.current_attempt.cause == "unknown"
    assert job.current_attempt.reason.startswith("1 of 2 replica pods disappeared while running")


def test_a_gang_vanished_whole_says_so(dispatched, kube, resync) -> None:
    job = dispatched(replicas=2, retry_limit=1)
    for pod in pods_of(kube, job).values():
        set_status(kube, pod, running())
    resync()
    for name in list(pods_of(kube, job)):
        forget(kube, name)
    resync()
    job = refresh(job)
    assert job.current_attempt.reason.startswith("all 2 replica pods disappeared while running")


def test_a_gang_removed_by_garbage_collection_says_every_pod_went(dispatched, kube, resync) -> None:
    """Deleting an attempt's parent ConfigMap makes the garbage collector delete the pods it owns one by one: an
    observation between two deletions sees one pod left, but the whole gang is going, and the reason says so."""

    def with_uid(request):  # kmock assigns no uid: without one the children carry no owner reference
        if request.data["metadata"].get("labels", {}).get(names.LABEL_COMPONENT) == "parent":
            return {**request.data, "metadata": {**request.data["metadata"], "uid": "uid-parent-1"}}
        return request.data

    kube.handler[f"post /api/v1/namespaces/{NS}/configmaps"] << with_uid
    job = dispatched(replicas=2, retry_limit=1)
    for pod in pods_of(kube, job).values():
        set_status(kube, pod, running())
    resync()
    first, second = sorted(pods_of(kube, job))
    parent = pods_of(kube, job)[second]["metadata"]["ownerReferences"][0]["name"]
    forget(kube, parent)  # someone deletes the parent...
    forget(kube, first)  # ...and the garbage collector has removed one pod so far
    resync()
    job = refresh(job)
    assert job.state == State.RETRYING and job.current_attempt.cause == "unknown"
    assert job.current_attempt.reason.startswith(
        f"all 2 replica pods disappeared while running: the attempt's parent ConfigMap {parent} was deleted, and "
        "the garbage collector removes every pod it owned (1 still there)")


def test_pods_all_gone_or_terminating_are_the_whole_gang(dispatched, kube, resync) -> None:
    job = dispatched(replicas=2, retry_limit=1)
    for pod in pods_of(kube, job).values():
        set_status(kube, pod, running())
    resync()
    first, second = sorted(pods_of(kube, job))
    terminating = pods_of(kube, job)[second]
    terminating["metadata"]["deletionTimestamp"] = "2030-01-01T00:00:00Z"  # deleted with its grace period
    kube.put("pods", NS, terminating)
    forget(kube, first)
    resync()
    assert refresh(job).current_attempt.reason.startswith(
        "all 2 replica pods disappeared while running (1 still terminating)")


def test_pods_gone_with_their_node_are_a_lost_node_before_any_node_sync(dispatched, kube, kube_inventory,
                                                                         resync) -> None:
    """The node is deleted and its pods garbage-collected before node sync marks it: still node_lost, and the
    retry avoids the node."""
    job = dispatched(replicas=1, retry_limit=1)
    pod = next(iter(pods_of(kube, job).values()))
    set_status(kube, pod, running())
    resync()
    node = refresh(job).current_attempt.placement[0]["node"]
    forget(kube, node)  # the node is deleted from the cluster...
    forget(kube, pod["metadata"]["name"])  # ...and its pod garbage-collected
    assert Node.objects.get(cluster=kube_inventory["cluster"], name=node).ready  # node sync has not seen it yet
    resync()
    job = refresh(job)
    assert job.state == State.RETRYING and job.current_attempt.cause == "node_lost"
    assert job.current_attempt.outcome == "lost" and job.avoid_nodes == [f"gpu/{node}"]


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
    KubernetesBackend(kube_inventory["cluster"]).stop(attempt(job), "preempted")
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
    deleted = sweep.cluster_sweep_orphans(kube_inventory["cluster"])
    assert sorted(deleted) == sorted(f"{m['kind']}/{NS}/{m['metadata']['name']}" for m in manifests)
    assert pods_of(kube, job) and "notebook" in live_names(kube)


def test_pods_of_an_ended_attempt_hold_their_node_until_they_are_gone(dispatched, kube, kube_inventory) -> None:
    """Node sync counts the pods of an ended attempt still on a node (its stop failed, or they are terminating) as
    taking their devices, until they are gone; those of open attempts are the scheduler's own."""
    job = dispatched(replicas=2)
    for pod in pods_of(kube, job).values():
        set_status(kube, pod, running())
    cluster = kube_inventory["cluster"]
    nodesync.cluster_sync_nodes(cluster)
    assert sorted(Node.objects.filter(cluster=cluster).values_list("foreign_used", flat=True)) == [0, 0]
    transition(job, State.CANCELLED, reason="cancelled", actor="member")  # its stop never runs
    nodesync.cluster_sync_nodes(cluster)
    assert sorted(Node.objects.filter(cluster=cluster).values_list("foreign_used", flat=True)) == [8, 8]
    for name in pods_of(kube, job, attempt=1):
        forget(kube, name)
    nodesync.cluster_sync_nodes(cluster)
    assert sorted(Node.objects.filter(cluster=cluster).values_list("foreign_used", flat=True)) == [0, 0]


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
