"""The scheduler loop: the only writer of scheduling decisions.

One cycle = take the leader lock, requeue due retries, read a snapshot, call the pure `run_cycle`, and apply every
decision in the same transaction through the state machine (`jobs.lifecycle`), which dispatches admitted attempts
and stops preempted ones after commit, in this order: preemptions, shrinks of elastic jobs, admissions, grows of
elastic jobs (resizes: `lifecycle.resize`). Waiting jobs get their reasons, positions and estimated starts with their
range or why they have none (the pure `estimate_starts`: the scheduler run forward from this cycle, within a
budget). On PostgreSQL the leader lock is a transaction-level advisory lock, so two scheduler processes never decide
at once; on SQLite the IMMEDIATE transaction already serializes writers.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import Counter as Tally
from collections.abc import Mapping
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any

from django.conf import settings
from django.db import connection, transaction
from django.utils import timezone

from core import wakeup
from core.collector import collector_paused
from jobs import lifecycle, metrics, ports, services
from jobs import scheduling as core
from jobs.bulk import bulk_set
from jobs.lifecycle import WAIT_FIELDS, Admission
from jobs.models import AttemptResize, Job
from jobs.scheduling.forecast import BUDGET_SPENT
from jobs.scheduling.ordering import decayed_usage
from jobs.selectors import runtime_shares
from jobs.snapshot import CycleInput, QueuedRow, build_snapshot, policy_from_settings, recent_arrival_rates
from jobs.states import HOLDING, State
from quotas.models import ProjectUsage
from tenancy.models import Project

logger = logging.getLogger(__name__)

ADVISORY_LOCK_KEY = 0x7D1A1  # any constant shared by every scheduler process
CLOCK_JUMP_SECONDS = 1.0
_process_lock = threading.Lock()


def _take_leader_lock() -> bool:
    if connection.vendor != "postgresql":
        return True
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_try_advisory_xact_lock(%s)", [ADVISORY_LOCK_KEY])
        return bool(cursor.fetchone()[0])


def _admission(admit: core.Admit, cluster_ids: Mapping[str, int], pool_of: Mapping[str, str]) -> Admission:
    cluster = core.split_node_key(admit.placement[0].node)[0]
    placement: list[dict[str, Any]] = [_replica_row(a, pool_of) for a in admit.placement]
    where = ", ".join(sorted({row["node"] for row in placement}))
    return Admission(admit.job_id, cluster_ids[cluster], placement, admit.borrowed,
                     reason=f"admitted on {cluster}: {where}")


def _apply_preemptions(result: core.CycleResult, now: datetime) -> None:
    """Requeue victims, which resume from their checkpoint; the state machine stops their attempts after commit.

    The victims' rows are locked first, in id order, and read as they are then: a victim its backend moved on
    since the snapshot (admitted -> dispatching -> running, committed or about to be) still holds its devices and
    is preempted from its new state; skipping it would put the jobs admitted in its place on devices it holds.
    A victim that stopped holding meanwhile (cancelled, finished, failed) has freed them already."""
    victims = {p.victim_id: p for p in result.preemptions}
    holding = (Job.objects.select_for_update(of=("self",)).filter(pk__in=victims, state__in=HOLDING)
               .select_related("project", "flavor").order_by("pk"))
    for job in holding:
        decision = victims[job.pk]
        lifecycle.transition(job, State.PREEMPTED, reason=decision.reason, actor="scheduler", now=now,
                             details={"for_job": decision.for_job_id})
        lifecycle.transition(job, State.QUEUED, reason="requeued after preemption; resumes from its checkpoint",
                             actor="scheduler", now=now)
        metrics.PREEMPTIONS.labels(job.project.slug, job.flavor.name).inc()


def _replica_row(a: core.Assignment, pool_of: Mapping[str, str]) -> dict[str, Any]:
    """A placement row; one on a pool's node names the pool (tidal capacity: costs price it at the tidal rate)."""
    row: dict[str, Any] = {"role": a.role, "index": a.index, "node": core.split_node_key(a.node)[1],
                           "devices": a.devices}
    if a.node in pool_of:
        row["pool"] = pool_of[a.node]
    return row


