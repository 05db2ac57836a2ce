"""Celery beat's tasks of costs (thin: they call the rollup and the budget check)."""

from __future__ import annotations

from celery import shared_task

from costs.budgets import alerts
from costs.metering import rollup


@shared_task
def roll_segments() -> int:
    return rollup.roll_segments()


@shared_task
def check_budgets() -> int:
    return alerts.check_budgets()
