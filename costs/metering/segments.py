"""Usage segments follow the job state machine: inside the transaction of every transition, the start of an attempt
opens its segment and the end of an attempt closes it, each in one statement.

What is billed is the time an attempt's pods held their devices with the whole gang there:

- from the attempt's start (every replica running: the `running` transition), not its admission: a gang that never
  started (unschedulable, image never pulled, pending timeout, preempted or cancelled while starting) is not billed.
  An attempt seen only once it had succeeded (it ran between two observations) is billed from its admission, the
  latest moment it can have started that is known;
- until its pods are really gone: an attempt that ended with its pods asked to stop (preempted, cancelled, failed,
  lost) is billed its grace too, the cluster's termination grace period during which they may still run and hold
  their devices (Kubernetes clusters; a simulated cluster's pods stop at once). One that succeeded has none: its
  pods had exited.

Devices on capacity a pool lent (`Attempt.tidal_devices`: its placement rows naming a pool) are copied too: they are
priced at the tidal rate. An elastic job's attempt is billed at the devices it holds at each moment: a resize
(`lifecycle.on_resize`) closes its open segment at the resize (outcome "resized") and opens one at the new device
count. The attempt points to its current segment only (`UsageSegment.attempt` is one-to-one): the closed pieces keep
their job and attempt number, so an attempt's usage is every segment of (job, attempt_number)."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from datetime import datetime

from django.db import connection
from django.db.models import OuterRef, Subquery, Value
from django.db.models.functions import Coalesce

from clusters.models import Cluster
from costs.models import UsageSegment
from jobs import lifecycle
from jobs.models import Attempt, Job, Outcome, ReplicaGroup
from jobs.states import State
from tenancy.models import Project
from tracking.services import DEFAULT_EXPERIMENT


def epoch(at: datetime) -> int:
    return int(at.timestamp())


def _open_sql(count: int) -> str:
    """One INSERT ... SELECT: the attempt, its job (its labels too), the job's project and its groups' CPU and memory,
    copied in the database (a
    job naming no experiment is in tracking's default one, as its run is). An
    attempt that has a segment already keeps it (one opened at its admission, as segments were before they followed
    the start)."""
    segment, attempt, job, project, group = (model._meta.db_table for model in
                                             (UsageSegment, Attempt, Job, Project, ReplicaGroup))
    marks = ", ".join(["%s"] * count)
    return (
        f'INSERT INTO {segment} (attempt_id, attempt_number, job_id, organization_id, project_id, user_id, '  # noqa: S608
        f'cluster_id, flavor_id, priority_class_id, stage, experiment, devices, cpu_millis, memory_mib, labels, '
        f'borrowed, tidal_devices, start_ts, '
        f'outcome, rolled) '
        f'SELECT a.id, a.number, j.id, p.organization_id, j.project_id, j.submitter_id, a.cluster_id, j.flavor_id, '
        f"j.priority_class_id, j.stage, COALESCE(NULLIF(j.experiment, ''), %s), j.total_devices, "
        f'(SELECT COALESCE(SUM(COALESCE(g.min_replicas, g.replicas) * g.cpu_millis), 0) FROM {group} g '
        f'WHERE g.job_id = j.id), '
        f'(SELECT COALESCE(SUM(COALESCE(g.min_replicas, g.replicas) * g.memory_mib), 0) FROM {group} g '
        f'WHERE g.job_id = j.id), j.labels, '
        f"a.borrowed, a.tidal_devices, %s, '', %s "
        f'FROM {attempt} a JOIN {job} j ON j.id = a.job_id JOIN {project} p ON p.id = j.project_id '
        f'WHERE a.id IN ({marks}) AND NOT EXISTS (SELECT 1 FROM {segment} s WHERE s.attempt_id = a.id)')


def _open(attempt_ids: Sequence[int], start: int) -> None:
    with connection.cursor() as cursor:
        cursor.execute(_open_sql(len(attempt_ids)), [DEFAULT_EXPERIMENT, start, False, *attempt_ids])


def grace_seconds() -> Coalesce:
    """The grace of a segment's attempt, as an expression on the segment: its cluster's termination grace period
    on Kubernetes, none on a simulated cluster (or a cluster since deleted)."""
    grace = Cluster.objects.filter(pk=OuterRef("cluster_id"), backend=Cluster.Backend.KUBERNETES)
    return Coalesce(Subquery(grace.values("termination_grace_seconds")[:1]), Value(0))


def _close(attempt_ids: Sequence[int], outcome: str, at: int) -> None:
    """Close the open segments of these ended attempts, exactly once: a late second writer changes nothing."""
    end = Value(at) if outcome == Outcome.SUCCEEDED else Value(at) + grace_seconds()
    UsageSegment.objects.filter(attempt_id__in=attempt_ids, end_ts__isnull=True).update(end_ts=end, outcome=outcome)


# Connected to jobs.lifecycle.on_change in CostsConfig.ready().
def follow_attempts(changes: Sequence[lifecycle.Change]) -> None:
    started = [c.attempt_id for c in changes if c.target == State.RUNNING and c.attempt_id is not None]
    if started:
        _open(started, epoch(changes[0].at))
    ended: dict[tuple[str, int], list[int]] = defaultdict(list)
    for change in changes:
        if change.outcome and change.attempt_id is not None:
            if change.outcome == Outcome.SUCCEEDED and change.source != State.RUNNING:
                _open_unseen_run(change.attempt_id)
            ended[change.outcome, epoch(change.at)].append(change.attempt_id)
    for (outcome, at), attempts in ended.items():  # one group: only single transitions end attempts
        _close(attempts, outcome, at)


RESIZED = "resized"  # the outcome of a segment an elastic attempt's resize closed (the attempt went on)


# Connected to jobs.lifecycle.on_resize in CostsConfig.ready().
def follow_resizes(resized: lifecycle.Resized) -> None:
    """Close the attempt's open segment at the resize and open the next at the new device count, CPU and memory (its
    labels as they were), both in the resize's transaction. An attempt with no open segment (not started yet) has
    nothing to split: its segment opens at its start."""
    at = epoch(resized.at)
    current = UsageSegment.objects.filter(attempt_id=resized.attempt_id, end_ts__isnull=True).first()
    if current is None:
        return
    # The closed piece lets go of the attempt first: one segment per attempt points to it (the open one).
    UsageSegment.objects.filter(pk=current.pk, end_ts__isnull=True).update(
        end_ts=max(at, current.start_ts), outcome=RESIZED, attempt=None)
    current.pk = None
    current.devices, current.cpu_millis, current.memory_mib = resized.new_devices, resized.new_cpu_millis, \
        resized.new_memory_mib
    current.tidal_devices = resized.new_tidal_devices
    current.start_ts = max(at, current.start_ts)
    current.end_ts, current.outcome, current.rolled = None, "", False
    current.save(force_insert=True)


def _open_unseen_run(attempt_id: int) -> None:
    """An attempt that succeeded before it was seen running: billed from its admission."""
    admitted = Attempt.objects.filter(pk=attempt_id, segment__isnull=True).values_list("admitted_at", flat=True)
    for at in admitted:
        _open([attempt_id], epoch(at))


def ran(attempt: Attempt) -> bool:
    """Whether the attempt's gang ran: it started (every replica running), or it succeeded."""
    return attempt.started_at is not None or attempt.outcome == Outcome.SUCCEEDED