def _pool_of(snapshot: core.Snapshot) -> dict[str, str]:
    return {n.name: n.pool for n in snapshot.nodes if n.pool}


def _apply_resizes(result: core.CycleResult, read: CycleInput, now: datetime, *, grows: bool) -> None:
    """Shrinks (before the admissions that use what they free) or grows (last), each an event of the job's current
    attempt through the state machine, conditional on the attempt's resize count the snapshot read: a decision on
    a placement that changed since (or applied already) changes nothing. A grow waits until the job runs (a gang
    still starting is not grown: the core asks again next cycle); a shrink applies while the job holds capacity."""
    decisions: list[tuple[int, str, tuple[core.Assignment, ...], str, int | None]] = (
        [(g.job_id, AttemptResize.Kind.GROW, g.placement, lifecycle.GROWN_REASON, None) for g in result.grows]
        if grows else
        [(s.job_id, AttemptResize.Kind.SHRINK, s.removed, s.reason, s.for_job_id) for s in result.shrinks])
    pool_of = _pool_of(read.snapshot)
    for job_id, kind, replicas, reason, for_job in decisions:
        version = read.versions.get(job_id)
        if version is None:
            continue
        applied = lifecycle.resize(job_id, attempt_id=version[0], version=version[1], kind=kind,
                                   replicas=[_replica_row(a, pool_of) for a in replicas], reason=reason,
                                   now=now, for_job=for_job)
        if applied is not None:
            metrics.RESIZES.labels(kind).inc()


def _apply_admits(result: core.CycleResult, read: CycleInput, now: datetime) -> None:
    pool_of = _pool_of(read.snapshot)
    admitted = lifecycle.transition_many([_admission(a, read.cluster_ids, pool_of) for a in result.admits],
                                         now=now)
    for job_id in admitted:
        row = read.queued[job_id]
        metrics.ADMISSIONS.labels(row.project, row.flavor).inc()
        metrics.SUBMIT_TO_ADMIT.observe(max(0.0, (now - row.submitted_at).total_seconds()))


class _Forecasts:
    """The last estimates and what they were made from: a cycle that finds the same jobs, nodes and quotas (nothing
    submitted, started, ended or changed since) keeps them instead of simulating again, unless the wall clock
    jumped since (estimates are wall-clock times: they would be left in the past, or pushed out)."""

    fingerprint: tuple | None = None
    estimates: dict[int, core.Estimate] = {}
    clock: tuple[float, float] = (0.0, 0.0)  # (wall, monotonic) seconds when they were made

    @classmethod
    def clock_jumped(cls) -> bool:
        """The wall clock moved more than a second away from the monotonic one since the forecast was made (an NTP
        step, a VM resumed from a snapshot, an operator setting the time)."""
        wall, monotonic = cls.clock
        return abs((time.time() - wall) - (time.monotonic() - monotonic)) > CLOCK_JUMP_SECONDS


def forget_forecasts() -> None:
    """The next cycle forecasts afresh (tests: a database rolled back between them gives the next the same ids)."""
    _Forecasts.fingerprint = None


def _fingerprint(snapshot: core.Snapshot, policy: core.Policy, shares: core.RuntimeShares) -> tuple:
    # Projects by name and whether their budget stops them only: their decayed usage (and the spend a budget's
    # reason quotes) moves a little every cycle, and forecasting again for that alone would cost a simulation per
    # cycle and make estimates jitter between page loads. Arrival rates are left out for the same reason: they
    # move with every submission, which changes the queue anyway.
    return (policy, shares, snapshot.nodes, snapshot.quotas,
            tuple((p.name, bool(p.budget_stop)) for p in snapshot.projects),
            tuple((r.id, r.started_at) for r in snapshot.running), tuple(j.id for j in snapshot.pending))


