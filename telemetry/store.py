"""Attributed samples into the runs' system series (tracking's blocks and rollups, one block per key and batch, not
a row per sample), each GPU's latest readings and the attempt's tally; then the idle-GPU rule.

A sample's step in its series is the number of seconds from its attempt's admission to the sample, so a window
read again (after a failure before the position was saved) writes the same points at the same steps: nothing
doubles. Its timestamp is the sample's own, in milliseconds."""

from __future__ import annotations

import logging
from collections import defaultdict
from collections.abc import Iterable, Mapping
from datetime import UTC, datetime

from django.db.models import F

from jobs.models import Attempt
from telemetry.attribution import Holder
from telemetry.fields import SM_ACTIVE, UTILIZATION, Sample, key
from telemetry.models import AttemptGpu, AttemptTelemetry
from tracking import alerts, services
from tracking.models import Run
from tracking.series import anomaly
from tracking.series.validate import Batch, KeyPoints

logger = logging.getLogger(__name__)


def store(holders: Mapping[int, Holder], grouped: Mapping[int, list[Sample]], node_name: dict[str, str] | None = None,
          now: datetime | None = None) -> int:
    """Write each attempt's samples (inside the caller's transaction); returns the points stored."""
    node_name = node_name or {}
    runs = dict(Run.objects.filter(job_id__in={holders[a].job_id for a in grouped}).values_list("job_id", "pk"))
    stored = 0
    for attempt_id, samples in grouped.items():
        holder = holders[attempt_id]
        run_id = runs.get(holder.job_id)
        if run_id is None:
            continue
        samples = [s._replace(node=node_name.get(s.node, s.node)) for s in samples]
        ordinals = _ordinals(holder, samples)
        stored += services.run_log_measured(run_id=run_id, attempt=holder.number,
                                            batch=_batch(holder, ordinals, samples))
        _latest(holder, ordinals, samples)
        _tally(holder, run_id, samples, now)
    return stored


def _ordinals(holder: Holder, samples: Iterable[Sample]) -> dict[tuple[str, int], int]:
    """Each GPU's number in the attempt: kept from its first sight, new ones numbered after in placement order."""
    new = sorted({(s.node, s.gpu): s.uuid for s in samples if (s.node, s.gpu) not in holder.known}.items(),
                 key=lambda item: (holder.order.get(item[0][0], 1 << 20), item[0][0], item[0][1]))
    if new:
        start = len(holder.known)
        rows = [AttemptGpu(attempt_id=holder.attempt_id, ordinal=start + i, node=node, gpu=gpu, uuid=uuid[:100])
                for i, ((node, gpu), uuid) in enumerate(new)]
        AttemptGpu.objects.bulk_create(rows)
        holder.known.update({(row.node, row.gpu): row.ordinal for row in rows})
    return holder.known


def _batch(holder: Holder, ordinals: Mapping[tuple[str, int], int], samples: Iterable[Sample]) -> Batch:
    points: dict[str, dict[int, tuple[int, float]]] = defaultdict(dict)
    for s in samples:
        points[key(ordinals[(s.node, s.gpu)], s.suffix)][s.timestamp - holder.admitted] = (s.timestamp * 1000,
                                                                                          s.value)
    batch: Batch = {}
    for name, by_step in points.items():
        steps = sorted(by_step)
        batch[name] = KeyPoints(steps, [by_step[step][0] for step in steps], [by_step[step][1] for step in steps])
    return batch


LATEST = {SM_ACTIVE: "last_sm_active", UTILIZATION: "last_utilization", "memory_used_gib": "last_memory_used_gib",
          "power_watts": "last_power_watts"}


def _latest(holder: Holder, ordinals: Mapping[tuple[str, int], int], samples: Iterable[Sample]) -> None:
    """Each GPU's newest readings, for the Clusters page's grid (only those newer than what is kept)."""
    newest: dict[tuple[str, int], dict[str, tuple[int, float]]] = defaultdict(dict)
    for s in samples:
        if s.suffix in LATEST and s.timestamp >= newest[(s.node, s.gpu)].get(s.suffix, (-1, 0.0))[0]:
            newest[(s.node, s.gpu)][s.suffix] = (s.timestamp, s.value)
    for (node, gpu), readings in newest.items():
        at = _moment(max(ts for ts, _ in readings.values()))
        values = {LATEST[suffix]: value for suffix, (_, value) in readings.items()}
        AttemptGpu.objects.filter(attempt_id=holder.attempt_id, node=node, gpu=gpu).exclude(last_at__gt=at).update(
            last_at=at, **values)


def _tally(holder: Holder, run_id: int, samples: list[Sample], now: datetime | None) -> None:
    """Add the samples to the attempt's means; follow since when every GPU is idle; open or clear the idle alert."""
    sm = [s for s in samples if s.suffix == SM_ACTIVE]
    utilization = [s for s in samples if s.suffix == UTILIZATION]
    times = [s.timestamp for s in samples]
    tally, _ = AttemptTelemetry.objects.get_or_create(attempt_id=holder.attempt_id)
    AttemptTelemetry.objects.filter(pk=tally.pk).update(
        sm_sum=F("sm_sum") + sum(s.value for s in sm), sm_count=F("sm_count") + len(sm),
        utilization_sum=F("utilization_sum") + sum(s.value for s in utilization),
        utilization_count=F("utilization_count") + len(utilization))
    first, last = _moment(min(times)), _moment(max(times))
    if tally.first_at is None or first < tally.first_at:
        tally.first_at = first
    if tally.last_at is not None and last <= tally.last_at:
        AttemptTelemetry.objects.filter(pk=tally.pk).update(first_at=tally.first_at)
        return  # a late stretch: the idle state follows the newest samples only
    params = alerts.rule_settings(holder.project_id).active.get(anomaly.GPU_IDLE)
    # SM activity where the GPUs report it (DCGM's profiling metrics), else GPU utilization (older GPUs).
    activity = sm or utilization
    idle_since = idle_after(tally.idle_since, activity, params["below"] if params else anomaly.DEFAULTS[
        anomaly.GPU_IDLE]["below"], after=tally.last_at)
    AttemptTelemetry.objects.filter(pk=tally.pk).update(first_at=tally.first_at, last_at=last, idle_since=idle_since)
    if params is None or not Attempt.objects.filter(pk=holder.attempt_id, ended_at=None).exists():
        return
    if idle_since is None:
        if tally.idle_since is not None:
            alerts.clear_finding(run_id, anomaly.GPU_IDLE, now=now)
        return
    finding = anomaly.gpu_idle((last - idle_since).total_seconds(), params)
    if finding is not None:
        alerts.open_finding(run_id, finding, now)


def idle_after(since: datetime | None, activity: Iterable[Sample], below: float,
               after: datetime | None = None) -> datetime | None:
    """Since when every GPU has been under `below`, given the readings after `after` (by time: one GPU at or above
    it at a moment ends the idle stretch; the first moment all are under starts one)."""
    highest: dict[int, float] = {}
    for s in activity:
        if after is None or s.timestamp > after.timestamp():
            highest[s.timestamp] = max(highest.get(s.timestamp, s.value), s.value)
    for timestamp in sorted(highest):
        if highest[timestamp] >= below:
            since = None
        elif since is None:
            since = _moment(timestamp)
    return since


def _moment(timestamp: int) -> datetime:
    return datetime.fromtimestamp(timestamp, tz=UTC)
