"""Writes for jobs: submit, cancel, resubmit, the dispatch claim, retries and checkpoints. State changes go through
the state machine (`jobs.lifecycle`)."""

from __future__ import annotations

from datetime import datetime
from typing import Any, NamedTuple

from django.db import transaction
from django.utils import timezone

from core import wakeup
from core.actors import actor_name
from core.errors import DomainError, Forbidden, InvalidTransition, NotFound
from jobs import lifecycle, selectors
from jobs.models import Attempt, AttemptResize, Job, JobEvent, ReplicaGroup
from jobs.states import FINAL, HOLDING, State
from quotas import selectors as quota_selectors
from tenancy.models import Project, Role
from tenancy.permissions import can_manage_job, require_role


def record_event(job: Job, *, reason: str, actor: Any, kind: str = "note", details: dict | None = None,
                 attempt: int | None = None, now: datetime | None = None) -> JobEvent:
    """A note on the job's timeline (a dispatch, a stop); state changes are recorded by `jobs.lifecycle`."""
    return JobEvent.objects.create(
        job=job, attempt=attempt if attempt is not None else job.attempt, created_at=now or timezone.now(),
        kind=kind, reason=reason[:1000], actor_name=actor_name(actor), details=details or {},
    )


class Submitted(NamedTuple):
    """A job just queued, with the rows written with it (to render it without reading them back)."""

    job: Job
    groups: list[ReplicaGroup]
    events: list[JobEvent]

    def related(self) -> dict[str, list]:
        return {"groups": self.groups, "events": self.events, "attempts": []}


def job_submit(*, actor: Any, project: Project, spec: dict[str, Any]) -> Submitted:
    """Check the rules a serializer cannot (role, archived project, can it ever run) and queue the job."""
    require_role(actor, project, Role.MEMBER)
    if project.archived:
        raise DomainError(f"Project {project.slug} is archived and accepts no new jobs.", field="project")
    spec = dict(spec)
    groups = spec.pop("groups")
    priority_class = spec.pop("priority_class", None) or quota_selectors.default_priority_class()
    main = max(groups, key=lambda g: (g["devices"] * g["replicas"], g["devices"]))
    # An elastic group needs only its minimum to run (what admission asks; growth is never promised).
    needed = [{**g, "replicas": g.get("min_replicas") or g["replicas"]} for g in groups]
    reason = selectors.never_fits_reason(project, needed, spec.get("topology", "none"), priority_class)
    if reason:
        raise DomainError(f"This job can never run: {reason}", field="groups", code="never_fits")
    now = timezone.now()
    with transaction.atomic():
        job = Job.objects.create(
            project=project, submitter=actor, submitter_name=actor_name(actor), priority_class=priority_class,
            flavor=main["flavor"], total_devices=sum(g["devices"] * g["replicas"] for g in needed),
            submitted_at=now, queued_at=now, **spec,
        )
        created = ReplicaGroup.objects.bulk_create(ReplicaGroup(job=job, **group) for group in groups)
        event = lifecycle.submitted(job, actor=actor, now=now)
    return Submitted(job, created, [event])


def _require_can_manage(actor: Any, job: Job) -> None:
    """Refuse a viewer or an outsider (naming the role needed), and a member who did not submit the job."""
    role = require_role(actor, job.project, Role.MEMBER)
    if not can_manage_job(actor, role, job.submitter_id):
        raise Forbidden("Members can only manage their own jobs; ask a project admin.")


def job_cancel(*, actor: Any, job: Job, reason: str = "") -> Job:
    """Cancel a job that has not finished; the state machine stops its attempt, if one holds capacity."""
    _require_can_manage(actor, job)
    if job.state in FINAL:
        raise InvalidTransition(f"Job {job.pk} already {job.state}.", field="state")
    with transaction.atomic():
        job = Job.objects.select_for_update().get(pk=job.pk)
        lifecycle.transition(job, State.CANCELLED, reason=reason or f"cancelled by {actor_name(actor)}",
                             actor=actor)
    return job


def job_scale(*, actor: Any, job: Job, maximum: int, role: str | None = None) -> Job:
    """Set the maximum replicas of an elastic job's group (`role`: needed when it has several elastic groups) while
    it waits or runs: raised, the scheduler may grow it into idle capacity; lowered below what it runs, its attempt
    shrinks at once (its highest ranks, an event of the attempt as any resize). For those who manage the job."""
    _require_can_manage(actor, job)
    if job.state in FINAL:
        raise InvalidTransition(f"Job {job.pk} already {job.state}.", field="state")
    with transaction.atomic():
        job = Job.objects.select_for_update().get(pk=job.pk)
        elastic = [g for g in ReplicaGroup.objects.filter(job=job).order_by("id") if g.min_replicas is not None]
        if not elastic:
            raise DomainError(f"Job {job.pk} is not elastic (its replica groups are rigid gangs): only an elastic "
                              "job's maximum can change.", field="max")
        if role is None and len(elastic) > 1:
            raise DomainError("The job has several elastic groups: name one with role.", field="role")
        group = next((g for g in elastic if role in (None, g.role)), None)
        if group is None:
            raise DomainError(f"No elastic group {role!r}; elastic groups: "
                              f"{', '.join(g.role for g in elastic)}.", field="role")
        least = group.min_replicas or 1
        if maximum < least:
            raise DomainError(f"max ({maximum}) must be at least the group's min ({least}).", field="max")
        if maximum == group.replicas:
            return job
        before = group.replicas
        _shrink_to(job, group.role, maximum, actor)
        ReplicaGroup.objects.filter(pk=group.pk).update(replicas=maximum)
        record_event(job, reason=f"max {group.role} replicas {before} -> {maximum} by {actor_name(actor)}",
                     actor=actor, details={"role": group.role, "old_max": before, "new_max": maximum})
        transaction.on_commit(wakeup.wake_scheduler)  # a raised maximum may grow it now
    return job


