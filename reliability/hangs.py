"""Hang detection from the run's own progress, long before NCCL's watchdog (600 s by default).

A running attempt whose run logged no new step for more than max(TIDAL_HANG_STEP_FACTOR x its recent step time,
TIDAL_HANG_MIN_SECONDS) is hung: the check (Celery beat, or the embedded loop, every TIDAL_HANG_CHECK_INTERVAL)
records it on the attempt's progress and the job's events, and where the project (`ProjectPolicy`) or the job
(label `reliability.tidal.dev/restart-on-hang: "true"`) opts in, ends the attempt as a hang, retried from its last
checkpoint like every infrastructure failure. A run that never logged a step is not judged (a job that does not
use tracking is not hung).

The recent step time comes from what the check saw between two of its passes: (time of the newest step - time of
the step seen last) / steps between them, smoothed; until then, the time from the attempt's start to the first step
seen stands in for it. The detection comes at most one check interval after the bound is crossed.
"""

from __future__ import annotations

import logging
from datetime import datetime

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from jobs.observations import record_hang
from jobs.selectors import attempt_with_job
from jobs.services import record_event
from jobs.states import State
from reliability.models import Progress, ProjectPolicy
from tracking.models import Run

logger = logging.getLogger(__name__)

RESTART_LABEL = "reliability.tidal.dev/restart-on-hang"
ACTOR = "tidal-reliability"
_SMOOTHING = 0.5  # weight of the newest step time


def bound_seconds(step_seconds: float | None) -> float:
    """How long a run may go without a new step before it is hung."""
    factor, minimum = settings.TIDAL["HANG_STEP_FACTOR"], settings.TIDAL["HANG_MIN_SECONDS"]
    return max(factor * (step_seconds or 0.0), minimum)


def check_hangs(now: datetime | None = None) -> int:
    """One pass over the running jobs' runs. Returns the hangs found."""
    now = now or timezone.now()
    rows = list(Run.objects.filter(job__state=State.RUNNING, job__current_attempt__started_at__isnull=False)
                .values_list("job__current_attempt_id", "last_step", "last_step_at",
                             "job__current_attempt__started_at", "job__labels", "project_id"))
    if not rows:
        return 0
    known = {p.attempt_id: p for p in Progress.objects.filter(attempt_id__in=[r[0] for r in rows])}
    opted = set(ProjectPolicy.objects.filter(restart_on_hang=True, project_id__in={r[5] for r in rows})
                .values_list("project_id", flat=True))
    found = 0
    for attempt_id, last_step, last_step_at, started_at, labels, project_id in rows:
        progress = known.get(attempt_id) or Progress(attempt_id=attempt_id)
        # Written only when it changed (a new step, a hang): most passes over a healthy fleet write nothing.
        changed = _advance(progress, last_step, last_step_at) or progress.pk is None
        if progress.last_step_at is None:
            if changed:
                progress.save()
            continue
        since = max(progress.last_step_at, started_at)
        idle = (now - since).total_seconds()
        # Until two steps were seen the step time is not known: the time the attempt took to its first step seen
        # (start-up included, so too long rather than too short) stands in, or a run of slow steps would be hung
        # between its first two.
        step = progress.step_seconds if progress.step_seconds is not None else max(
            0.0, (progress.last_step_at - started_at).total_seconds())
        bound = bound_seconds(step)
        if idle > bound and progress.hang_detected_at is None:
            found += 1
            restart = project_id in opted or str((labels or {}).get(RESTART_LABEL, "")).lower() == "true"
            _hung(progress, since, idle, bound, now, restart)
        elif changed:
            progress.save()
    return found


def _advance(progress: Progress, last_step: int | None, last_step_at: datetime | None) -> bool:
    """Take the run's newest step: learn the step time from the steps since the last pass, and clear a hang.
    Returns whether there was a new step."""
    if last_step is None or last_step_at is None:
        return False
    if progress.last_step is not None and last_step <= progress.last_step:
        return False
    # Steps across a hang say nothing of the step time: they would raise the bound of the next hang.
    if (progress.last_step is not None and progress.last_step_at is not None
            and last_step_at > progress.last_step_at and progress.hang_detected_at is None):
        per_step = (last_step_at - progress.last_step_at).total_seconds() / (last_step - progress.last_step)
        progress.step_seconds = per_step if progress.step_seconds is None else (
            _SMOOTHING * per_step + (1 - _SMOOTHING) * progress.step_seconds)
    progress.last_step, progress.last_step_at = last_step, last_step_at
    if progress.hang_detected_at is not None:  # it moves again
        progress.hang_since = progress.hang_detected_at = None
        progress.hang_message = ""
    return True


def _hung(progress: Progress, since: datetime, idle: float, bound: float, now: datetime, restart: bool) -> None:
    step = f"{progress.step_seconds:.1f} s" if progress.step_seconds else "not known yet"
    message = (f"no new step for {idle:.0f} s after step {progress.last_step} (recent step time {step}; "
               f"bound {bound:.0f} s)")
    with transaction.atomic():
        progress.hang_since, progress.hang_detected_at, progress.hang_message = since, now, message[:300]
        progress.save()
        attempt = attempt_with_job(progress.attempt_id)
        if attempt is None or attempt.ended_at is not None:
            return
        what = "restarting from the last checkpoint" if restart else (
            "not restarted (opt in per project or with the job label " f"{RESTART_LABEL})")
        record_event(attempt.job, kind="hang", actor=ACTOR, attempt=attempt.number, now=now,
                     reason=f"Hang suspected: {message}; {what}.",
                     details={"idle_seconds": round(idle), "bound_seconds": round(bound),
                              "last_step": progress.last_step})
        if restart:
            record_hang(attempt, reason=f"hang: {message}", now=now)
    logger.warning("attempt %s hung: %s", progress.attempt_id, message)
