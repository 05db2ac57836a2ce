"""The backend of each cluster (the implementations of `jobs.ports.Backend`) and the node inventory the scheduler
places on: the clusters' side of the dispatch port, connected at start-up by `ClustersConfig.ready`. And the
periodic observation of a cluster's open attempts, whatever its backend.

The Kubernetes adapter is the package `kubernetes/` (backend, mapping, watch, node sync, sweep, clients); the
simulated cluster is `simulated.py`.
"""

from __future__ import annotations

import logging
from datetime import datetime, timedelta

from django.conf import settings
from django.utils import timezone

from clusters import selectors
from clusters.kube.errors import ApiError
from clusters.models import Cluster, Node
from jobs import ports
from jobs import scheduling as core
from jobs.models import Attempt, Launcher
from jobs.observations import record_all
from jobs.selectors import open_attempts

logger = logging.getLogger(__name__)


# The launchers whose jobs each backend resizes (Backend.resize): elastic jobs grow and shrink there only. On
# Kubernetes, torchrun's c10d rendezvous (pytorch), DeepSpeed's elastic agent (the same rendezvous) and a Ray
# cluster's worker pods (docs/kubernetes.md); megatron and command jobs are never elastic (jobs.models.NOT_RESIZABLE).
RESIZABLE_LAUNCHERS: dict[str, frozenset[str]] = {
    Cluster.Backend.SIMULATED: frozenset(Launcher.values),
    Cluster.Backend.KUBERNETES: frozenset({Launcher.PYTORCH, Launcher.DEEPSPEED, Launcher.RAY}),
}


def backend_for_cluster(cluster: Cluster) -> ports.Backend:
    if cluster.backend == Cluster.Backend.SIMULATED:
        from clusters.backends.simulated import SimulatedBackend

        return SimulatedBackend(cluster)
    from clusters.backends.kubernetes.backend import KubernetesBackend

    return KubernetesBackend(cluster)


def redispatch_before() -> datetime:
    """Attempts admitted before this moment and still not claimed (or, on Kubernetes, with objects missing) lost
    their dispatch task: a worker killed while running it (Celery acks such a task, so it never comes back) or a
    queue Redis lost. Each backend's periodic observation dispatches them again; the conditional claim keeps a
    task that was merely slow from dispatching twice."""
    return timezone.now() - timedelta(seconds=settings.TIDAL["REDISPATCH_AFTER"])


def backend_for_attempt(attempt: Attempt) -> ports.Backend:
    if attempt.cluster is None:
        raise ports.LogsUnavailable("the attempt's cluster was deleted")
    return backend_for_cluster(attempt.cluster)


def inventory() -> ports.Inventory:
    """Every node (a gang never spans clusters: the scheduler's node names carry the cluster's)."""
    rows = Node.objects.order_by("cluster__name", "position", "name").values_list(
        "cluster_id", "cluster__name", "name", "flavor__name", "devices", "foreign_used", "serving_used", "block",
        "rack", "ready",
        "cordoned", "cluster__enabled", "cpu_millis", "memory_mib", "quarantined_at", "cluster__backend")
    nodes, cluster_ids, resizable = [], {}, {}
    for cluster_id, cluster, name, flavor, devices, foreign, serving, block, rack, ready, cordoned, enabled, cpu, \
            memory, quarantined_at, backend in rows:
        cluster_ids[cluster] = cluster_id
        resizable[cluster] = RESIZABLE_LAUNCHERS.get(backend, frozenset())
        foreign = min(foreign, devices)
        serving = min(serving, devices - foreign)
        capacity = devices - foreign - serving
        # A quarantined node (hardware faults, reliability) is out of service like a cordoned one.
        unavailable = ("in a disabled cluster" if not enabled else "not ready" if not ready
                       else "cordoned" if cordoned else f"quarantined ({name})" if quarantined_at else "")
        # Node sync stores CPU and memory already net of what pods the platform did not create request; 0 means
        # the node does not model them (the scheduler then never counts them there).
        nodes.append(core.Node(name=core.node_key(cluster, name), flavor=flavor, devices=capacity, free=capacity,
                               cluster=cluster, block=block, rack=rack, schedulable=not unavailable,
                               foreign=foreign, serving=serving, unavailable=unavailable, cpu_millis=cpu,
                               memory_mib=memory, free_cpu_millis=cpu, free_memory_mib=memory))
    return ports.Inventory(tuple(nodes), cluster_ids, resizable)


def observe_cluster(cluster: Cluster) -> list[str]:
    """Record what the cluster's backend observes of every open attempt on it (the full resync); the new job
    states. An observation hinting that the node inventory is stale (a replica stuck Pending) syncs it again, so
    the retry is placed on what is really free."""
    backend = backend_for_cluster(cluster)
    attempts = list(open_attempts().filter(cluster=cluster))
    states = record_all(attempts, backend.observe(attempts))
    if getattr(backend, "nodes_stale", False):
        from clusters.backends.kubernetes.nodesync import cluster_sync_nodes

        try:
            cluster_sync_nodes(cluster)
        except ApiError as exc:
            logger.warning("node sync of %s after a stuck attempt failed: %s", cluster.name, exc)
    return states


def observe_simulated() -> None:
    for cluster in selectors.simulated_clusters():
        observe_cluster(cluster)
