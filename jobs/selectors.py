"""Reads for jobs, scoped to what the caller may see, and the submission-time feasibility check."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from django.db.models import Count, Prefetch, Q, QuerySet, Sum

from core.snapshots import Snapshot
from jobs import failures
from jobs import scheduling as core
from jobs.models import Attempt, Job, JobEvent, Outcome, ReplicaGroup
from jobs.ports import AttemptEnv
from jobs.snapshot import load_nodes, load_projects, load_quotas, policy_from_settings
from jobs.states import HOLDING, State
from quotas.models import PriorityClass
from tenancy.models import Project
from tenancy.permissions import is_submitter_or_admin
from tenancy.selectors import project_ids_for_user

# What everyone else sees of an env value (docs/security.md, "Who sees what").
HIDDEN_VALUE = "••••"


def jobs_for_user(user) -> QuerySet[Job]:
    return (Job.objects.filter(project__in=project_ids_for_user(user))
            .select_related("project", "priority_class", "flavor", "current_attempt__cluster"))


def job_detail_for_user(user) -> QuerySet[Job]:
    groups = Prefetch("groups", queryset=ReplicaGroup.objects.select_related("flavor"))
    attempts = Prefetch("attempts", queryset=Attempt.objects.select_related("cluster").prefetch_related("resizes"))
    return jobs_for_user(user).prefetch_related(groups, attempts, "events")


def may_read_env(user, job: Job) -> bool:
    """Whether `user` reads the values of the job's env (which may hold secrets): its submitter, the project's
    admins and owners, and platform staff (who act as owners). Everyone else who sees the job reads only the names."""
    return is_submitter_or_admin(user, job.project, job.submitter_id)


def env_shown_to(user, job: Job) -> dict[str, str]:
    """The job's env as `user` may see it: the values, or every name with a hidden value."""
    if may_read_env(user, job):
        return dict(job.env)
    return dict.fromkeys(job.env, HIDDEN_VALUE)


def queue_for_user(user) -> QuerySet[Job]:
    """Waiting jobs in scheduler order: position in the flavor's queue, then submission (with their groups: an
    elastic job shows its bounds)."""
    return jobs_for_user(user).filter(state=State.QUEUED).prefetch_related("groups").order_by(
        "flavor__name", "flavor_position", "submitted_at", "id")


def events_for_job(job: Job) -> QuerySet[JobEvent]:
    return JobEvent.objects.filter(job=job)


def attempt_of(job: Job, number: int | None = None) -> Attempt | None:
    """The job's attempt of that number (of a job the caller may see), else its current one."""
    if number is None:
        return job.current_attempt
    return job.attempts.select_related("cluster").filter(number=number).first()


# Every name resume_env sets: a job spec may not set them (jobs.ports.is_reserved_env).
RESUME_ENV_NAMES = frozenset({"TIDAL_RESUME_FROM", "TIDAL_RESUME_STEP"})


def resume_env(attempt: Attempt) -> AttemptEnv:
    """What an attempt resumes from: the latest checkpoint an earlier attempt of its job reported (the one before
    it may have ended before saving any), empty for a first attempt or when none was reported. A dispatch port env
    source (JobsConfig.ready), so every backend gives it to the attempt's process."""
    latest = (Attempt.objects.filter(job_id=attempt.job_id, number__lt=attempt.number).exclude(checkpoint="")
              .order_by("-number").values_list("checkpoint", "checkpoint_step").first())
    checkpoint, step = latest or ("", None)
    return AttemptEnv({"TIDAL_RESUME_FROM": checkpoint, "TIDAL_RESUME_STEP": "" if step is None else str(step)}, {})


def attempt_with_job(attempt_id: int) -> Attempt | None:
    """An attempt with what a backend needs to dispatch, stop or read it."""
    return attempts_with_jobs().filter(pk=attempt_id).first()


def attempts_with_jobs() -> QuerySet[Attempt]:
    """Attempts with their job (project, organization, flavor, replica groups) and cluster loaded."""
    groups = Prefetch("job__groups", queryset=ReplicaGroup.objects.order_by("id"))
    return Attempt.objects.select_related("job__project__organization", "job__flavor", "cluster").prefetch_related(
        groups)


def live_attempt_numbers() -> list[tuple[int, int]]:
    """(job id, attempt number) of every job queued or holding capacity: its current or next attempt."""
    return list(Job.objects.filter(state__in=[State.QUEUED, *HOLDING]).values_list("pk", "attempt"))


