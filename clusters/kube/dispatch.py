"""Create, clean up and sweep a job attempt's objects through :class:`~clusters.kube.client.KubeClient`.

Dispatch order: the parent ConfigMap first (its uid becomes the children's ownerReference, see
``render.bind_owner``), then every child, concurrently on ``workers`` threads; the client's token bucket
keeps the whole cluster under its QPS however many threads or Celery workers share it. A 409 means a
previous try already created the object: it is adopted, never an error, so dispatch is idempotent.

A :class:`~clusters.kube.errors.PermanentError` (403, 422 ...) or :class:`TransientError` (retries
exhausted) propagates; the caller fails the attempt with the error's message and calls :func:`cleanup`. The orphan
sweep goes namespace by namespace and skips (and reports) a namespace that refuses it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from . import names
from .client import KubeClient
from .errors import PermanentError
from .render import bind_owner

AttemptKey = tuple[str, int]
# Deleted in this order: pods first so they get their grace period while the rest goes.
CLEANUP_KINDS: tuple[str, ...] = ("Pod", "Service", "Secret", "ConfigMap")


def attempt_key(job_id: int | str, attempt: int) -> AttemptKey:
    """The key the sweep compares, exactly as it is read back from labels."""
    return names.label_value(str(job_id)), int(attempt)


@dataclass
class DispatchResult:
    parent_uid: str | None = None
    created: list[str] = field(default_factory=list)  # "Kind/name"
    adopted: list[str] = field(default_factory=list)

    @property
    def objects(self) -> int:
        return len(self.created) + len(self.adopted)


def _ref(manifest: Mapping[str, Any]) -> str:
    return f"{manifest['kind']}/{manifest['metadata']['name']}"


def dispatch(client: KubeClient, manifests: list[dict[str, Any]], *, workers: int = 8,
             executor: ThreadPoolExecutor | None = None) -> DispatchResult:
    """Create the rendered attempt (``manifests[0]`` is the parent). Idempotent."""
    result = DispatchResult()
    if not manifests:
        return result
    parent = client.create(manifests[0])
    (result.created if parent.created else result.adopted).append(_ref(manifests[0]))
    result.parent_uid = (parent.object.get("metadata") or {}).get("uid") or None
    children = [bind_owner(m, result.parent_uid) for m in manifests[1:]]
    if executor is None and workers > 1 and len(children) > 1:
        with ThreadPoolExecutor(max_workers=min(workers, len(children))) as pool:
            outcomes = list(pool.map(client.create, children))
    elif executor is not None:
        outcomes = list(executor.map(client.create, children))
    else:
        outcomes = [client.create(m) for m in children]
    for manifest, outcome in zip(children, outcomes, strict=True):
        (result.created if outcome.created else result.adopted).append(_ref(manifest))
    return result


def matches(labels: Mapping[str, str] | None, selector: Mapping[str, str]) -> bool:
    """Equality-based label selection, applied client-side too (never trust a server to have filtered)."""
    labels = labels or {}
    return all(labels.get(k) == v for k, v in selector.items())


def _labels(obj: Mapping[str, Any]) -> dict[str, str]:
    return (obj.get("metadata") or {}).get("labels") or {}


def cleanup(client: KubeClient, namespace: str, job_id: int | str, attempt: int, *, instance: str = "default",
            grace_seconds: int | None = 30) -> list[str]:
    """Delete every object of one attempt (preemption, cancellation, failed dispatch). Pods get
    ``grace_seconds`` to checkpoint on SIGTERM. Returns what was deleted, as ``Kind/name``."""
    selector = names.attempt_selector(job_id, attempt, instance)
    deleted: list[str] = []
    for kind in CLEANUP_KINDS:
        items, _ = client.list(kind, namespace, label_selector=names.selector_string(selector))
        for item in items:
            if not matches(_labels(item), selector):
                continue
            name = item["metadata"]["name"]
            grace = grace_seconds if kind == "Pod" else None
            if client.delete(kind, namespace, name, grace_seconds=grace):
                deleted.append(f"{kind}/{name}")
    return deleted


def find_orphans(objects: Iterable[Mapping[str, Any]], active: set[AttemptKey], *,
                 instance: str = "default") -> list[Mapping[str, Any]]:
    """Platform-labelled objects of this instance whose (job, attempt) is not active. Objects without
    job/attempt labels are never chosen: what cannot be attributed is not deleted."""
    own = {names.LABEL_MANAGED: "true", names.LABEL_INSTANCE: names.label_value(instance)}
    out = []
    for obj in objects:
        if not matches(_labels(obj), own):
            continue
        key = names.labelled_attempt(obj)
        if key is not None and key not in active:
            out.append(obj)
    return out


@dataclass
class SweepResult:
    deleted: list[str] = field(default_factory=list)  # "Kind/namespace/name"
    skipped: dict[str, str] = field(default_factory=dict)  # namespace -> why it could not be swept


def sweep_orphans(client: KubeClient, active: set[AttemptKey], *, namespaces: Iterable[str],
                  instance: str = "default", grace_seconds: int | None = 30) -> SweepResult:
    """Delete platform objects that belong to no active attempt (e.g. a crash between dispatch and the database
    commit, or a cleanup that failed). ``active`` holds :func:`attempt_key` values.

    One namespace at a time: Tidal's rights on services, config maps and secrets are granted per project namespace
    (docs/kubernetes.md), never cluster-wide. A namespace the API refuses (403: no RoleBinding there) is skipped and
    reported; an unavailable API (``TransientError``) ends the sweep."""
    result = SweepResult()
    for namespace in dict.fromkeys(namespaces):
        try:
            _sweep_namespace(client, active, namespace, instance, grace_seconds, result.deleted)
        except PermanentError as exc:
            result.skipped[namespace] = str(exc)
    return result


def _sweep_namespace(client: KubeClient, active: set[AttemptKey], namespace: str, instance: str,
                     grace_seconds: int | None, deleted: list[str]) -> None:
    for kind in CLEANUP_KINDS:
        items, _ = client.list(kind, namespace, label_selector=names.instance_selector(instance))
        for obj in find_orphans(items, active, instance=instance):
            name = obj["metadata"]["name"]
            grace = grace_seconds if kind == "Pod" else None
            if client.delete(kind, namespace, name, grace_seconds=grace):
                deleted.append(f"{kind}/{namespace}/{name}")
