"""``render(job, placement, settings)``: one admitted job attempt -> Kubernetes manifests (plain dicts).

Objects, in creation order (all in the job's namespace, all labelled with :func:`names.attempt_selector`):

1. the **parent** ConfigMap ``tidal-<job>-<name>-a<attempt>``: owns everything else;
2. the headless **Service** (same name) for rendezvous DNS, only when the attempt has more than one pod or the job is
   elastic;
3. the DeepSpeed **hostfile** ConfigMap ``...-a<attempt>-hostfile`` (deepspeed only; an elastic job's lists every
   replica up to its groups' maximum, so that pods a grow adds find their line);
4. the **Secret** ``...-a<attempt>-token`` holding the secret env (tracking's run token), only when there is one;
5. one **Pod** per replica ``...-a<attempt>-<role>-<index>``, pinned to its node.

Owner references: children carry an ownerReference to the parent whose ``uid`` is
:data:`PARENT_UID_PLACEHOLDER`. The uid exists only once the parent is created, so dispatch creates the
parent first and fills the children with :func:`bind_owner` (see ``dispatch.py``). Deleting the parent
lets the garbage collector remove the rest; cleanup also deletes them by label so it never depends on GC.

Pods are pinned with a *required node affinity* on ``kubernetes.io/hostname`` rather than ``nodeName``:
``nodeName`` bypasses the scheduler, so a pod sent to a node still occupied by a preempted victim fails
kubelet admission (OutOfgpu); with affinity it stays Pending until the victim's pods are gone.
"""

from __future__ import annotations

import copy
from dataclasses import replace
from typing import Any

from core.k8snames import is_dns1123_label, is_image_reference

from . import launchers, names
from .envvars import check_user_env
from .errors import PlacementError, RenderError
from .launchers import Replica
from .quantity import is_quantity
from .spec import LAUNCHERS, ClusterSettings, Placement, RenderJob

PARENT_UID_PLACEHOLDER = ""
MAIN_CONTAINER = "main"
MAX_ROLE_LENGTH = 15

Manifest = dict[str, Any]


# --------------------------------------------------------------------------------------------- names

def base_name(job: RenderJob) -> str:
    """Name of the parent ConfigMap and the headless Service of this attempt (DNS-1035 safe)."""
    return names.object_name(f"tidal-{names.slug(str(job.job_id))}", job.name, f"a{job.attempt}")


def pod_name(job: RenderJob, role: str, index: int) -> str:
    return replica_pod_name(job.job_id, job.name, job.attempt, role, index)


def replica_pod_name(job_id: int | str, job_name: str, attempt: int, role: str, index: int) -> str:
    """A replica's pod name from what an attempt row knows: GPU telemetry finds the attempt of a pod by it."""
    return names.object_name(f"tidal-{names.slug(str(job_id))}", job_name, f"a{attempt}-{role}-{index}")


def _child_name(job: RenderJob, what: str) -> str:
    return names.object_name(f"tidal-{names.slug(str(job.job_id))}", job.name, f"a{job.attempt}-{what}")


# ---------------------------------------------------------------------------------------- validation

