"""Celery tasks: thin wrappers that load by id and call a backend or a service, and the functions the dispatch port
uses to queue them (run in-process in embedded mode)."""

from __future__ import annotations

import logging

from celery import shared_task

from clusters import services
from clusters.backends import backend_for_cluster
from jobs.selectors import attempt_with_job

logger = logging.getLogger(__name__)


@shared_task(acks_late=True)
def dispatch_attempt_task(attempt_id: int) -> None:
    attempt = attempt_with_job(attempt_id)
    if attempt is not None and attempt.cluster is not None:
        backend_for_cluster(attempt.cluster).dispatch(attempt)


@shared_task(acks_late=True)
def stop_attempt_task(attempt_id: int, reason: str) -> None:
    attempt = attempt_with_job(attempt_id)
    if attempt is None or attempt.cluster is None:
        return
    try:
        backend_for_cluster(attempt.cluster).stop(attempt, reason)
    except Exception:  # an unreachable cluster: the orphan sweep deletes what is left
        logger.exception("stop of job %s attempt %s on cluster %s failed", attempt.job_id, attempt.number,
                         attempt.cluster.name)


def queue_dispatch(attempt_id: int) -> None:
    dispatch_attempt_task.delay(attempt_id)


def queue_stop(attempt_id: int, reason: str) -> None:
    stop_attempt_task.delay(attempt_id, reason)


@shared_task
def observe_simulated_task() -> None:
    services.observe_simulated()


@shared_task
def kube_resync_task() -> None:
    services.kube_resync_all()


@shared_task
def kube_sync_nodes_task(cluster_id: int | None = None) -> None:
    services.kube_sync_nodes_all(cluster_id)


@shared_task
def kube_sweep_orphans_task() -> None:
    services.kube_sweep_all()
