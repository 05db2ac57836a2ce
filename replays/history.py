"""The platform's job history as replay records: finished jobs as they ran, and (for a what-if) the jobs waiting
and running now with an estimate of how long they run.

Rows come from `replays.selectors.history`; `replay.export_trace` turns the records into a trace. It takes a job's
duration as `end - start`, so a record of a job that has not finished carries an estimated end: its start and end
here only say how long it runs, not when (the replay decides when).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from datetime import datetime, timedelta
from typing import Any

from jobs.states import ACTIVE, HOLDING
from replay import JobRecord


def job_shape(groups: Sequence[tuple[int, int]]) -> tuple[int, int] | None:
    """(devices per replica, replicas) of a job's replica groups; a trace job has one shape, so mixed groups
    become replicas of the largest group's size covering the same total."""
    sized = [(r, d) for r, d in groups if d > 0]
    if not sized:
        return None
    sizes = {d for _, d in sized}
    if len(sizes) == 1:
        return sizes.pop(), sum(r for r, _ in sized)
    largest = max(sizes)
    total = sum(r * d for r, d in sized)
    return largest, -(-total // largest)


def runtime_estimate(row: dict[str, Any]) -> float | None:
    """Seconds a job that has not finished is expected to run in all, from what it declared: the simulated
    backend's `duration` (exact there: an attempt runs exactly that long), else its `max_runtime` (the job is
    stopped there, and the live scheduler's backfill assumes it too: the platform's own estimate, an upper
    bound). None when it declared neither."""
    if row.get("duration") is not None:
        return float(row["duration"])
    if row.get("max_runtime"):
        return float(row["max_runtime"])
    return None


def active_runtime(row: dict[str, Any], now: datetime, since: datetime, counts: Counter[str]) -> float | None:
    """Seconds to replay, from `since` at the earliest, for a job waiting or running at `now`; counts how each
    was estimated.

    A running job runs its estimate in all, and never less than it has run so far (its current attempt's time:
    an attempt restarts the job); with no estimate, the time so far is all we know (a lower bound). The part it
    ran before `since` is outside the replayed period and left out. A waiting job runs its estimate; with none it
    cannot be replayed (None)."""
    estimate = runtime_estimate(row)
    if row["state"] in HOLDING:
        counts["running"] += 1
        started = row.get("current_attempt__started_at")
        so_far = max(0.0, (now - started).total_seconds()) if started else 0.0
        if estimate is None:
            counts["running_time_so_far"] += 1
        total = so_far if estimate is None else max(so_far, estimate)
        before_period = max(0.0, (since - started).total_seconds()) if started else 0.0
        return total - before_period
    if estimate is None:
        counts["waiting_no_runtime"] += 1
        return None
    counts["waiting"] += 1
    return estimate


def _record(row: dict[str, Any], shape: tuple[int, int], submit: datetime, start: datetime | None,
            end: datetime | None) -> JobRecord:
    return JobRecord(
        submit=submit, start=start, end=end, devices=shape[0], replicas=shape[1],
        flavor=row["flavor__name"], project=row["project__slug"], priority=row["priority_class__name"] or "normal",
        user=row["submitter_name"] or "", job_id=str(row["id"]),
        max_runtime=float(row["max_runtime"]) if row["max_runtime"] else None)


def history_records(rows: Iterable[dict[str, Any]], counts: Counter[str], *, now: datetime | None = None,
                    since: datetime | None = None) -> list[JobRecord]:
    """Records of the history rows. Without `now` only what ran (export_trace leaves out the rest and counts it).
    With `now` (and the period's start `since`), jobs still waiting or running then are replayed from their
    submission for their estimated runtime (see active_runtime); one submitted before the period enters the
    replay at its start, as it was in the system then, so the replay covers the chosen period only."""
    records = []
    for row in rows:
        shape = job_shape(row["groups"]) or ((row["total_devices"], 1) if row["total_devices"] else None)
        if shape is None:
            counts["no_devices"] += 1  # CPU-only jobs hold no devices: nothing to replay
            continue
        if now is None or row.get("state") not in ACTIVE:
            records.append(_record(row, shape, row["submitted_at"], row["started_at"], row["finished_at"]))
            continue
        period_start = since or row["submitted_at"]
        seconds = active_runtime(row, now, period_start, counts)
        if seconds is not None:
            submit = max(row["submitted_at"], period_start)
            records.append(_record(row, shape, submit, submit, submit + timedelta(seconds=seconds)))
    return records