def validate(job: RenderJob, settings: ClusterSettings) -> None:
    """Raise a :class:`RenderError` subclass naming the field if the job cannot be rendered."""
    if job.launcher not in LAUNCHERS:
        raise RenderError(f"unknown launcher {job.launcher!r}; expected one of {', '.join(LAUNCHERS)}",
                          field="launcher")
    if not is_image_reference(job.image):
        raise RenderError(f"image {job.image!r} is not an image reference", field="image")
    if not is_dns1123_label(job.namespace):
        raise RenderError(f"namespace {job.namespace!r} is not a DNS-1123 label", field="namespace")
    if job.attempt < 0:
        raise RenderError("attempt must be >= 0", field="attempt")
    if not 1 <= job.master_port <= 65535:
        raise RenderError("master_port must be within 1..65535", field="master_port")
    if not job.replica_groups:
        raise RenderError("at least one replica group is required", field="replica_groups")
    roles = [group.role for group in job.replica_groups]
    if len(set(roles)) != len(roles):
        raise RenderError("replica group roles must be distinct", field="replica_groups")
    for group in job.replica_groups:
        if not is_dns1123_label(group.role) or len(group.role) > MAX_ROLE_LENGTH:
            raise RenderError(f"role {group.role!r} must be a lowercase DNS label of at most "
                              f"{MAX_ROLE_LENGTH} characters", field="replica_groups")
        if group.replicas < 1 or group.devices < 0 or group.rdma < 0:
            raise RenderError(f"role {group.role!r}: replicas must be >= 1, devices and rdma >= 0",
                              field="replica_groups")
        for what, value in (("cpu", group.cpu), ("memory", group.memory)):
            if not is_quantity(value):
                raise RenderError(f"role {group.role!r}: {what} {value!r} is not a Kubernetes quantity",
                                  field="replica_groups")
    if len({group.rdma > 0 for group in job.replica_groups}) > 1:
        raise RenderError("RDMA must be requested by every replica group or by none", field="replica_groups")
    shm = job.shm_size or settings.default_shm_size
    if not is_quantity(shm):
        raise RenderError(f"shm size {shm!r} is not a Kubernetes quantity", field="shm_size")
    if job.run_as_user is not None and (isinstance(job.run_as_user, bool) or not isinstance(job.run_as_user, int)
                                        or job.run_as_user < 1):
        raise RenderError("run_as_user must be a non-root uid (a positive integer)",
                          field="launcher_options.run_as_user")
    if job.launcher == "ray" and job.replica_groups[0].replicas != 1:
        raise RenderError("ray: the first replica group is the head and must have exactly 1 replica",
                          field="replica_groups")
    check_user_env(job.env)
    launchers.check_parallelism(job)


# ------------------------------------------------------------------------------------------ replicas

def _replicas(job: RenderJob, placement: Placement, lines: list[Replica]) -> list[Replica]:
    """The replicas the attempt runs now, ranked in group order."""
    by_key = {(r.role, r.index): r for r in lines}
    out: list[Replica] = []
    for group in job.replica_groups:
        for index in group.replica_indexes:
            out.append(replace(by_key[(group.role, index)], rank=len(out)))
    expected = {(r.role, r.index) for r in out}
    placed = [(p.role, p.index) for p in placement.replicas]
    if len(placed) != len(set(placed)) or set(placed) != expected:
        missing = sorted(expected - set(placed))
        extra = sorted(set(placed) - expected)
        raise PlacementError(f"placement must cover every replica once (missing {missing}, unexpected {extra})",
                             field="placement")
    return out


def _lines(job: RenderJob, service: str | None, domain: str) -> list[Replica]:
    """Every replica the attempt may run (an elastic group's up to its maximum), in hostfile line order."""
    out: list[Replica] = []
    for group in job.replica_groups:
        for index in range(max(group.slots, max(group.replica_indexes, default=-1) + 1)):
            pod = pod_name(job, group.role, index)
            dns = f"{pod}.{service}.{job.namespace}.svc.{domain}" if service else "localhost"
            out.append(Replica(group.role, index, -1, group.devices, pod, dns, line=len(out)))
    return out


# ------------------------------------------------------------------------------------------- objects

def _meta(job: RenderJob, settings: ClusterSettings, name: str, component: str,
          extra_labels: dict[str, str] | None = None, owner: str | None = None) -> dict[str, Any]:
    labels = names.attempt_selector(job.job_id, job.attempt, settings.instance)
    labels.update({
        names.LABEL_PROJECT: names.label_value(job.project),
        names.LABEL_LAUNCHER: job.launcher,
        names.LABEL_COMPONENT: component,
    })
    labels.update(extra_labels or {})
    meta: dict[str, Any] = {
        "name": name,
        "namespace": job.namespace,
        "labels": labels,
        "annotations": {names.ANNOTATION_JOB_NAME: job.name, names.ANNOTATION_PROJECT: job.project},
    }
    if owner:
        meta["ownerReferences"] = [{
            "apiVersion": "v1", "kind": "ConfigMap", "name": owner,
            "uid": PARENT_UID_PLACEHOLDER, "controller": True,
        }]
    return meta


def _parent(job: RenderJob, settings: ClusterSettings, replicas: list[Replica]) -> Manifest:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": _meta(job, settings, base_name(job), "parent"),
        "data": {
            "job-id": str(job.job_id),
            "attempt": str(job.attempt),
            "launcher": job.launcher,
            "pods": "\n".join(r.pod_name for r in replicas),
        },
    }


