"""Rules jobs and their attempts keep (see `core.consistency`): a job holding capacity has exactly one open attempt,
its current one, and no other job's attempt is ever current. Repairs go through `jobs.lifecycle`, the only writer
of job state and attempts."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime
from functools import partial

from django.db.models import Count, F, Q
from django.utils import timezone

from core.consistency import Check, Problem
from jobs import lifecycle
from jobs.models import Attempt, Job, JobEvent
from jobs.states import HOLDING, State

ACTOR = "check_consistency"


def holding_without_attempt() -> Iterator[Problem]:
    """A job admitted, dispatching or running with no current attempt, or a current attempt that ended: nothing
    runs it that the platform knows of, and the scheduler cannot place it. It points back at its open attempt of
    its number if it has one, else it is requeued through `retrying` (its next attempt resumes from its
    checkpoint)."""
    jobs = (Job.objects.filter(state__in=HOLDING)
            .filter(Q(current_attempt__isnull=True)
                    | Q(current_attempt__ended_at__isnull=False, current_attempt__job=F("pk")))
            .select_related("project", "current_attempt"))
    for job in jobs:
        current = job.current_attempt
        why = "no current attempt" if current is None else f"its current attempt {current.number} ended"
        yield Problem("jobs.holding_without_attempt", f"job {job.pk} is {job.state} with {why}", job, job.project,
                      fix=partial(_requeue, job, why))


def _requeue(job: Job, why: str) -> str:
    own_open = job.attempts.filter(number=job.attempt, ended_at__isnull=True).first()
    if own_open is not None:  # only the pointer was lost: the job keeps running on it
        changed = lifecycle.repoint_current_attempt(
            job, own_open, actor=ACTOR, reason=f"{why}; pointed back at its open attempt by check_consistency")
        return f"pointed back at its open attempt {own_open.number}" if changed else "moved meanwhile; left alone"
    now = timezone.now()
    lifecycle.transition(job, State.RETRYING, reason=f"{job.state} with {why}: requeued by check_consistency",
                         actor=ACTOR, now=now, retry_at=now)
    return "requeued through retrying"


def open_attempt_of_idle_job() -> Iterator[Problem]:
    """An open attempt whose job holds no capacity (queued, retrying, preempted or finished): closed as of when the
    job left it."""
    attempts = (Attempt.objects.filter(ended_at__isnull=True).exclude(job__state__in=HOLDING)
                .select_related("job__project"))
    for attempt in attempts:
        yield Problem("jobs.open_attempt_of_idle_job",
                      f"attempt {attempt.number} of job {attempt.job_id} is open but the job is {attempt.job.state}",
                      attempt, attempt.job.project, fix=partial(_close, attempt))


def extra_open_attempts() -> Iterator[Problem]:
    """A holding job with open attempts besides its current one: the others are closed as of when the job left
    them. (A job whose current attempt is another job's is repaired first, by `foreign_current_attempt`.)"""
    jobs = (Job.objects.filter(state__in=HOLDING, current_attempt__job=F("pk"))
            .annotate(open_attempts=Count("attempts", filter=Q(attempts__ended_at__isnull=True)))
            .filter(open_attempts__gt=1))
    extra = (Attempt.objects.filter(job__in=jobs, ended_at__isnull=True).exclude(job__current_attempt=F("pk"))
             .select_related("job__project"))
    for attempt in extra:
        yield Problem("jobs.extra_open_attempts",
                      f"job {attempt.job_id} has attempt {attempt.number} open besides its current attempt "
                      f"{attempt.job.attempt}", attempt, attempt.job.project,
                      fix=partial(_close, attempt))


def _close(attempt: Attempt) -> str:
    ended_at = left_holding_at(attempt)
    outcome = lifecycle.close_orphan_attempt(
        attempt, ended_at=ended_at, actor=ACTOR,
        reason=f"closed by check_consistency: left open while the job was {attempt.job.state}")
    return f"closed as {outcome} at {ended_at.isoformat()}" if outcome else "already closed"


def left_holding_at(attempt: Attempt) -> datetime:
    """When the attempt's job stopped holding it: the transition out of the holding states recorded for it, else
    the next attempt's admission, else the job's end, else now; never before its admission."""
    left = (JobEvent.objects.filter(job=attempt.job_id, attempt=attempt.number, kind="transition",
                                    from_state__in=HOLDING).exclude(to_state__in=HOLDING)
            .order_by("created_at").values_list("created_at", flat=True).first())
    following = (Attempt.objects.filter(job=attempt.job_id, number__gt=attempt.number).order_by("number")
                 .values_list("admitted_at", flat=True).first())
    return max(left or following or attempt.job.finished_at or timezone.now(), attempt.admitted_at)


def foreign_current_attempt() -> Iterator[Problem]:
    """A job whose current attempt is another job's: it points at its own attempt of its number again (none while
    queued for a new attempt)."""
    jobs = (Job.objects.filter(current_attempt__isnull=False).exclude(current_attempt__job=F("pk"))
            .select_related("project", "current_attempt"))
    for job in jobs:
        yield Problem("jobs.foreign_current_attempt",
                      f"job {job.pk}'s current attempt {job.current_attempt_id} is job "
                      f"{job.current_attempt.job_id}'s", job, job.project, fix=partial(_repoint, job))


def _repoint(job: Job) -> str:
    own = None if job.state == State.QUEUED else job.attempts.filter(number=job.attempt).first()
    changed = lifecycle.repoint_current_attempt(
        job, own, actor=ACTOR, reason="current attempt pointed at another job's; repointed by check_consistency")
    if not changed:
        return "moved meanwhile; left alone"
    return f"now attempt {own.number}" if own is not None else "now none"


CHECKS: list[Check] = [foreign_current_attempt, holding_without_attempt, open_attempt_of_idle_job,
                       extra_open_attempts]
