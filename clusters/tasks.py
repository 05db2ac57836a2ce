"""Celery tasks: thin wrappers that load by id and call a backend, and the functions the dispatch port uses to queue
them (run in-process in embedded mode). The Kubernetes clusters' periodic tasks are
`clusters.backends.kubernetes.tasks`."""

from __future__ import annotations

import logging

from celery import shared_task

from clusters.backends import backend_for_cluster, observe_simulated
from clusters.backends.kubernetes.nodesync import hold_nodes_of
from clusters.kube.errors import TransientError
from clusters.models import Node
from jobs.selectors import attempt_with_job

logger = logging.getLogger(__name__)


@shared_task(acks_late=True)
def dispatch_attempt_task(attempt_id: int) -> None:
    attempt = attempt_with_job(attempt_id)
    if attempt is not None and attempt.cluster is not None:
        backend_for_cluster(attempt.cluster).dispatch(attempt)


STOP_RETRIES = 8  # about 15 minutes of tries; the resync and the orphan sweep delete what is left afterwards
STOP_RETRY_FIRST, STOP_RETRY_MAX = 5.0, 300.0  # seconds before the first retry, and at most between two


def stop_retry_delay(retries: int) -> float:
    """Seconds before retry number `retries + 1` of a stop: 5, 10, 20 ... up to 5 minutes."""
    return min(STOP_RETRY_MAX, STOP_RETRY_FIRST * 2 ** retries)


@shared_task(bind=True, acks_late=True, max_retries=STOP_RETRIES)
def stop_attempt_task(self, attempt_id: int, reason: str) -> None:
    """Delete what is left of an ended attempt. While the cluster's API is unavailable, its devices stay counted on
    its nodes (the scheduler places nothing there) and the stop is retried with a growing backoff; in embedded mode
    (no worker to retry later) and after the last retry, the resync deletes the attempt's pods once the API answers
    (and the orphan sweep the rest)."""
    attempt = attempt_with_job(attempt_id)
    if attempt is None or attempt.cluster is None:
        return
    try:
        backend_for_cluster(attempt.cluster).stop(attempt, reason)
    except TransientError as exc:
        if self.request.retries == 0:
            hold_nodes_of(attempt, f"the Kubernetes API is unavailable: {exc}")
        if self.request.is_eager or self.request.retries >= STOP_RETRIES:
            logger.warning("stop of job %s attempt %s on cluster %s failed (%s); the resync deletes its pods once "
                           "the API answers", attempt.job_id, attempt.number, attempt.cluster.name, exc)
            return
        raise self.retry(exc=exc, countdown=stop_retry_delay(self.request.retries)) from exc
    except Exception:  # a cluster it cannot even reach (its credentials unreadable): the orphan sweep cleans up
        logger.exception("stop of job %s attempt %s on cluster %s failed", attempt.job_id, attempt.number,
                         attempt.cluster.name)


@shared_task(acks_late=True)
def resize_attempt_task(attempt_id: int, resize_id: int) -> None:
    """Carry out a resize the state machine applied: the backend starts the added replicas or stops the removed."""
    from jobs.models import AttemptResize

    attempt = attempt_with_job(attempt_id)
    resize = AttemptResize.objects.filter(pk=resize_id, attempt_id=attempt_id).first()
    if attempt is None or attempt.cluster is None or resize is None or attempt.ended_at is not None:
        return
    backend_for_cluster(attempt.cluster).resize(attempt, resize)


@shared_task(acks_late=True)
def cordon_node_task(node_id: int, cordoned: bool) -> None:
    """Cordon a node reliability quarantined (or uncordon it on release) on its cluster, through its backend."""
    node = Node.objects.select_related("cluster").filter(pk=node_id).first()
    if node is not None:
        backend_for_cluster(node.cluster).cordon(node.name, cordoned)


def queue_cordon(node_id: int, cordoned: bool) -> None:
    cordon_node_task.delay(node_id, cordoned)


def queue_resize(attempt_id: int, resize_id: int) -> None:
    resize_attempt_task.delay(attempt_id, resize_id)


def queue_dispatch(attempt_id: int) -> None:
    dispatch_attempt_task.delay(attempt_id)


def queue_stop(attempt_id: int, reason: str) -> None:
    stop_attempt_task.delay(attempt_id, reason)


@shared_task
def observe_simulated_task() -> None:
    observe_simulated()
