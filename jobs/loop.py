"""The scheduler loop: the only writer of scheduling decisions.

One cycle = take the leader lock, read a snapshot, call the pure `run_cycle`, apply every decision in the same
transaction, then (after commit) dispatch admitted jobs and stop preempted ones. On PostgreSQL the leader lock is a
transaction-level advisory lock, so two scheduler processes never decide at once; on SQLite the IMMEDIATE
transaction already serializes writers.
"""

from __future__ import annotations

import logging
import math
import threading
import time
from collections import Counter as Tally
from datetime import UTC, datetime

from django.conf import settings
from django.db import connection, transaction
from django.utils import timezone

from core import wakeup
from core.errors import InvalidTransition
from jobs import metrics
from jobs import scheduling as core
from jobs.bulk import bulk_set
from jobs.models import Job, JobEvent
from jobs.services import transition
from jobs.snapshot import QueuedRow, build_snapshot, policy_from_settings
from jobs.states import HOLDING, State
from quotas.models import ProjectUsage

logger = logging.getLogger(__name__)

WAIT_FIELDS = ["wait_code", "wait_reason", "project_position", "flavor_position", "eta"]
ADVISORY_LOCK_KEY = 0x7D1A1  # any constant shared by every scheduler process
_process_lock = threading.Lock()


def _take_leader_lock() -> bool:
    if connection.vendor != "postgresql":
        return True
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_try_advisory_xact_lock(%s)", [ADVISORY_LOCK_KEY])
        return bool(cursor.fetchone()[0])


def _placement_json(admit: core.Admit) -> tuple[str, list[dict]]:
    cluster = admit.placement[0].node.split("/", 1)[0]
    rows = [{"role": a.role, "index": a.index, "node": a.node.split("/", 1)[1], "devices": a.devices}
            for a in admit.placement]
    return cluster, rows


def _apply_preemptions(result: core.CycleResult, now: datetime) -> list[tuple[int, int]]:
    """Requeue victims (with their checkpoint); returns (job id, attempt) pairs whose workloads must be stopped."""
    victims = {p.victim_id: p for p in result.preemptions}
    stopped = []
    for job in Job.objects.filter(pk__in=victims, state__in=HOLDING).select_related("project", "flavor"):
        decision = victims[job.pk]
        attempt = job.attempt
        with transaction.atomic():  # a savepoint: a job that moved meanwhile is skipped, not the whole cycle
            try:
                transition(job, State.PREEMPTED, reason=decision.reason, actor="scheduler", now=now,
                           details={"for_job": decision.for_job_id})
                transition(job, State.QUEUED, reason="requeued after preemption; resumes from its checkpoint",
                           actor="scheduler", now=now, attempt=attempt + 1)
            except InvalidTransition:
                continue
        metrics.PREEMPTIONS.labels(job.project.slug, job.flavor.name).inc()
        stopped.append((job.pk, attempt))
    return stopped


def _apply_admits(result: core.CycleResult, queued: dict[int, QueuedRow], now: datetime) -> list[int]:
    """Admit in bulk: lock the rows still queued (a job cancelled since the read is skipped, and a cancel racing
    with us waits for our commit, then sees `admitted`), write state and placement, and one event per job."""
    from clusters.models import Cluster

    decisions = {admit.job_id: admit for admit in result.admits}
    if not decisions:
        return []
    still_queued = set(Job.objects.select_for_update().filter(pk__in=decisions, state=State.QUEUED)
                       .values_list("id", flat=True))
    clusters = dict(Cluster.objects.values_list("name", "id"))
    rows, events = [], []
    for job_id in sorted(still_queued):
        admit = decisions[job_id]
        cluster, placement = _placement_json(admit)
        rows.append((job_id, State.ADMITTED, now, clusters[cluster], placement, admit.borrowed, "", "", None, None,
                     None))
        where = ", ".join(sorted({row["node"] for row in placement}))
        events.append(JobEvent(job_id=job_id, created_at=now, kind="transition", from_state=State.QUEUED,
                               to_state=State.ADMITTED, reason=f"admitted on {cluster}: {where}"[:1000],
                               actor_name="scheduler", details={"borrowed": admit.borrowed}))
        row = queued[job_id]
        metrics.ADMISSIONS.labels(row.project, row.flavor).inc()
        metrics.SUBMIT_TO_ADMIT.observe(max(0.0, (now - row.submitted_at).total_seconds()))
    bulk_set(Job, ["state", "admitted_at", "cluster", "placement", "borrowed", *WAIT_FIELDS], rows)
    JobEvent.objects.bulk_create(events, batch_size=1000)
    return sorted(still_queued)


