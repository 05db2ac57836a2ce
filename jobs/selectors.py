"""Reads for jobs, scoped to what the caller may see, and the submission-time feasibility check."""

from __future__ import annotations

from typing import Any

from django.db.models import Prefetch, QuerySet

from core.snapshots import Snapshot
from jobs import scheduling as core
from jobs.models import Job, JobEvent, ReplicaGroup
from jobs.snapshot import load_nodes, load_projects, load_quotas, policy_from_settings
from jobs.states import State
from quotas.models import PriorityClass
from tenancy.models import Project
from tenancy.selectors import project_ids_for_user


def jobs_for_user(user) -> QuerySet[Job]:
    return (Job.objects.filter(project__in=project_ids_for_user(user))
            .select_related("project", "priority_class", "flavor", "cluster"))


def job_detail_for_user(user) -> QuerySet[Job]:
    groups = Prefetch("groups", queryset=ReplicaGroup.objects.select_related("flavor"))
    return jobs_for_user(user).prefetch_related(groups, "events")


def queue_for_user(user) -> QuerySet[Job]:
    """Waiting jobs in scheduler order: position in the flavor's queue, then submission."""
    return jobs_for_user(user).filter(state=State.QUEUED).order_by("flavor__name", "flavor_position", "submitted_at",
                                                                   "id")


def events_for_job(job: Job) -> QuerySet[JobEvent]:
    return JobEvent.objects.filter(job=job)


_feasibility = Snapshot(lambda: core.Feasibility(load_nodes(), load_quotas(), load_projects(), policy_from_settings()))


def never_fits_reason(project: Project, groups: list[dict[str, Any]], topology: str,
                      priority_class: PriorityClass) -> str | None:
    """Why a job of this shape can never run in this project on this inventory, else None."""
    probe = core.PendingJob(
        id=0, project=project.slug, priority=priority_class.value, submitted_at=0.0,
        groups=tuple(core.ReplicaGroup(g["role"], g["replicas"], g["devices"], g["flavor"].name) for g in groups),
        preemptible=priority_class.preemptible, topology=core.Topology(topology),
    )
    reason = _feasibility.get().reason(probe)
    if reason is not None:  # confirm on fresh data: a quota raised a moment ago must not turn the job away
        reason = _feasibility.get(fresh=True).reason(probe)
    return reason
