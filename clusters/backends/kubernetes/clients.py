"""How Tidal reaches a cluster's API: one client per cluster and process, sharing the cluster's request budget (QPS and
burst) across every thread and, through Redis, every process; and the connection test of the admin console and API.
"""

from __future__ import annotations

import hashlib
import threading
from dataclasses import dataclass, field
from typing import Any

from django.conf import settings

from clusters import selectors
from clusters.backends.kubernetes import mapping
from clusters.kube.client import CORDON_PERMISSIONS, KubeClient, Permission
from clusters.kube.errors import ApiError, PermanentError
from clusters.kube.ratelimit import RedisTokenBucket
from clusters.models import Cluster
from core.errors import DomainError
from core.redis import redis_client

BUCKET_KEY_PREFIX = "tidal:kube-qps:"  # + cluster id: the Redis hash of the cluster's shared token bucket

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


@dataclass
class ConnectionReport:
    ok: bool
    version: str = ""
    namespace: str = ""
    missing: list[str] = field(default_factory=list)
    error: str = ""

    def summary(self) -> str:
        if self.error:
            return f"cannot connect: {self.error}"
        text = f"Kubernetes {self.version}"
        if self.missing:
            return f"{text}; missing permissions: {', '.join(self.missing)}"
        return f"{text}; every permission Tidal needs is granted in {self.namespace}"


def required_extra() -> tuple[Permission, ...]:
    """The rights the settings add to those every cluster needs: cordoning quarantined nodes."""
    return CORDON_PERMISSIONS if settings.TIDAL["QUARANTINE_CORDON"] else ()


def cluster_test_connection(cluster: Cluster, *, client=None) -> ConnectionReport:
    """Server version and the permissions Tidal lacks (checked in the first project's namespace)."""
    project = selectors.first_project()
    namespace = mapping.namespace_for(cluster, project.slug if project else "default",
                                      project.organization.slug if project else "")
    try:
        client = client or build_client(cluster)
        info = client.server_version()
        missing = client.missing_permissions(namespace, required_extra())
    except (ApiError, DomainError) as exc:
        return ConnectionReport(False, namespace=namespace, error=str(exc))
    except Exception as exc:  # a kubeconfig the client library rejects, an unreachable in-cluster API
        return ConnectionReport(False, namespace=namespace, error=f"{type(exc).__name__}: {exc}")
    version = str(info.get("gitVersion") or f"{info.get('major', '?')}.{info.get('minor', '?')}")
    return ConnectionReport(not missing, version=version, namespace=namespace, missing=missing)
