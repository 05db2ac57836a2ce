"""Device-seconds at low GPU utilization, read from the system metrics of jobs' runs (tracking).

The SDK logs each GPU's utilization as `system/gpu.<i>.utilization` (percent, every 10 s by default); other
loggers use keys like `system/gpu_util`: every key tracking's GPU utilization rule watches counts. A run with GPU
telemetry (`system/gpu.<i>.sm_active`, DCGM's SM activity: telemetry.fields) is judged by SM activity instead, which
reads low where utilization reads 98% for GPUs whose SMs mostly wait. A point
counts from its time until the next point of its series and attempt, at most `GAP_CAP` seconds, and only while its
attempt held devices inside the window; the time of points under the threshold is low. Each series stands for an
equal share of the job's devices (rank 0 logs its own node's GPUs; the other nodes are taken to behave alike), so a
job's low device-seconds are its devices x its series' low seconds / its number of series. Series whose raw points
retention deleted are not read: their rollups keep only extremes."""

from __future__ import annotations

import math
from collections import Counter, defaultdict
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from itertools import groupby

import numpy as np

from costs.analysis import Scope, chunks
from costs.metering.pricing import PriceBook, Usage
from telemetry.fields import SM_ACTIVE
from tracking.models import Run, Series
from tracking.points import read_blocks
from tracking.series.anomaly import GPU_UTIL_COLLAPSE, rules_for_key

GAP_CAP = 300  # seconds a point counts for at most: a longer silence is not known to be idle


@dataclass(frozen=True)
class Held:
    """What one attempt held: its usage and its segment's times (end None while it holds)."""

    usage: Usage
    start: int
    end: int | None


@dataclass
class Low:
    device_seconds: float = 0.0
    cost: float = 0.0


def low_utilization(scope: Scope, held: Mapping[tuple[int, int], Held], below: float,
                    book: PriceBook, *, sm_activity: bool = True) -> dict[int, Low]:
    """Per job: device-seconds and cost inside the window at GPU utilization under `below` percent. `held` has
    the attempts (job, number) metered in the window: only their jobs' runs are read. `sm_activity`: runs with SM
    activity series are judged by them (else by utilization alone, the figure shown beside it)."""
    run_jobs: dict[int, int] = {}
    for batch in chunks({job for job, _ in held}):
        run_jobs.update(Run.objects.filter(job_id__in=batch).values_list("id", "job_id"))
    utilization: dict[int, int] = {}
    sm_active: dict[int, int] = {}
    for batch in chunks(run_jobs):
        for series_id, run_id, key in (Series.objects.filter(run_id__in=batch, key__istartswith="system/gpu",
                                                             raw_pruned=False)
                                       .values_list("id", "run_id", "key")):
            if key.endswith(f".{SM_ACTIVE}"):
                if sm_activity:
                    sm_active[series_id] = run_id
            elif GPU_UTIL_COLLAPSE in rules_for_key(key):  # tracking's own test of a GPU utilization key
                utilization[series_id] = run_id
    measured = set(sm_active.values())  # runs with SM activity are judged by it alone
    series_runs = {**sm_active, **{s: run for s, run in utilization.items() if run not in measured}}
    shares = Counter(series_runs.values())  # GPU series per run
    found: dict[int, Low] = defaultdict(Low)
    start, until = scope.window.start_ts, scope.until_ts
    for batch in chunks(series_runs):
        for (series_id, attempt), rows in _points_in_time(batch, (start - GAP_CAP) * 1000, until * 1000):
            run_id = series_runs[series_id]
            job = run_jobs[run_id]
            attempt_held = held.get((job, attempt))
            if attempt_held is None:
                continue
            first = max(start, attempt_held.start)
            last = min(until, attempt_held.end if attempt_held.end is not None else until)
            for a, b in _low_intervals(rows, below, first, last):
                found[job].device_seconds += attempt_held.usage.devices * (b - a) / shares[run_id]
                found[job].cost += book.cost(attempt_held.usage, a, b) / shares[run_id]
    return dict(found)


def _points_in_time(series: list[int], since: int, before: int) -> Iterator[tuple[tuple[int, int],
                                                                                 list[tuple[int, float]]]]:
    """Per (series, attempt): its points (timestamp ms, value) with since <= timestamp < before, in time order."""
    blocks = read_blocks(series, min_timestamp=since, before_timestamp=before)
    for (series_id, attempt), group in groupby(blocks, lambda block: (block.series_id, block.attempt)):
        of_attempt = list(group)
        timestamps = np.concatenate([block.timestamps for block in of_attempt])
        values = np.concatenate([block.values for block in of_attempt])
        order = np.argsort(timestamps, kind="stable")
        inside = order[(timestamps[order] >= since) & (timestamps[order] < before)]
        yield (series_id, attempt), list(zip(timestamps[inside].tolist(), values[inside].tolist(), strict=True))


def _low_intervals(points: Sequence[tuple[int, float]], below: float, first: int,
                   last: int) -> Iterator[tuple[float, float]]:
    """Merged intervals inside [first, last) of the points (ms timestamps, in order) under `below`."""
    current: tuple[float, float] | None = None
    followings: list[int | None] = [ts for ts, _ in points[1:]]
    followings.append(None)  # the last point's
    for (ts, value), following in zip(points, followings, strict=True):
        if not value < below:  # nor a NaN, which is not a reading
            continue
        at = ts / 1000
        a = max(at, first)
        b = min(at + GAP_CAP, last, math.inf if following is None else following / 1000)
        if b <= a:
            continue
        if current is not None and a <= current[1]:
            current = (current[0], b)
        else:
            if current is not None:
                yield current
            current = (a, b)
    if current is not None:
        yield current
