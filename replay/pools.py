"""Tidal pools in trace replay (issue 30): a serving pool beside the training trace, lending what serving does not
need to training, in virtual time, through the production core (jobs/scheduling/pools.py).

The pool is `PoolSpec.nodes` extra nodes of the trace's flavor whose devices online serving owns. Its demand (devices
serving needs) follows a one-day curve repeated over the trace's days, each day scaled by a factor drawn from the
day's number (`day_spread`: no two days alike, so a forecast from yesterday is not an oracle). What training may
hold of it (`Pool.lendable`) depends on the lending mode:

- "none": nothing (the pool idles when serving does not need it);
- "schedule": everything above `schedule_floor` devices inside the daily windows `windows` (Volcano tdm's revocable
  zones), nothing outside them, whatever serving does;
- "demand": its devices less serving's demand now less the headroom (`headroom_percent` of the demand, at least
  `headroom_floor` devices);
- "forecast": as "demand", but against the most serving is expected to need from now to `lead` seconds ahead,
  expected from the same time yesterday: lending stops before a known rise by the time a give-back takes.

When what training holds there rises above what the pool lends, the core gives devices back (grown replicas first,
then preemptible jobs) and the engine keeps those devices busy for the victims' termination grace (`grace`: they
checkpoint meanwhile) before serving gets them. `PoolMeter` integrates what serving demanded and did not get, what
was lendable, what training used, and how long each give-back took (from lending falling below what training held
to the devices being free).

The GenAI serving curve (`alibaba_curve`) is read in place from the shared traces directory (research use only,
never copied into the repo). Its timestamps are anonymised: it is stretched to 24 h (its samples are 57 s apart
for 60 s, see the traces' README) and its first sample is placed at 08:00 (`GENAI_START`), so its busy spells fall in
working hours and its quiet ones at night, as the 22:00-08:00 schedule assumes.
"""

from __future__ import annotations

import csv
import hashlib
import math
from bisect import bisect_right
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from jobs.scheduling.model import Node, Pool

DAY = 86_400.0
HOUR = 3_600.0
GENAI_FILE = "alibaba_genai_gpu_demand_5min.csv"
GENAI_START = 8 * HOUR  # the clock time given to the curve's first sample (the trace has none)
GENAI_STRETCH = 60.0 / 57.0  # its samples are 57 s apart for what looks like a minute each
LENDING_MODES = ("none", "schedule", "demand", "forecast")


class PoolError(ValueError):
    """A pool curve or setting that cannot be used (the message names the file, line or field)."""


@dataclass(frozen=True)
class PoolSpec:
    curve: tuple[tuple[float, float], ...]  # (second of the day, share of the pool serving needs), by time
    name: str = "serving"
    nodes: int = 16
    node_devices: int = 8
    lending: str = "forecast"
    headroom_percent: float = 10.0
    headroom_floor: int = 4
    windows: tuple[tuple[float, float], ...] = ((22 * HOUR, 8 * HOUR),)  # (start, end) second of the day; wraps
    schedule_floor: int = 8
    grace: float = 30.0  # seconds a job given back holds its devices to checkpoint
    lead: float = 120.0  # forecast: how far ahead lending looks (a give-back's time, with margin)
    day_spread: float = 0.15  # each day's demand is the curve x a factor in [1 - spread, 1 + spread]

    def __post_init__(self) -> None:
        checks = (
            ("lending", self.lending in LENDING_MODES, f"one of {', '.join(LENDING_MODES)}"),
            ("nodes", self.nodes >= 1, "at least 1"),
            ("node_devices", self.node_devices >= 1, "at least 1"),
            ("headroom_percent", 0.0 <= self.headroom_percent <= 100.0, "a percent from 0 to 100"),
            ("headroom_floor", self.headroom_floor >= 0, "devices, at least 0"),
            ("schedule_floor", self.schedule_floor >= 0, "devices, at least 0"),
            ("grace", self.grace >= 0.0, "seconds, at least 0"),
            ("lead", self.lead >= 0.0, "seconds, at least 0"),
            ("day_spread", 0.0 <= self.day_spread < 1.0, "from 0 to below 1"),
            ("curve", bool(self.curve), "at least one point"),
        )
        for name, ok, what in checks:
            if not ok:
                raise PoolError(f"pool {name} must be {what}, got {getattr(self, name)!r}")

    @property
    def devices(self) -> int:
        return self.nodes * self.node_devices


