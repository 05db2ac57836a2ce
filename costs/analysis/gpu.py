"""Device-seconds at low GPU utilization, read from the system metrics of jobs' runs (tracking).

The SDK logs each GPU's utilization as `system/gpu.<i>.utilization` (percent, every 10 s by default); other
loggers use keys like `system/gpu_util`: every key tracking's GPU utilization rule watches counts. A point
counts from its time until the next point of its series and attempt, at most `GAP_CAP` seconds, and only while its
attempt held devices inside the window; the time of points under the threshold is low. Each series stands for an
equal share of the job's devices (rank 0 logs its own node's GPUs; the other nodes are taken to behave alike), so a
job's low device-seconds are its devices x its series' low seconds / its number of series. Series whose raw points
retention deleted are not read: their rollups keep only extremes."""

from __future__ import annotations

import math
from collections import Counter, defaultdict
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from itertools import chain, groupby, pairwise

from costs.analysis import Scope, chunks
from costs.pricing import PriceBook, Usage
from tracking.models import Point, Run, Series
from tracking.series.anomaly import GPU_UTIL_COLLAPSE, rules_for_key

GAP_CAP = 300  # seconds a point counts for at most: a longer silence is not known to be idle
POINTS_CHUNK = 5000


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
                    book: PriceBook) -> dict[int, Low]:
    """Per job: device-seconds and cost inside the window at GPU utilization under `below` percent. `held` has
    the attempts (job, number) metered in the window: only their jobs' runs are read."""
    run_jobs: dict[int, int] = {}
    for batch in chunks({job for job, _ in held}):
        run_jobs.update(Run.objects.filter(job_id__in=batch).values_list("id", "job_id"))
    series_runs: dict[int, int] = {}
    for batch in chunks(run_jobs):
        for series_id, run_id, key in (Series.objects.filter(run_id__in=batch, key__istartswith="system/gpu",
                                                             raw_pruned=False)
                                       .values_list("id", "run_id", "key")):
            if GPU_UTIL_COLLAPSE in rules_for_key(key):  # tracking's own test of a GPU utilization key
                series_runs[series_id] = run_id
    shares = Counter(series_runs.values())  # GPU series per run
    found: dict[int, Low] = defaultdict(Low)
    start, until = scope.window.start_ts, scope.until_ts
    for batch in chunks(series_runs):
        points = (Point.objects.filter(series_id__in=batch, timestamp__gte=(start - GAP_CAP) * 1000,
                                       timestamp__lt=until * 1000)
                  .order_by("series_id", "attempt", "timestamp").values_list("series_id", "attempt", "timestamp",
                                                                             "value"))
        for (series_id, attempt), rows in groupby(points.iterator(chunk_size=POINTS_CHUNK), lambda p: p[:2]):
            run_id = series_runs[series_id]
            job = run_jobs[run_id]
            attempt_held = held.get((job, attempt))
            if attempt_held is None:
                continue
            first = max(start, attempt_held.start)
            last = min(until, attempt_held.end if attempt_held.end is not None else until)
            for a, b in _low_intervals(((ts, value) for _, _, ts, value in rows), below, first, last):
                found[job].device_seconds += attempt_held.usage.devices * (b - a) / shares[run_id]
                found[job].cost += book.cost(attempt_held.usage, a, b) / shares[run_id]
    return dict(found)


def _low_intervals(points: Iterable[tuple[int, float | None]], below: float, first: int,
                   last: int) -> Iterator[tuple[float, float]]:
    """Merged intervals inside [first, last) of the points (ms timestamps, in order) under `below`."""
    current: tuple[float, float] | None = None
    for (ts, value), (following, _) in pairwise(chain(points, [(None, None)])):
        if value is None or value >= below:  # None: a NaN, not a reading
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
