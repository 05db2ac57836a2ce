"""Celery tasks: thin wrappers that load by id and call a backend or a service."""

from __future__ import annotations

import logging

from celery import shared_task

from clusters import selectors, services
from clusters.backends import backend_for

logger = logging.getLogger(__name__)


@shared_task(acks_late=True)
def dispatch_job_task(job_id: int) -> None:
    job = selectors.job_with_cluster(job_id)
    if job is not None and job.cluster is not None:
        backend_for(job.cluster).dispatch(job_id)


@shared_task(acks_late=True)
def stop_job_task(job_id: int, reason: str, attempt: int | None = None) -> None:
    job = selectors.job_with_cluster(job_id)
    if job is None:
        return
    for cluster in selectors.clusters_of(job):
        try:
            backend_for(cluster).stop(job_id, attempt or job.attempt, reason)
        except Exception:  # an unreachable cluster: the orphan sweep deletes what is left
            logger.exception("stop of job %s on cluster %s failed", job_id, cluster.name)


@shared_task
def simulated_tick_task() -> None:
    from clusters.backends.simulated import SimulatedBackend

    SimulatedBackend().tick()


@shared_task
def kube_resync_task() -> None:
    services.kube_resync_all()


@shared_task
def kube_sync_nodes_task(cluster_id: int | None = None) -> None:
    services.kube_sync_nodes_all(cluster_id)


@shared_task
def kube_sweep_orphans_task() -> None:
    services.kube_sweep_all()
