"""Retention of raw points: runs ended long enough ago keep only their rollups, and their charts still show every
extreme."""

from __future__ import annotations

import math
from datetime import timedelta

import pytest
from django.conf import settings
from django.db.models import Sum
from django.utils import timezone

from tracking import selectors, services
from tracking.models import PointBlock, Run
from tracking.points import stored_points

pytestmark = pytest.mark.django_db


def ended_run(tenant, days_ago: float | None, name: str) -> Run:
    run = services.run_create(project=tenant.project, name=name)
    values = [1.0 + (s % 5) / 10 for s in range(3000)]
    values[1500] = 40.0
    points = [{"key": "loss", "value": v, "step": s} for s, v in enumerate(values)]
    points[2500]["value"] = "NaN"
    services.run_log_batch(run_id=run.pk, metrics=points)
    if days_ago is not None:
        Run.objects.filter(pk=run.pk).update(status="FINISHED", ended_at=timezone.now() - timedelta(days=days_ago))
    return Run.objects.get(pk=run.pk)


@pytest.fixture
def keep_30_days(settings):
    settings.TIDAL = {**settings.TIDAL, "TRACKING_RAW_RETENTION_DAYS": 30}


def test_only_runs_ended_before_the_retention_lose_their_raw_points(tenant, keep_30_days):
    old, recent, running = (ended_run(tenant, 40, "old"), ended_run(tenant, 10, "recent"),
                            ended_run(tenant, None, "running"))
    assert services.points_prune_raw() == 1
    assert not stored_points(old.pk)
    assert len(stored_points(recent.pk)) == len(stored_points(running.pk)) == 3000
    assert services.points_prune_raw() == 0  # done once


def test_a_pruned_series_still_shows_its_spike_and_nan(tenant, keep_30_days):
    run = ended_run(tenant, 40, "old")
    services.points_prune_raw()
    chart = selectors.series(run, "loss", max_points=100)
    assert (1500, 40.0) in chart.points and len(chart.points) <= 100
    assert [s for s, v in chart.markers if math.isnan(v)] == [2500]
    full = selectors.full_series(run, "loss")  # CSV and zoom: every chunk's extremes
    assert (1500, 40.0) in full and any(s == 2500 and math.isnan(v) for s, v in full)
    assert {v for _, v in full if math.isfinite(v)} >= {1.0, 1.4, 40.0}
    assert len(full) < 20  # three chunks of 1,024 steps, not 3,000 points


def test_no_retention_keeps_everything(tenant):
    assert settings.TIDAL["TRACKING_RAW_RETENTION_DAYS"] == 0
    ended_run(tenant, 4000, "ancient")
    assert services.points_prune_raw() == 0 and PointBlock.objects.aggregate(n=Sum("count"))["n"] == 3000
