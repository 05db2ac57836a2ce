"""Tidal-run inference services on Kubernetes (issue 30): one ``apps/v1`` Deployment and one ClusterIP ``v1`` Service
per service, both named by the service's key, in its project's namespace. The serving app calls this module; it
imports nothing of serving's.

* **Pods as Tidal's.** The pod template carries ``tidal.dev/managed`` and ``tidal.dev/instance`` (and
  ``tidal.dev/service``, ``tidal.dev/component=service``) but no job or attempt label: node sync does not count them
  as foreign pods (a pool's demand counts a service through its replicas, not again through node capacity), and the
  reconciler and the orphan sweep, which act only on objects with a job and an attempt label, leave them alone.
* **Placement.** Kubernetes' scheduler places the replicas, on the pool's nodes only (a required node affinity on
  ``metadata.name``), with the cluster's GPU tolerations and termination grace, as training pods get them. Devices
  are requested with requests = limits; a TCP readiness probe on the port keeps a replica out of the Service's
  endpoints until it listens.
* **Rollouts** never surge (``maxSurge: 0``): a surge replica would need devices the pool may have lent to training.
* **Idempotent apply.** Each object carries a hash of what Tidal applied (``tidal.dev/spec-hash``). ``apply`` reads
  the object and writes only when the hash differs (one JSON merge patch of the whole spec: every list Tidal sets is
  replaced whole, every key it may set is always present) or, for the Deployment, when only the replica count
  differs (the scale subresource). A create that meets the object (409: a redelivered task) compares it the same way.
"""

from __future__ import annotations

import copy
import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from core.k8snames import is_dns1123_label, is_dns1123_subdomain, is_image_reference, is_label_value, label_key_problem

from . import names
from .client import KubeClient
from .envvars import check_user_env
from .errors import RenderError
from .quantity import is_quantity
from .render import MAIN_CONTAINER, container_security, pod_security
from .spec import ClusterSettings

Manifest = dict[str, Any]
COMPONENT = "service"
PORT_NAME = "serve"
READINESS_PERIOD_SECONDS = 5
# Labels of a training attempt: a service's pods carrying them would pass for an attempt's (node sync, reconciler,
# orphan sweep), so a spec may not set them.
ATTEMPT_LABELS = (names.LABEL_JOB, names.LABEL_ATTEMPT)
# Maps Tidal writes whole, by path: a merge patch merges maps, so each key the spec no longer sets is removed with an
# explicit null (the API server adds no key of its own to these).
OWNED_MAPS: dict[str, tuple[tuple[str, ...], ...]] = {
    "Deployment": (("metadata", "labels"), ("spec", "template", "metadata", "labels"),
                   ("spec", "template", "spec", "securityContext")),
    "Service": (("metadata", "labels"),),
}


@dataclass(frozen=True)
class ServiceSpec:
    """What a service runs, as the serving app fills it from its models."""

    key: str  # the Deployment's and the Service's name: a DNS-1035 label (e.g. "tidal-svc-42")
    namespace: str
    image: str
    command: tuple[str, ...]
    args: tuple[str, ...]
    env: Mapping[str, str]
    port: int
    devices_per_replica: int
    device_resource: str  # the flavor's resource, e.g. "nvidia.com/gpu" (as a training pod asks for it)
    node_names: tuple[str, ...]  # the pool's nodes: the replicas may run on these only
    replicas: int
    labels: Mapping[str, str]  # project, service id...: written on the Deployment, the Service and the pods
    cpu: str = "1"
    memory: str = "4Gi"
    # The non-root uid the image runs as: given, the pods meet the `restricted` Pod Security Standard (as a job's).
    run_as_user: int | None = None
    settings: ClusterSettings = field(default_factory=ClusterSettings)  # tolerations, grace, instance, pull secret


# ---------------------------------------------------------------------------------------------------- validation

