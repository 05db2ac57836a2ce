"""Celery beat's tasks of tracking: the hung-run check, the retention of raw points and the sweep of abandoned
artifact uploads (thin: they call the services). Alert notifications are tasks of their own module,
tracking.notifications, which alerts enqueue."""

from __future__ import annotations

from celery import shared_task

from tracking import alerts, services
from tracking.artifacts import services as artifact_services


@shared_task
def check_hung_runs() -> int:
    return alerts.check_hung_runs()


@shared_task
def prune_raw_points() -> int:
    return services.points_prune_raw()


@shared_task
def sweep_artifact_uploads() -> int:
    return artifact_services.uploads_sweep()


@shared_task
def purge_deleted_runs() -> int:
    return services.runs_purge_expired()
