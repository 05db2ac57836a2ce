"""Reads for flavors, priority classes and quotas, with live usage."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import NamedTuple

from django.db.models import QuerySet

from core.hooks import Hook
from core.snapshots import Snapshot
from quotas.models import PriorityClass, ProjectUsage, Quota, ResourceFlavor
from tenancy.selectors import project_ids_for_user


def flavors() -> QuerySet[ResourceFlavor]:
    return ResourceFlavor.objects.all()


def priority_classes() -> QuerySet[PriorityClass]:
    return PriorityClass.objects.all()


class Catalog(NamedTuple):
    flavors: dict[str, ResourceFlavor]
    priority_classes: dict[str, PriorityClass]
    default_priority_class: PriorityClass | None


def _read_catalog() -> Catalog:
    classes = {pc.name: pc for pc in PriorityClass.objects.order_by("value")}
    default = next((pc for pc in classes.values() if pc.is_default), next(iter(classes.values()), None))
    return Catalog({f.name: f for f in ResourceFlavor.objects.all()}, classes, default)


# Submissions look names up here instead of querying for every request (see mlplatform/snapshots.py).
catalog = Snapshot(_read_catalog)


def catalog_entry(table: str, name: str) -> ResourceFlavor | PriorityClass | None:
    """The flavor or priority class (`table`: "flavors" or "priority_classes") of that name, or None."""
    found = getattr(catalog.get(), table).get(name)
    return found if found is not None else getattr(catalog.get(fresh=True), table).get(name)


def default_priority_class() -> PriorityClass:
    found = catalog.get().default_priority_class or catalog.get(fresh=True).default_priority_class
    if found is None:
        from core.errors import DomainError

        raise DomainError("No priority classes are defined; a platform admin must create them.",
                          field="priority_class")
    return found


def quotas_for_user(user) -> QuerySet[Quota]:
    return Quota.objects.filter(project__in=project_ids_for_user(user)).select_related("project__organization",
                                                                                      "flavor")


def usage_rows() -> QuerySet[ProjectUsage]:
    return ProjectUsage.objects.select_related("project")


@dataclass(frozen=True)
class QuotaUsage:
    used: int  # devices held by the project's admitted, dispatching and running jobs
    borrowed: int  # of which above its guarantee
    lent: int  # of its idle guarantee, devices other projects of the organization are using now


# Where the devices projects hold come from: `source(organization ids)` -> devices held per (project id, flavor id)
# in those organizations. The jobs app connects it at start-up (quotas never imports jobs).
HeldDevices = Callable[[Iterable[int]], Mapping[tuple[int, int], int]]
usage_source: Hook[HeldDevices] = Hook("quotas.selectors.usage_source", single=True)


def live_usage(quotas: list[Quota]) -> dict[int, QuotaUsage]:
    """Usage per quota id. Lent capacity is shared out among a cohort's lenders by how much each has idle."""
    orgs = {q.project.organization_id for q in quotas}
    used = usage_source.one()(orgs) if usage_source.receivers and orgs else {}
    cohort_quotas = Quota.objects.filter(project__organization_id__in=orgs).select_related("project")
    borrowed_in_cohort: dict[tuple[int, int], int] = defaultdict(int)
    idle: dict[int, int] = {}
    for q in cohort_quotas:
        mine = used.get((q.project_id, q.flavor_id), 0)
        borrowed_in_cohort[(q.project.organization_id, q.flavor_id)] += max(0, mine - q.guaranteed)
        free = max(0, q.guaranteed - mine)
        idle[q.pk] = free if q.lend_limit is None else min(free, q.lend_limit)
    idle_in_cohort: dict[tuple[int, int], int] = defaultdict(int)
    for q in cohort_quotas:
        idle_in_cohort[(q.project.organization_id, q.flavor_id)] += idle[q.pk]
    result = {}
    for q in quotas:
        key = (q.project.organization_id, q.flavor_id)
        mine = used.get((q.project_id, q.flavor_id), 0)
        total_idle = idle_in_cohort[key]
        lent = min(idle.get(q.pk, 0), borrowed_in_cohort[key] * idle.get(q.pk, 0) // total_idle) if total_idle else 0
        result[q.pk] = QuotaUsage(used=mine, borrowed=max(0, mine - q.guaranteed), lent=lent)
    return result
