"""The periodic work on every Kubernetes cluster (Celery beat, or the embedded loops): the full resync, node sync and
the orphan sweep. Each isolates failures per cluster, so one unreachable cluster never stops the others."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from clusters import selectors
from clusters.backends import observe_cluster
from clusters.backends.kubernetes.nodesync import cluster_sync_nodes
from clusters.backends.kubernetes.sweep import cluster_sweep_orphans
from clusters.models import Cluster

logger = logging.getLogger(__name__)


def _each_kubernetes_cluster(what: str, action: Callable[[Cluster], Any]) -> dict[str, Any]:
    results: dict[str, Any] = {}
    for cluster in selectors.kubernetes_clusters():
        try:
            results[cluster.name] = action(cluster)
        except Exception as exc:  # one broken cluster must not stop the others
            logger.exception("%s of cluster %s failed", what, cluster.name)
            results[cluster.name] = exc
    return results


def kube_resync_all() -> dict[str, Any]:
    return _each_kubernetes_cluster("resync", observe_cluster)


def kube_sync_nodes_all(cluster_id: int | None = None) -> dict[str, Any]:
    if cluster_id is not None:
        cluster = selectors.clusters().filter(pk=cluster_id).first()
        return {cluster.name: cluster_sync_nodes(cluster)} if cluster else {}
    return _each_kubernetes_cluster("node sync", cluster_sync_nodes)


def kube_sweep_all() -> dict[str, Any]:
    return _each_kubernetes_cluster("orphan sweep", cluster_sweep_orphans)
