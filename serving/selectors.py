"""Reads for services: what a user may see (their projects' services), what a pool's services demand, and a
service's history for its page."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from django.db.models import F, QuerySet, Sum
from django.utils import timezone

from pools.models import Pool
from serving.models import ScaleEvent, Service, ServiceSample
from tenancy.selectors import project_ids_for_user


def services_for_user(user: Any) -> QuerySet[Service]:
    """The services of the projects `user` is a member of (any role); another project's are not there."""
    if not user.is_authenticated:
        return Service.objects.none()
    return Service.objects.filter(project_id__in=project_ids_for_user(user)).select_related(
        "project", "pool__cluster", "pool__flavor")


def pool_services(pool: Pool) -> QuerySet[Service]:
    """The pool's services: what its token may push the metric of, whatever their project."""
    return Service.objects.filter(pool=pool).select_related("project")


def pool_demand(pool: Pool) -> tuple[int, float] | None:
    """The devices of the pool's services' desired replicas and when they last rose (a give-back it causes starts
    then), or None while the pool has no service."""
    services = Service.objects.filter(pool=pool)
    devices = services.aggregate(d=Sum(F("replicas") * F("devices_per_replica")))["d"]
    if devices is None:
        return None
    last = (ScaleEvent.objects.filter(service__pool=pool, after__gt=F("before")).order_by("-at")
            .values_list("at", flat=True).first())
    return int(devices), (last or timezone.now()).timestamp()


def history(service: Service, *, hours: int = 24) -> tuple[list[ServiceSample], list[ScaleEvent]]:
    since: datetime = timezone.now() - timedelta(hours=hours)
    return (list(service.samples.filter(at__gte=since).order_by("at")),
            list(service.scale_events.filter(at__gte=since).order_by("-at", "-id")[:100]))
