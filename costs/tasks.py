"""Celery beat's task of costs: closed segments cut into priced days (thin: it calls the rollup)."""

from __future__ import annotations

from celery import shared_task

from costs import rollup


@shared_task
def roll_segments() -> int:
    return rollup.roll_segments()
