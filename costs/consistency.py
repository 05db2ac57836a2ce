"""Rules usage segments keep with their attempts (see `core.consistency`): every attempt that ran has one segment,
billed as `costs.metering.segments.billed_interval` says (from its start, open while the attempt is, closed at its
end with its grace), with the devices the attempt placed; an attempt that never ran has none. A rolled segment is
history (its days are priced and never change), so it is reported, never repaired."""

from __future__ import annotations

from collections.abc import Iterator
from functools import partial

from django.db.models import F, Q
from django.utils import timezone

from core.consistency import Check, Problem
from costs.metering.segments import billed_interval, cluster_grace, epoch, restore_segment
from costs.models import UsageSegment
from jobs.models import Attempt, Outcome
from jobs.states import HOLDING

RAN = Q(started_at__isnull=False) | Q(outcome=Outcome.SUCCEEDED)

ROLLED = "its days are already rolled and priced: correct it by hand if it matters"


def attempt_without_segment() -> Iterator[Problem]:
    """An attempt that ran without a segment (it ran before costs were metered, or its segment was deleted): its
    segment is written from the attempt."""
    for attempt in Attempt.objects.filter(RAN, segment__isnull=True).select_related("job__project", "cluster"):
        yield Problem("costs.attempt_without_segment",
                      f"attempt {attempt.number} of job {attempt.job_id} has no usage segment", attempt,
                      attempt.job.project, fix=partial(_restore, attempt))


def _restore(attempt: Attempt) -> str:
    if UsageSegment.objects.filter(attempt=attempt).exists():
        return "written meanwhile; left alone"
    restore_segment(attempt)
    return "segment written from the attempt"


def segment_open_after_attempt() -> Iterator[Problem]:
    """A segment still open (costed up to now) although its attempt ended: closed at the attempt's end (and its
    grace)."""
    segments = (UsageSegment.objects.filter(end_ts__isnull=True, attempt__ended_at__isnull=False)
                .select_related("attempt__cluster", "project"))
    for segment in segments:
        attempt = segment.attempt
        interval = billed_interval(attempt, cluster_grace(attempt))
        if interval is None:  # it never ran: segment_of_attempt_that_never_ran deletes the segment
            continue
        end = max(segment.start_ts, interval[1])
        yield Problem("costs.segment_open_after_attempt",
                      f"segment {segment.pk} of job {segment.job_id} attempt {attempt.number} is open but the "
                      f"attempt ended at {attempt.ended_at.isoformat()}", segment, segment.project,
                      fix=partial(_close, segment, end, attempt.outcome))


def segment_of_attempt_that_never_ran() -> Iterator[Problem]:
    """A segment of an attempt whose gang never ran (written at its admission, as segments were before they
    followed the start): such an attempt is not billed, so its segment is deleted, unless rolled."""
    segments = (UsageSegment.objects.filter(attempt__isnull=False).exclude(attempt__in=Attempt.objects.filter(RAN))
                .select_related("attempt", "project"))
    for segment in segments:
        yield Problem("costs.segment_of_attempt_that_never_ran",
                      f"segment {segment.pk} of job {segment.job_id} attempt {segment.attempt.number} bills an "
                      f"attempt that never ran{'; ' + ROLLED if segment.rolled else ''}", segment, segment.project,
                      fix=None if segment.rolled else partial(_delete, segment))


def _delete(segment: UsageSegment) -> str:
    deleted, _ = UsageSegment.objects.filter(pk=segment.pk, rolled=False).delete()
    return "deleted" if deleted else "rolled meanwhile; left alone"


def open_segment_without_attempt() -> Iterator[Problem]:
    """A segment still open whose attempt was deleted (with its job): it would be costed up to now forever. Closed
    now, the latest moment it can have held anything."""
    for segment in UsageSegment.objects.filter(end_ts__isnull=True, attempt__isnull=True).select_related("project"):
        yield Problem("costs.open_segment_without_attempt",
                      f"segment {segment.pk} (job {segment.job_id}, attempt {segment.attempt_number}) is open but "
                      "its attempt no longer exists", segment, segment.project,
                      fix=partial(_close_now, segment))


def _close_now(segment: UsageSegment) -> str:
    return _close(segment, epoch(timezone.now()), segment.outcome)


def _close(segment: UsageSegment, end_ts: int, outcome: str) -> str:
    closed = UsageSegment.objects.filter(pk=segment.pk, end_ts__isnull=True).update(end_ts=end_ts, outcome=outcome)
    return f"closed at {end_ts}" if closed else "closed meanwhile; left alone"


def segment_closed_while_attempt_open() -> Iterator[Problem]:
    """A closed segment whose attempt is open and its job's current, holding one (any other open attempt is closed
    by the jobs checks instead): opened again, unless already rolled."""
    segments = (UsageSegment.objects.filter(end_ts__isnull=False, attempt__ended_at__isnull=True,
                                            attempt__job__state__in=HOLDING,
                                            attempt__job__current_attempt=F("attempt"))
                .select_related("attempt", "project"))
    for segment in segments:
        yield Problem("costs.segment_closed_while_attempt_open",
                      f"segment {segment.pk} of job {segment.job_id} attempt {segment.attempt.number} is closed but "
                      f"the attempt is open{'; ' + ROLLED if segment.rolled else ''}", segment, segment.project,
                      fix=None if segment.rolled else partial(_reopen, segment))


def _reopen(segment: UsageSegment) -> str:
    opened = UsageSegment.objects.filter(pk=segment.pk, rolled=False, end_ts__isnull=False).update(end_ts=None,
                                                                                                   outcome="")
    return "opened again" if opened else "rolled or opened meanwhile; left alone"


def segment_devices_differ() -> Iterator[Problem]:
    """A segment whose devices are not the sum of its attempt's placement: set to the placement, unless rolled."""
    segments = UsageSegment.objects.filter(attempt__isnull=False).select_related("attempt", "project")
    for segment in segments.iterator(chunk_size=2000):
        placed = segment.attempt.devices
        if segment.devices != placed:
            yield Problem("costs.segment_devices_differ",
                          f"segment {segment.pk} of job {segment.job_id} counts {segment.devices} devices, its "
                          f"attempt placed {placed}{'; ' + ROLLED if segment.rolled else ''}", segment,
                          segment.project,
                          fix=None if segment.rolled else partial(_set_devices, segment, placed))


def _set_devices(segment: UsageSegment, devices: int) -> str:
    changed = UsageSegment.objects.filter(pk=segment.pk, rolled=False).update(devices=devices)
    return f"devices set to {devices}" if changed else "rolled meanwhile; left alone"


CHECKS: list[Check] = [attempt_without_segment, segment_open_after_attempt, segment_of_attempt_that_never_ran,
                       open_segment_without_attempt, segment_closed_while_attempt_open, segment_devices_differ]
