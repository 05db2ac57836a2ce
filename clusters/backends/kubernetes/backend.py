"""The Kubernetes backend: dispatch admitted attempts, stop ended ones, observe the pods of open ones, read logs.

* ``dispatch(attempt)`` claims ``admitted -> dispatching`` exactly once, renders the attempt
  (``mapping`` -> ``clusters.kube.render``) and creates its objects. An attempt already ``dispatching`` (a
  redelivered task, or the resync finding missing pods) is created again: names are deterministic, so 409 means
  "already there" and is adopted. A RenderError or PermanentError (403, 422 ...) is reported as a failed attempt
  (``invalid_spec``) with the API server's reason; a TransientError (retries exhausted) leaves the attempt
  dispatching with an event, and the resync tries again.
* ``stop(attempt, reason)`` deletes the attempt's objects, pods first with the cluster's grace period. The state
  machine calls it after every attempt ends (cancelled, preempted, failed, succeeded).
* ``observe(attempts)`` (the periodic full resync) and ``observe_attempt`` (also the watch loop's, in
  ``watch``) turn pods into ``jobs.observations.Observation``s: ``attempt_status`` + ``classify``
  give the phase, the failure cause, the replicas' last log lines and the nodes lost under the attempt. What
  follows from an observation (retry, lost node, max runtime) is decided on the jobs side.
"""

from __future__ import annotations

import logging
from collections import defaultdict
from collections.abc import Iterable, Iterator, Mapping
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from clusters import selectors
from clusters.backends import redispatch_before
from clusters.backends.kubernetes import clients, evidence, mapping
from clusters.kube import names
from clusters.kube.client import KubeClient
from clusters.kube.dispatch import AttemptKey, attempt_key, cleanup
from clusters.kube.dispatch import dispatch as kube_dispatch
from clusters.kube.errors import ApiError, PermanentError, RenderError, TransientError
from clusters.kube.failures import CAUSES, Failure, classify, pending_failure
from clusters.kube.nodes import node_is_ready, not_ready_since
from clusters.kube.render import MAIN_CONTAINER, pod_name, render
from clusters.kube.status import AttemptStatus, ReplicaState, attempt_status, stuck_pending
from clusters.kube.streams import LogPosition
from clusters.models import Cluster, Node
from core.errors import DomainError
from jobs.models import Attempt, AttemptResize
from jobs.observations import record_observation
from jobs.ports import FollowedLog, LogsUnavailable, Observation, Phase
from jobs.services import job_claim_for_dispatch, record_event
from jobs.states import State

logger = logging.getLogger(__name__)

ACTOR = "backend"
PENDING_GRACE_MARGIN = 60  # seconds beyond the termination grace period before a Pending replica counts as stuck
# When several replicas fail, the most specific cause wins: NCCL errors are usually the echo of a peer's crash.
CAUSE_PRIORITY = ("image_pull", "invalid_spec", "node_lost", "preempted", "cuda_oom", "host_oom", "user_error",
                  "nccl", "unschedulable", "pending_timeout", "unknown")
assert set(CAUSE_PRIORITY) == set(CAUSES)
MAX_LOGGED_REPLICAS = 8
MAX_LINE = 500

# ----------------------------------------------------------------------------------------------------- helpers

def group_pods(pods: Iterable[Mapping[str, Any]]) -> dict[AttemptKey, list[Mapping[str, Any]]]:
    """Platform pods of this instance by (job label, attempt); others are ignored (never trust a selector)."""
    own = {names.LABEL_MANAGED: "true", names.LABEL_INSTANCE: names.label_value(mapping.instance())}
    out: dict[AttemptKey, list[Mapping[str, Any]]] = defaultdict(list)
    for pod in pods:
        labels = (pod.get("metadata") or {}).get("labels") or {}
        if any(labels.get(k) != v for k, v in own.items()):
            continue
        key = names.labelled_attempt(pod)
        if key is not None:
            out[key].append(pod)
    return out


def _replica_key(pod: Mapping[str, Any]) -> tuple[str, str]:
    labels = (pod.get("metadata") or {}).get("labels") or {}
    return str(labels.get(names.LABEL_ROLE, "")), str(labels.get(names.LABEL_INDEX, ""))


def _pick(failures: list[tuple[ReplicaState, Failure]]) -> tuple[ReplicaState, Failure]:
    return min(failures, key=lambda pair: (CAUSE_PRIORITY.index(pair[1].cause), pair[0].rank))


