"""The Kubernetes backend: dispatch admitted jobs, stop attempts, and map pod status back to job state.

* ``dispatch(job_id)`` claims ``admitted -> dispatching`` exactly once, renders the attempt
  (``clusters.kubemap`` -> ``clusters.kube.render``) and creates its objects. A job already ``dispatching`` (a
  redelivered task, or the resync finding missing pods) is created again: names are deterministic, so 409 means
  "already there" and is adopted. A RenderError or PermanentError (403, 422 ...) fails the attempt as
  ``invalid_spec``, not retryable, with the API server's reason; a TransientError (retries exhausted) leaves the
  job dispatching with an event, and the resync tries again.
* ``stop(job_id, attempt, reason)`` deletes the attempt's objects, pods first with the cluster's grace period.
* ``reconcile_attempt(job, pods, not_ready)`` is the one status mapper, called by the periodic full resync
  (``tick``/``resync``) and by the watch loop (``clusters.reconciler``): ``attempt_status`` + ``classify`` ->
  ``job_mark_running`` / ``job_mark_succeeded`` / ``job_attempt_failed`` (with the cause, the replicas' last log
  lines and the lost node to avoid on the retry), then cleanup of a finished attempt.
"""

from __future__ import annotations

import hashlib
import logging
import threading
from collections import defaultdict
from collections.abc import Iterable, Iterator, Mapping
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.db import transaction
from django.db.models import Prefetch
from django.utils import timezone

from clusters import kubemap
from clusters.kube import names
from clusters.kube.client import KubeClient
from clusters.kube.dispatch import AttemptKey, attempt_key, cleanup
from clusters.kube.dispatch import dispatch as kube_dispatch
from clusters.kube.errors import ApiError, PermanentError, RenderError, TransientError
from clusters.kube.failures import CAUSES, Failure, classify, pending_failure
from clusters.kube.ratelimit import RedisTokenBucket
from clusters.kube.render import MAIN_CONTAINER, render
from clusters.kube.status import AttemptStatus, ReplicaState, attempt_status, stuck_pending
from clusters.models import Cluster, Node
from core.errors import InvalidTransition
from core.redis import redis_client
from jobs import services
from jobs.models import Job, ReplicaGroup
from jobs.states import State

logger = logging.getLogger(__name__)

ACTOR = "backend"
REDISPATCH_AFTER = timedelta(seconds=60)  # the resync re-creates missing objects of jobs admitted this long ago
RECONCILED = (State.DISPATCHING, State.RUNNING)
BUCKET_KEY_PREFIX = "tidal:kube-qps:"  # + cluster id: the Redis hash of the cluster's shared token bucket
PENDING_GRACE_MARGIN = 60  # seconds beyond the termination grace period before a Pending replica counts as stuck
# When several replicas fail, the most specific cause wins: NCCL errors are usually the echo of a peer's crash.
CAUSE_PRIORITY = ("image_pull", "invalid_spec", "node_lost", "preempted", "cuda_oom", "host_oom", "user_error",
                  "nccl", "unschedulable", "pending_timeout", "unknown")
assert set(CAUSE_PRIORITY) == set(CAUSES)
MAX_LOGGED_REPLICAS = 8
MAX_LINE = 500

# ------------------------------------------------------------------------------------------------------ client

_clients: dict[int, tuple[str, KubeClient]] = {}
_clients_lock = threading.Lock()


def shared_bucket(cluster: Cluster) -> RedisTokenBucket | None:
    """With Redis (several Celery worker processes), one token bucket per cluster in Redis, so the cluster's QPS
    and burst hold across all of them; None in embedded mode, where one process holds the only client."""
    client = redis_client()
    if client is None:
        return None
    return RedisTokenBucket(client, f"{BUCKET_KEY_PREFIX}{cluster.pk}", cluster.qps, cluster.burst)


def build_client(cluster: Cluster, **kwargs: Any) -> KubeClient:
    kwargs.setdefault("qps", cluster.qps)
    kwargs.setdefault("burst", cluster.burst)
    kwargs.setdefault("bucket", shared_bucket(cluster))
    if cluster.in_cluster:
        return KubeClient.in_cluster(**kwargs)
    kubeconfig = cluster.get_kubeconfig()
    if not kubeconfig:
        raise PermanentError(f"cluster {cluster.name} has no kubeconfig (and is not in-cluster)",
                             reason="NoKubeconfig")
    return KubeClient.from_kubeconfig(kubeconfig, **kwargs)