def _apply_waits(result: core.CycleResult, queued: dict[int, QueuedRow]) -> None:
    """Write only the waiting jobs whose explanation changed, in bulk."""
    changed = []
    for wait in result.waits:
        row = queued.get(wait.job_id)
        if row is None:
            continue
        eta = datetime.fromtimestamp(wait.eta, tz=UTC) if wait.eta is not None else None
        new = (wait.code, wait.reason[:500], wait.project_position, wait.flavor_position, eta)
        if new != row.wait:
            changed.append((wait.job_id, *new))
    bulk_set(Job, WAIT_FIELDS, changed)


def _decay_usage(snapshot: core.Snapshot, now: datetime) -> None:
    """Fair share's memory: usage = usage * 2^(-dt/half-life) + devices in use * dt, per project."""
    half_life = settings.TIDAL["FAIR_SHARE_HALF_LIFE"]
    in_use = Tally()
    for job in snapshot.running:
        in_use[job.project] += sum(a.devices for a in job.placement)
    rows = {u.project.slug: u for u in ProjectUsage.objects.select_related("project")}
    from tenancy.models import Project

    missing = [p for p in in_use if p not in rows]
    for project in Project.objects.filter(slug__in=missing):
        rows[project.slug] = ProjectUsage.objects.create(project=project, updated_at=now)
    for slug, usage in rows.items():
        dt = max(0.0, (now - usage.updated_at).total_seconds())
        usage.decayed_device_seconds = usage.decayed_device_seconds * math.pow(2, -dt / half_life) + in_use[slug] * dt
        usage.updated_at = now
    ProjectUsage.objects.bulk_update(rows.values(), ["decayed_device_seconds", "updated_at"])


def _update_queue_gauges(result: core.CycleResult, queued: dict[int, QueuedRow]) -> None:
    metrics.QUEUE_LENGTH.clear()
    lengths = Tally((queued[w.job_id].project, queued[w.job_id].flavor) for w in result.waits if w.job_id in queued)
    for (project, flavor), count in lengths.items():
        metrics.QUEUE_LENGTH.labels(project, flavor).set(count)


def _after_commit(admitted: list[int], stopped: list[tuple[int, int]]) -> None:
    from clusters import backends

    for job_id, attempt in stopped:
        backends.stop_job(job_id, reason="preempted", attempt=attempt)
    for job_id in admitted:
        backends.dispatch_job(job_id)


def run_once(now: datetime | None = None) -> core.CycleResult | None:
    """One scheduling cycle. Returns None when another scheduler holds the leader lock."""
    started = time.perf_counter()
    now = now or timezone.now()
    with _process_lock, transaction.atomic():
        if not _take_leader_lock():
            return None
        snapshot, queued = build_snapshot(now.timestamp())
        result = core.run_cycle(snapshot, policy_from_settings())
        stopped = _apply_preemptions(result, now)
        admitted = _apply_admits(result, queued, now)
        _apply_waits(result, queued)
        _decay_usage(snapshot, now)
        _update_queue_gauges(result, queued)
        transaction.on_commit(lambda: _after_commit(admitted, stopped))
    metrics.CYCLE_SECONDS.observe(time.perf_counter() - started)
    if result.admits or result.preemptions:
        logger.info("cycle: %d admitted, %d preempted, %d waiting", len(result.admits), len(result.preemptions),
                    len(result.waits))
    return result


def run_forever(interval: float | None = None, stop: threading.Event | None = None) -> None:
    """Cycle whenever woken (submission, completion, quota change) and at least every `interval` seconds."""
    interval = interval or settings.TIDAL["SCHEDULER_INTERVAL"]
    while stop is None or not stop.is_set():
        try:
            run_once()
        except Exception:
            logger.exception("scheduling cycle failed; retrying")
        wakeup.wait_for_wakeup(interval)