def alibaba_curve(path: Path) -> tuple[tuple[float, float], ...]:
    """The GenAI serving day as (second of the day, share of its pods serving needs): `pods_needed_20pct_headroom`
    over `pods` of each 5-minute bin (see the module for the clock)."""
    points = []
    for row in _rows(path, ("t_s", "pods", "pods_needed_20pct_headroom")):
        pods = float(row["pods"])
        share = float(row["pods_needed_20pct_headroom"]) / pods if pods > 0 else 0.0
        points.append(((GENAI_START + float(row["t_s"]) * GENAI_STRETCH) % DAY, min(1.0, share)))
    return _by_time(points, path)


def csv_curve(path: Path, devices: int) -> tuple[tuple[float, float], ...]:
    """A `t_s,demand` CSV: serving's demand in devices from t_s (seconds of the day) on, as a share of `devices`."""
    points = []
    for line, row in enumerate(_rows(path, ("t_s", "demand")), start=2):
        try:
            t, demand = float(row["t_s"]), float(row["demand"])
        except ValueError:
            raise PoolError(f"{path}:{line}: t_s and demand must be numbers") from None
        if not (0.0 <= t < DAY) or not (0.0 <= demand <= devices):
            raise PoolError(f"{path}:{line}: t_s must be a second of the day (0 to 86399) and demand "
                            f"devices from 0 to the pool's {devices}")
        points.append((t, demand / devices))
    return _by_time(points, path)


def _rows(path: Path, columns: tuple[str, ...]) -> Iterator[dict[str, str]]:
    with open(path, newline="", encoding="utf-8") as handle:
        reader = csv.DictReader(handle)
        missing = [c for c in columns if c not in (reader.fieldnames or ())]
        if missing:
            raise PoolError(f"{path}: missing column(s) {', '.join(missing)}")
        yield from reader


def _by_time(points: list[tuple[float, float]], path: Path) -> tuple[tuple[float, float], ...]:
    if not points:
        raise PoolError(f"{path}: no demand points")
    return tuple(sorted(points))


def pool_nodes(spec: PoolSpec, flavor: str) -> tuple[Node, ...]:
    """The pool's nodes: `flavor`, all free (serving's use is what the pool does not lend)."""
    return tuple(Node(f"{spec.name}-{i:03d}", flavor, spec.node_devices, spec.node_devices, cluster=spec.name,
                      pool=spec.name) for i in range(spec.nodes))


def day_factor(spec: PoolSpec, day: int) -> float:
    """The day's demand scale: a hash of the pool's name and the day read as a number in [1 - s, 1 + s]."""
    digest = hashlib.sha256(f"{spec.name}/{day}".encode()).digest()
    return 1.0 + spec.day_spread * (2.0 * int.from_bytes(digest[:8], "big") / float(1 << 64) - 1.0)


