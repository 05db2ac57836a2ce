"""Reads for replays: runs scoped to their creator, and the platform's cluster, quotas and history as replay
inputs (the `current` configuration)."""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime
from typing import Any

from django.db.models import Min, Q, QuerySet

from clusters.models import Cluster
from jobs.models import Job, ReplicaGroup
from jobs.snapshot import load_nodes, load_projects, load_quotas
from jobs.states import ACTIVE
from quotas.models import PriorityClass, Quota, ResourceFlavor
from replay.cluster import ClusterShape, QuotaSet
from replay.trace import PRIORITY_CLASSES
from replays.costing import Catalog
from replays.models import ReplayRun
from tenancy.models import Project


def runs_for_user(user) -> QuerySet[ReplayRun]:
    """Platform staff see every run; anybody else only the runs they created (others answer 404)."""
    if not user.is_authenticated:
        return ReplayRun.objects.none()
    runs = ReplayRun.objects.select_related("created_by")
    return runs if user.is_staff else runs.filter(created_by=user)


def run_by_id(run_id: int) -> ReplayRun | None:
    return ReplayRun.objects.filter(pk=run_id).first()


def whatif_runs() -> QuerySet[ReplayRun]:
    return ReplayRun.objects.filter(kind="whatif")


def current_cluster() -> ClusterShape:
    """The inventory as a replay cluster: every node at its allocatable size (devices held by pods the platform
    did not create are left out), all free; cordons and readiness are transient and ignored."""
    return ClusterShape(tuple(replace(n, free=n.devices, schedulable=True) for n in load_nodes() if n.devices > 0))


def current_quotas() -> QuotaSet:
    """The quotas and projects (cohort = organization) as configured; fair-share history starts at zero."""
    projects = tuple(replace(p, decayed_usage=0.0) for p in load_projects())
    return QuotaSet(load_quotas(), projects)


def priority_values() -> dict[str, int]:
    """The configured values of the priority classes a trace can name (high, normal, low, preemptible)."""
    rows = PriorityClass.objects.filter(name__in=PRIORITY_CLASSES).values_list("name", "value")
    return dict(rows)


def pricing_catalog() -> Catalog:
    """The ids of flavors, clusters and priority classes by name: where a replay's names meet the price book."""
    return Catalog(*(dict(model.objects.values_list("name", "pk")) for model in (ResourceFlavor, Cluster,
                                                                                 PriorityClass)))


def priority_class(name: str) -> PriorityClass | None:
    return PriorityClass.objects.filter(name=name).first()


def projects() -> QuerySet[Project]:
    return Project.objects.select_related("organization").order_by("slug")


def flavors() -> QuerySet[ResourceFlavor]:
    return ResourceFlavor.objects.order_by("name")


def project_by_slug(slug: str) -> Project | None:
    return Project.objects.filter(slug=slug).select_related("organization").first()


def flavor_by_name(name: str) -> ResourceFlavor | None:
    return ResourceFlavor.objects.filter(name=name).first()


def quota_for(project: Project, flavor: ResourceFlavor) -> Quota | None:
    return Quota.objects.filter(project=project, flavor=flavor).select_related("project", "flavor").first()


def guarantees_in_organization(organization_id: int, flavor: str) -> dict[str, int]:
    """Project slug -> guarantee of `flavor`, for the projects of one organization (the scheduler's cohort)."""
    rows = Quota.objects.filter(project__organization_id=organization_id, flavor__name=flavor).values_list(
        "project__slug", "guaranteed")
    return dict(rows)


def history(since: datetime, until: datetime, *, active: bool = False) -> list[dict[str, Any]]:
    """Jobs submitted in [since, until) as plain rows with their replica groups (for export_trace); a job's start
    is its first attempt's. With `active`, also every job still waiting or running (whenever it was submitted),
    with its state, simulated `duration` and the start of its current attempt: the what-if replays them too."""
    chosen = Q(submitted_at__gte=since, submitted_at__lt=until)
    if active:
        chosen |= Q(state__in=list(ACTIVE), submitted_at__lt=until)
    rows = list(Job.objects.filter(chosen).order_by("submitted_at", "id")
                .annotate(started_at=Min("attempts__started_at"))
                .values("id", "submitted_at", "started_at", "finished_at", "total_devices", "flavor__name",
                        "project__slug", "priority_class__name", "submitter_name", "max_runtime", "state",
                        "duration", "current_attempt__started_at"))
    groups: dict[int, list[tuple[int, int]]] = {}
    for job_id, replicas, devices in ReplicaGroup.objects.filter(job_id__in=[r["id"] for r in rows]).values_list(
            "job_id", "replicas", "devices"):
        groups.setdefault(job_id, []).append((replicas, devices))
    for row in rows:
        row["groups"] = groups.get(row["id"], [])
    return rows
