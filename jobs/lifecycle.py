"""The job state machine: the only writer of `Job.state`, of attempts and of the transition events.

    transition(job, target, ...)       one job, conditional on the state it was read in
    transition_many(admissions, ...)   the scheduler's admissions, in bulk
    resize(job_id, ...)                an elastic job's running attempt grows or shrinks (not a transition)

Entering `admitted` opens an attempt with its placement, `running` marks it started, and leaving the states that hold
capacity (admitted, dispatching, running) ends it with an outcome: succeeded, failed, lost, preempted or cancelled.
Queueing again (after a preemption or a failed attempt) counts the next attempt. Every change is a JobEvent.

Other apps follow it through two hooks (`core.hooks`), connecting in their AppConfig.ready(), and never write state
themselves:
  - `on_change.connect(listener)`: called inside the transaction with the changes, so what it writes (a usage
    segment opening or closing) commits or rolls back with the transition;
  - `after_commit.connect(listener)`: called once the transaction committed.
The state machine's own side effects run after commit too: an admitted attempt is dispatched, an ended one is
stopped (its remaining objects deleted), and the scheduler is woken when capacity frees up or a job queues.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from django.db import transaction
from django.utils import timezone

from core import wakeup
from core.actors import actor_name
from core.errors import InvalidTransition
from core.hooks import Hook
from jobs import ports
from jobs.bulk import bulk_set
from jobs.models import Attempt, AttemptResize, Job, JobEvent, Outcome, ReplicaGroup
from jobs.states import FINAL, HOLDING, State, can_transition, ends_attempt

# What the scheduler writes of a waiting job, cleared (in this order) when it leaves the queue.
_CLEARED_WAIT = {"wait_code": "", "wait_reason": "", "project_position": None, "flavor_position": None, "eta": None,
                 "eta_low": None, "eta_high": None, "eta_note": ""}
WAIT_FIELDS = list(_CLEARED_WAIT)
_OUTCOME_OF_TARGET: dict[str, str] = {State.SUCCEEDED: Outcome.SUCCEEDED, State.CANCELLED: Outcome.CANCELLED,
                      State.PREEMPTED: Outcome.PREEMPTED, State.FAILED: Outcome.FAILED,
                      State.RETRYING: Outcome.FAILED}


@dataclass(frozen=True, slots=True)
class Change:
    """One transition, as listeners see it."""

    job_id: int
    project_id: int
    source: str  # "" when the job was just submitted
    target: str
    at: datetime
    actor: str
    attempt_id: int | None  # the attempt the change opened, started or ended (None while queued)
    attempt: int  # the attempt's number (the next one's while queued)
    outcome: str = ""  # set when the change ended the attempt


@dataclass(frozen=True)
class AttemptEnd:
    """How an attempt ended, beyond the transition's: why in the attempt's own words (default: the transition's
    reason), the cause of a failure, whether its node was lost, the exit code and details, and the last log lines
    kept per replica."""

    reason: str = ""
    cause: str = ""
    lost: bool = False
    exit_code: int | None = None
    details: Mapping[str, Any] = field(default_factory=dict)
    logs: Mapping[str, list[str]] = field(default_factory=dict)


@dataclass(frozen=True)
class Admission:
    """A scheduling decision to apply: the job, its cluster and where each replica goes."""

    job_id: int
    cluster_id: int
    placement: list[dict[str, Any]]  # {"role", "index", "node", "devices"}
    borrowed: int = 0
    reason: str = "admitted"


Listener = Callable[[Sequence[Change]], None]
# listener(changes) inside the transaction of every transition, and after it committed.
on_change: Hook[Listener] = Hook("jobs.lifecycle.on_change")
after_commit: Hook[Listener] = Hook("jobs.lifecycle.after_commit")


@dataclass(frozen=True, slots=True)
class Resized:
    """One resize of a running attempt, as listeners see it: what it holds from `at` on."""

    job_id: int
    project_id: int
    attempt_id: int
    attempt: int  # the attempt's number
    resize_id: int  # the AttemptResize row
    at: datetime
    old_devices: int
    new_devices: int
    new_cpu_millis: int  # what its replicas request together from `at` on
    new_memory_mib: int
    new_tidal_devices: int = 0  # of `new_devices`, those on capacity a pool lent


ResizeListener = Callable[[Resized], None]
# listener(resized) inside the transaction of every resize (costs: the usage segment follows the device count).
on_resize: Hook[ResizeListener] = Hook("jobs.lifecycle.on_resize")


# ----------------------------------------------------------------------------------------------- one job

def transition(job: Job, target: str, *, reason: str, actor: Any, now: datetime | None = None,
               details: dict | None = None, end: AttemptEnd | None = None, log_location: str = "",
               **fields: Any) -> Job:
    """Move `job` to `target` if the table allows it and nobody moved it meanwhile.

    The UPDATE is conditional on the state we read, so two writers racing on one job (a cancel against an
    admission, two dispatch workers) cannot both win: the loser gets InvalidTransition. `end` describes how the
    attempt ended when the target ends it; `log_location` where a dispatched attempt's live logs are; `fields` are
    other job fields the same UPDATE writes (retry_at...).
    """
    source = job.state
    if target == State.ADMITTED:
        raise InvalidTransition("Admission needs a placement: use transition_many().", field="state")
    if not can_transition(source, target):
        raise InvalidTransition(f"Job {job.pk} cannot go from {source} to {target}.", field="state")
    now = now or timezone.now()
    if job.current_attempt_id is not None and (target == State.RUNNING or ends_attempt(source, target)):
        now = _not_before_attempt(job.current_attempt_id, now)
    changes = {"state": target, **fields}
    if target == State.QUEUED:  # queued again: the next attempt will open at its admission
        changes.update(queued_at=now, attempt=job.attempt + 1, current_attempt=None, retry_at=None)
    else:
        changes.update(_CLEARED_WAIT)
    if target in FINAL:
        changes["finished_at"] = now
    with transaction.atomic():
        if Job.objects.filter(pk=job.pk, state=source).update(**changes) != 1:
            raise InvalidTransition(f"Job {job.pk} changed state concurrently; it is no longer {source}.",
                                    field="state")
        attempt_id, outcome = job.current_attempt_id, ""
        if attempt_id is not None and target == State.DISPATCHING and log_location:
            Attempt.objects.filter(pk=attempt_id).update(log_location=log_location[:300])
        elif attempt_id is not None and target == State.RUNNING:
            Attempt.objects.filter(pk=attempt_id).update(started_at=now)
        elif attempt_id is not None and ends_attempt(source, target):
            outcome = _end_attempt(attempt_id, target, reason, end or AttemptEnd(), now)
        if target == State.QUEUED:
            attempt_id = None
        number = changes.get("attempt", job.attempt)
        for name, value in changes.items():
            setattr(job, name, value)
        JobEvent.objects.create(job=job, attempt=number, created_at=now, kind="transition", from_state=source,
                                to_state=target, reason=reason[:1000], actor_name=actor_name(actor),
                                details=details or {})
        _announce([Change(job.pk, job.project_id, source, target, now, actor_name(actor), attempt_id, number,
                          outcome)])
    return job


def _not_before_attempt(attempt_id: int, now: datetime) -> datetime:
    """`now`, or the attempt's admission or start if later: a clock turned back since (an NTP step, another host's
    clock) must not end an attempt, and close its usage segment, before it began."""
    times = Attempt.objects.filter(pk=attempt_id).values_list("admitted_at", "started_at").first()
    return max([now, *(at for at in times or () if at is not None)])


def _end_attempt(attempt_id: int, target: str, reason: str, end: AttemptEnd, now: datetime) -> str:
    outcome = Outcome.LOST if end.lost else _OUTCOME_OF_TARGET[target]
    values: dict[str, Any] = {"ended_at": now, "outcome": outcome, "reason": (end.reason or reason)[:1000]}
    if end.cause:
        values["cause"] = end.cause[:30]
    if end.exit_code is not None:
        values["exit_code"] = end.exit_code
    if end.details:
        values["details"] = dict(end.details)
    if end.logs:
        values["logs"] = dict(end.logs)
    Attempt.objects.filter(pk=attempt_id, ended_at__isnull=True).update(**values)
    return outcome


def submitted(job: Job, *, actor: Any, now: datetime) -> JobEvent:
    """Record a job just created in `queued` (the first state is the model's default, not a transition)."""
    event = JobEvent.objects.create(job=job, attempt=job.attempt, created_at=now, kind="transition",
                                    to_state=State.QUEUED, reason="submitted", actor_name=actor_name(actor))
    _announce([Change(job.pk, job.project_id, "", State.QUEUED, now, event.actor_name, None, job.attempt)])
    return event


def record_checkpoint(attempt: Attempt, checkpoint: str, now: datetime | None = None,
                      step: int | None = None) -> Attempt:
    """Keep the latest checkpoint an open attempt reported (not a transition: its state does not change)."""
    now = now or timezone.now()
    Attempt.objects.filter(pk=attempt.pk, ended_at__isnull=True).update(
        checkpoint=checkpoint[:500], checkpoint_step=step, checkpoint_at=now)
    attempt.checkpoint, attempt.checkpoint_step, attempt.checkpoint_at = checkpoint[:500], step, now
    return attempt


# ------------------------------------------------------------------------------------------------- in bulk

def transition_many(admissions: Sequence[Admission], *, now: datetime, actor: str = "scheduler") -> list[int]:
    """Admit jobs in bulk: lock the rows still queued (a job cancelled since the scheduler read it is skipped; a
    cancel racing with us waits for our commit, then sees `admitted`), open an attempt for each, move them to
    admitted and record one event each. Returns the ids admitted."""
    if not admissions:
        return []
    decisions = {a.job_id: a for a in admissions}
    with transaction.atomic():
        queued = (Job.objects.select_for_update().filter(pk__in=decisions, state=State.QUEUED).order_by("pk")
                  .values_list("pk", "attempt", "project_id"))
        rows = list(queued)
        attempts = Attempt.objects.bulk_create(
            Attempt(job_id=job_id, number=number, cluster_id=decisions[job_id].cluster_id,
                    placement=decisions[job_id].placement, borrowed=decisions[job_id].borrowed,
                    tidal_devices=tidal_devices(decisions[job_id].placement), admitted_at=now)
            for job_id, number, _ in rows)
        bulk_set(Job, ["state", "current_attempt", *WAIT_FIELDS],
                 [(job_id, State.ADMITTED, attempt.pk, *_CLEARED_WAIT.values())
                  for (job_id, _, _), attempt in zip(rows, attempts, strict=True)])
        JobEvent.objects.bulk_create(
            (JobEvent(job_id=job_id, attempt=number, created_at=now, kind="transition", from_state=State.QUEUED,
                      to_state=State.ADMITTED, reason=decisions[job_id].reason[:1000], actor_name=actor,
                      details={"borrowed": decisions[job_id].borrowed})
             for job_id, number, _ in rows), batch_size=1000)
        _announce([Change(job_id, project_id, State.QUEUED, State.ADMITTED, now, actor, attempt.pk, number)
                   for (job_id, number, project_id), attempt in zip(rows, attempts, strict=True)])
    return [job_id for job_id, _, _ in rows]


# ------------------------------------------------------------------------------------------------- resizes

GROWN_REASON = "grew into idle capacity"


def resize(job_id: int, *, attempt_id: int, version: int, kind: str, replicas: Sequence[Mapping[str, Any]],
           reason: str, now: datetime, actor: Any = "scheduler", for_job: int | None = None) -> AttemptResize | None:
    """Grow (`kind` "grow": `replicas` are new rows {role, index, node, devices}) or shrink ("shrink": `replicas`
    leave, by role and index) the job's open attempt `attempt_id`: an event of that attempt, not a new one. Its
    placement changes, an AttemptResize row keeps the old and new world size and why, a JobEvent of kind "resize"
    shows it on the timeline, `on_resize` listeners follow inside the transaction (the usage segment), and after
    commit the backend adds or stops the replicas (`ports.resize`).

    Applied at most once: the UPDATE is conditional on the attempt's `resize_count` being `version` (what the
    caller read, e.g. the scheduler's snapshot), so a decision applied twice, or made on a placement that changed
    since, changes nothing and returns None. None as well when the job no longer runs on that attempt (a grow needs
    it running: a gang still starting is not grown), when a replica to add is there already or one to remove is
    not, or when the result would leave a group's bounds (min_replicas..replicas)."""
    if kind not in AttemptResize.Kind.values or not replicas:
        raise ValueError(f"a resize is a grow or a shrink of at least one replica, not {kind!r} of {len(replicas)}")
    states = [State.RUNNING] if kind == AttemptResize.Kind.GROW else list(HOLDING)
    with transaction.atomic():
        job = (Job.objects.select_for_update(of=("self",)).filter(pk=job_id, current_attempt_id=attempt_id,
                                                                  state__in=states).first())
        attempt = Attempt.objects.filter(pk=attempt_id, ended_at__isnull=True, resize_count=version).first()
        if job is None or attempt is None:
            return None
        old = list(attempt.placement)
        new = _resized(old, replicas, grow=kind == AttemptResize.Kind.GROW)
        groups = {g.role: g for g in ReplicaGroup.objects.filter(job_id=job_id)}
        if new is None or not _within_bounds(new, groups):
            return None
        if Attempt.objects.filter(pk=attempt_id, ended_at__isnull=True, resize_count=version).update(
                placement=new, tidal_devices=tidal_devices(new), resize_count=version + 1, resized_at=now) != 1:
            return None
        devices = (sum(int(r["devices"]) for r in old), sum(int(r["devices"]) for r in new))
        row = AttemptResize.objects.create(
            attempt_id=attempt_id, at=now, kind=kind, old_replicas=len(old), new_replicas=len(new),
            old_devices=devices[0], new_devices=devices[1], reason=reason[:1000], for_job=for_job,
            replicas=[dict(r) for r in replicas])
        verb = "grew" if kind == AttemptResize.Kind.GROW else "shrank"
        JobEvent.objects.create(
            job=job, attempt=attempt.number, created_at=now, kind="resize",
            reason=f"{verb} from {len(old)} to {len(new)} workers: {reason}"[:1000], actor_name=actor_name(actor),
            details={"old_replicas": len(old), "new_replicas": len(new), "old_devices": devices[0],
                     "new_devices": devices[1], **({"for_job": for_job} if for_job else {})})
        cpu = sum(groups[r["role"]].cpu_millis for r in new if r["role"] in groups)
        memory = sum(groups[r["role"]].memory_mib for r in new if r["role"] in groups)
        on_resize.send(Resized(job_id, job.project_id, attempt_id, attempt.number, row.pk, now, devices[0],
                               devices[1], cpu, memory, tidal_devices(new)))
        transaction.on_commit(lambda: ports.resize(attempt_id, row.pk))
        if kind == AttemptResize.Kind.SHRINK:
            transaction.on_commit(wakeup.wake_scheduler)  # capacity freed
    return row


def tidal_devices(placement: Sequence[Mapping[str, Any]]) -> int:
    """Devices of the placement on capacity a pool lent: its rows that name a `pool` (the scheduler loop's)."""
    return sum(int(r["devices"]) for r in placement if r.get("pool"))


def _resized(placement: list[dict[str, Any]], replicas: Sequence[Mapping[str, Any]],
             grow: bool) -> list[dict[str, Any]] | None:
    """The placement with `replicas` added (none of them there yet) or removed (all of them there), else None."""
    present = {(r["role"], int(r["index"])) for r in placement}
    named = {(r["role"], int(r["index"])) for r in replicas}
    if len(named) != len(replicas):
        return None
    if grow:
        return None if named & present else placement + [dict(r) for r in replicas]
    if not named <= present:
        return None
    return [r for r in placement if (r["role"], int(r["index"])) not in named]


def _within_bounds(placement: list[dict[str, Any]], groups: Mapping[str, ReplicaGroup]) -> bool:
    """Every group of the placement has min_replicas..replicas replicas (a rigid group exactly its replicas)."""
    counts: dict[str, int] = {}
    for r in placement:
        counts[r["role"]] = counts.get(r["role"], 0) + 1
    return all(role in groups and groups[role].needed <= n <= groups[role].replicas for role, n in counts.items()) \
        and all(g.role in counts for g in groups.values())


# ------------------------------------------------------------------------------------------------- repairs
# Used only by `manage.py check_consistency` on rows a committed transition never leaves behind.

def close_orphan_attempt(attempt: Attempt, *, ended_at: datetime, reason: str, actor: Any) -> str:
    """End `attempt`, left open although its job no longer holds it (`attempt.job` loaded), as of `ended_at`: its
    outcome follows the job's state (cancelled when the job is queued again), and, as when a transition ends an
    attempt, its usage segment closes and the backend deletes what is left of it after commit. Returns the outcome,
    or "" when the attempt had ended meanwhile."""
    job = attempt.job
    outcome = _OUTCOME_OF_TARGET.get(job.state, Outcome.CANCELLED)
    with transaction.atomic():
        if Attempt.objects.filter(pk=attempt.pk, ended_at__isnull=True).update(
                ended_at=ended_at, outcome=outcome, reason=reason[:1000]) != 1:
            return ""
        JobEvent.objects.create(job=job, attempt=attempt.number, created_at=timezone.now(), kind="note",
                                reason=reason[:1000], actor_name=actor_name(actor))
        _announce([Change(job.pk, job.project_id, job.state, job.state, ended_at, actor_name(actor), attempt.pk,
                          attempt.number, outcome)])
    return outcome


def repoint_current_attempt(job: Job, attempt: Attempt | None, *, reason: str, actor: Any) -> bool:
    """Make `attempt` (one of the job's own, or none) the job's current attempt, if the job still points where it
    was read pointing. Returns whether it changed."""
    if attempt is not None and attempt.job_id != job.pk:
        raise ValueError(f"attempt {attempt.pk} belongs to job {attempt.job_id}, not {job.pk}")
    with transaction.atomic():
        if Job.objects.filter(pk=job.pk, current_attempt=job.current_attempt_id).update(current_attempt=attempt) != 1:
            return False
        job.current_attempt = attempt
        JobEvent.objects.create(job=job, attempt=job.attempt, created_at=timezone.now(), kind="note",
                                reason=reason[:1000], actor_name=actor_name(actor))
    return True


# ----------------------------------------------------------------------------------------------- listeners

def _announce(changes: list[Change]) -> None:
    on_change.send(changes)
    transaction.on_commit(lambda: _committed(changes))


def _committed(changes: list[Change]) -> None:
    _side_effects(changes)
    after_commit.send(changes)


def _side_effects(changes: Sequence[Change]) -> None:
    """Dispatch what was admitted, stop what ended, and wake the scheduler when capacity frees or a job queues."""
    wake = False
    for change in changes:
        if change.attempt_id is not None:  # an admission opens an attempt, an outcome ends one: never None then
            if change.target == State.ADMITTED:
                ports.dispatch(change.attempt_id)
            if change.outcome:
                ports.stop(change.attempt_id, change.outcome)
        wake = wake or bool(change.outcome) or change.target == State.QUEUED
    if wake:
        wakeup.wake_scheduler()