def validate(spec: ServiceSpec) -> None:
    """Raise :class:`RenderError` (a ``ValueError``) naming the field that cannot become a manifest."""
    if not is_dns1123_label(spec.key) or not spec.key[0].isalpha():
        raise RenderError(f"key {spec.key!r} must be a DNS-1035 label (a Service's name)", field="key")
    if not is_dns1123_label(spec.namespace):
        raise RenderError(f"namespace {spec.namespace!r} is not a DNS-1123 label", field="namespace")
    if not is_image_reference(spec.image):
        raise RenderError(f"image {spec.image!r} is not an image reference", field="image")
    if isinstance(spec.port, bool) or not 1 <= spec.port <= 65535:
        raise RenderError(f"port {spec.port!r} must be within 1..65535", field="port")
    if isinstance(spec.devices_per_replica, bool) or spec.devices_per_replica < 1:
        raise RenderError("devices_per_replica must be at least 1", field="devices_per_replica")
    if label_key_problem(spec.device_resource) is not None:
        raise RenderError(f"device_resource {spec.device_resource!r} is not a resource name",
                          field="device_resource")
    if not spec.node_names:
        raise RenderError("node_names must name at least one node (the pool's)", field="node_names")
    bad_nodes = [n for n in spec.node_names if not is_dns1123_subdomain(n)]
    if bad_nodes:
        raise RenderError(f"node_names {bad_nodes!r} are not node names", field="node_names")
    _check_replicas(spec.replicas)
    if spec.run_as_user is not None and (isinstance(spec.run_as_user, bool) or not isinstance(spec.run_as_user, int)
                                         or spec.run_as_user < 1):
        raise RenderError("run_as_user must be a non-root uid (a positive integer)", field="run_as_user")
    for what, value in (("cpu", spec.cpu), ("memory", spec.memory)):
        if not is_quantity(value):
            raise RenderError(f"{what} {value!r} is not a Kubernetes quantity", field=what)
    check_user_env(spec.env)
    for key, value in spec.labels.items():
        problem = label_key_problem(key)
        if problem is not None or not is_label_value(value):
            raise RenderError(f"labels: {key}={value!r} is not valid: {problem or 'bad value'}", field="labels")
        if key in ATTEMPT_LABELS:
            raise RenderError(f"labels: {key} belongs to training attempts", field="labels")


def _check_replicas(replicas: int) -> None:
    if isinstance(replicas, bool) or not isinstance(replicas, int) or replicas < 0:
        raise RenderError(f"replicas {replicas!r} must be an integer >= 0", field="replicas")


# ----------------------------------------------------------------------------------------------------- manifests

def selector(spec: ServiceSpec) -> dict[str, str]:
    """The labels picking a service's pods (the Deployment's selector, the Service's)."""
    return {names.LABEL_MANAGED: "true", names.LABEL_INSTANCE: names.label_value(spec.settings.instance),
            names.LABEL_SERVICE: spec.key}


def _labels(spec: ServiceSpec) -> dict[str, str]:
    return {**spec.labels, **selector(spec), names.LABEL_COMPONENT: COMPONENT}


def _env(spec: ServiceSpec) -> list[dict[str, Any]]:
    env: list[dict[str, Any]] = [
        {"name": "TIDAL_SERVICE", "value": spec.key},
        {"name": "TIDAL_POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
        {"name": "TIDAL_NODE_NAME", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}},
    ]
    # Sorted: the same env in another order is the same spec (and hash).
    return env + [{"name": k, "value": str(v)} for k, v in sorted(spec.env.items())]


def _pod_spec(spec: ServiceSpec) -> dict[str, Any]:
    devices = str(spec.devices_per_replica)
    container: dict[str, Any] = {
        "name": MAIN_CONTAINER,
        "image": spec.image,
        "imagePullPolicy": "IfNotPresent",
        "env": _env(spec),
        "ports": [{"name": PORT_NAME, "containerPort": spec.port, "protocol": "TCP"}],
        "readinessProbe": {"tcpSocket": {"port": PORT_NAME}, "periodSeconds": READINESS_PERIOD_SECONDS},
        "resources": {"requests": {"cpu": spec.cpu, "memory": spec.memory, spec.device_resource: devices},
                      "limits": {"memory": spec.memory, spec.device_resource: devices}},
        "securityContext": container_security(False),
        "volumeMounts": [{"name": "dshm", "mountPath": "/dev/shm"}],  # noqa: S108  (a pod's shared memory)
    }
    if spec.command:
        container["command"] = list(spec.command)
    if spec.args:
        container["args"] = list(spec.args)
    settings = spec.settings
    return {
        "securityContext": pod_security(spec.run_as_user),
        "automountServiceAccountToken": False,
        "enableServiceLinks": False,
        "terminationGracePeriodSeconds": settings.termination_grace_seconds,
        "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
            "nodeSelectorTerms": [{"matchFields": [{
                "key": "metadata.name", "operator": "In", "values": sorted(set(spec.node_names)),
            }]}],
        }}},
        "tolerations": [t.to_dict() for t in settings.gpu_tolerations],
        # Always present, empty too: a merge patch then removes a pull secret the cluster no longer has.
        "imagePullSecrets": [{"name": settings.image_pull_secret}] if settings.image_pull_secret else [],
        "containers": [container],
        "volumes": [{"name": "dshm", "emptyDir": {"medium": "Memory", "sizeLimit": settings.default_shm_size}}],
    }