def _lines(text: str, limit: int) -> list[str]:
    return [line[:MAX_LINE] for line in text.splitlines()[-limit:]] if limit else []


class KubernetesBackend:
    log_source = "pod"
    nodes_stale = False  # set when an observation suggests the node inventory is out of date

    def __init__(self, cluster: Cluster, *, client: KubeClient | None = None) -> None:
        self.cluster = cluster
        self._client = client

    @property
    def client(self) -> KubeClient:
        if self._client is None:
            self._client = clients.client_for(self.cluster)
        return self._client

    # ------------------------------------------------------------------------------------------------ dispatch

    def dispatch(self, attempt: Attempt) -> None:
        job = attempt.job
        if job.current_attempt_id != attempt.pk:
            return
        if job.state == State.ADMITTED:
            with transaction.atomic():
                if not job_claim_for_dispatch(attempt, actor=ACTOR, log_location=self._log_location(attempt)):
                    return
        elif job.state != State.DISPATCHING:
            return
        self.create(attempt)

    def _log_location(self, attempt: Attempt) -> str:
        try:
            namespace = self._namespace(attempt)
        except RenderError:
            return ""
        return f"pods of attempt {attempt.number} in namespace {namespace} on cluster {self.cluster.name}"

    def _hostnames(self, attempt: Attempt) -> dict[str, str]:
        nodes = {row["node"] for row in attempt.placement}
        return {name: hostname for name, hostname in
                Node.objects.filter(cluster=self.cluster, name__in=nodes).exclude(hostname="")
                .values_list("name", "hostname")}

    def create(self, attempt: Attempt) -> bool:
        """Render and create the attempt's objects. True when every object exists."""
        try:
            render_job, placement, cluster_settings = mapping.render_inputs(attempt, self.cluster,
                                                                            self._hostnames(attempt))
            manifests = render(render_job, placement, cluster_settings)
        except RenderError as exc:
            self._report(attempt, Phase.FAILED, cause="invalid_spec", message=f"the job cannot be rendered: {exc}",
                         details={"field": exc.field or "", "code": exc.code})
            return False
        namespace = cluster_settings.namespace
        try:
            result = kube_dispatch(self.client, manifests)
        except PermanentError as exc:
            self._report(attempt, Phase.FAILED, cause="invalid_spec", message=f"Kubernetes refused the job: {exc}",
                         details={"status": exc.status, "api_reason": exc.reason, "namespace": namespace})
            return False
        except TransientError as exc:
            record_event(attempt.job, kind="note", actor=ACTOR, attempt=attempt.number, reason=(
                f"dispatch of attempt {attempt.number} delayed, the Kubernetes API is unavailable ({exc}); "
                "the periodic resync tries again"))
            return False
        summary = f"created {len(result.created)} objects in namespace {namespace}"
        if result.adopted:
            summary += f", adopted {len(result.adopted)} that already existed"
        record_event(attempt.job, kind="note", actor=ACTOR, attempt=attempt.number, reason=summary, details={
            "namespace": namespace, "created": result.created, "adopted": result.adopted})
        return True

    def _report(self, attempt: Attempt, phase: Phase, **fields: Any) -> str:
        with transaction.atomic():
            return record_observation(attempt, Observation(attempt.pk, phase, **fields))

    # -------------------------------------------------------------------------------------------------- resize

    def resize(self, attempt: Attempt, resize: AttemptResize) -> None:
        """An elastic pytorch, deepspeed or ray job's attempt (`attempt.placement` already the new one) grows or
        shrinks. A grow creates the new ranks' pods: the attempt is dispatched again, which adopts every object that
        exists and creates the rest (idempotent), and the new pods join the running ones through the c10d rendezvous
        of torchrun or DeepSpeed's elastic agent, or join the Ray head's cluster (launchers.rendezvous_env). A
        shrink deletes the removed ranks' pods (the highest) with the cluster's termination grace: SIGTERM first, so
        the job can checkpoint; the agents (or Ray Train) restart the workers at the new world size. A
        TransientError propagates (the task is acknowledged late); the resync repairs a grow whose pods are missing
        (`_growing`) and ignores a shrink's pods (not in the placement)."""
        if resize.kind == AttemptResize.Kind.GROW:
            self.create(attempt)
            return
        namespace = self._namespace(attempt)
        render_job = mapping.render_job(attempt, namespace)
        deleted = [name for name in (pod_name(render_job, str(row["role"]), int(row["index"]))
                                     for row in resize.replicas)
                   if self.client.delete("Pod", namespace, name,
                                         grace_seconds=self.cluster.termination_grace_seconds)]
        record_event(attempt.job, kind="note", actor=ACTOR, attempt=attempt.number, reason=(
            f"shrink: deleted {len(deleted)} pods in namespace {namespace} with a grace of "
            f"{self.cluster.termination_grace_seconds}s"), details={"namespace": namespace, "deleted": deleted})

    # ---------------------------------------------------------------------------------------------------- stop

    def stop(self, attempt: Attempt, reason: str) -> None:
        """TransientError (the API unavailable) propagates: the stop task retries. What the API refuses for good is
        logged; the orphan sweep tries again."""
        try:
            deleted = cleanup(self.client, self._namespace(attempt), attempt.job_id, attempt.number,
                              instance=mapping.instance(), grace_seconds=self.cluster.termination_grace_seconds)
        except (PermanentError, RenderError) as exc:
            logger.warning("stop of job %s attempt %s on %s failed (%s); the orphan sweep will retry",
                           attempt.job_id, attempt.number, self.cluster.name, exc)
            return
        if deleted:
            record_event(attempt.job, kind="note", actor=ACTOR, attempt=attempt.number, reason=(
                f"stopped attempt {attempt.number} ({reason}): deleted {len(deleted)} objects on "
                f"{self.cluster.name} with a {self.cluster.termination_grace_seconds}s grace period"),
                details={"deleted": deleted})

    # ------------------------------------------------------------------------------------------------- observe

    def lost_nodes(self) -> frozenset[str]:
        """Nodes whose attempts are lost (gone, or NotReady past TIDAL_NODE_LOST_GRACE: `selectors.lost_nodes`)."""
        return selectors.lost_nodes(self.cluster)

    def observe(self, attempts: Iterable[Attempt]) -> Iterator[Observation]:
        """Full resync: list every platform pod of this instance once and observe each open attempt. Attempts
        admitted long ago and never claimed (a lost dispatch task) are dispatched again."""
        attempts = list(attempts)
        pods, _ = self.client.list("Pod", None, label_selector=names.instance_selector(mapping.instance()))
        by_attempt = group_pods(pods)
        self._stop_ended(by_attempt, {attempt_key(attempt.job_id, attempt.number) for attempt in attempts})
        lost = self.lost_nodes()
        stale = redispatch_before()
        for attempt in attempts:
            if attempt.job.state == State.ADMITTED:
                if attempt.admitted_at <= stale:
                    self.dispatch(attempt)
                continue
            try:
                observation = self.observe_attempt(attempt, by_attempt.get(attempt_key(attempt.job_id,
                                                                                       attempt.number), []),
                                                   lost, redispatch=True)
            except ApiError as exc:
                logger.warning("observing job %s on %s failed: %s", attempt.job_id, self.cluster.name, exc)
                continue
            if observation is not None:
                yield observation

    def _stop_ended(self, by_attempt: Mapping[AttemptKey, list[Mapping[str, Any]]], open_keys: set[AttemptKey]
                    ) -> None:
        """Delete the pods still running of attempts that ended (their stop failed: the API was down, or its retries
        ran out), so their devices come free as soon as the API answers rather than at the next orphan sweep.
        Pods already terminating are left to finish; attempts still open when the resync read them are not
        touched."""
        running = {key for key, pods in by_attempt.items() if key not in open_keys
                   and any(not (pod.get("metadata") or {}).get("deletionTimestamp") for pod in pods)}
        for attempt in selectors.ended_attempts(self.cluster, running):
            try:
                self.stop(attempt, "still running after it ended")
            except ApiError as exc:
                logger.warning("deleting the pods of job %s attempt %s, which ended, on %s failed: %s",
                               attempt.job_id, attempt.number, self.cluster.name, exc)

    def observe_attempt(self, attempt: Attempt, pods: list[Mapping[str, Any]],
                        lost_nodes: frozenset[str] = frozenset(), *, redispatch: bool = False) -> Observation | None:
        """What the pods of one attempt say, `lost_nodes` being the cluster's nodes gone or NotReady past the grace.
        None while nothing is decided and nothing is missing."""
        job = attempt.job
        # The replicas the attempt holds now (an elastic job's change with each resize): pods of replicas a shrink
        # removed (terminating) are not the attempt's any more.
        current = {(str(row["role"]), str(row["index"])) for row in attempt.placement}
        pods = [p for p in pods if _replica_key(p) in current] if attempt.resize_count else pods
        expected = len(attempt.placement) or sum(group.replicas for group in job.groups.all())
        status = attempt_status(pods, expected=expected, launcher=job.launcher, not_ready_nodes=lost_nodes)
        placed = {str(row["node"]) for row in attempt.placement}
        if status.state == "succeeded":
            return self._succeeded(attempt, status)
        if status.state == "failed":
            return self._failed(attempt, status, placed & lost_nodes)
        if placed & lost_nodes:
            lost = sorted(placed & lost_nodes)
            return Observation(attempt.pk, Phase.PENDING if status.state == "pending" else Phase.RUNNING,
                               f"node {lost[0]} is gone or NotReady", lost_nodes=tuple(lost),
                               details=self._where(lost[0]))
        stuck = self._stuck_pending(attempt, status)
        if stuck is not None:
            return stuck
        if len(status.replicas) < expected:
            if job.state == State.RUNNING and self._growing(attempt, status):
                return None
            if job.state == State.RUNNING:
                return self._vanished(attempt, status, expected, pods)
            if redispatch and attempt.admitted_at <= redispatch_before():
                self.create(attempt)
            return None
        phase = Phase.RUNNING if status.state == "running" else Phase.PENDING
        return Observation(attempt.pk, phase, f"all {expected} replicas running" if phase == Phase.RUNNING else
                           status.message)

    # outcomes ---------------------------------------------------------------------------------------------

    def _namespace(self, attempt: Attempt) -> str:
        return mapping.job_namespace(self.cluster, attempt.job)

    def _tail(self, attempt: Attempt, pod: str, lines: int) -> list[str]:
        if lines <= 0:
            return []
        try:
            return _lines(self.client.pod_log(self._namespace(attempt), pod, container=MAIN_CONTAINER,
                                              tail_lines=lines), lines)
        except ApiError:  # the container never started, or the pod is gone
            return []

    def _where(self, node: str) -> dict[str, str]:
        rack = Node.objects.filter(cluster=self.cluster, name=node).values_list("rack", flat=True).first()
        return {"node": node, "rack": rack or "", "cluster": self.cluster.name}

    def _succeeded(self, attempt: Attempt, status: AttemptStatus) -> Observation:
        rank0 = next((r for r in status.replicas if r.rank == 0), None)
        keep = settings.TIDAL["KUBE_LOG_LINES"]
        logs = {mapping.replica_key(rank0.role, rank0.index): self._tail(attempt, rank0.pod, keep)} if rank0 else {}
        return Observation(attempt.pk, Phase.SUCCEEDED, status.message, logs={k: v for k, v in logs.items() if v})

    def _failed(self, attempt: Attempt, status: AttemptStatus, lost: set[str]) -> Observation:
        keep = settings.TIDAL["KUBE_LOG_LINES"]
        logs: dict[str, list[str]] = {}
        failures: list[tuple[ReplicaState, Failure]] = []
        for replica in status.failed[:MAX_LOGGED_REPLICAS]:
            key = mapping.replica_key(replica.role, replica.index)
            logs[key] = self._tail(attempt, replica.pod, keep)
            failures.append((replica, classify(exit_code=replica.exit_code, reason=replica.reason,
                                               message=replica.message, log_lines=logs[key])))
        replica, failure = _pick(failures)
        message = f"{failure.summary}; {status.message}"
        if failure.last_frame:
            message += f" (at {failure.last_frame})"
        details = {
            **self._where(replica.node),
            "replica": mapping.replica_key(replica.role, replica.index), "pod": replica.pod,
            "k8s_reason": replica.reason, "last_frame": failure.last_frame,
            "replicas": [{"replica": mapping.replica_key(r.role, r.index), "node": r.node, "reason": r.reason,
                          "exit_code": r.exit_code, "cause": f.cause} for r, f in failures],
        }
        details.update(self._evidence(attempt, {r.pod for r in status.replicas}))
        lost_nodes = sorted(lost | (set(status.avoid_nodes) if failure.cause == "node_lost" else set()))
        return Observation(attempt.pk, Phase.FAILED, message, cause=failure.cause, exit_code=replica.exit_code,
                           lost_nodes=tuple(lost_nodes), details=details, logs={k: v for k, v in logs.items() if v})

    def _evidence(self, attempt: Attempt, pods: set[str]) -> dict[str, Any]:
        """The events of the attempt's pods and nodes since its admission and its nodes' unhealthy conditions, for
        reliability's diagnosis (`events`, `node_conditions` of the details). What the API cannot answer now is
        left out: the failure is recorded all the same."""
        nodes = {str(row["node"]) for row in attempt.placement}
        found: dict[str, Any] = {}
        try:
            events = self.client.list_events(self._namespace(attempt), field_selector="involvedObject.kind=Pod")
            events += self.client.list_events(None, field_selector="involvedObject.kind=Node")
            found["events"] = evidence.event_lines(events, pods=pods, nodes=nodes, since=attempt.admitted_at)
        except (ApiError, RenderError) as exc:
            logger.warning("events of job %s attempt %s on %s unavailable: %s", attempt.job_id, attempt.number,
                           self.cluster.name, exc)
        try:
            found["node_conditions"] = evidence.unhealthy_conditions(self.client.list_nodes(), nodes)
        except ApiError as exc:
            logger.warning("nodes of job %s attempt %s on %s unavailable: %s", attempt.job_id, attempt.number,
                           self.cluster.name, exc)
        return {key: value for key, value in found.items() if value}

    def _vanished(self, attempt: Attempt, status: AttemptStatus, expected: int,
                  pods: list[Mapping[str, Any]]) -> Observation:
        """Pods of a running attempt are gone. The whole gang is going when the pods left are all terminating, or
        when their owner, the attempt's parent ConfigMap, was deleted (the garbage collector then deletes its pods
        one by one). When their nodes went away too (a node deleted, its pods garbage-collected before the next node
        sync), the node is lost: ask the API server which nodes exist."""
        present = {r.pod for r in status.replicas}
        staying = [r for r in status.replicas if not r.deleting]
        owner = self._deleted_owner(pods) if staying else ""
        if owner:
            message = (f"all {expected} replica pods disappeared while running: the attempt's parent ConfigMap "
                       f"{owner} was deleted, and the garbage collector removes every pod it owned "
                       f"({len(present)} still there)")
        elif present and not staying:
            message = f"all {expected} replica pods disappeared while running ({len(present)} still terminating)"
        else:
            what = f"all {expected}" if not present else f"{expected - len(present)} of {expected}"
            message = f"{what} replica pods disappeared while running"
        left = {r.node for r in status.replicas}
        vanished_on = {str(row["node"]) for row in attempt.placement} - left
        lost = tuple(sorted(vanished_on - self._live_nodes(vanished_on)))
        details: dict[str, Any] = self._where(lost[0]) if lost else {}
        details.update(self._evidence(attempt, {r.pod for r in status.replicas}))
        return Observation(attempt.pk, Phase.VANISHED, message, lost_nodes=lost, details=details)

    def _growing(self, attempt: Attempt, status: AttemptStatus) -> bool:
        """The pods missing are replicas a grow added (its pods not created yet, or lost on the way): created now
        (dispatch adopts the rest), rather than the attempt counted as vanished."""
        if not attempt.resize_count:
            return False
        present = {(r.role, r.index) for r in status.replicas}
        missing = {(str(row["role"]), int(row["index"])) for row in attempt.placement} - present
        added = {(str(row["role"]), int(row["index"])) for resize in
                 attempt.resizes.filter(kind=AttemptResize.Kind.GROW) for row in resize.replicas}
        if not missing or not missing <= added:
            return False
        self.create(attempt)
        return True

    def _deleted_owner(self, pods: list[Mapping[str, Any]]) -> str:
        """The name of the parent ConfigMap owning these pods if it no longer exists; "" while it does, when the pods
        name no owner, or when the API cannot tell."""
        for pod in pods:
            meta = pod.get("metadata") or {}
            owner = next((str(ref.get("name") or "") for ref in meta.get("ownerReferences") or []
                          if ref.get("kind") == "ConfigMap" and ref.get("controller")), "")
            if owner:
                try:
                    return "" if self.client.get("ConfigMap", str(meta.get("namespace", "")), owner) else owner
                except ApiError:
                    return ""
        return ""

    def _live_nodes(self, names_: set[str]) -> set[str]:
        """Which of these nodes the cluster still has, and not NotReady past TIDAL_NODE_LOST_GRACE."""
        try:
            nodes = self.client.list_nodes()
        except ApiError:
            return set(names_)  # cannot tell: do not call a node lost on no evidence
        now = timezone.now()
        grace_start = now - timedelta(seconds=settings.TIDAL["NODE_LOST_GRACE"])
        return {str((n.get("metadata") or {}).get("name")) for n in nodes
                if node_is_ready(n) or (not_ready_since(n) or now) > grace_start} & names_

    def pending_timeout(self) -> float:
        """The cluster's pending timeout, never shorter than a preempted victim may take to leave: a preemptor's
        pods wait in Pending for the victims' termination grace period, and that wait is expected."""
        return float(max(self.cluster.pending_timeout_seconds,
                         self.cluster.termination_grace_seconds + PENDING_GRACE_MARGIN))

    def _stuck_pending(self, attempt: Attempt, status: AttemptStatus) -> Observation | None:
        """An attempt not started yet whose replica has been Pending past the timeout fails (retryably), and the
        cluster's nodes are synced again: the usual cause is a pod Tidal did not create taking the placed node's
        devices since the last sync, and the retry must be placed on the corrected inventory."""
        if attempt.job.state != State.DISPATCHING:
            return None
        stuck = stuck_pending(status.replicas, now=timezone.now(), since=attempt.admitted_at,
                              timeout_seconds=self.pending_timeout())
        if stuck is None:
            return None
        replica, seconds = stuck
        failure = pending_failure(pod=replica.pod, node=replica.node, seconds=seconds,
                                  unschedulable=replica.unschedulable, reason=replica.reason, message=replica.message)
        self.nodes_stale = True
        details = {**self._where(replica.node), "replica": mapping.replica_key(replica.role, replica.index),
                   "pod": replica.pod, "k8s_reason": replica.reason, "pending_seconds": round(seconds),
                   **self._evidence(attempt, {r.pod for r in status.replicas})}
        return Observation(attempt.pk, Phase.FAILED, failure.summary, cause=failure.cause, details=details)

    # ------------------------------------------------------------------------------------------------ cordon

    def cordon(self, node: str, cordoned: bool) -> None:
        """Cordon a quarantined node (`spec.unschedulable`, as `kubectl cordon`), marked with an annotation as
        Tidal's; on release, uncordon it only if that mark is there: a node an admin or a drain cordoned stays so.
        The inventory's `cordoned` follows at once (node sync would at its next run). Errors propagate: the task
        is acknowledged late."""
        found = next((n for n in self.client.list_nodes(field_selector=f"metadata.name={node}")
                      if (n.get("metadata") or {}).get("name") == node), None)
        if found is None:
            return
        ours = ((found.get("metadata") or {}).get("annotations") or {}).get(names.ANNOTATION_CORDON) == "true"
        if cordoned == bool((found.get("spec") or {}).get("unschedulable")) or not (cordoned or ours):
            return
        self.client.patch_node(node, {"metadata": {"annotations": {names.ANNOTATION_CORDON: "true" if cordoned
                                                                   else None}},
                                      "spec": {"unschedulable": cordoned}})
        Node.objects.filter(cluster=self.cluster, name=node).update(cordoned=cordoned)
        logger.warning("node %s of %s %s", node, self.cluster.name,
                       "cordoned: quarantined" if cordoned else "uncordoned: released from quarantine")

    # -------------------------------------------------------------------------------------------------- logs

    def _pod(self, attempt: Attempt, role: str, index: int) -> tuple[str, str]:
        """(namespace, pod name) of one replica of the attempt."""
        from clusters.kube.render import pod_name

        render_job = mapping.render_job(attempt, self._namespace(attempt))
        return render_job.namespace, pod_name(render_job, role, index)

    def logs(self, attempt: Attempt, role: str, index: int, tail: int) -> list[str]:
        try:
            namespace, pod = self._pod(attempt, role, index)
            return _lines(self.client.pod_log(namespace, pod, container=MAIN_CONTAINER, tail_lines=tail), tail)
        except (ApiError, RenderError) as exc:
            raise LogsUnavailable(f"pod log unavailable: {exc}") from None

    def follow(self, attempt: Attempt, role: str, index: int, tail: int, max_seconds: float,
               after: str | None = None) -> FollowedLog:
        """Connects now: LogsUnavailable (the pod is gone, the API is down) is raised before any line. The position
        is the timestamp of the last line given (`clusters.kube.streams.LogPosition`)."""
        try:
            position = None if after is None else LogPosition.parse(after)
        except ValueError:
            raise DomainError("Not a cursor this server gave: resume with the cursor= of the stream's last line.",
                              field="cursor") from None
        try:
            namespace, pod = self._pod(attempt, role, index)
            return self.client.follow_log(namespace, pod, container=MAIN_CONTAINER, tail_lines=tail,
                                          max_seconds=max_seconds, after=position)
        except (ApiError, RenderError) as exc:
            raise LogsUnavailable(f"pod log unavailable: {exc}") from None
