"""A replica's log, read from its attempt: live from the backend while the attempt holds its cluster, else the last
lines the attempt kept when it ended. Attempts are the job's current one by default, or any earlier one by number.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from django.conf import settings

from core import leases
from core.digits import is_digits
from core.errors import DomainError, NotFound, TooManyRequests
from core.leases import Lease
from jobs import ports, selectors
from jobs.models import Attempt, Job
from jobs.states import State

LIVE = (State.DISPATCHING, State.RUNNING)  # a workload exists: its replicas may have a log
STREAMS_KEY = "tidal:log-streams"  # + ":user:<id>" (shared by every process) or ":process" (this process's)
RESUME_PREFIX = "# tidal: log stream paused"  # the last line of a stream to resume; `tidal logs -f` reads it


def replicas_of(job: Job) -> list[str]:
    """Every replica's key, `<role>-<index>`, in group order."""
    return [f"{g.role}-{i}" for g in job.groups.all() for i in range(g.replicas)]


def _replica(job: Job, replica: str) -> tuple[str, str, int]:
    """(`<role>-<index>`, role, index) of a replica of the job (default: the first); DomainError names the valid
    ones."""
    valid = replicas_of(job)
    replica = replica or (valid[0] if valid else "")
    role, _, index_text = replica.rpartition("-")
    if replica not in valid or not is_digits(index_text):
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


@dataclass(frozen=True)
class Cursor:
    """Where a paused stream resumes: the attempt it followed and the backend's position in the replica's log
    (`ports.FollowedLog.position`), written `<attempt>:<position>`."""

    attempt: int
    position: str

    def __str__(self) -> str:
        return f"{self.attempt}:{self.position}"

    @classmethod
    def parse(cls, text: str) -> Cursor:
        number, colon, position = text.partition(":")
        if not colon or not is_digits(number) or not 1 <= int(number) <= 32767:
            raise DomainError("Not a cursor this server gave: resume with the cursor= of the stream's last line.",
                              field="cursor")
        return cls(int(number), position)


class LogStream:
    """A followed log as a text/plain body sends it: the replica's lines, then, when the stream paused before the
    replica ended (its time bound, a connection to the cluster that broke), a last line saying where to resume.

    The stream holds places among the caller's and the process's streams (`leases`): they are given back before that
    last line (a client resuming at once is not refused because of its own stream) and by `close()`, which the
    server calls when the response ends, also when the client went away before the first line; `close()` also ends
    the backend's stream (its connection to the pod's log)."""

    def __init__(self, lines: Iterator[str], *, resume: Callable[[], str] = str, leases: Sequence[Lease] = ()):
        self._lines = lines
        self._resume = resume
        self._leases = leases

    def __iter__(self) -> Iterator[str]:
        for line in self._lines:
            yield f"{line}\n"
        _release(self._leases)
        marker = self._resume()
        if marker:
            yield f"{marker}\n"

    def close(self) -> None:
        _release(self._leases)
        close = getattr(self._lines, "close", None)
        if close is not None:
            close()


def log_stream_leases(user: Any) -> list[Lease]:
    """A place among the caller's streams (TIDAL_LOG_STREAMS_PER_USER, counted across every process through Redis)
    and among this process's (TIDAL_LOG_STREAMS_PER_PROCESS, fewer than its threads: the others always answer
    requests); TooManyRequests with Retry-After when none is left."""
    tidal = settings.TIDAL
    hold = float(tidal["LOG_FOLLOW_MAX_SECONDS"])
    try:
        mine = leases.acquire(f"{STREAMS_KEY}:user:{user.pk}", tidal["LOG_STREAMS_PER_USER"], hold)
    except leases.Refused as refused:
        raise TooManyRequests(f"You already follow {tidal['LOG_STREAMS_PER_USER']} logs (TIDAL_LOG_STREAMS_PER_USER):"
                              f" stop one, or retry in {refused.retry_after:.0f} s.",
                              retry_after=refused.retry_after, code="too_many_streams") from None
    try:
        here = leases.acquire(f"{STREAMS_KEY}:process", tidal["LOG_STREAMS_PER_PROCESS"], hold, shared=False)
    except leases.Refused as refused:
        mine.release()
        raise TooManyRequests("This server process is streaming as many logs as it may; retry in a moment.",
                              retry_after=min(refused.retry_after, 5.0), code="streams_busy") from None
    return [mine, here]


def job_log_stream(job: Job, *, user: Any, replica: str = "", tail: int = 200, attempt: int | None = None,
                   cursor: str = "") -> LogStream:
    """A replica's log as a stream of lines: the tail (or, given a `cursor` from a paused stream, every line after
    it), then new lines while the attempt runs, ending when the replica's container ends or the attempt leaves its
    cluster, or pausing after TIDAL_LOG_FOLLOW_MAX_SECONDS: then its last line gives the cursor to resume with. A
    replica not running answers what `job_logs` would, its message as a `# ` line. The caller's place among the
    streams, validation and the backend's connection happen now, so refusals and errors are proper API errors and
    not a cut-off stream."""
    replica, role, index = _replica(job, replica)
    resume = Cursor.parse(cursor) if cursor else None
    chosen = _attempt(job, resume.attempt if resume else attempt)
    limit = float(settings.TIDAL["LOG_FOLLOW_MAX_SECONDS"])
    places = log_stream_leases(user)
    try:
        followed = _follow(job, chosen, role, index, tail, limit, resume)
    except BaseException:
        _release(places)
        raise
    if followed is not None and chosen is not None:  # (only a chosen attempt is followed)
        number = chosen.number
        return LogStream(iter(followed), resume=lambda: _resume_line(followed, number), leases=places)
    _release(places)
    return LogStream(iter(_not_followed(job, chosen, replica, tail, resume)))


def _release(places: Sequence[Lease]) -> None:
    for place in places:
        place.release()


def _follow(job: Job, chosen: Attempt | None, role: str, index: int, tail: int, limit: float,
            resume: Cursor | None) -> ports.FollowedLog | None:
    """The backend's stream of a replica of a live attempt; None when the attempt is not live or its log cannot be
    reached (the pod is gone, the cluster's API is down)."""
    if chosen is None or not _is_live(job, chosen):
        return None
    try:
        return ports.backend_for(chosen).follow(chosen, role, index, tail, limit,
                                                after=resume.position if resume else None)
    except ports.LogsUnavailable:
        return None


def _not_followed(job: Job, chosen: Attempt | None, replica: str, tail: int, resume: Cursor | None) -> list[str]:
    """What a stream says of a replica it cannot follow: what the tail would; resuming, only why (the lines the
    attempt kept when it ended would repeat what was sent), and where its kept lines are read."""
    number = chosen.number if chosen else None
    body = job_logs(job, replica=replica, tail=tail, attempt=number)
    message = [f"# {body['message']}"] if body["message"] else []
    if resume is None:
        return message + body["lines"]
    if body["source"] == "kept":
        message = [f"{message[0]}: tidal logs {job.pk} --replica {replica} --attempt {number}"]
    return message


def _resume_line(followed: ports.FollowedLog, attempt: int) -> str:
    """The last line of a stream that paused before the replica ended: why, and the cursor to resume with."""
    if not followed.paused:
        return ""
    return f"{RESUME_PREFIX} {followed.paused}; resume with cursor={Cursor(attempt, followed.position)}"