def _estimated_starts(snapshot: core.Snapshot, policy: core.Policy,
                      result: core.CycleResult) -> dict[int, core.Estimate]:
    """Each waiting job's estimated start with its range, or why it has none (`core.estimate_starts`): the
    scheduler run forward from this cycle, within the configured number of simulated cycles and seconds, jobs
    expected to use the shares of their max runtime that finished jobs used and to arrive as in the last hour."""
    steps, seconds = settings.TIDAL["ETA_STEPS"], settings.TIDAL["ETA_SECONDS"]
    if not result.waits or not steps:
        return {}
    shares = runtime_shares()
    fingerprint = _fingerprint(snapshot, policy, shares)
    if fingerprint != _Forecasts.fingerprint or _Forecasts.clock_jumped():
        if not snapshot.arrival_rates:  # the cycle read them when elastic jobs run
            snapshot = replace(snapshot, arrival_rates=recent_arrival_rates(snapshot.now))
        _Forecasts.estimates = core.estimate_starts(snapshot, policy, first=result, shares=shares, max_steps=steps,
                                                    seconds=seconds, clock=time.perf_counter)
        _Forecasts.fingerprint = fingerprint
        _Forecasts.clock = (time.time(), time.monotonic())
    return _Forecasts.estimates


def _moment(at: float | None) -> datetime | None:
    return datetime.fromtimestamp(at, tz=UTC) if at is not None else None


NO_ESTIMATE = core.Estimate()  # estimates turned off (TIDAL_ETA_STEPS=0)


def _apply_waits(result: core.CycleResult, queued: dict[int, QueuedRow],
                 estimates: dict[int, core.Estimate]) -> None:
    """Write only the waiting jobs whose explanation or estimated start changed, in bulk."""
    changed = []
    for wait in result.waits:
        row = queued.get(wait.job_id)
        if row is None:
            continue
        e = estimates.get(wait.job_id, NO_ESTIMATE)
        new = (wait.code, wait.reason[:500], wait.project_position, wait.flavor_position, _moment(e.start),
               _moment(e.low), _moment(e.high), e.note)
        if new != row.wait:
            changed.append((wait.job_id, *new))
    bulk_set(Job, WAIT_FIELDS, changed)


def _apply_held(read: CycleInput) -> None:
    """The wait of the jobs kept out of the cycle because their user's hard budget is spent (`jobs.snapshot`): code
    "budget" and the reason, as the core writes a project's budget stop; written only when it changed."""
    changed = []
    for job_id, (reason, stored) in read.held.items():
        new = ("budget", reason[:500], None, None, None, None, None, BUDGET_SPENT)
        if new != stored:
            changed.append((job_id, *new))
    bulk_set(Job, WAIT_FIELDS, changed)


def _decay_usage(snapshot: core.Snapshot, policy: core.Policy, now: datetime) -> None:
    """Fair share's memory, per project: the policy's decay (the same as replay's) of the devices in use."""
    in_use: Tally[str] = Tally()
    for job in snapshot.running:
        in_use[job.project] += sum(a.devices for a in job.placement)
    rows = {u.project.slug: u for u in ProjectUsage.objects.select_related("project")}
    missing = [p for p in in_use if p not in rows]
    for project in Project.objects.filter(slug__in=missing):
        rows[project.slug] = ProjectUsage.objects.create(project=project, updated_at=now)
    for slug, usage in rows.items():
        dt = max(0.0, (now - usage.updated_at).total_seconds())
        usage.decayed_device_seconds = decayed_usage(usage.decayed_device_seconds, in_use[slug], dt,
                                                     policy.usage_half_life)
        usage.updated_at = now
    ProjectUsage.objects.bulk_update(rows.values(), ["decayed_device_seconds", "updated_at"])


