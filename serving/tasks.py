"""Celery beat's task of serving (thin: it calls the autoscaler)."""

from __future__ import annotations

from celery import shared_task

from serving import scaler


@shared_task
def autoscale_services() -> int:
    return scaler.tick()
