"""Map the pods of one job attempt (as dicts from list/watch) to a job-level outcome. Pure.

Success rule per launcher (:data:`SUCCESS_RULES`):

* ``pytorch`` and ``megatron``: **rank 0** succeeded (Kubeflow PyTorchJob's convention: the master's exit
  decides; the other ranks finish with it or are cleaned up);
* ``ray``: the **head** (rank 0) succeeded: it runs the user's entrypoint, workers block until removed;
* ``deepspeed`` and ``command``: **every** replica succeeded.

Precedence: the success rule first (once rank 0 / the head is done, stragglers are irrelevant), then any
failed replica fails the attempt, then ``running`` when every expected replica runs, else ``pending``.
A replica counts as failed when its pod phase is Failed or Unknown, when its node is NotReady, when it is
being deleted for a disruption (preemption, eviction, node taint), or when its container is stuck on a
reason that will not fix itself (ImagePullBackOff, InvalidImageName, CreateContainerConfigError ...).
``ErrImagePull`` alone stays pending: kubelet retries once before backing off.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from . import names
from .failures import NODE_LOST_REASONS
from .render import MAIN_CONTAINER

SUCCESS_RULES: dict[str, str] = {
    "pytorch": "rank0", "megatron": "rank0", "ray": "rank0", "deepspeed": "all", "command": "all",
}
FATAL_WAITING = frozenset({"ImagePullBackOff", "InvalidImageName", "ErrImageNeverPull",
                           "CreateContainerConfigError", "CreateContainerError", "RunContainerError"})


@dataclass(frozen=True)
class ReplicaState:
    pod: str
    role: str
    index: int
    rank: int
    node: str
    state: str  # pending | running | succeeded | failed
    phase: str = ""
    exit_code: int | None = None
    reason: str = ""
    message: str = ""
    created: datetime | None = None  # metadata.creationTimestamp (absent on some API mocks)
    unschedulable: bool = False  # PodScheduled is False: the kube-scheduler cannot bind it to its node
    deleting: bool = False  # metadata.deletionTimestamp is set: the pod is terminating

    @property
    def node_lost(self) -> bool:
        return self.reason in NODE_LOST_REASONS


@dataclass(frozen=True)
class AttemptStatus:
    state: str  # pending | running | succeeded | failed
    reason: str
    message: str
    replicas: tuple[ReplicaState, ...]
    failed: tuple[ReplicaState, ...] = ()
    avoid_nodes: frozenset[str] = frozenset()  # nodes lost under this attempt: avoid them on the retry


def _int(text: Any, default: int = -1) -> int:
    try:
        return int(text)
    except (TypeError, ValueError):
        return default


def _main_container(status: Mapping[str, Any]) -> Mapping[str, Any]:
    containers = status.get("containerStatuses") or []
    for container in containers:
        if container.get("name") == MAIN_CONTAINER:
            return container
    return containers[0] if containers else {}


def _disruption(status: Mapping[str, Any]) -> str:
    for condition in status.get("conditions") or []:
        if condition.get("type") == "DisruptionTarget" and condition.get("status") == "True":
            return str(condition.get("reason") or "DisruptionTarget")
    return ""


def _unscheduled(status: Mapping[str, Any]) -> Mapping[str, Any] | None:
    for condition in status.get("conditions") or []:
        if condition.get("type") == "PodScheduled" and condition.get("status") == "False":
            return condition
    return None


def _timestamp(text: Any) -> datetime | None:
    try:
        return datetime.fromisoformat(str(text).replace("Z", "+00:00")) if text else None
    except ValueError:
        return None


def replica_state(pod: Mapping[str, Any], not_ready_nodes: frozenset[str] = frozenset()) -> ReplicaState:
    meta = pod.get("metadata") or {}
    labels = meta.get("labels") or {}
    spec = pod.get("spec") or {}
    status = pod.get("status") or {}
    node = spec.get("nodeName") or (meta.get("annotations") or {}).get(names.ANNOTATION_NODE, "")
    phase = status.get("phase") or "Pending"
    container = _main_container(status)
    cstate = container.get("state") or {}
    terminated = cstate.get("terminated") or {}
    waiting = cstate.get("waiting") or {}
    unscheduled = _unscheduled(status)

    def make(state: str, reason: str = "", message: str = "", exit_code: int | None = None) -> ReplicaState:
        return ReplicaState(
            pod=str(meta.get("name", "")), role=str(labels.get(names.LABEL_ROLE, "")),
            index=_int(labels.get(names.LABEL_INDEX)), rank=_int(labels.get(names.LABEL_RANK)),
            node=str(node), state=state, phase=phase, exit_code=exit_code, reason=reason, message=message[:1000],
            created=_timestamp(meta.get("creationTimestamp")), unschedulable=unscheduled is not None,
            deleting=bool(meta.get("deletionTimestamp")),
        )

    exit_code = terminated.get("exitCode")
    disruption = _disruption(status)
    if phase == "Succeeded":
        return make("succeeded", exit_code=exit_code if exit_code is not None else 0)
    if phase == "Failed":
        reason = status.get("reason") or disruption or terminated.get("reason") or "Error"
        message = status.get("message") or terminated.get("message") or ""
        return make("failed", str(reason), str(message), exit_code)
    if phase == "Unknown" or status.get("reason") == "NodeLost":
        return make("failed", "NodeLost", str(status.get("message") or "node stopped reporting"))
    if node and node in not_ready_nodes and spec.get("nodeName"):
        return make("failed", "NodeNotReady", f"node {node} is NotReady")
    if disruption and meta.get("deletionTimestamp"):
        return make("failed", disruption, "pod is being deleted")
    if waiting.get("reason") in FATAL_WAITING:
        return make("failed", str(waiting["reason"]), str(waiting.get("message") or ""))
    if terminated and exit_code not in (None, 0):
        return make("failed", str(terminated.get("reason") or "Error"), str(terminated.get("message") or ""),
                    exit_code)
    if phase == "Running":
        return make("running")
    if unscheduled is not None:  # the scheduler's own words ("0/3 nodes are available: ...") say the most
        return make("pending", str(unscheduled.get("reason") or "Unschedulable"), str(unscheduled.get("message") or ""))
    return make("pending", str(waiting.get("reason") or ""), str(waiting.get("message") or ""))


def attempt_status(pods: Iterable[Mapping[str, Any]], *, expected: int, launcher: str,
                   not_ready_nodes: Iterable[str] = ()) -> AttemptStatus:
    """Outcome of one attempt from its pods. ``expected`` is the number of replicas rendered."""
    lost = frozenset(not_ready_nodes)
    by_name = {}
    for pod in pods:
        by_name[(pod.get("metadata") or {}).get("name")] = pod
    replicas = tuple(sorted((replica_state(p, lost) for p in by_name.values()), key=lambda r: (r.rank, r.pod)))
    failed = tuple(r for r in replicas if r.state == "failed")
    rule = SUCCESS_RULES.get(launcher, "all")
    if rule == "rank0":
        succeeded = any(r.rank == 0 and r.state == "succeeded" for r in replicas)
    else:
        succeeded = len(replicas) >= expected and all(r.state == "succeeded" for r in replicas)
    if succeeded:
        who = "rank 0" if rule == "rank0" else "every replica"
        return AttemptStatus("succeeded", "Completed", f"{who} succeeded", replicas)
    if failed:
        first = failed[0]
        code = f", exit code {first.exit_code}" if first.exit_code is not None else ""
        message = f"replica {first.pod} on {first.node or 'no node'} failed: {first.reason}{code}"
        if first.message:
            message += f": {first.message}"
        avoid = frozenset(r.node for r in failed if r.node_lost and r.node)
        return AttemptStatus("failed", first.reason, message, replicas, failed, avoid)
    if len(replicas) >= expected and all(r.state in ("running", "succeeded") for r in replicas):
        return AttemptStatus("running", "Running", f"{len(replicas)} replicas running", replicas)
    waiting = [r for r in replicas if r.state == "pending"]
    missing = max(expected - len(replicas), 0)
    reason = next((r.reason for r in waiting if r.reason), "Pending")
    return AttemptStatus("pending", reason, f"{len(waiting)} replicas pending, {missing} not created yet", replicas)


def stuck_pending(replicas: Iterable[ReplicaState], *, now: datetime, since: datetime,
                  timeout_seconds: float) -> tuple[ReplicaState, float] | None:
    """The replica pending the longest, with its seconds pending, if that exceeds ``timeout_seconds``; else None.

    A pod's wait counts from its creationTimestamp; ``since`` (when the attempt was dispatched) stands in when the
    API did not set one. Nothing in Kubernetes ever fails a pod that cannot be scheduled or whose container never
    starts, so without this bound such an attempt would hold its quota forever.
    """
    waits = [(replica, (now - (replica.created or since)).total_seconds())
             for replica in replicas if replica.state == "pending"]
    if not waits:
        return None
    replica, seconds = max(waits, key=lambda pair: (pair[1], -pair[0].rank))
    return (replica, seconds) if seconds > timeout_seconds else None
