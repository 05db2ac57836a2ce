"""Export the platform's own job history as a replay trace.

The Django side selects finished jobs in a date range and hands plain records here (no ORM in this package).
Submit times are rebased so the trace starts at 0; with `anonymize` project and user names become keyed hashes
(stable within one export salt, so the same project keeps one name across the trace).
"""

from __future__ import annotations

import hashlib
import hmac
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from core.streams import TextSink
from replay.trace import PRIORITY_CLASSES, TraceJob, write_trace


@dataclass(frozen=True)
class JobRecord:
    """One job of the platform's history. Times are datetimes or epoch seconds."""

    submit: datetime | float
    start: datetime | float | None
    end: datetime | float | None
    devices: int  # per replica
    flavor: str
    project: str
    priority: str = "normal"
    user: str = ""
    replicas: int = 1
    job_id: str = ""
    max_runtime: float | None = None


def _secs(t: datetime | float) -> float:
    return t.timestamp() if isinstance(t, datetime) else float(t)


def anonymize_name(name: str, salt: str, prefix: str) -> str:
    if not name:
        return ""
    digest = hmac.new(salt.encode(), name.encode(), hashlib.sha256).hexdigest()
    return f"{prefix}-{digest[:10]}"


def export_trace(
    records: Iterable[JobRecord | Mapping[str, Any]],
    dest: str | Path | TextSink,
    *,
    anonymize: bool = False,
    salt: str = "",
) -> Counter[str]:
    """Write records as a trace; returns counts of "exported" and of skipped records by reason.

    Jobs that never started or have no end (cancelled while queued, still running) carry no duration and are
    skipped. Unknown priority classes map to "normal" (counted as "priority_defaulted").
    """
    counts: Counter[str] = Counter()
    rows: list[tuple[float, TraceJob]] = []
    for i, rec in enumerate(records):
        r = rec if isinstance(rec, JobRecord) else JobRecord(**rec)
        if r.start is None or r.end is None:
            counts["not_run"] += 1
            continue
        start, end, submit = _secs(r.start), _secs(r.end), _secs(r.submit)
        if end < start or start < submit:
            counts["bad_times"] += 1
            continue
        priority = r.priority if r.priority in PRIORITY_CLASSES else "normal"
        if priority != r.priority:
            counts["priority_defaulted"] += 1
        project, user, jid = r.project, r.user, r.job_id or f"job-{i + 1}"
        if anonymize:
            project = anonymize_name(project, salt, "p")
            user = anonymize_name(user, salt, "u")
            jid = f"job-{i + 1}"
        job = TraceJob(jid, submit, end - start, r.devices, r.replicas, r.flavor, project, priority, user,
                       r.max_runtime)  # fmt: skip
        rows.append((submit, job))
    rows.sort(key=lambda x: x[0])
    t0 = rows[0][0] if rows else 0.0
    jobs = [
        TraceJob(
            j.job_id,
            j.submit - t0,
            j.duration,
            j.devices,
            j.replicas,
            j.flavor,
            j.project,
            j.priority,
            j.user,
            j.max_runtime,
        )  # fmt: skip
        for _, j in rows
    ]
    counts["exported"] = write_trace(jobs, dest)
    return counts