def held_placements() -> list[tuple[int, list[dict], int, str, int]]:
    """(cluster id, placement, project id, project slug, job id) of every open attempt."""
    return list(Attempt.objects.filter(ended_at__isnull=True, cluster__isnull=False).values_list(
        "cluster_id", "placement", "job__project_id", "job__project__slug", "job_id"))


def open_attempts() -> QuerySet[Attempt]:
    """Attempts holding capacity now, with what a backend needs to observe or stop them."""
    return attempts_with_jobs().filter(ended_at__isnull=True)


def held_devices(organization_ids: Iterable[int]) -> dict[tuple[int, int], int]:
    """Devices held by admitted, dispatching and running jobs per (project id, flavor id), in these organizations
    (registered as the quotas app's usage source)."""
    holding = Job.objects.filter(state__in=HOLDING, project__organization_id__in=list(organization_ids))
    # A resized elastic attempt holds what its placement says now (its job's total_devices is its minimum need).
    resized = Q(current_attempt__resize_count__gt=0)
    held = (holding.exclude(resized).values("project_id", "flavor_id").annotate(devices=Sum("total_devices")))
    out = {(row["project_id"], row["flavor_id"]): row["devices"] or 0 for row in held}
    for project_id, flavor_id, placement in holding.filter(resized).values_list(
            "project_id", "flavor_id", "current_attempt__placement"):
        key = (project_id, flavor_id)
        out[key] = out.get(key, 0) + sum(int(row["devices"]) for row in placement)
    return out


def runtime_shares(recent: int = 500, least: int = 20) -> core.RuntimeShares:
    """The median, p10 and p90 share of its max runtime a job used, over the most recent successful attempts of
    jobs that declare one (1.0 until `least` of them finished): how the ETA forecast expects jobs to end."""
    rows = (Attempt.objects.filter(outcome=Outcome.SUCCEEDED, started_at__isnull=False, ended_at__isnull=False,
                                   job__max_runtime__gt=0)
            .order_by("-ended_at").values_list("started_at", "ended_at", "job__max_runtime")[:recent])
    return core.runtime_shares([(ended - started).total_seconds() / limit for started, ended, limit in rows],
                               least)


_feasibility = Snapshot(lambda: core.Feasibility(load_nodes(), load_quotas(), load_projects(), policy_from_settings()))


def _requests(group: dict[str, Any]) -> tuple[int, int]:
    """A submitted group's CPU millicores and memory MiB per replica: what it will be stored with."""
    return (group.get("cpu_millis", ReplicaGroup._meta.get_field("cpu_millis").default),
            group.get("memory_mib", ReplicaGroup._meta.get_field("memory_mib").default))


def never_fits_reason(project: Project, groups: list[dict[str, Any]], topology: str,
                      priority_class: PriorityClass) -> str | None:
    """Why a job of this shape can never run in this project on this inventory, else None."""
    probe = core.PendingJob(
        id=0, project=project.slug, priority=priority_class.value, submitted_at=0.0,
        groups=tuple(core.ReplicaGroup(g["role"], g["replicas"], g["devices"], g["flavor"].name, *_requests(g))
                     for g in groups),
        preemptible=priority_class.preemptible, topology=core.Topology(topology),
    )
    reason = _feasibility.get().reason(probe)
    if reason is not None:  # confirm on fresh data: a quota raised a moment ago must not turn the job away
        reason = _feasibility.get(fresh=True).reason(probe)
    return reason


def failure_counts(jobs: Any) -> dict[str, Any]:
    """Failed and lost attempts of `jobs` (a scoped queryset) counted by cause, and by rack and cause where the
    rack is known: every failed attempt counts once, retried or final."""
    ended = Attempt.objects.filter(job__in=jobs, outcome__in=[Outcome.FAILED, Outcome.LOST])
    by_cause = ended.values("cause").annotate(n=Count("id")).order_by("-n", "cause")
    by_rack = (ended.filter(~Q(details__rack="") & Q(details__has_key="rack"))
               .values("details__rack", "cause").annotate(n=Count("id")).order_by("-n", "details__rack", "cause"))
    causes = [{"cause": row["cause"] or failures.UNKNOWN, "count": row["n"]} for row in by_cause]
    return {
        "total": sum(row["count"] for row in causes),
        "by_cause": causes,
        "by_rack": [{"rack": str(row["details__rack"]), "cause": row["cause"] or failures.UNKNOWN, "count": row["n"]}
                    for row in by_rack],
    }
