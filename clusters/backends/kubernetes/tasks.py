"""The periodic Celery tasks of the Kubernetes clusters (beat: `CELERY_BEAT_SCHEDULE`). Their names are the dotted
paths they had as `clusters.tasks`, which beat schedules and queued messages carry; the worker imports this module
through `CELERY_IMPORTS` (autodiscovery finds only `<app>.tasks`)."""

from __future__ import annotations

from celery import shared_task

from clusters.backends.kubernetes import loops


@shared_task(name="clusters.tasks.kube_resync_task")
def kube_resync_task() -> None:
    loops.kube_resync_all()


@shared_task(name="clusters.tasks.kube_sync_nodes_task")
def kube_sync_nodes_task(cluster_id: int | None = None) -> None:
    loops.kube_sync_nodes_all(cluster_id)


@shared_task(name="clusters.tasks.kube_sweep_orphans_task")
def kube_sweep_orphans_task() -> None:
    loops.kube_sweep_all()
