"""A replica's log, read from its attempt: live from the backend while the attempt holds its cluster, else the last
lines the attempt kept when it ended. Attempts are the job's current one by default, or any earlier one by number.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

from django.conf import settings

from core.errors import DomainError, NotFound
from jobs import ports, selectors
from jobs.models import Attempt, Job
from jobs.states import State

LIVE = (State.DISPATCHING, State.RUNNING)  # a workload exists: its replicas may have a log


def replicas_of(job: Job) -> list[str]:
    """Every replica's key, `<role>-<index>`, in group order."""
    return [f"{g.role}-{i}" for g in job.groups.all() for i in range(g.replicas)]


def _replica(job: Job, replica: str) -> tuple[str, str, int]:
    """(`<role>-<index>`, role, index) of a replica of the job (default: the first); DomainError names the valid
    ones."""
    valid = replicas_of(job)
    replica = replica or (valid[0] if valid else "")
    role, _, index_text = replica.rpartition("-")
    if replica not in valid or not index_text.isdigit():
        raise DomainError(f"Unknown replica {replica!r}; this job has {', '.join(sorted(valid)[:20])}.",
                          field="replica")
    return replica, role, int(index_text)


def _attempt(job: Job, number: int | None) -> Attempt | None:
    """The attempt asked for, else the current one, else (a job queued again) the last one; with `job` as its job,
    which the caller loaded with what a backend reads."""
    if number is not None:
        attempt = selectors.attempt_of(job, number)
        if attempt is None:
            raise NotFound(f"Job {job.pk} has no attempt {number}.", code="not_found")
    else:
        attempt = job.current_attempt or job.attempts.order_by("-number").first()
    if attempt is not None:
        attempt.job = job
    return attempt


def _is_live(job: Job, attempt: Attempt) -> bool:
    return attempt.ended_at is None and attempt.pk == job.current_attempt_id and job.state in LIVE


def job_logs(job: Job, *, replica: str = "", tail: int = 200, attempt: int | None = None) -> dict[str, Any]:
    """The log tail of one replica (`<role>-<index>`) of an attempt: `source` says where it came from (pod or
    simulated: live; kept: stored when the attempt ended; none)."""
    replica, role, index = _replica(job, replica)
    chosen = _attempt(job, attempt)
    body: dict[str, Any] = {"job": job.pk, "attempt": chosen.number if chosen else None, "replica": replica,
                            "source": "none", "lines": [], "message": ""}
    if chosen is None:
        body["message"] = "no log yet: the job has not started an attempt"
        return body
    if _is_live(job, chosen):
        backend = ports.backend_for(chosen)
        try:
            body.update(source=backend.log_source, lines=backend.logs(chosen, role, index, tail))
            return body
        except ports.LogsUnavailable as exc:
            body["message"] = str(exc)
            return body
    if chosen.ended_at is None:
        body["message"] = f"attempt {chosen.number} is {job.state}: no replica runs yet"
        return body
    kept = chosen.logs.get(replica)
    ended = f"attempt {chosen.number} ended ({chosen.outcome})"
    if kept:
        body.update(source="kept", lines=list(kept)[-tail:], message=f"last lines kept when {ended}; its pods are gone")
    else:
        body["message"] = f"no log kept for {replica}: {ended}"
    return body


def job_log_stream(job: Job, *, replica: str = "", tail: int = 200, attempt: int | None = None,
                   max_seconds: float | None = None) -> Iterator[str]:
    """A replica's log as a stream of lines: the tail, then new lines while the attempt runs, ending when the
    replica's container ends, the attempt leaves its cluster, or after `max_seconds`
    (TIDAL_LOG_FOLLOW_MAX_SECONDS). A replica not running answers what `job_logs` would, its message as a `# `
    line. Validation and the backend's connection happen now, so errors are proper API errors and not a cut-off
    stream."""
    replica, role, index = _replica(job, replica)
    chosen = _attempt(job, attempt)
    limit = float(settings.TIDAL["LOG_FOLLOW_MAX_SECONDS"] if max_seconds is None else max_seconds)
    if chosen is not None and _is_live(job, chosen):
        try:
            return _noting_the_limit(ports.backend_for(chosen).follow(chosen, role, index, tail, limit), limit)
        except ports.LogsUnavailable:
            pass  # the pod is gone or the API is down: job_logs says so
    body = job_logs(job, replica=replica, tail=tail, attempt=attempt)
    return iter(([f"# {body['message']}"] if body["message"] else []) + body["lines"])


def _noting_the_limit(lines: Iterator[str], limit: float) -> Iterator[str]:
    """The lines, then a note when the stream was cut by the duration limit rather than by the replica ending."""
    started = time.monotonic()
    yield from lines
    if time.monotonic() - started >= limit:
        yield f"# log stream stopped after {limit:.0f} s (TIDAL_LOG_FOLLOW_MAX_SECONDS); reconnect to continue"
