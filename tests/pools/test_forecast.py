"""The forecast source (pools/forecast.py): lending stops a give-back time ahead of a rise seen on past days, and
the pool's history keeps what serving demanded, never the forecast itself."""

from __future__ import annotations

from datetime import timedelta

from django.utils import timezone

from jobs.snapshot import build_snapshot
from pools import forecast
from pools.demand import Reading, Settings, figures
from pools.models import GiveBack, PoolSample

NOW = 100 * forecast.DAY + 8 * 3600.0  # 08:00 on day 100


def test_the_most_demanded_over_the_coming_lead_on_past_days_is_expected():
    history = [(NOW - forecast.DAY + 30, 12),  # yesterday, 30 s after this moment: a rise
               (NOW - forecast.DAY - 30, 20),  # yesterday, before this moment: past, not coming
               (NOW - 7 * forecast.DAY + 50, 9),  # the same day last week
               (NOW - 8 * forecast.DAY + 10, 30)]  # older than a week: not looked at
    assert forecast.expected(history, NOW, 60.0) == (12, NOW + 30)
    assert forecast.expected(history, NOW, 20.0) is None  # the rise is beyond a 20 s look-ahead
    assert forecast.expected([], NOW, 60.0) is None


def test_the_look_ahead_is_the_slowest_recent_give_back_and_at_least_a_minute():
    assert forecast.lead_time([]) == forecast.LEAD_FLOOR
    assert forecast.lead_time([5.0, 12.0]) == forecast.LEAD_FLOOR
    assert forecast.lead_time([10.0] * 99 + [240.0]) == 240.0


def test_a_forecast_rise_stops_lending_now_and_says_when_it_comes():
    f = figures(Settings(16), Reading(api=2, api_at=0.0, forecast=14, forecast_at=NOW + 30), NOW)
    assert (f.demand, f.observed, f.lendable, f.back_at) == (14, 2, 2, NOW + 30)


def test_the_pool_stops_lending_before_a_rise_it_saw_yesterday(pool):
    from pools import services

    services.demand_set(pool=pool, devices=0)
    now = timezone.now()
    PoolSample.objects.create(pool=pool, at=now - timedelta(days=1, seconds=-40), capacity=16, demand=16,
                              headroom=0, lent=0, used=0)
    PoolSample.objects.create(pool=pool, at=now - timedelta(days=1, seconds=600), capacity=16, demand=16,
                              headroom=0, lent=0, used=0)  # ten minutes before this moment yesterday: past
    assert [p.lendable for p in build_snapshot(now.timestamp()).snapshot.pools] == [16]  # forecast off
    pool.use_forecast = True
    pool.save()
    assert [p.lendable for p in build_snapshot(now.timestamp()).snapshot.pools] == [0]
    # A slow give-back lengthens the look-ahead: a rise 100 s ahead is seen only then.
    PoolSample.objects.filter(demand=16).update(at=now - timedelta(days=1, seconds=-100))
    assert [p.lendable for p in build_snapshot(now.timestamp()).snapshot.pools] == [16]
    GiveBack.objects.create(pool=pool, started_at=now - timedelta(hours=1), devices=8,
                            freed_at=now - timedelta(hours=1) + timedelta(seconds=150))
    assert [p.lendable for p in build_snapshot(now.timestamp()).snapshot.pools] == [0]
