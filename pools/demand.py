"""What a pool's serving demands now and what it lends: pure functions of its settings and its sources' readings.

Sources, any combination; the pool follows the largest: the demand API's last value, the devices pods on its nodes
hold (Tidal's own services' desired replicas plus the pods Tidal did not create, which node sync counts: a
service's pods carry Tidal's labels, so node sync does not count them as foreign and nothing is counted twice), a
schedule (inside its windows serving needs only the floor, outside them every device), and a forecast (forecast.py:
the most serving demanded over the coming give-back time on past days, so lending stops before a known rise).
Headroom is a percent of demand, at least the floor, kept unlent.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import datetime, time, timedelta
from zoneinfo import ZoneInfo


@dataclass(frozen=True)
class Settings:
    capacity: int  # devices of the pool's nodes
    headroom_percent: int = 0
    headroom_floor: int = 0
    time_zone: str = "UTC"
    windows: tuple[str, ...] = ()  # "HH:MM-HH:MM", local time
    schedule_floor: int = 0
    lending: bool = True


@dataclass(frozen=True)
class Reading:
    """What the sources say now: the API's value and when it changed (None: not a source), foreign devices (None:
    not counted), the devices of Tidal's services' desired replicas and when they last rose (None: no service), the
    forecast for the coming give-back time and when that rise is expected (None: no forecast)."""

    api: int | None = None
    api_at: float | None = None
    foreign: int | None = None
    forecast: int | None = None
    forecast_at: float | None = None
    services: int | None = None
    services_at: float | None = None


@dataclass(frozen=True)
class Figures:
    demand: int  # what the pool keeps for serving (the forecast included)
    headroom: int
    lendable: int
    changed_at: float  # when what decides the demand last changed (the start of a give-back it causes)
    back_at: float | None  # when the schedule or the forecast stops lending (None: not known)
    observed: int = 0  # what serving demands now, the forecast left out: what the pool's history keeps


def _parse(window: str) -> tuple[time, time]:
    start, end = window.split("-")
    return time.fromisoformat(start), time.fromisoformat(end)


def _inside(local: time, start: time, end: time) -> bool:
    return start <= local < end if start < end else local >= start or local < end


def _at(day: datetime, clock: time, zone: ZoneInfo) -> datetime:
    """`clock` on `day`'s local date, as an aware time: the wall clock, whatever offset daylight saving gives it."""
    return datetime.combine(day.date(), clock, tzinfo=zone)


def _last_boundary(now: datetime, windows: tuple[str, ...], zone: ZoneInfo) -> datetime:
    """The latest window start or end at or before `now`."""
    boundaries = [_at(now + timedelta(days=d), clock, zone) for d in (-1, 0) for w in windows for clock in _parse(w)]
    return max(b for b in boundaries if b <= now)


def schedule(now: float, windows: tuple[str, ...], time_zone: str) -> tuple[bool, float, float | None]:
    """Whether `now` is inside a window, when that last changed, and when the window ends (None: outside)."""
    zone = ZoneInfo(time_zone)
    moment = datetime.fromtimestamp(now, zone)
    local = moment.timetz().replace(tzinfo=None)
    for window in windows:
        start, end = _parse(window)
        if _inside(local, start, end):
            days = 1 if end <= local else 0
            ends = _at(moment + timedelta(days=days), end, zone)
            return True, _last_boundary(moment, windows, zone).timestamp(), ends.timestamp()
    return False, _last_boundary(moment, windows, zone).timestamp(), None


def figures(settings: Settings, reading: Reading, now: float) -> Figures:
    """Demand (the largest source's), headroom and what the pool lends now (never below 0)."""
    demands: list[tuple[int, float]] = []  # (devices, since when)
    back_at = None
    if reading.api is not None:
        demands.append((reading.api, reading.api_at if reading.api_at is not None else now))
    if reading.foreign is not None:
        demands.append((reading.foreign, now))
    if reading.services is not None:
        # Tidal's services and the pods it did not create both hold the pool's devices: together, serving's.
        demands.append((reading.services + (reading.foreign or 0),
                        reading.services_at if reading.services_at is not None else now))
    if settings.windows:
        inside, since, back_at = schedule(now, settings.windows, settings.time_zone)
        demands.append((settings.schedule_floor if inside else settings.capacity, since))
    observed = min(max((d for d, _ in demands), default=0), settings.capacity)
    if reading.forecast is not None:
        demands.append((reading.forecast, now))
        if reading.forecast > observed and reading.forecast_at is not None:
            back_at = reading.forecast_at if back_at is None else min(back_at, reading.forecast_at)
    demand, changed_at = max(demands, default=(0, now), key=lambda d: (d[0], -d[1]))
    demand = min(demand, settings.capacity)
    headroom = max(settings.headroom_floor, math.ceil(demand * settings.headroom_percent / 100))
    lendable = max(0, settings.capacity - demand - headroom) if settings.lending else 0
    return Figures(demand, headroom, lendable, changed_at, back_at if lendable else None, observed)
