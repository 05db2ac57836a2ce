"""Attributed samples into the runs' system series (tracking's blocks and rollups, one block per key and batch, not
a row per sample), each GPU's latest readings and the attempt's tally; then the idle-GPU rule.

Writing a run's series costs about the same for one point a key as for many (a block and its rollups per key:
some 0.1 ms of CPU each, 8 s for 10,000 GPUs x 8 fields), so the reader stages each attempt's points
(`StagedPoints`, in the read's transaction) and writes them into the series every `write_every` seconds of
samples, several reads at once; the GPUs' latest readings, the tallies and the idle rule follow every read. The
attempts take turns (each its own phase in the period), so each read writes about the same share of them. An
attempt that ended is written at once.

A sample's step in its series is the number of seconds from its attempt's admission to the sample, so a window
read again (after a failure before the position was saved) writes the same points at the same steps: nothing
doubles. Its timestamp is the sample's own, in milliseconds."""

from __future__ import annotations

import logging
from collections import defaultdict
from collections.abc import Iterable, Mapping
from datetime import UTC, datetime
from itertools import chain
from typing import Any

import numpy as np
from django.db import connection
from django.db.models import Model

from telemetry.attribution import Holder
from telemetry.fields import NODE, SM_ACTIVE, UTILIZATION, Sample, key, node_key
from telemetry.models import AttemptGpu, AttemptTelemetry, StagedPoints
from tracking import alerts, services
from tracking.models import Run
from tracking.series import anomaly
from tracking.series.validate import Batch, KeyPoints

logger = logging.getLogger(__name__)


def store(holders: Mapping[int, Holder], grouped: Mapping[int, list[Sample]], node_name: dict[str, str] | None = None,
          now: datetime | None = None, *, end: int | None = None, write_every: int = 0) -> int:
    """Store each attempt's samples (inside the caller's transaction); returns the points written into series. A
    handful of statements per attempt written (its run's batch), and a few for them all (the staged points, the
    GPUs' latest readings and the tallies). `end`: the read's end (Unix seconds), when points are staged and
    written every `write_every` seconds; without it, or with 0, they are written at once."""
    node_name = node_name or {}
    staging = end is not None and write_every > 0
    staged: dict[int, list[StagedPoints]] = defaultdict(list)  # read even when not staging: staged before
    for row in StagedPoints.objects.filter(attempt_id__in=list(holders)).order_by("pk"):
        staged[row.attempt_id].append(row)
    runs = dict(Run.objects.filter(job_id__in={holders[a].job_id for a in [*grouped, *staged]})
                .values_list("job_id", "pk"))
    tallies = {t.attempt_id: t for t in AttemptTelemetry.objects.filter(attempt_id__in=list(grouped))}
    missing = [AttemptTelemetry(attempt_id=a) for a in grouped if a not in tallies]
    if missing:
        AttemptTelemetry.objects.bulk_create(missing)
        tallies.update({t.attempt_id: t for t in AttemptTelemetry.objects.filter(
            attempt_id__in=[m.attempt_id for m in missing])})
    stored = 0
    gpus: list[AttemptGpu] = []
    alerts_due: list[tuple[Holder, int, AttemptTelemetry, datetime | None]] = []
    to_stage: list[StagedPoints] = []
    written: list[int] = []  # staged rows written now
    for attempt_id in sorted({*grouped, *staged}):
        holder = holders[attempt_id]
        run_id = runs.get(holder.job_id)
        if run_id is None:
            continue
        samples = [s._replace(node=node_name.get(s.node, s.node)) for s in grouped.get(attempt_id, ())]
        of_gpus = [s for s in samples if s.gpu != NODE]
        ordinals = _ordinals(holder, of_gpus)
        batch = _batch(holder, ordinals, samples)
        earlier = staged.get(attempt_id, [])
        first = min([row.first_at for row in earlier] + [s.timestamp for s in samples])
        if not staging or _due(holder, first, end or 0, write_every):
            batch = _merged([*(unpacked(row) for row in earlier), batch])
            stored += services.run_log_measured(run_id=run_id, attempt=holder.number, batch=batch)
            written += [row.pk for row in earlier]
        elif batch:
            to_stage.append(_packed(attempt_id, min(s.timestamp for s in samples), batch))
        if not of_gpus:
            continue  # node-level readings only: no GPU's latest readings, nothing to tally
        gpus += _latest(holder, of_gpus)
        tally = tallies[attempt_id]
        was_idle = tally.idle_since
        if _tally(holder, tally, of_gpus):
            alerts_due.append((holder, run_id, tally, was_idle))
    StagedPoints.objects.filter(pk__in=written).delete()
    StagedPoints.objects.bulk_create(to_stage)
    _update_rows(AttemptGpu, gpus, ["last_at", *LATEST.values()])
    _update_rows(AttemptTelemetry, list(tallies.values()), TALLY_FIELDS)
    for holder, run_id, tally, was_idle in alerts_due:
        _judge_idle(holder, run_id, tally, was_idle, now)
    return stored


