"""What a pool demands and lends (pools/demand.py): the largest source wins, headroom is a percent of demand with a
floor, and schedule windows follow the pool's wall clock across daylight-saving changes."""

from __future__ import annotations

from datetime import datetime
from zoneinfo import ZoneInfo

import pytest

from pools.demand import Reading, Settings, figures, schedule

BERLIN = ZoneInfo("Europe/Berlin")


def at(text: str, zone=BERLIN) -> float:
    return datetime.fromisoformat(text).replace(tzinfo=zone).timestamp()


def test_lends_above_demand_plus_headroom_only():
    f = figures(Settings(32, headroom_percent=25, headroom_floor=2), Reading(api=12, api_at=100.0), 200.0)
    assert (f.demand, f.headroom, f.lendable, f.changed_at) == (12, 3, 17, 100.0)


def test_the_headroom_floor_holds_when_demand_is_low():
    f = figures(Settings(32, headroom_percent=25, headroom_floor=4), Reading(api=0, api_at=0.0), 1.0)
    assert (f.headroom, f.lendable) == (4, 28)


def test_the_largest_source_decides_and_foreign_pods_are_demand():
    f = figures(Settings(32), Reading(api=4, api_at=0.0, foreign=10), 50.0)
    assert (f.demand, f.lendable, f.changed_at) == (10, 22, 50.0)


def test_services_and_foreign_pods_hold_devices_together_and_the_api_is_an_alternative():
    """A service's pods carry Tidal's labels (not foreign): its replicas and the foreign pods add up, once each."""
    f = figures(Settings(32), Reading(api=4, api_at=0.0, foreign=6, services=8, services_at=40.0), 50.0)
    assert (f.demand, f.lendable, f.changed_at, f.observed) == (14, 18, 40.0, 14)
    assert figures(Settings(32), Reading(api=20, api_at=0.0, foreign=6, services=8), 50.0).demand == 20
    assert figures(Settings(32), Reading(services=0, services_at=1.0), 50.0).lendable == 32


def test_demand_beyond_the_pool_lends_nothing_and_lending_off_lends_nothing():
    assert figures(Settings(16), Reading(api=40), 0.0).lendable == 0
    assert figures(Settings(16, lending=False), Reading(api=0), 0.0).lendable == 0


@pytest.mark.parametrize(("local", "inside", "ends"), [
    ("2026-03-28T21:59", False, None),
    ("2026-03-28T22:00", True, "2026-03-29T08:00"),  # the night clocks go forward (02:00 -> 03:00)
    ("2026-03-29T07:59", True, "2026-03-29T08:00"),
    ("2026-03-29T08:00", False, None),
    ("2026-10-24T23:00", True, "2026-10-25T08:00"),  # the night clocks go back (03:00 -> 02:00)
])
def test_schedule_windows_follow_the_wall_clock_across_daylight_saving(local, inside, ends):
    now = at(local)
    found, _, end = schedule(now, ("22:00-08:00",), "Europe/Berlin")
    assert found is inside
    assert end == (at(ends) if ends else None)


def test_a_night_window_across_a_dst_change_lasts_an_hour_less_or_more_in_utc():
    spring = schedule(at("2026-03-28T22:00"), ("22:00-08:00",), "Europe/Berlin")
    autumn = schedule(at("2026-10-24T22:00"), ("22:00-08:00",), "Europe/Berlin")
    assert spring[2] - at("2026-03-28T22:00") == 9 * 3600
    assert autumn[2] - at("2026-10-24T22:00") == 11 * 3600


def test_the_schedule_lends_above_its_floor_inside_a_window_and_nothing_outside():
    settings = Settings(32, headroom_floor=2, time_zone="Europe/Berlin", windows=("22:00-08:00",), schedule_floor=8)
    night = figures(settings, Reading(), at("2026-03-29T03:30"))
    day = figures(settings, Reading(), at("2026-03-29T12:00"))
    assert (night.demand, night.lendable, night.back_at) == (8, 22, at("2026-03-29T08:00"))
    assert night.changed_at == at("2026-03-28T22:00")
    assert (day.demand, day.lendable, day.back_at) == (32, 0, None)
    assert day.changed_at == at("2026-03-29T08:00")


def test_a_demand_api_value_above_the_schedule_floor_wins_at_night():
    settings = Settings(32, windows=("22:00-08:00",), schedule_floor=8, time_zone="Europe/Berlin")
    f = figures(settings, Reading(api=20, api_at=5.0), at("2026-03-29T03:30"))
    assert (f.demand, f.lendable, f.changed_at) == (20, 12, 5.0)