def client_for(cluster: Cluster) -> KubeClient:
    """One client per cluster and process, so its token bucket holds the cluster's QPS across every thread of
    the process (and, through Redis, across processes); rebuilt when the credentials or limits change."""
    fingerprint = hashlib.sha256(
        f"{cluster.kubeconfig_encrypted}|{cluster.in_cluster}|{cluster.qps}|{cluster.burst}".encode()).hexdigest()
    with _clients_lock:
        cached = _clients.get(cluster.pk)
        if cached is not None and cached[0] == fingerprint:
            return cached[1]
        client = build_client(cluster)
        _clients[cluster.pk] = (fingerprint, client)
    if cached is not None:
        cached[1].close()
    return client


def forget_clients() -> None:
    with _clients_lock:
        clients = [client for _, client in _clients.values()]
        _clients.clear()
    for client in clients:
        client.close()


# ----------------------------------------------------------------------------------------------------- helpers

def group_pods(pods: Iterable[Mapping[str, Any]]) -> dict[AttemptKey, list[Mapping[str, Any]]]:
    """Platform pods of this instance by (job label, attempt); others are ignored (never trust a selector)."""
    own = {names.LABEL_MANAGED: "true", names.LABEL_INSTANCE: names.label_value(kubemap.instance())}
    out: dict[AttemptKey, list[Mapping[str, Any]]] = defaultdict(list)
    for pod in pods:
        labels = (pod.get("metadata") or {}).get("labels") or {}
        if any(labels.get(k) != v for k, v in own.items()):
            continue
        job, attempt = labels.get(names.LABEL_JOB), labels.get(names.LABEL_ATTEMPT)
        if job and attempt and attempt.isdigit():
            out[(job, int(attempt))].append(pod)
    return out


def _jobs() -> Any:
    groups = Prefetch("groups", queryset=ReplicaGroup.objects.select_related("flavor"))
    return Job.objects.select_related("project__organization", "flavor", "cluster").prefetch_related(groups)


def _pick(failures: list[tuple[ReplicaState, Failure]]) -> tuple[ReplicaState, Failure]:
    return min(failures, key=lambda pair: (CAUSE_PRIORITY.index(pair[1].cause), pair[0].rank))


def _lines(text: str, limit: int) -> list[str]:
    return [line[:MAX_LINE] for line in text.splitlines()[-limit:]] if limit else []