def _service(job: RenderJob, settings: ClusterSettings, parent: str) -> Manifest:
    selector = names.attempt_selector(job.job_id, job.attempt, settings.instance)
    selector[names.LABEL_COMPONENT] = "replica"
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": _meta(job, settings, base_name(job), "rendezvous", owner=parent),
        "spec": {
            "clusterIP": "None",
            "publishNotReadyAddresses": True,  # rendezvous happens before any pod is Ready
            "selector": selector,
            "ports": launchers.service_ports(job),
        },
    }


def _hostfile(job: RenderJob, settings: ClusterSettings, parent: str, replicas: list[Replica]) -> Manifest:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": _meta(job, settings, _child_name(job, "hostfile"), "hostfile", owner=parent),
        "data": {"hostfile": launchers.deepspeed_hostfile(replicas)},
    }


def _token(job: RenderJob, settings: ClusterSettings, parent: str) -> Manifest:
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "type": "Opaque",
        "metadata": _meta(job, settings, _child_name(job, "token"), "token", owner=parent),
        "stringData": dict(job.secret_env),
    }


def _env(job: RenderJob, settings: ClusterSettings, replica: Replica, master: Replica,
         rdma: bool) -> list[dict[str, Any]]:
    platform: dict[str, str] = {
        "TIDAL_JOB_ID": str(job.job_id),
        "TIDAL_JOB_NAME": job.name,
        "TIDAL_PROJECT": job.project,
        "TIDAL_ATTEMPT": str(job.attempt),
        "TIDAL_LAUNCHER": job.launcher,
        "TIDAL_ROLE": replica.role,
        "TIDAL_REPLICA_INDEX": str(replica.index),
        "TIDAL_CHECKPOINT_PATH": job.checkpoint_path,
        **job.platform_env,
    }
    if settings.nccl_socket_ifname:
        platform["NCCL_SOCKET_IFNAME"] = settings.nccl_socket_ifname
        platform["GLOO_SOCKET_IFNAME"] = settings.nccl_socket_ifname
    if not rdma:
        platform["NCCL_IB_DISABLE"] = "1"
    platform.update(launchers.rendezvous_env(job, replica, master))
    env: list[dict[str, Any]] = [{"name": k, "value": v} for k, v in platform.items()]
    env.append({"name": "TIDAL_POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}})
    env.append({"name": "TIDAL_NODE_NAME", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}})
    env.extend({"name": name, "valueFrom": {"secretKeyRef": {"name": _child_name(job, "token"), "key": name}}}
               for name in sorted(job.secret_env))
    # Cluster NCCL extras are defaults: the user's env wins over them (reserved names never reach here).
    for key, value in sorted(settings.nccl_extra_env.items()):
        if key not in job.env and key not in platform:
            env.append({"name": key, "value": str(value)})
    # User env last, so it can reference platform variables as $(MASTER_ADDR).
    env.extend({"name": k, "value": str(v)} for k, v in job.env.items())
    return env


def pod_security(run_as_user: int | None) -> dict[str, Any]:
    """The pod's part of the `restricted` Pod Security Standard: the runtime's default seccomp profile always, and
    running as non-root when the job names the uid its image runs as (the kubelet can only check runAsNonRoot
    against a numeric user, and an image's default user may be root)."""
    context: dict[str, Any] = {"seccompProfile": {"type": "RuntimeDefault"}}
    if run_as_user is not None:
        context.update(runAsNonRoot=True, runAsUser=run_as_user)
    return context


def container_security(rdma: bool) -> dict[str, Any]:
    """The container's part of `restricted`: no privilege escalation and no capabilities, except IPC_LOCK for RDMA
    (verbs pin memory), which no Pod Security level but `privileged` allows."""
    capabilities: dict[str, Any] = {"drop": ["ALL"]}
    if rdma:
        capabilities["add"] = ["IPC_LOCK"]
    return {"allowPrivilegeEscalation": False, "privileged": False, "capabilities": capabilities}


def _pod(job: RenderJob, settings: ClusterSettings, replica: Replica, master: Replica, placement: Placement,
         parent: str, service: str | None) -> Manifest:
    group = next(g for g in job.replica_groups if g.role == replica.role)
    placed = placement.node_for(replica.role, replica.index)
    assert placed is not None  # checked by _replicas
    rdma = group.rdma > 0
    requests: dict[str, str] = {"cpu": group.cpu, "memory": group.memory}
    limits: dict[str, str] = {"memory": group.memory}
    if group.devices:
        requests[job.device_resource] = limits[job.device_resource] = str(group.devices)
    if rdma:
        requests[settings.rdma_resource] = limits[settings.rdma_resource] = str(group.rdma)
    command, args = launchers.command_for(job, replica)
    container: dict[str, Any] = {
        "name": MAIN_CONTAINER,
        "image": job.image,
        "imagePullPolicy": "IfNotPresent",
        "command": command,
        "env": _env(job, settings, replica, master, rdma),
        "resources": {"requests": requests, "limits": limits},
        "securityContext": container_security(rdma),
        "volumeMounts": [{"name": "dshm", "mountPath": "/dev/shm"}],  # noqa: S108  (a pod's shared memory, not a temp file)
    }
    if args:
        container["args"] = args
    ports = launchers.container_ports(job, replica)
    if ports:
        container["ports"] = ports
    volumes: list[dict[str, Any]] = [{"name": "dshm", "emptyDir": {
        "medium": "Memory", "sizeLimit": job.shm_size or settings.default_shm_size}}]
    if job.launcher == "deepspeed":
        volumes.append({"name": "hostfile", "configMap": {"name": _child_name(job, "hostfile")}})
        container["volumeMounts"].append({"name": "hostfile", "mountPath": launchers.DEEPSPEED_HOSTFILE_DIR,
                                          "readOnly": True})
    meta = _meta(job, settings, replica.pod_name, "replica", owner=parent, extra_labels={
        names.LABEL_ROLE: replica.role,
        names.LABEL_INDEX: str(replica.index),
        names.LABEL_RANK: str(replica.rank),
    })
    meta["annotations"][names.ANNOTATION_NODE] = placed.node
    if job.checkpoint_path:
        meta["annotations"][names.ANNOTATION_CHECKPOINT] = job.checkpoint_path
    spec: dict[str, Any] = {
        "securityContext": pod_security(job.run_as_user),
        "restartPolicy": "Never",
        "hostname": replica.pod_name,
        "automountServiceAccountToken": False,
        "enableServiceLinks": False,
        "terminationGracePeriodSeconds": settings.termination_grace_seconds,
        "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
            "nodeSelectorTerms": [{"matchExpressions": [{
                "key": "kubernetes.io/hostname", "operator": "In", "values": [placed.hostname or placed.node],
            }]}],
        }}},
        "tolerations": [t.to_dict() for t in settings.gpu_tolerations],
        "containers": [container],
        "volumes": volumes,
    }
    if service:
        spec["subdomain"] = service
    if settings.image_pull_secret:
        spec["imagePullSecrets"] = [{"name": settings.image_pull_secret}]
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec}


