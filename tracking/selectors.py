"""Reads of experiments, runs and series, scoped to what the caller may see."""

from __future__ import annotations

import math

from django.db.models import QuerySet, Sum

from tenancy.selectors import User, project_ids_for_user
from tracking.auth import RunCredential
from tracking.models import Alert, Experiment, Point, Rollup, Run, Series
from tracking.series.downsample import Downsampled, downsample, latest_attempt_per_step
from tracking.series.rollup import LEVEL_STEPS, Aggregate, downsample_rollups

RAW_LIMIT = 20_000  # points of a range read raw at most; longer ranges are read from rollups


def experiments_for_user(user: User) -> QuerySet[Experiment]:
    return (Experiment.objects.filter(project_id__in=project_ids_for_user(user)).select_related("project")
            .order_by("name", "id"))


def runs_for_user(user: User) -> QuerySet[Run]:
    return Run.objects.filter(project_id__in=project_ids_for_user(user)).select_related("project", "experiment")


def run_of_token(credential: RunCredential) -> Run | None:
    """The one run a run token may see."""
    return Run.objects.filter(pk=credential.run_id).select_related("project", "experiment").first()


def alerts_for_user(user: User) -> QuerySet[Alert]:
    return Alert.objects.filter(run__project_id__in=project_ids_for_user(user)).select_related("run")


def run_keys(run: Run) -> list[str]:
    """The run's metric keys; the summary holds every key ingestion saw."""
    return sorted(run.summary)


def series(run: Run, key: str, *, max_points: int, min_step: int | None = None,
           max_step: int | None = None) -> Downsampled:
    """One key of a run, at most `max_points` points keeping every extreme (see tracking.series.downsample).

    Up to RAW_LIMIT points (or max_points) are read raw and downsampled exactly; a longer range is read from the
    finest rollup level with at most 4 x max_points chunks in it (tracking.series.rollup), so a month-long run
    costs a few thousand rows. From rollups, buckets are whole chunks: with a step range, the chunks at its two
    edges may add extremes from up to one chunk outside it (zooming in further reads raw points)."""
    series_id = Series.objects.filter(run=run, key=key).values_list("id", flat=True).first()
    if series_id is None:
        return Downsampled([], [], 0)
    written = _rollups(series_id, 0, min_step, max_step).aggregate(n=Sum("count"))["n"] or 0
    if written <= max(RAW_LIMIT, max_points):
        return downsample(full_series(run, key, min_step=min_step, max_step=max_step), max_points)
    for level in range(len(LEVEL_STEPS)):
        rows = _rollups(series_id, level, min_step, max_step)
        if level == len(LEVEL_STEPS) - 1 or rows.count() <= 4 * max_points:
            chunks = rows.order_by("chunk").values_list("chunk", *Rollup.AGGREGATE_FIELDS)
            return downsample_rollups([Aggregate(*row) for row in chunks], max_points)
    raise AssertionError("unreachable: the last level always returns")


def _rollups(series_id: int, level: int, min_step: int | None, max_step: int | None) -> QuerySet[Rollup]:
    rows = Rollup.objects.filter(series_id=series_id, level=level)
    if min_step is not None:
        rows = rows.filter(chunk__gte=min_step // LEVEL_STEPS[level])
    if max_step is not None:
        rows = rows.filter(chunk__lte=max_step // LEVEL_STEPS[level])
    return rows


def full_series(run: Run, key: str, *, min_step: int | None = None,
                max_step: int | None = None) -> list[tuple[int, float]]:
    rows = Point.objects.filter(series__run=run, series__key=key)
    if min_step is not None:
        rows = rows.filter(step__gte=min_step)
    if max_step is not None:
        rows = rows.filter(step__lte=max_step)
    values = rows.order_by("step", "attempt").values_list("step", "attempt", "value")
    return latest_attempt_per_step([(s, a, math.nan if v is None else v) for s, a, v in values.iterator(5000)])


def attempt_starts(run: Run) -> list[dict]:
    """The first step each attempt logged: where the chart marks a restart (retry, requeue after preemption)."""
    return [{"attempt": int(number), "step": step, "timestamp": ts}
            for number, (step, ts) in sorted(run.attempt_starts.items(), key=lambda item: int(item[0]))]
