"""Celery tasks: thin wrappers that load by id and call a backend or a service."""

from __future__ import annotations

from celery import shared_task

from clusters import selectors
from clusters.backends import backend_for


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
        backend_for(cluster).stop(job_id, attempt or job.attempt, reason)


@shared_task
def simulated_tick_task() -> None:
    from clusters.backends.simulated import SimulatedBackend

    SimulatedBackend().tick()
