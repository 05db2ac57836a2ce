"""Reads of telemetry, scoped to what the caller may see: an attempt's GPUs and tally only in projects the caller is a
member of (another organization's telemetry is a 404); the sources are a catalog every signed-in user reads."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from django.db.models import QuerySet
from django.utils import timezone

from telemetry.models import AttemptGpu, AttemptTelemetry, TelemetrySource
from tenancy.selectors import project_ids_for_user

FRESH = timedelta(minutes=5)  # a GPU's latest readings older than this are not shown as its current activity


def sources() -> QuerySet[TelemetrySource]:
    return TelemetrySource.objects.select_related("cluster")


def telemetry_for_user(user: Any) -> QuerySet[AttemptTelemetry]:
    return (AttemptTelemetry.objects.filter(attempt__job__project__in=project_ids_for_user(user))
            .select_related("attempt__job__project", "attempt__cluster").order_by("-attempt__admitted_at", "-pk"))


def efficiencies(job_ids: list[int]) -> dict[int, AttemptTelemetry]:
    """The tally of each job's latest attempt that has one (the caller already sees these jobs)."""
    found: dict[int, AttemptTelemetry] = {}
    for tally in (AttemptTelemetry.objects.filter(attempt__job_id__in=job_ids).select_related("attempt")
                  .order_by("attempt__job_id", "attempt__number")):
        found[tally.attempt.job_id] = tally
    return found


def current_gpus(now: datetime | None = None) -> QuerySet[AttemptGpu]:
    """The GPUs of open attempts read within FRESH: the Clusters page's activity grid."""
    since = (now or timezone.now()) - FRESH
    return (AttemptGpu.objects.filter(attempt__ended_at=None, last_at__gte=since)
            .select_related("attempt__job__project", "attempt__cluster"))