def _update_queue_gauges(result: core.CycleResult, queued: dict[int, QueuedRow]) -> None:
    metrics.QUEUE_LENGTH.clear()
    lengths = Tally((queued[w.job_id].project, queued[w.job_id].flavor) for w in result.waits if w.job_id in queued)
    for (project, flavor), count in lengths.items():
        metrics.QUEUE_LENGTH.labels(project, flavor).set(count)


def _observe_phases(result: core.CycleResult, forecast_seconds: float) -> None:
    for phase, seconds in result.seconds.items():
        metrics.PHASE_SECONDS.labels(phase).observe(seconds)
    metrics.PHASE_SECONDS.labels("forecast").observe(forecast_seconds)


def run_once(now: datetime | None = None) -> core.CycleResult | None:
    """One scheduling cycle. Returns None when another scheduler holds the leader lock.

    Retrying jobs whose backoff passed join the queue first; dispatch and stops follow after commit (the state
    machine queues them)."""
    started = time.perf_counter()
    now = now or timezone.now()
    policy = policy_from_settings()
    with _process_lock, transaction.atomic():
        if not _take_leader_lock():
            return None
        services.job_requeue_due_retries(now)
        read = build_snapshot(now.timestamp())
        snapshot = read.snapshot
        if any(job.elastic for job in snapshot.running):  # growth leaves room for what is expected (elastic.py)
            snapshot = replace(snapshot, arrival_rates=recent_arrival_rates(snapshot.now))
        result = core.run_cycle(snapshot, policy)
        # The forecast is pure work of up to TIDAL_ETA_SECONDS: done before the writes below lock the rows of the
        # jobs they admit and preempt, so cancelling one of them does not wait for it.
        forecast_started = time.perf_counter()
        estimates = _estimated_starts(snapshot, policy, result)
        _observe_phases(result, time.perf_counter() - forecast_started)
        _apply_preemptions(result, now)
        _apply_resizes(result, read, now, grows=False)
        _apply_admits(result, read, now)
        _apply_resizes(result, read, now, grows=True)
        _apply_waits(result, read.queued, estimates)
        _apply_held(read)
        ports.record_pools(now.timestamp(), read.pools)
        _decay_usage(read.snapshot, policy, now)
        _update_queue_gauges(result, read.queued)
    metrics.CYCLE_SECONDS.observe(time.perf_counter() - started)
    if result.admits or result.preemptions or result.grows or result.shrinks:
        logger.info("cycle: %d admitted, %d preempted, %d grown, %d shrunk, %d waiting", len(result.admits),
                    len(result.preemptions), len(result.grows), len(result.shrinks), len(result.waits))
    return result


def run_forever(interval: float | None = None, stop: threading.Event | None = None, *,
                pause_collector: bool = False) -> None:
    """Cycle whenever woken (submission, completion, quota change) and at least every `interval` seconds.

    `pause_collector`: pause the garbage collector during each cycle. Only a process of its own may (the
    `run_scheduler` service): the pause is process-wide, and in embedded mode web requests share the process."""
    interval = interval or settings.TIDAL["SCHEDULER_INTERVAL"]
    while stop is None or not stop.is_set():
        result = None
        try:
            with collector_paused(pause_collector):
                result = run_once()
        except Exception:
            logger.exception("scheduling cycle failed; retrying")
        wakeup.wait_for_wakeup(next_wait(result, interval, time.time()))


def next_wait(result: core.CycleResult | None, interval: float, now: float) -> float:
    """Seconds until the next cycle unless woken: the interval, or less when the cycle asked to run sooner
    (CycleResult.wake_at: a waiting job's reclaim grace ends, or what the lend hold keeps from a borrower falls)."""
    if result is None or result.wake_at is None:
        return interval
    return min(interval, max(MIN_WAIT, result.wake_at - now))


MIN_WAIT = 0.05  # seconds: a wake-up that passed while the cycle ran is not waited for in a busy loop