def _update_rows(model: type[Model], rows: list[Any], names: list[str]) -> None:
    """One UPDATE by primary key, executed for every row: Django's bulk_update builds a CASE per field and row, and
    spent more time compiling it than the rest of a read of 10,000 GPUs."""
    if not rows:
        return
    fields = [model._meta.get_field(name) for name in names]
    assignments = ", ".join(f"{connection.ops.quote_name(f.column)} = %s" for f in fields)
    with connection.cursor() as cursor:
        cursor.executemany(f"UPDATE {model._meta.db_table} SET {assignments} WHERE id = %s",  # noqa: S608
                           [[f.get_db_prep_save(getattr(row, f.attname), connection) for f in fields] + [row.pk]
                            for row in rows])


def _ordinals(holder: Holder, samples: Iterable[Sample]) -> dict[tuple[str, int], int]:
    """Each GPU's number in the attempt: kept from its first sight, new ones numbered after in placement order."""
    new = sorted({(s.node, s.gpu): s.uuid for s in samples if (s.node, s.gpu) not in holder.known}.items(),
                 key=lambda item: (holder.order.get(item[0][0], 1 << 20), item[0][0], item[0][1]))
    if new:
        start = len(holder.known)
        rows = [AttemptGpu(attempt_id=holder.attempt_id, ordinal=start + i, node=node, gpu=gpu, uuid=uuid[:100])
                for i, ((node, gpu), uuid) in enumerate(new)]
        AttemptGpu.objects.bulk_create(rows)
        created = AttemptGpu.objects.filter(attempt_id=holder.attempt_id, ordinal__gte=start)
        holder.rows.update({(row.node, row.gpu): row.pk for row in created})
        holder.known.update({(row.node, row.gpu): row.ordinal for row in rows})
    return holder.known


def _due(holder: Holder, first: int, end: int, write_every: int) -> bool:
    """Whether an attempt's staged points are written at this read: its period, shifted by its own phase (so the
    attempts take turns), has turned since its earliest staged sample; or it ended."""
    phase = holder.attempt_id * 7919 % write_every  # a prime: consecutive attempts land far apart in the period
    return holder.ended is not None or (end + phase) // write_every > (first + phase) // write_every


def _batch(holder: Holder, ordinals: Mapping[tuple[str, int], int], samples: Iterable[Sample]) -> Batch:
    """The samples as series: a GPU's by its ordinal, a node's by its place among the attempt's nodes."""
    nodes = {node: place for place, node in enumerate(holder.nodes)}
    points: dict[str, dict[int, tuple[int, float]]] = defaultdict(dict)
    for s in samples:
        name = node_key(nodes[s.node], s.suffix) if s.gpu == NODE else key(ordinals[(s.node, s.gpu)], s.suffix)
        points[name][s.timestamp - holder.admitted] = (s.timestamp * 1000, s.value)
    return _in_step_order(points)


def _merged(batches: list[Batch]) -> Batch:
    """Batches of one attempt as one (of points at one step, the later batch's)."""
    if len(batches) == 1:
        return batches[0]
    points: dict[str, dict[int, tuple[int, float]]] = defaultdict(dict)
    for batch in batches:
        for name, group in batch.items():
            points[name].update(zip(group.steps, zip(group.timestamps, group.values, strict=True), strict=True))
    return _in_step_order(points)


def _in_step_order(points: Mapping[str, Mapping[int, tuple[int, float]]]) -> Batch:
    batch: Batch = {}
    for name, by_step in points.items():
        steps = sorted(by_step)
        batch[name] = KeyPoints(steps, [by_step[step][0] for step in steps], [by_step[step][1] for step in steps])
    return batch


def _packed(attempt_id: int, first: int, batch: Batch) -> StagedPoints:
    names = list(batch)
    groups = [batch[name] for name in names]
    return StagedPoints(
        attempt_id=attempt_id, first_at=first, keys=names,
        counts=np.array([len(g.steps) for g in groups], dtype="<i4").tobytes(),
        steps=np.fromiter(chain.from_iterable(g.steps for g in groups), dtype="<i8").tobytes(),
        timestamps=np.fromiter(chain.from_iterable(g.timestamps for g in groups), dtype="<i8").tobytes(),
        values=np.fromiter(chain.from_iterable(g.values for g in groups), dtype="<f8").tobytes())


