"""Celery beat's task of telemetry (thin: it calls the reader)."""

from __future__ import annotations

from celery import shared_task

from telemetry import ingest


@shared_task
def read_telemetry() -> int:
    return ingest.read_all()
