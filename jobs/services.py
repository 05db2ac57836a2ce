"""Writes for jobs: submit, cancel, resubmit, and the one function that moves a job between states."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from django.db import transaction
from django.utils import timezone

from core import wakeup
from core.errors import DomainError, Forbidden, InvalidTransition
from jobs import selectors
from jobs.models import Job, JobEvent, ReplicaGroup
from jobs.states import FINAL, HOLDING, State, can_transition
from quotas import selectors as quota_selectors
from tenancy.models import ROLE_RANK, Project, Role
from tenancy.selectors import role_in_project

SYSTEM_ACTORS = ("scheduler", "backend", "system")


def _actor_name(actor: Any) -> str:
    if isinstance(actor, str):
        return actor
    return actor.get_username() if actor is not None and actor.is_authenticated else "system"


def record_event(job: Job, *, reason: str, actor: Any, kind: str = "note", details: dict | None = None,
                 from_state: str = "", to_state: str = "", now: datetime | None = None) -> JobEvent:
    return JobEvent.objects.create(
        job=job, created_at=now or timezone.now(), kind=kind, from_state=from_state, to_state=to_state,
        reason=reason[:1000], actor_name=_actor_name(actor), details=details or {},
    )


# Timestamps each state sets when entered.
_ENTRY_FIELDS = {
    State.QUEUED: "queued_at",
    State.ADMITTED: "admitted_at",
    State.RUNNING: "started_at",
    State.SUCCEEDED: "finished_at",
    State.FAILED: "finished_at",
    State.CANCELLED: "finished_at",
}


def transition(job: Job, target: str, *, reason: str, actor: Any, details: dict | None = None,
               now: datetime | None = None, **fields: Any) -> Job:
    """Move `job` to `target` if the state machine allows it and nobody moved it meanwhile.

    The UPDATE is conditional on the state we read, so two writers racing on one job (a cancel against an
    admission, two dispatch workers) cannot both win: the loser gets InvalidTransition.
    """
    source = job.state
    if not can_transition(source, target):
        raise InvalidTransition(f"Job {job.pk} cannot go from {source} to {target}.", field="state")
    now = now or timezone.now()
    changes = {"state": target, **fields}
    if target in _ENTRY_FIELDS:
        changes.setdefault(_ENTRY_FIELDS[target], now)
    if target == State.QUEUED:  # a requeued job gets a new placement; a finished one keeps where it ran
        changes.setdefault("placement", [])
        changes.setdefault("cluster", None)
    if target != State.QUEUED:
        changes.update({"wait_code": "", "wait_reason": "", "project_position": None, "flavor_position": None,
                        "eta": None})
    updated = Job.objects.filter(pk=job.pk, state=source).update(**changes)
    if updated != 1:
        raise InvalidTransition(f"Job {job.pk} changed state concurrently; it is no longer {source}.", field="state")
    for name, value in changes.items():
        setattr(job, name, value)
    record_event(job, reason=reason, actor=actor, kind="transition", details=details, from_state=source,
                 to_state=target, now=now)
    return job


def _require_project_role(actor: Any, project: Project, role: str) -> str:
    actual = role_in_project(actor, project)
    if actual is None or ROLE_RANK[actual] < ROLE_RANK[role]:
        raise Forbidden(f"This needs the {role} role in project {project.slug}.")
    return actual


def job_submit(*, actor: Any, project: Project, spec: dict[str, Any]) -> Job:
    """Check the rules a serializer cannot (role, archived project, can it ever run) and queue the job."""
    _require_project_role(actor, project, Role.MEMBER)
    if project.archived:
        raise DomainError(f"Project {project.slug} is archived and accepts no new jobs.", field="project")
    spec = dict(spec)
    groups = spec.pop("groups")
    priority_class = spec.pop("priority_class", None) or quota_selectors.default_priority_class()
    main = max(groups, key=lambda g: (g["devices"] * g["replicas"], g["devices"]))
    reason = selectors.never_fits_reason(project, groups, spec.get("topology", "none"), priority_class)
    if reason:
        raise DomainError(f"This job can never run: {reason}", field="groups", code="never_fits")
    now = timezone.now()
    with transaction.atomic():
        job = Job.objects.create(
            project=project, submitter=actor, submitter_name=_actor_name(actor), priority_class=priority_class,
            flavor=main["flavor"], total_devices=sum(g["devices"] * g["replicas"] for g in groups),
            submitted_at=now, queued_at=now, **spec,
        )
        created = ReplicaGroup.objects.bulk_create(ReplicaGroup(job=job, **group) for group in groups)
        event = record_event(job, reason="submitted", actor=actor, kind="transition", to_state=State.QUEUED, now=now)
        transaction.on_commit(wakeup.wake_scheduler)
    _remember_related(job, groups=created, events=[event])
    return job


def _remember_related(job: Job, **related: list) -> None:
    """Store what was just written as Django's prefetch cache, so the caller renders the job without reading it
    back. As with prefetch_related, later writes to those rows are not seen through this instance."""
    for name, objects in related.items():
        queryset = getattr(job, name).get_queryset()
        queryset._result_cache, queryset._prefetch_done = objects, True
        job._prefetched_objects_cache = {**getattr(job, "_prefetched_objects_cache", {}), name: queryset}


def _require_can_manage(actor: Any, job: Job) -> None:
    """Members manage their own jobs; admins and owners manage every job of the project."""
    role = _require_project_role(actor, job.project, Role.MEMBER)
    if ROLE_RANK[role] < ROLE_RANK[Role.ADMIN] and job.submitter_id != actor.pk:
        raise Forbidden("Members can only manage their own jobs; ask a project admin.")


def job_cancel(*, actor: Any, job: Job, reason: str = "") -> Job:
    _require_can_manage(actor, job)
    if job.state in FINAL:
        raise InvalidTransition(f"Job {job.pk} already {job.state}.", field="state")
    from clusters import backends

    with transaction.atomic():
        job = Job.objects.select_for_update().get(pk=job.pk)
        was_holding = job.state in HOLDING
        transition(job, State.CANCELLED, reason=reason or f"cancelled by {_actor_name(actor)}", actor=actor)
        if was_holding:
            transaction.on_commit(lambda: backends.stop_job(job.pk, reason="cancelled"))
        transaction.on_commit(wakeup.wake_scheduler)
    return job


SPEC_FIELDS = ["name", "stage", "launcher", "image", "command", "args", "env", "launcher_options", "topology",
               "priority_class", "max_runtime", "min_runtime", "retry_limit", "retry_backoff", "permanent_exit_codes",
               "checkpoint_path", "labels", "experiment", "duration"]
GROUP_FIELDS = ["role", "replicas", "devices", "flavor", "cpu_millis", "memory_mib", "rdma"]


def job_resubmit(*, actor: Any, job: Job) -> Job:
    """Submit a new job with the same spec (the old one keeps its history)."""
    spec = {name: getattr(job, name) for name in SPEC_FIELDS}
    spec["groups"] = [{name: getattr(group, name) for name in GROUP_FIELDS} for group in job.groups.all()]
    return job_submit(actor=actor, project=job.project, spec=spec)


def job_claim_for_dispatch(job: Job, *, actor: str = "backend") -> bool:
    """admitted -> dispatching exactly once: the conditional UPDATE lets one dispatcher win, others step back."""
    try:
        transition(job, State.DISPATCHING, reason=f"dispatching attempt {job.attempt}", actor=actor)
    except InvalidTransition:
        return False
    return True


def job_mark_running(job: Job, *, reason: str = "all replicas running", actor: str = "backend") -> Job:
    return transition(job, State.RUNNING, reason=reason, actor=actor)


def job_mark_succeeded(job: Job, *, reason: str = "completed", actor: str = "backend") -> Job:
    job = transition(job, State.SUCCEEDED, reason=reason, actor=actor)
    transaction.on_commit(wakeup.wake_scheduler)
    return job


def job_attempt_failed(job: Job, *, cause: str, reason: str, retryable: bool, lost_node: str | None = None,
                       details: dict | None = None, actor: str = "backend") -> Job:
    """A failed attempt: retry the whole gang from its checkpoint with exponential backoff, or fail for good.

    `lost_node` (a snapshot key "cluster/node") is avoided by the retry.
    """
    now = timezone.now()
    details = {"cause": cause, "attempt": job.attempt, **(details or {})}
    retries_used = job.attempt - 1
    if retryable and retries_used < job.retry_limit:
        from datetime import timedelta

        backoff = job.retry_backoff * (2 ** retries_used)
        avoid = sorted(set(job.avoid_nodes) | ({lost_node} if lost_node else set()))
        job = transition(job, State.RETRYING, reason=f"attempt {job.attempt} failed ({cause}): {reason}; "
                         f"retry {retries_used + 1}/{job.retry_limit} in {backoff}s", actor=actor, details=details,
                         now=now, failure_cause=cause, retry_at=now + timedelta(seconds=backoff), avoid_nodes=avoid)
    else:
        why = "not retryable" if not retryable else f"retry limit {job.retry_limit} reached"
        job = transition(job, State.FAILED, reason=f"{cause}: {reason} ({why})", actor=actor, details=details,
                         now=now, failure_cause=cause)
    transaction.on_commit(wakeup.wake_scheduler)
    return job


def job_requeue_due_retries(now: datetime | None = None) -> int:
    """Move retrying jobs whose backoff has passed back into the queue with a new attempt number."""
    now = now or timezone.now()
    count = 0
    for job in Job.objects.filter(state=State.RETRYING, retry_at__lte=now):
        try:
            transition(job, State.QUEUED, reason=f"requeued for attempt {job.attempt + 1} from the latest checkpoint",
                       actor="system", now=now, attempt=job.attempt + 1, retry_at=None)
            count += 1
        except InvalidTransition:
            continue
    if count:
        transaction.on_commit(wakeup.wake_scheduler)
    return count