def unpacked(row: StagedPoints) -> Batch:
    """A staged row's points as the batch it was made from."""
    bounds = np.cumsum(np.frombuffer(row.counts, dtype="<i4"))[:-1]
    columns = [np.split(np.frombuffer(bytes(data), dtype=kind), bounds)
               for data, kind in ((row.steps, "<i8"), (row.timestamps, "<i8"), (row.values, "<f8"))]
    return {name: KeyPoints(steps.tolist(), timestamps.tolist(), values.tolist())
            for name, steps, timestamps, values in zip(row.keys, *columns, strict=True)}


LATEST = {SM_ACTIVE: "last_sm_active", UTILIZATION: "last_utilization", "memory_used_gib": "last_memory_used_gib",
          "power_watts": "last_power_watts"}
TALLY_FIELDS = ["sm_sum", "sm_count", "utilization_sum", "utilization_count", "first_at", "last_at", "idle_since"]


def _latest(holder: Holder, samples: Iterable[Sample]) -> list[AttemptGpu]:
    """Each GPU's newest readings in these samples, for the Clusters page's grid (a late stretch, older than what
    is kept, changes nothing)."""
    newest: dict[tuple[str, int], dict[str, tuple[int, float]]] = defaultdict(dict)
    for s in samples:
        if s.suffix in LATEST and s.timestamp >= newest[(s.node, s.gpu)].get(s.suffix, (-1, 0.0))[0]:
            newest[(s.node, s.gpu)][s.suffix] = (s.timestamp, s.value)
    rows = []
    for (node, gpu), readings in newest.items():
        at = _moment(max(ts for ts, _ in readings.values()))
        kept = holder.latest.get((node, gpu))
        if kept is not None and kept >= at:
            continue
        holder.latest[(node, gpu)] = at
        row = AttemptGpu(pk=holder.rows[(node, gpu)], last_at=at)
        for name in LATEST.values():
            setattr(row, name, None)
        for suffix, (_, value) in readings.items():
            setattr(row, LATEST[suffix], value)
        rows.append(row)
    return rows


def _tally(holder: Holder, tally: AttemptTelemetry, samples: list[Sample]) -> bool:
    """Add the samples to the attempt's means and follow since when every GPU is idle. Returns whether the idle
    state is to be judged (the samples are the newest the attempt has)."""
    sm = [s.value for s in samples if s.suffix == SM_ACTIVE]
    utilization = [s.value for s in samples if s.suffix == UTILIZATION]
    tally.sm_sum += sum(sm)
    tally.sm_count += len(sm)
    tally.utilization_sum += sum(utilization)
    tally.utilization_count += len(utilization)
    times = [s.timestamp for s in samples]
    first, last = _moment(min(times)), _moment(max(times))
    if tally.first_at is None or first < tally.first_at:
        tally.first_at = first
    if tally.last_at is not None and last <= tally.last_at:
        return False  # a late stretch: the idle state follows the newest samples only
    params = alerts.rule_settings(holder.project_id).active.get(anomaly.GPU_IDLE)
    below = (params or anomaly.DEFAULTS[anomaly.GPU_IDLE])["below"]
    # SM activity where the GPUs report it (DCGM's profiling metrics), else GPU utilization (older GPUs).
    activity = [s for s in samples if s.suffix == SM_ACTIVE] or [s for s in samples if s.suffix == UTILIZATION]
    tally.idle_since = idle_after(tally.idle_since, activity, below, after=tally.last_at)
    tally.last_at = last
    return params is not None and holder.ended is None


def _judge_idle(holder: Holder, run_id: int, tally: AttemptTelemetry, was_idle: datetime | None,
                now: datetime | None) -> None:
    """Open the gpu_idle alert of an attempt idle for the project's window (its action, e.g. stopping the job,
    follows), or clear it when the GPUs work again."""
    params = alerts.rule_settings(holder.project_id).active.get(anomaly.GPU_IDLE)
    if params is None:
        return
    if tally.idle_since is None:
        if was_idle is not None:
            alerts.clear_finding(run_id, anomaly.GPU_IDLE, now=now)
        return
    finding = anomaly.gpu_idle((tally.last_at - tally.idle_since).total_seconds(), params)
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
