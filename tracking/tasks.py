"""Celery beat's tasks of tracking: the hung-run check and the retention of raw points (thin: they call the
services). Alert notifications are tasks of their own module, tracking.notifications, which alerts enqueue."""

from __future__ import annotations

from celery import shared_task

from tracking import alerts, services


@shared_task
def check_hung_runs() -> int:
    return alerts.check_hung_runs()


@shared_task
def prune_raw_points() -> int:
    return services.points_prune_raw()