def _shrink_to(job: Job, role: str, maximum: int, actor: Any) -> None:
    """Shrink the job's running attempt to at most `maximum` replicas of `role` (its highest indexes)."""
    attempt = Attempt.objects.filter(pk=job.current_attempt_id, ended_at__isnull=True).first()
    if attempt is None or job.state not in HOLDING:
        return
    rows = sorted((r for r in attempt.placement if r["role"] == role), key=lambda r: int(r["index"]))
    if len(rows) <= maximum:
        return
    done = lifecycle.resize(job.pk, attempt_id=attempt.pk, version=attempt.resize_count,
                            kind=AttemptResize.Kind.SHRINK, replicas=rows[maximum:], now=timezone.now(),
                            reason=f"its maximum was lowered to {maximum} by {actor_name(actor)}", actor=actor)
    if done is None:
        raise InvalidTransition(f"Job {job.pk} changed meanwhile; try again.", field="max")


SPEC_FIELDS = ["name", "stage", "launcher", "image", "command", "args", "env", "launcher_options", "topology",
               "priority_class", "max_runtime", "min_runtime", "retry_limit", "retry_backoff", "permanent_exit_codes",
               "checkpoint_path", "labels", "experiment", "duration", "scaling_efficiency", "resize_cooldown"]
GROUP_FIELDS = ["role", "replicas", "min_replicas", "devices", "flavor", "cpu_millis", "memory_mib", "rdma"]


def job_resubmit(*, actor: Any, job: Job) -> Submitted:
    """Submit a new job with the same spec, as `actor` (the old one keeps its history). It copies the env's values,
    so only someone who may read them resubmits a job that has an env (the submitter, project admins): anyone else
    is refused, naming env, rather than handed another user's secrets to run with."""
    require_role(actor, job.project, Role.MEMBER)
    if job.env and not selectors.may_read_env(actor, job):
        raise Forbidden("Resubmitting copies the job's environment variables, which only its submitter and the "
                        "project's admins may read: submit a new job with your own env instead.", field="env")
    spec = {name: getattr(job, name) for name in SPEC_FIELDS}
    spec["groups"] = [{name: getattr(group, name) for name in GROUP_FIELDS} for group in job.groups.all()]
    return job_submit(actor=actor, project=job.project, spec=spec)


def job_claim_for_dispatch(attempt: Attempt, *, actor: str = "backend", log_location: str = "") -> bool:
    """admitted -> dispatching exactly once: the conditional UPDATE lets one dispatcher win, others step back.
    False as well when the attempt is no longer the job's current one. `log_location` says where the backend keeps
    the attempt's live logs."""
    job = attempt.job
    if job.current_attempt_id != attempt.pk:
        return False
    try:
        lifecycle.transition(job, State.DISPATCHING, reason=f"dispatching attempt {attempt.number}", actor=actor,
                             log_location=log_location)
    except InvalidTransition:
        return False
    return True


def job_requeue_due_retries(now: datetime | None = None) -> int:
    """Move retrying jobs whose backoff has passed back into the queue for their next attempt.

    A failure recorded after `now` means the clock was turned back since: its backoff then counts from now, not
    from the failure, else the retry would wait the jump on top of it."""
    now = now or timezone.now()
    for job in Job.objects.filter(state=State.RETRYING, retry_at__gt=now, current_attempt__ended_at__gt=now).values(
            "pk", "retry_at", "current_attempt__ended_at"):
        backoff = job["retry_at"] - job["current_attempt__ended_at"]
        Job.objects.filter(pk=job["pk"], state=State.RETRYING, retry_at=job["retry_at"]).update(
            retry_at=now + backoff)
    count = 0
    for job in Job.objects.filter(state=State.RETRYING, retry_at__lte=now):
        try:
            lifecycle.transition(job, State.QUEUED, reason=f"requeued for attempt {job.attempt + 1} from the latest "
                                 "checkpoint", actor="system", now=now)
            count += 1
        except InvalidTransition:
            continue
    return count


def attempt_report_checkpoint(*, actor: Any, job: Job, checkpoint: str, step: int | None = None) -> Attempt:
    """Record the latest checkpoint the job's running attempt saved (a path, a step): what the next attempt
    resumes from (`selectors.resume_env`), and the work a preemption or failure after it loses. For users who
    manage the job; its own process reports with `attempt_report_own_checkpoint`."""
    _require_can_manage(actor, job)
    return _record_checkpoint(job, job.current_attempt, checkpoint, step)


def attempt_report_own_checkpoint(*, job_id: int, attempt: int, checkpoint: str, step: int | None = None) -> Attempt:
    """The checkpoint a job's process reports with the credential its attempt was given (`jobs.auth`): recorded
    only while that attempt is the job's current, open one, so a process of an ended attempt never moves what the
    next attempt resumes from."""
    job = Job.objects.select_related("current_attempt").filter(pk=job_id).first()
    if job is None:
        raise NotFound(f"No job {job_id}.")
    current = job.current_attempt
    if current is None or current.number != attempt:
        raise InvalidTransition(f"Attempt {attempt} of job {job_id} has ended: only the job's current attempt "
                                "reports checkpoints.", field="state")
    return _record_checkpoint(job, current, checkpoint, step)


def _record_checkpoint(job: Job, attempt: Attempt | None, checkpoint: str, step: int | None) -> Attempt:
    if attempt is None or attempt.ended_at is not None or job.state not in HOLDING:
        raise InvalidTransition(f"Job {job.pk} has no running attempt to report a checkpoint for.", field="state")
    return lifecycle.record_checkpoint(attempt, checkpoint, step=step)
