"""Celery beat's task of reliability: hang detection (thin: it calls the check)."""

from __future__ import annotations

from celery import shared_task

from reliability import hangs


@shared_task
def check_hangs() -> int:
    return hangs.check_hangs()
