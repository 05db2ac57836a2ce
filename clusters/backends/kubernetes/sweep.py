"""The orphan sweep: the platform's objects on a cluster that belong to no active attempt (a stop that never came,
a dispatch whose attempt ended meanwhile) are deleted, in the namespace of every project that has had a job."""

from __future__ import annotations

import logging

from clusters import selectors
from clusters.backends.kubernetes import clients, mapping
from clusters.kube.dispatch import attempt_key, sweep_orphans
from clusters.kube.errors import RenderError
from clusters.models import Cluster
from jobs import selectors as job_selectors

logger = logging.getLogger(__name__)


def active_attempts() -> set[tuple[str, int]]:
    """(job, attempt) keys whose objects must stay: open attempts, and the next attempt of queued jobs (one
    admitted and dispatched between the sweep's read and its list would otherwise look orphaned)."""
    return {attempt_key(job_id, attempt) for job_id, attempt in job_selectors.live_attempt_numbers()}


def cluster_namespaces(cluster: Cluster) -> list[str]:
    """The namespaces on `cluster` that can hold Tidal's objects: those of every project that has had a job."""
    namespaces = set()
    for project in selectors.projects_with_jobs():
        try:
            namespaces.add(mapping.namespace_for(cluster, project.slug, project.organization.slug))
        except RenderError:  # an invalid namespace pattern: nothing could have been dispatched there either
            continue
    return sorted(namespaces)


def cluster_sweep_orphans(cluster: Cluster, *, client=None) -> list[str]:
    """Delete the cluster's platform objects of no active attempt, namespace by namespace: Tidal may list services,
    config maps and secrets only in project namespaces (docs/kubernetes.md, RBAC). A namespace that refuses (no
    RoleBinding there) is skipped with a warning naming it; the others are still swept."""
    client = client or clients.client_for(cluster)
    result = sweep_orphans(client, active_attempts(), namespaces=cluster_namespaces(cluster),
                           instance=mapping.instance(), grace_seconds=cluster.termination_grace_seconds)
    if result.deleted:
        logger.info("orphan sweep on %s deleted %d objects: %s", cluster.name, len(result.deleted),
                    ", ".join(result.deleted[:20]))
    for namespace, why in result.skipped.items():
        logger.warning("orphan sweep on %s skipped namespace %s: %s", cluster.name, namespace, why)
    return result.deleted
