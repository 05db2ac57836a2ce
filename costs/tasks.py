"""Celery beat's tasks of costs (thin: they call the rollup and the budget check)."""

from __future__ import annotations

from celery import shared_task

from costs.budgets import alerts, anomalies
from costs.metering import rollup


@shared_task
def roll_segments() -> int:
    return rollup.roll_segments()


@shared_task
def check_budgets() -> int:
    return alerts.check_budgets()


@shared_task
def check_spend_anomalies() -> int:
    return anomalies.check_spend_anomalies()
