"""Usage segments follow the job state machine: inside the transaction of every transition, an admission opens one
segment per admitted attempt and the end of an attempt closes its segment, each in one statement."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from datetime import datetime

from django.db import connection

from costs.models import UsageSegment
from jobs import lifecycle
from jobs.models import Attempt, Job, ReplicaGroup
from jobs.states import State
from tenancy.models import Project


def epoch(at: datetime) -> int:
    return int(at.timestamp())


def _open_sql(count: int) -> str:
    """One INSERT ... SELECT: the attempt, its job, the job's project and its groups' CPU, copied in the database."""
    segment, attempt, job, project, group = (model._meta.db_table for model in
                                             (UsageSegment, Attempt, Job, Project, ReplicaGroup))
    marks = ", ".join(["%s"] * count)
    return (
        f'INSERT INTO {segment} (attempt_id, attempt_number, job_id, organization_id, project_id, user_id, '  # noqa: S608
        f'cluster_id, flavor_id, priority_class_id, stage, experiment, devices, cpu_millis, borrowed, start_ts, '
        f'outcome, rolled) '
        f'SELECT a.id, a.number, j.id, p.organization_id, j.project_id, j.submitter_id, a.cluster_id, j.flavor_id, '
        f'j.priority_class_id, j.stage, j.experiment, j.total_devices, '
        f'(SELECT COALESCE(SUM(g.replicas * g.cpu_millis), 0) FROM {group} g WHERE g.job_id = j.id), '
        f"a.borrowed, %s, '', %s "
        f'FROM {attempt} a JOIN {job} j ON j.id = a.job_id JOIN {project} p ON p.id = j.project_id '
        f'WHERE a.id IN ({marks})')


@lifecycle.on_change
def follow_attempts(changes: Sequence[lifecycle.Change]) -> None:
    admitted = [c.attempt_id for c in changes if c.target == State.ADMITTED and c.attempt_id is not None]
    if admitted:
        with connection.cursor() as cursor:
            cursor.execute(_open_sql(len(admitted)), [epoch(changes[0].at), False, *admitted])
    ended: dict[tuple[str, int], list[int]] = defaultdict(list)
    for change in changes:
        if change.outcome and change.attempt_id is not None:
            ended[change.outcome, epoch(change.at)].append(change.attempt_id)
    for (outcome, at), attempts in ended.items():  # one group: only single transitions end attempts
        UsageSegment.objects.filter(attempt_id__in=attempts, end_ts__isnull=True).update(end_ts=at, outcome=outcome)


def restore_segment(attempt: Attempt) -> None:
    """Write the segment an attempt should have had from its admission (and its end, if it ended): a repair of
    `manage.py check_consistency` for attempts admitted before costs were metered or by a transaction that lost it."""
    with connection.cursor() as cursor:
        cursor.execute(_open_sql(1), [epoch(attempt.admitted_at), False, attempt.pk])
    if attempt.ended_at is not None:
        UsageSegment.objects.filter(attempt=attempt).update(end_ts=epoch(attempt.ended_at), outcome=attempt.outcome)
