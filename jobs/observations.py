"""The one function that turns what a backend observed of an attempt into job state.

Backends only report (`jobs.ports.Observation`): the Kubernetes backend from pods, nodes and logs, the simulated one
from its clock and injected failures. The rules that follow from a report live here, once, for every backend.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from core.errors import InvalidTransition
from core.hooks import Hook
from jobs import failures, ports
from jobs.lifecycle import AttemptEnd, resize, transition
from jobs.models import Attempt, AttemptResize, Job, Outcome, ReplicaGroup
from jobs.ports import Observation, Phase
from jobs.states import HOLDING, State

ACTOR = "backend"


@dataclass(frozen=True)
class Verdict:
    """What the failure diagnosis concluded of a failing attempt before it ends: the cause (one of
    `jobs.failures.CAUSES`), the reason in its words, and the nodes a retry must avoid (names in the attempt's
    cluster)."""

    cause: str
    reason: str = ""
    avoid_nodes: tuple[str, ...] = ()


# diagnose(attempt, cause, reason, seen) -> Verdict | None: refines the backend's cause from all the evidence
# (connected by `reliability`); without it the backend's cause stands.
Diagnoser = Callable[[Attempt, str, str, Observation], "Verdict | None"]
failure_diagnosis: Hook[Diagnoser] = Hook("jobs.observations.failure_diagnosis", single=True)


def record_observation(attempt: Attempt, seen: Observation, *, now: datetime | None = None) -> str:
    """Apply what a backend saw of `attempt` (loaded with its job and cluster) to the job:

    1. only the job's current, open attempt counts: a late report of an earlier attempt changes nothing;
    2. a node under the attempt went away or is not ready, and the attempt did not succeed: the attempt is lost
       (cause node_lost, retried away from those nodes), whatever else was seen first: pods garbage-collected
       with their node are a lost node, not an unknown failure. Unless the job is elastic, running on a cluster
       whose backend resizes, and every replica on those nodes is a grown one (index >= its group's min): then
       the attempt shrinks off them and goes on (`_shrink_off`);
    3. a failed replica: the attempt fails, and is retried or not by the cause and the job's permanent exit codes;
    4. a vanished workload: the attempt fails as unknown (retried);
    5. still running past the job's max runtime: the attempt fails, not retried;
    6. every replica running: the job runs; succeeded: the job succeeded.

    Returns the job's new state, or "" when nothing changed (also when another writer moved the job first).
    """
    job = attempt.job
    if attempt.ended_at is not None or job.current_attempt_id != attempt.pk or job.state not in (
            State.DISPATCHING, State.RUNNING):
        return ""
    now = now or timezone.now()
    try:
        if seen.lost_nodes and seen.phase != Phase.SUCCEEDED:
            nodes = ", ".join(seen.lost_nodes)
            if _shrink_off(attempt, seen.lost_nodes, f"node {nodes} went away or became NotReady", now):
                return State.RUNNING
            return _fail(attempt, cause=failures.NODE_LOST, reason=f"node {nodes} went away or became NotReady",
                         seen=seen, now=now)
        if seen.phase == Phase.FAILED:
            return _fail(attempt, cause=seen.cause or failures.UNKNOWN, reason=seen.message, seen=seen, now=now)
        if seen.phase == Phase.VANISHED:
            return _fail(attempt, cause=failures.UNKNOWN, reason=seen.message, seen=seen, now=now)
        if _past_max_runtime(job, attempt, now):
            return _fail(attempt, cause="max_runtime", reason=f"ran past its max runtime of {job.max_runtime}s",
                         seen=seen, now=now)
        if seen.phase == Phase.RUNNING and job.state == State.DISPATCHING:
            transition(job, State.RUNNING, reason=seen.message or "all replicas running", actor=ACTOR, now=now)
            return State.RUNNING
        if seen.phase == Phase.SUCCEEDED:
            transition(job, State.SUCCEEDED, reason=seen.message or "completed", actor=ACTOR, now=now,
                       end=AttemptEnd(details=seen.details, logs=seen.logs))
            return State.SUCCEEDED
    except InvalidTransition:  # cancelled or preempted between the backend's read and this write
        return ""
    return ""


def _shrink_off(attempt: Attempt, lost: Iterable[str], reason: str, now: datetime) -> bool:
    """Shrink an elastic job's running attempt off the lost nodes, when every replica there is a grown one (the job
    keeps at least its minimum: the core's base replicas are the indexes below it) and its cluster's backend
    resizes. Whether it did."""
    job = attempt.job
    if job.state != State.RUNNING or attempt.cluster is None:
        return False
    minimum = {g.role: g.min_replicas for g in ReplicaGroup.objects.filter(job=job) if g.min_replicas is not None}
    gone = [r for r in attempt.placement if r["node"] in set(lost)]
    if not gone or not minimum or any(int(r["index"]) < minimum.get(r["role"], 1 << 30) for r in gone):
        return False
    if job.launcher not in ports.inventory().resizable.get(attempt.cluster.name, ()):
        return False
    done = resize(job.pk, attempt_id=attempt.pk, version=attempt.resize_count, kind=AttemptResize.Kind.SHRINK,
                  replicas=gone, reason=reason, now=now, actor=ACTOR)
    return done is not None


def record_gone_placement(attempt: Attempt, nodes: Iterable[str], *, reason: str,
                          now: datetime | None = None) -> str:
    """`attempt` (loaded with its job and cluster) holds nodes that no longer exist: its cluster or nodes were
    deleted, so no backend will ever report on it. The attempt is lost as if the nodes had gone away (rule 2: retried
    away from them within the job's retry limit), whatever state its job is in while holding it. Returns the job's
    new state, or "" when it is no longer the job's current, open attempt."""
    job = attempt.job
    if attempt.ended_at is not None or job.current_attempt_id != attempt.pk or job.state not in HOLDING:
        return ""
    seen = Observation(attempt.pk, Phase.VANISHED, message=reason, lost_nodes=tuple(nodes))
    try:
        return _fail(attempt, cause=failures.NODE_LOST, reason=reason, seen=seen, now=now or timezone.now())
    except InvalidTransition:
        return ""


def record_all(attempts: Iterable[Attempt], observations: Iterable[Observation]) -> list[str]:
    """Record each observation of these attempts in its own transaction: one job moved by another writer meanwhile
    does not undo the others. Returns the new states (\"\" where nothing changed)."""
    by_id = {attempt.pk: attempt for attempt in attempts}
    states = []
    for seen in observations:
        attempt = by_id.get(seen.attempt_id)
        if attempt is not None:
            with transaction.atomic():
                states.append(record_observation(attempt, seen))
    return states


def _past_max_runtime(job: Job, attempt: Attempt, now: datetime) -> bool:
    return bool(job.max_runtime and attempt.started_at
                and now - attempt.started_at >= timedelta(seconds=job.max_runtime))


def failed_attempts(job: Job) -> int:
    """Attempts of the job that failed or were lost and used one of its retries (preemptions are not failures, and
    infrastructure failures are the platform's: neither uses a retry)."""
    return (job.attempts.filter(outcome__in=[Outcome.FAILED, Outcome.LOST])
            .exclude(cause__in=failures.NOT_COUNTED).count())


def infrastructure_failures(job: Job) -> int:
    """Attempts of the job that failed or were lost to the infrastructure (retried without using its retries)."""
    return job.attempts.filter(outcome__in=[Outcome.FAILED, Outcome.LOST], cause__in=failures.NOT_COUNTED).count()


def record_hang(attempt: Attempt, *, reason: str, now: datetime | None = None) -> str:
    """End `attempt` (loaded with its job and cluster), whose run stopped progressing, as a hang: retried from its
    checkpoint as every infrastructure failure is. Returns the job's new state, or "" when it is no longer the
    job's current, running attempt (or another writer moved it first)."""
    job = attempt.job
    if attempt.ended_at is not None or job.current_attempt_id != attempt.pk or job.state != State.RUNNING:
        return ""
    seen = Observation(attempt.pk, Phase.FAILED, message=reason, cause="hang")
    try:
        return _fail(attempt, cause="hang", reason=reason, seen=seen, now=now or timezone.now())
    except InvalidTransition:
        return ""


def _diagnosed(attempt: Attempt, cause: str, reason: str, seen: Observation) -> Verdict:
    for diagnose in failure_diagnosis:
        verdict = diagnose(attempt, cause, reason, seen)
        if verdict is not None and verdict.cause in failures.BY_NAME:
            return verdict
    return Verdict(cause, reason)


def _fail(attempt: Attempt, *, cause: str, reason: str, seen: Observation, now: datetime) -> str:
    """End a failed attempt: retry the whole gang from its checkpoint with exponential backoff, avoiding lost nodes
    and those the diagnosis names, or fail the job for good. The cause is the diagnosis' (when one is connected),
    and decides whether the retry uses one of the job's retries (`jobs.failures.decide_retry`)."""
    job = attempt.job
    verdict = _diagnosed(attempt, cause, reason, seen)
    cause, reason = verdict.cause, verdict.reason or reason
    lost = cause == failures.NODE_LOST or bool(seen.lost_nodes)
    end = AttemptEnd(reason=reason, cause=cause, lost=lost, exit_code=seen.exit_code, logs=seen.logs,
                     details={**seen.details, **({"lost_nodes": list(seen.lost_nodes)} if seen.lost_nodes else {})})
    details = {"cause": cause, "attempt": attempt.number}
    retries_used = failed_attempts(job)
    decision = failures.decide_retry(
        cause, exit_code=seen.exit_code, permanent_exit_codes=job.permanent_exit_codes, retries_used=retries_used,
        retry_limit=job.retry_limit, infra_retries_used=infrastructure_failures(job),
        infra_retry_limit=settings.TIDAL["INFRA_RETRY_LIMIT"])
    if decision.retry:
        backoff = job.retry_backoff * (2 ** retries_used) if decision.counted else job.retry_backoff
        cluster = attempt.cluster.name if attempt.cluster else ""
        avoid = sorted(set(job.avoid_nodes) | {f"{cluster}/{node}" for node in (*seen.lost_nodes,
                                                                                   *verdict.avoid_nodes)})
        which = (f"retry {retries_used + 1}/{job.retry_limit}" if decision.counted
                 else "retry not counted against the job's retry limit (infrastructure)")
        details["counted"] = decision.counted
        transition(job, State.RETRYING, reason=f"attempt {attempt.number} failed ({cause}): {reason}; {which} in "
                   f"{backoff}s", actor=ACTOR, now=now, details=details, end=end,
                   retry_at=now + timedelta(seconds=backoff), avoid_nodes=avoid)
        return State.RETRYING
    transition(job, State.FAILED, reason=f"{cause}: {reason} ({decision.why})", actor=ACTOR, now=now,
               details=details, end=end)
    return State.FAILED