def render(job: RenderJob, placement: Placement, settings: ClusterSettings) -> list[Manifest]:
    """All manifests of one job attempt, parent first. Pure and deterministic; raises ``RenderError``."""
    validate(job, settings)
    parent = base_name(job)
    # An elastic job gets its headless Service even at one pod: pods it grows reach the rendezvous through it.
    service = parent if job.total_replicas > 1 or job.elastic_nodes else None
    lines = _lines(job, service, settings.cluster_domain)
    replicas = _replicas(job, placement, lines)
    master = replicas[0]
    out: list[Manifest] = [_parent(job, settings, replicas)]
    if service:
        out.append(_service(job, settings, parent))
    if job.launcher == "deepspeed":
        out.append(_hostfile(job, settings, parent, lines))
    if job.secret_env:
        out.append(_token(job, settings, parent))
    out.extend(_pod(job, settings, r, master, placement, parent, service) for r in replicas)
    return out


def bind_owner(manifest: Manifest, uid: str | None) -> Manifest:
    """A copy of ``manifest`` whose parent ownerReference carries ``uid``; without a uid (a mock API that
    assigns none) the reference is dropped, since the API server rejects an empty uid."""
    refs = manifest.get("metadata", {}).get("ownerReferences")
    if not refs:
        return manifest
    out = copy.deepcopy(manifest)
    if uid:
        for ref in out["metadata"]["ownerReferences"]:
            if ref.get("uid") == PARENT_UID_PLACEHOLDER:
                ref["uid"] = uid
    else:
        del out["metadata"]["ownerReferences"]
    return out