def billed_interval(attempt: Attempt, grace: int) -> tuple[int, int | None] | None:
    """[start, end) of the segment `attempt` should have (end None while it is open; `grace` its cluster's, see
    `grace_seconds`), or None when it is not billed: its gang never ran. The rule the listener above follows, for
    the consistency checks and the repair that writes a missing segment."""
    if not ran(attempt):
        return None
    start = epoch(attempt.started_at or attempt.admitted_at)
    if attempt.ended_at is None:
        return start, None
    return start, epoch(attempt.ended_at) + (0 if attempt.outcome == Outcome.SUCCEEDED else grace)


def cluster_grace(attempt: Attempt) -> int:
    """The grace `grace_seconds` gives `attempt`'s segment, read for one attempt (`attempt.cluster` loaded)."""
    cluster = attempt.cluster
    return cluster.termination_grace_seconds if cluster is not None and cluster.is_kubernetes else 0


def restore_segment(attempt: Attempt) -> None:
    """Write the segment an attempt that ran should have had (see `billed_interval`): a repair of `manage.py
    check_consistency` for attempts that started before costs were metered or by a transaction that lost it."""
    interval = billed_interval(attempt, cluster_grace(attempt))
    if interval is None:
        return
    _open([attempt.pk], interval[0])
    if interval[1] is not None:
        UsageSegment.objects.filter(attempt=attempt).update(end_ts=interval[1], outcome=attempt.outcome)