class PoolClock:
    """Serving's demand and the pool's lending over virtual time (seconds from the trace's midnight)."""

    def __init__(self, spec: PoolSpec) -> None:
        self.spec = spec
        self.times = [t for t, _ in spec.curve]
        self.shares = [s for _, s in spec.curve]
        self.factors: dict[int, float] = {}  # day -> day_factor (asked at every event)

    def demand(self, t: float) -> int:
        """Devices serving needs at `t` (the curve's bin holding it, scaled by the day)."""
        day, second = divmod(t, DAY)
        i = bisect_right(self.times, second) - 1  # before the first point of a day: the day before's last
        factor = self.factors.get(int(day))
        if factor is None:
            factor = self.factors[int(day)] = day_factor(self.spec, int(day))
        return min(self.spec.devices, math.ceil(self.shares[i] * factor * self.spec.devices - 1e-9))

    def headroom(self, demand: int) -> int:
        return max(self.spec.headroom_floor, math.ceil(demand * self.spec.headroom_percent / 100.0))

    def expected(self, t: float) -> int:
        """The most serving is expected to need from `t` to `t + lead`: now, and what it needed over the same
        span yesterday (on the first day, now only)."""
        most = self.demand(t)
        if t < DAY:
            return most
        start, end = t - DAY, t - DAY + self.spec.lead
        most = max(most, self.demand(start))
        for change in self._changes_between(start, end):
            most = max(most, self.demand(change))
        return most

    def lendable(self, t: float) -> int:
        spec = self.spec
        if spec.lending == "none":
            return 0
        if spec.lending == "schedule":
            return max(0, spec.devices - spec.schedule_floor) if self.in_window(t) else 0
        need = self.demand(t) if spec.lending == "demand" else self.expected(t)
        return max(0, spec.devices - need - self.headroom(need))

    def back_at(self, t: float) -> float | None:
        """When a schedule's window ends (None for the other modes: they follow demand)."""
        if self.spec.lending != "schedule" or not self.in_window(t):
            return None
        return next(edge for edge in self._edges_from(t) if not self.in_window(edge))

    def in_window(self, t: float) -> bool:
        second = t % DAY
        return any(start <= second < end if start <= end else (second >= start or second < end)
                   for start, end in self.spec.windows)

    def changes(self) -> Iterator[float]:
        """Every instant the pool's lending may change, in order, forever: the curve's points of every day, those
        moved `lead` earlier for a forecast, and a schedule's window edges."""
        day = 0
        while True:
            base = day * DAY
            moments = {base} | {base + t for t in self.times}  # midnight: the day's factor changes
            if self.spec.lending == "forecast":
                moments |= {m - self.spec.lead for m in moments}
            if self.spec.lending == "schedule":
                moments |= {base + edge for window in self.spec.windows for edge in window}
            yield from sorted(m for m in moments if m >= 0.0)
            day += 1

    def _changes_between(self, start: float, end: float) -> Iterator[float]:
        base = math.floor(start / DAY) * DAY
        for day in (base, base + DAY):  # the span may cross midnight
            first = bisect_right(self.times, start - day)
            last = bisect_right(self.times, end - day)
            for t in self.times[first:last]:
                yield day + t

    def _edges_from(self, t: float) -> Iterator[float]:
        day = math.floor(t / DAY)
        while True:
            for edge in sorted(e for window in self.spec.windows for e in window):
                moment = day * DAY + edge
                if moment > t:
                    yield moment
            day += 1

    def pool(self, t: float) -> Pool:
        return Pool(self.spec.name, self.lendable(t), self.back_at(t))


@dataclass
class PoolMeter:
    """What the pool did over a replay (integrals in device-seconds), counted over the trace's submissions (from 0 to
    `until`, its last arrival): after that training's queue only drains, and lending to nobody says nothing."""

    devices: int  # the pool's
    capacity: int  # the whole cluster's, the pool's included
    until: float
    used_s: float = 0.0  # devices training held anywhere (the pool's included)
    demand_s: float = 0.0  # serving's demand
    unmet_s: float = 0.0  # ... that the devices training held (or was still giving back) left without
    lendable_s: float = 0.0  # what the pool lent
    training_s: float = 0.0  # what training ran on it
    # What it lent and training left idle, by what waited then: work that may borrow (preemptible), only work that
    # may not, nothing (why training uses less than the pool lends).
    idle_borrower_waiting_s: float = 0.0
    idle_rigid_waiting_s: float = 0.0
    idle_nothing_waiting_s: float = 0.0
    idle_growable_s: float = 0.0  # ... of it while an elastic job ran below its max, past its cooldown
    draining_s: float = 0.0  # what jobs given back held during their grace
    give_backs: list[float] = field(default_factory=list)  # seconds each took
    given_back_jobs: int = 0  # preemptions and shrinks that gave devices back
    lost_work: float = 0.0  # device-seconds of training work those lost
    span: float = 0.0
    open_since: float | None = None  # a give-back under way since

    def advance(self, last: float, t: float, demand: int, lendable: int, used: int, training: int,
                draining: int, waiting: tuple[int, int] = (0, 0), growable: bool = False) -> None:
        """Integrate [last, t) with the pool as it stood: serving's demand, what the pool lent, what training held
        in all (`used`) and of the pool (`training`), what give-backs in their grace held, how many jobs waited
        (`waiting`: preemptible ones, others), and whether an elastic job ran below its max past its cooldown
        (`growable`: growth could have used what the pool lent)."""
        dt = min(t, self.until) - last
        if dt <= 0:
            return
        self.span += dt
        self.used_s += used * dt
        self.demand_s += demand * dt
        self.unmet_s += max(0, demand - (self.devices - training - draining)) * dt
        self.lendable_s += lendable * dt
        self.training_s += training * dt
        self.draining_s += draining * dt
        idle = max(0, lendable - training) * dt
        if waiting[0]:
            self.idle_borrower_waiting_s += idle
        elif waiting[1]:
            self.idle_rigid_waiting_s += idle
        else:
            self.idle_nothing_waiting_s += idle
            if growable:
                self.idle_growable_s += idle

    def utilisation(self) -> float:
        """Device-hours used (training's, and serving's demand it got) over device-hours available, the pool's
        included."""
        if not self.span:
            return 0.0
        return (self.used_s + self.demand_s - self.unmet_s) / (self.capacity * self.span)

    def observe(self, now: float, held: int, lendable: int) -> None:
        """After the decisions of `now`: a give-back starts when training holds (running or in its grace) more
        than the pool lends, and ends when it no longer does."""
        if held > lendable and self.open_since is None:
            self.open_since = now
        elif held <= lendable and self.open_since is not None:
            self.give_backs.append(now - self.open_since)
            self.open_since = None