def _stamp(manifest: Manifest) -> Manifest:
    """``manifest`` with the hash of everything but its replica count (which ``scale`` changes on its own)."""
    hashed = copy.deepcopy(manifest)
    hashed.get("spec", {}).pop("replicas", None)
    digest = hashlib.sha256(json.dumps(hashed, sort_keys=True).encode()).hexdigest()[:16]
    manifest["metadata"]["annotations"] = {names.ANNOTATION_SPEC_HASH: digest}
    return manifest


def manifests(spec: ServiceSpec) -> list[Manifest]:
    """The service's Deployment and ClusterIP Service (in that order). Pure; raises :class:`RenderError`."""
    validate(spec)
    labels = _labels(spec)
    deployment: Manifest = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": spec.key, "namespace": spec.namespace, "labels": dict(labels)},
        "spec": {
            "replicas": spec.replicas,
            "selector": {"matchLabels": selector(spec)},
            # Replace a replica at a time, never one more: a surge would ask for devices the pool may have lent.
            "strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": 0, "maxUnavailable": 1}},
            "template": {"metadata": {"labels": dict(labels)}, "spec": _pod_spec(spec)},
        },
    }
    service: Manifest = {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": spec.key, "namespace": spec.namespace, "labels": dict(labels)},
        "spec": {
            "type": "ClusterIP",
            "selector": selector(spec),
            "ports": [{"name": PORT_NAME, "port": spec.port, "targetPort": PORT_NAME, "protocol": "TCP"}],
        },
    }
    return [_stamp(deployment), _stamp(service)]


# ---------------------------------------------------------------------------------------------------- operations

def _spec_hash(obj: Mapping[str, Any]) -> str:
    return str(((obj.get("metadata") or {}).get("annotations") or {}).get(names.ANNOTATION_SPEC_HASH, ""))


def _at(obj: Mapping[str, Any], path: tuple[str, ...]) -> Mapping[str, Any]:
    for key in path:
        obj = obj.get(key) or {}
    return obj


def _update(existing: Mapping[str, Any], desired: Manifest) -> dict[str, Any]:
    """The merge patch turning ``existing`` into ``desired``: its labels, its hash and its whole spec, with a null
    for each key of an owned map (``OWNED_MAPS``) that ``existing`` has and ``desired`` lacks."""
    patch: dict[str, Any] = {"metadata": {key: desired["metadata"][key] for key in ("labels", "annotations")},
                             "spec": desired["spec"]}
    patch = copy.deepcopy(patch)
    for path in OWNED_MAPS[desired["kind"]]:
        target = _at(patch, path)
        assert isinstance(target, dict)
        target.update({key: None for key in _at(existing, path) if key not in target})
    return patch


def _apply_one(client: KubeClient, desired: Manifest) -> None:
    kind, namespace, name = desired["kind"], desired["metadata"]["namespace"], desired["metadata"]["name"]
    existing = client.get(kind, namespace, name)
    if existing is None:
        created = client.create(desired)
        if created.created:
            return
        existing = created.object  # created meanwhile (409): by another delivery of this apply, or an older spec
    if _spec_hash(existing) != _spec_hash(desired):
        client.patch(kind, namespace, name, _update(existing, desired))
    elif kind == "Deployment" and (existing.get("spec") or {}).get("replicas") != desired["spec"]["replicas"]:
        scale(client, namespace, name, desired["spec"]["replicas"])


def apply(client: KubeClient, spec: ServiceSpec) -> None:
    """Create the service's objects, or update those whose spec changed; writes nothing when nothing did. Safe to
    run again (a redelivered task): it converges on ``spec``. Raises :class:`RenderError` on a bad spec, the client's
    ``PermanentError`` / ``TransientError`` on an API error (403 forbidden, 422 invalid, retries exhausted)."""
    for manifest in manifests(spec):
        _apply_one(client, manifest)


def scale(client: KubeClient, namespace: str, key: str, replicas: int) -> None:
    """Set the Deployment's replica count through its ``scale`` subresource (a 404 if it does not exist)."""
    _check_replicas(replicas)
    client.patch("Deployment", namespace, key, {"spec": {"replicas": replicas}}, subresource="scale")


def delete(client: KubeClient, namespace: str, key: str) -> None:
    """Delete the Service (no new traffic), then the Deployment (its pods get their termination grace). Deleting
    what is already gone is no error."""
    client.delete("Service", namespace, key)
    client.delete("Deployment", namespace, key)


def ready_replicas(client: KubeClient, namespace: str, key: str) -> int:
    """Replicas passing their readiness probe, from the Deployment's status; 0 when it does not exist (yet)."""
    deployment = client.get("Deployment", namespace, key)
    return int(((deployment or {}).get("status") or {}).get("readyReplicas") or 0)