class KubernetesBackend:
    def __init__(self, cluster: Cluster, *, client: KubeClient | None = None) -> None:
        self.cluster = cluster
        self._client = client

    @property
    def client(self) -> KubeClient:
        if self._client is None:
            self._client = client_for(self.cluster)
        return self._client

    # ------------------------------------------------------------------------------------------------ dispatch

    def dispatch(self, job_id: int) -> None:
        job = _jobs().filter(pk=job_id, cluster=self.cluster).first()
        if job is None:
            return
        if job.state == State.ADMITTED:
            with transaction.atomic():
                if not services.job_claim_for_dispatch(job, actor=ACTOR):
                    return
        elif job.state != State.DISPATCHING:
            return
        self.create(job)

    def _hostnames(self, job: Job) -> dict[str, str]:
        nodes = {row["node"] for row in job.placement or []}
        return {name: hostname for name, hostname in
                Node.objects.filter(cluster=self.cluster, name__in=nodes).exclude(hostname="")
                .values_list("name", "hostname")}

    def create(self, job: Job) -> bool:
        """Render and create the job's current attempt. True when every object exists."""
        try:
            render_job, placement, cluster_settings = kubemap.render_inputs(job, self.cluster, self._hostnames(job))
            manifests = render(render_job, placement, cluster_settings)
        except RenderError as exc:
            self._fail(job, cause="invalid_spec", reason=f"the job cannot be rendered: {exc}", retryable=False,
                       details={"field": exc.field or "", "code": exc.code})
            return False
        namespace = cluster_settings.namespace
        try:
            result = kube_dispatch(self.client, manifests)
        except PermanentError as exc:
            self._fail(job, cause="invalid_spec", reason=f"Kubernetes refused the job: {exc}", retryable=False,
                       details={"status": exc.status, "api_reason": exc.reason, "namespace": namespace})
            self._cleanup_quietly(job, job.attempt, namespace)
            return False
        except TransientError as exc:
            services.record_event(job, kind="note", actor=ACTOR, reason=(
                f"dispatch of attempt {job.attempt} delayed, the Kubernetes API is unavailable ({exc}); "
                "the periodic resync tries again"), details={"attempt": job.attempt})
            return False
        summary = f"created {len(result.created)} objects in namespace {namespace}"
        if result.adopted:
            summary += f", adopted {len(result.adopted)} that already existed"
        services.record_event(job, kind="note", actor=ACTOR, reason=summary, details={
            "attempt": job.attempt, "namespace": namespace, "created": result.created, "adopted": result.adopted})
        return True

    # ---------------------------------------------------------------------------------------------------- stop

    def stop(self, job_id: int, attempt: int, reason: str) -> None:
        job = Job.objects.select_related("project__organization").filter(pk=job_id).first()
        if job is None:
            return
        namespace = kubemap.job_namespace(self.cluster, job)
        try:
            deleted = cleanup(self.client, namespace, job_id, attempt, instance=kubemap.instance(),
                              grace_seconds=self.cluster.termination_grace_seconds)
        except ApiError as exc:
            logger.warning("stop of job %s attempt %s on %s failed (%s); the orphan sweep will retry", job_id,
                           attempt, self.cluster.name, exc)
            return
        if deleted:
            services.record_event(job, kind="note", actor=ACTOR, reason=(
                f"stopped attempt {attempt} ({reason}): deleted {len(deleted)} objects on {self.cluster.name} "
                f"with a {self.cluster.termination_grace_seconds}s grace period"),
                details={"attempt": attempt, "deleted": deleted})

    def _cleanup_quietly(self, job: Job, attempt: int, namespace: str | None = None) -> None:
        try:
            cleanup(self.client, namespace or kubemap.job_namespace(self.cluster, job), job.pk, attempt,
                    instance=kubemap.instance(), grace_seconds=self.cluster.termination_grace_seconds)
        except ApiError as exc:
            logger.warning("cleanup of job %s attempt %s failed (%s); the orphan sweep will retry", job.pk,
                           attempt, exc)

    # ----------------------------------------------------------------------------------------------- reconcile

    def tick(self) -> None:
        self.resync()
        with transaction.atomic():
            services.job_requeue_due_retries()

    def not_ready_nodes(self) -> frozenset[str]:
        return frozenset(Node.objects.filter(cluster=self.cluster, ready=False).values_list("name", flat=True))

    def resync(self) -> int:
        """Full resync: list every platform pod of this instance, reconcile every active job. Returns the number
        of jobs looked at."""
        pods, _ = self.client.list("Pod", None, label_selector=names.instance_selector(kubemap.instance()))
        return self.reconcile_all(group_pods(pods), redispatch=True)

    def reconcile_all(self, by_attempt: Mapping[AttemptKey, list[Mapping[str, Any]]], *,
                      redispatch: bool = False) -> int:
        not_ready = self.not_ready_nodes()
        jobs = list(_jobs().filter(cluster=self.cluster, state__in=RECONCILED))
        for job in jobs:
            try:
                self.reconcile_attempt(job, by_attempt.get(attempt_key(job.pk, job.attempt), []), not_ready,
                                       redispatch=redispatch)
            except ApiError as exc:
                logger.warning("reconcile of job %s on %s failed: %s", job.pk, self.cluster.name, exc)
        if redispatch:  # admitted long ago but never claimed: the dispatch task was lost
            stale = timezone.now() - REDISPATCH_AFTER
            for job_id in Job.objects.filter(cluster=self.cluster, state=State.ADMITTED,
                                             admitted_at__lte=stale).values_list("pk", flat=True):
                self.dispatch(job_id)
        return len(jobs)

    def reconcile_attempt(self, job: Job, pods: list[Mapping[str, Any]], not_ready: frozenset[str] = frozenset(),
                          *, redispatch: bool = False) -> str:
        """Map the pods of the job's current attempt to its state. Returns the attempt status's state (or
        "missing" when pods are gone)."""
        if job.state not in RECONCILED:
            return job.state
        expected = sum(group.replicas for group in job.groups.all())
        status = attempt_status(pods, expected=expected, launcher=job.launcher, not_ready_nodes=not_ready)
        if status.state == "succeeded":
            self._succeeded(job, status)
            return status.state
        if status.state == "failed":
            self._failed(job, status)
            return status.state
        placed_lost = sorted({str(row["node"]) for row in job.placement or []} & not_ready)
        if placed_lost:
            self._fail(job, cause="node_lost", reason=f"node {placed_lost[0]} became NotReady", retryable=True,
                       lost_nodes=placed_lost, details=self._where(placed_lost[0]))
            self._cleanup_quietly(job, job.attempt)
            return "failed"
        if self._fail_if_stuck_pending(job, status):
            return "failed"
        if len(status.replicas) < expected:
            if job.state == State.RUNNING:
                present = {r.pod for r in status.replicas}
                self._fail(job, cause="unknown", retryable=True, reason=(
                    f"{expected - len(present)} of {expected} replica pods disappeared while running"))
                self._cleanup_quietly(job, job.attempt)
                return "missing"
            if redispatch and job.admitted_at and job.admitted_at <= timezone.now() - REDISPATCH_AFTER:
                self.create(job)
            return status.state
        if status.state == "running" and job.state == State.DISPATCHING:
            self._guarded(services.job_mark_running, job, reason=f"all {expected} replicas running", actor=ACTOR)
        return status.state

    # outcomes ---------------------------------------------------------------------------------------------

    def _namespace(self, job: Job) -> str:
        return kubemap.job_namespace(self.cluster, job)

    def _tail(self, job: Job, pod: str, lines: int) -> list[str]:
        if lines <= 0:
            return []
        try:
            return _lines(self.client.pod_log(self._namespace(job), pod, container=MAIN_CONTAINER,
                                              tail_lines=lines), lines)
        except ApiError:  # the container never started, or the pod is gone
            return []

    def _where(self, node: str) -> dict[str, str]:
        rack = Node.objects.filter(cluster=self.cluster, name=node).values_list("rack", flat=True).first()
        return {"node": node, "rack": rack or "", "cluster": self.cluster.name}

    def _succeeded(self, job: Job, status: AttemptStatus) -> None:
        rank0 = next((r for r in status.replicas if r.rank == 0), None)
        keep = settings.TIDAL["KUBE_LOG_LINES"]
        logs = {kubemap.replica_key(rank0.role, rank0.index): self._tail(job, rank0.pod, keep)} if rank0 else {}
        with transaction.atomic():
            if self._guarded(services.job_mark_succeeded, job, reason=status.message, actor=ACTOR) and any(
                    logs.values()):
                services.record_event(job, kind="log", actor=ACTOR, reason=f"last log lines of attempt {job.attempt}",
                                      details={"attempt": job.attempt, "logs": logs})
        self._cleanup_quietly(job, job.attempt)

    def _failed(self, job: Job, status: AttemptStatus) -> None:
        keep = settings.TIDAL["KUBE_LOG_LINES"]
        logs: dict[str, list[str]] = {}
        failures: list[tuple[ReplicaState, Failure]] = []
        codes = job.permanent_exit_codes or ()
        for replica in status.failed[:MAX_LOGGED_REPLICAS]:
            key = kubemap.replica_key(replica.role, replica.index)
            logs[key] = self._tail(job, replica.pod, keep)
            failures.append((replica, classify(exit_code=replica.exit_code, reason=replica.reason,
                                               message=replica.message, log_lines=logs[key],
                                               permanent_exit_codes=codes)))
        replica, failure = _pick(failures)
        retryable = all(f.retryable for _, f in failures)
        reason = f"{failure.summary}; {status.message}"
        if failure.last_frame:
            reason += f" (at {failure.last_frame})"
        details = {
            **self._where(replica.node),
            "replica": kubemap.replica_key(replica.role, replica.index), "pod": replica.pod,
            "exit_code": replica.exit_code, "k8s_reason": replica.reason, "last_frame": failure.last_frame,
            "replicas": [{"replica": kubemap.replica_key(r.role, r.index), "node": r.node, "reason": r.reason,
                          "exit_code": r.exit_code, "cause": f.cause} for r, f in failures],
            "logs": logs,
        }
        lost = sorted(status.avoid_nodes) if failure.cause == "node_lost" else []
        self._fail(job, cause=failure.cause, reason=reason, retryable=retryable, lost_nodes=lost, details=details)
        self._cleanup_quietly(job, job.attempt)

    def pending_timeout(self) -> float:
        """The cluster's pending timeout, never shorter than a preempted victim may take to leave: a preemptor's
        pods wait in Pending for the victims' termination grace period, and that wait is expected."""
        return float(max(self.cluster.pending_timeout_seconds,
                         self.cluster.termination_grace_seconds + PENDING_GRACE_MARGIN))

    def _fail_if_stuck_pending(self, job: Job, status: AttemptStatus) -> bool:
        """Fail (retryably) an attempt not started yet whose replica has been Pending past the timeout, and re-sync
        the cluster's nodes: the usual cause is a pod Tidal did not create taking the placed node's devices since
        the last sync, and the retry must be placed on the corrected inventory."""
        if job.state != State.DISPATCHING or job.admitted_at is None:
            return False
        stuck = stuck_pending(status.replicas, now=timezone.now(), since=job.admitted_at,
                              timeout_seconds=self.pending_timeout())
        if stuck is None:
            return False
        replica, seconds = stuck
        failure = pending_failure(pod=replica.pod, node=replica.node, seconds=seconds,
                                  unschedulable=replica.unschedulable, reason=replica.reason, message=replica.message)
        details = {**self._where(replica.node), "replica": kubemap.replica_key(replica.role, replica.index),
                   "pod": replica.pod, "k8s_reason": replica.reason, "pending_seconds": round(seconds)}
        if self._fail(job, cause=failure.cause, reason=failure.summary, retryable=True, details=details):
            from clusters.tasks import kube_sync_nodes_task

            cluster_id = self.cluster.pk
            transaction.on_commit(lambda: kube_sync_nodes_task.delay(cluster_id), robust=True)
        self._cleanup_quietly(job, job.attempt)
        return True

    def _fail(self, job: Job, *, cause: str, reason: str, retryable: bool, lost_nodes: Iterable[str] = (),
              details: dict | None = None) -> bool:
        lost = [f"{self.cluster.name}/{node}" for node in lost_nodes]
        if len(lost) > 1:  # job_attempt_failed adds one lost node; the others join the avoid list first
            job.avoid_nodes = sorted(set(job.avoid_nodes or ()) | set(lost[1:]))
        return self._guarded(services.job_attempt_failed, job, cause=cause, reason=reason, retryable=retryable,
                             lost_node=lost[0] if lost else None, details=details or {}, actor=ACTOR)

    @staticmethod
    def _guarded(action, job: Job, **kwargs: Any) -> bool:
        """A job cancelled or preempted between our read and our write is simply skipped."""
        try:
            with transaction.atomic():
                action(job, **kwargs)
        except InvalidTransition:
            return False
        return True

    # -------------------------------------------------------------------------------------------------- logs

    def _pod(self, job: Job, role: str, index: int) -> tuple[str, str]:
        """(namespace, pod name) of one replica of the job's current attempt."""
        from clusters.kube.render import pod_name

        render_job = kubemap.render_job(job, self._namespace(job))
        return render_job.namespace, pod_name(render_job, role, index)

    def pod_log(self, job: Job, role: str, index: int, tail: int) -> list[str]:
        """The log tail of one replica of the job's current attempt (PermanentError 404 when the pod is gone)."""
        namespace, pod = self._pod(job, role, index)
        return _lines(self.client.pod_log(namespace, pod, container=MAIN_CONTAINER, tail_lines=tail), tail)

    def follow_log(self, job: Job, role: str, index: int, tail: int, max_seconds: float) -> Iterator[str]:
        """The replica's log tail, then its new lines until the container ends or ``max_seconds`` pass. Connects
        now: ApiError (the pod is gone, the API is down) is raised before any line."""
        namespace, pod = self._pod(job, role, index)
        return self.client.follow_log(namespace, pod, container=MAIN_CONTAINER, tail_lines=tail,
                                      max_seconds=max_seconds)