def pool_summary(spec: PoolSpec, meter: PoolMeter) -> dict[str, float | int | str | None]:
    """What a replay's pool did, as plain data (JSON-ready; GPU-hours, percents, seconds)."""
    backs = sorted(meter.give_backs)
    return {
        "lending": spec.lending,
        "devices": spec.devices,
        "headroom_percent": spec.headroom_percent,
        "grace_s": spec.grace,
        "demand_gpu_h": meter.demand_s / HOUR,
        "unmet_percent": 100.0 * meter.unmet_s / meter.demand_s if meter.demand_s else 0.0,
        "lendable_gpu_h": meter.lendable_s / HOUR,
        "training_gpu_h": meter.training_s / HOUR,
        "lendable_used_percent": 100.0 * meter.training_s / meter.lendable_s if meter.lendable_s else None,
        # Lent and left idle, by what waited then (preemptible work / only other work / nothing).
        "idle_borrower_waiting_gpu_h": meter.idle_borrower_waiting_s / HOUR,
        "idle_rigid_waiting_gpu_h": meter.idle_rigid_waiting_s / HOUR,
        "idle_nothing_waiting_gpu_h": meter.idle_nothing_waiting_s / HOUR,
        "idle_growable_gpu_h": meter.idle_growable_s / HOUR,
        "give_backs": len(backs),
        "give_back_p50_s": _percentile(backs, 0.50),
        "give_back_p99_s": _percentile(backs, 0.99),
        "jobs_given_back": meter.given_back_jobs,
        "lost_gpu_h": meter.lost_work / HOUR,
        "lost_percent": 100.0 * meter.lost_work / meter.training_s if meter.training_s else 0.0,
        "utilisation_percent": 100.0 * meter.utilisation(),
    }


def _percentile(values: list[float], q: float) -> float | None:
    """The nearest-rank percentile of sorted values (None when there is none)."""
    if not values:
        return None
    return values[min(len(values) - 1, math.ceil(q * len(values)) - 1)]


def format_pool(name: str, summary: dict[str, float | int | str | None]) -> str:
    """One line of a pool's figures for the replay command's output."""
    def fmt(value: float | int | str | None, digits: int = 1) -> str:
        return "-" if value is None else f"{value:,.{digits}f}" if isinstance(value, float) else str(value)

    return (f"{name}: pool of {summary['devices']} devices lending by {summary['lending']}: "
            f"serving demanded {fmt(summary['demand_gpu_h'], 0)} GPU-h, {fmt(summary['unmet_percent'], 3)}% unmet; "
            f"lent {fmt(summary['lendable_gpu_h'], 0)} GPU-h, training used {fmt(summary['training_gpu_h'], 0)} "
            f"({fmt(summary['lendable_used_percent'])}%); {summary['give_backs']} give-backs, p50 "
            f"{fmt(summary['give_back_p50_s'], 0)} s, p99 {fmt(summary['give_back_p99_s'], 0)} s; "
            f"work lost {fmt(summary['lost_gpu_h'])} GPU-h ({fmt(summary['lost_percent'], 2)}% of what it "
            f"borrowed); cluster utilisation {fmt(summary['utilisation_percent'])}%")
