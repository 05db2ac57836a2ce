"""Pricing, pure: what an interval of use cost under effective-dated prices. Plain data in, money out; no Django.

A price is in force from its date until the next one of the same key. A device price may be set per flavor (every
cluster) and per flavor and cluster (that cluster only, from its own first date on); a CPU core-hour prices jobs
that hold no device; a GiB-hour of memory is priced per flavor and cluster as devices are, for every segment (its
memory request, devices or not); a priority class pays `factor` of the price (preemptible capacity cheaper);
devices on tidal capacity (lent by a pool: `Usage.tidal_devices`) pay the tidal factor instead of their class's,
once one is set. An interval is cut at every change of any of these, so a price change in the middle of a segment
costs each side at its own price.
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

DAY = 86_400
HOUR = 3_600.0
# Prices and class factors are stored with 4 decimals (`costs.models`), so every price is an exact whole number of
# ten-thousandths and every hourly rate below an exact integer: money is computed without rounding and rounded
# once, to micro-units (MICROS a unit of the currency), where a piece of use is priced.
PRICE_SCALE = 10_000
MICROS = 1_000_000
# An hourly rate's unit, as a fraction of the currency: a price and a factor (ten-thousandths each), a thousandth of
# a core (CPU is requested in millicores), a 1024th of a GiB (memory in MiB).
RATE_SCALE = PRICE_SCALE * PRICE_SCALE * 1000 * 1024
# Rate x seconds / MICRO_DIVISOR = micro-units.
MICRO_DIVISOR = RATE_SCALE * 3600 // MICROS

Timeline = Sequence[tuple[int, float | Decimal]]  # (in force from, UTC epoch seconds; value), sorted by time


@dataclass(frozen=True, slots=True)
class Usage:
    """What a segment holds: its devices (or, with none, its CPU) of a flavor on a cluster, in a priority class."""

    flavor_id: int
    cluster_id: int | None
    priority_class_id: int
    devices: int
    cpu_millis: int
    memory_mib: int = 0
    tidal_devices: int = 0  # of `devices`, those on capacity a pool lent: they pay the tidal factor


def value_at(timeline: Sequence[tuple[int, Any]], at: float) -> Any:
    """The value in force at `at`, or None before the first date."""
    index = bisect_right(timeline, (at, float("inf"))) - 1
    return timeline[index][1] if index >= 0 else None


def _changes(timeline: Sequence[tuple[int, Any]], start: float, end: float) -> list[int]:
    return [since for since, _ in timeline if start < since < end]


def price_units(value: float | Decimal) -> int:
    """A price or factor as whole ten-thousandths, exactly (a float is read as its shortest decimal, 0.3 as 0.3);
    ValueError for a finer one, which the catalog's 4 decimals cannot hold."""
    scaled = Decimal(str(value)).scaleb(4)
    if scaled != scaled.to_integral_value():
        raise ValueError(f"{value} has more than 4 decimals")
    return int(scaled)


def _scaled(timeline: Timeline) -> list[tuple[int, int]]:
    return [(since, price_units(value)) for since, value in timeline]


def rounded_division(numerator: int, divisor: int) -> int:
    """numerator / divisor to the nearest integer, halves away from zero (numerator >= 0)."""
    return (2 * numerator + divisor) // (2 * divisor)


@dataclass(frozen=True)
class PriceBook:
    """Every price timeline: device prices by (flavor, cluster or None), the CPU core-hour, class discounts, memory
    prices (per GiB-hour) by (flavor, cluster or None). Values as the catalog stores them (Decimal; a float is read
    as its decimal), kept as whole ten-thousandths for the arithmetic."""

    device: Mapping[tuple[int, int | None], Timeline] = field(default_factory=dict)
    cpu: Timeline = ()
    discount: Mapping[int, Timeline] = field(default_factory=dict)
    memory: Mapping[tuple[int, int | None], Timeline] = field(default_factory=dict)
    tidal: Timeline = ()  # the factor devices on tidal capacity pay (before its first date: their class's)
    _units: dict[str, Any] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_units", {
            "device": {key: _scaled(line) for key, line in self.device.items()}, "cpu": _scaled(self.cpu),
            "discount": {key: _scaled(line) for key, line in self.discount.items()},
            "memory": {key: _scaled(line) for key, line in self.memory.items()}, "tidal": _scaled(self.tidal)})

    def _timelines(self, usage: Usage) -> list[Sequence[tuple[int, int]]]:
        units = self._units
        if usage.devices:
            prices = [units["device"].get((usage.flavor_id, None), ()),
                      units["device"].get((usage.flavor_id, usage.cluster_id), ())]
        else:
            prices = [units["cpu"]]
        if usage.memory_mib:
            prices += [units["memory"].get((usage.flavor_id, None), ()),
                       units["memory"].get((usage.flavor_id, usage.cluster_id), ())]
        if usage.tidal_devices:
            prices.append(units["tidal"])
        return [*prices, units["discount"].get(usage.priority_class_id, ())]

    @staticmethod
    def _flavor_price(table: Mapping[tuple[int, int | None], Sequence[tuple[int, int]]], usage: Usage,
                      at: float) -> int:
        """The flavor's price at `at`: its cluster's own when that has started, else the flavor's, else 0."""
        own = table.get((usage.flavor_id, usage.cluster_id), ()) if usage.cluster_id is not None else ()
        price = value_at(own, at)
        if price is None:
            price = value_at(table.get((usage.flavor_id, None), ()), at) or 0
        return int(price)

    def _rates(self, usage: Usage, at: float) -> tuple[int, int]:
        """What `usage` costs per hour at `at`, in RATE_SCALE units, exactly: its devices (or, with none, its CPU)
        and its memory, each at the class's factor (its devices on tidal capacity at the tidal factor, once set)."""
        units = self._units
        factor = value_at(units["discount"].get(usage.priority_class_id, ()), at)
        factor = PRICE_SCALE if factor is None else factor
        if usage.devices:
            device = 1000 * 1024 * self._flavor_price(units["device"], usage, at)
            tidal = value_at(units["tidal"], at) if usage.tidal_devices else None
            lent = usage.tidal_devices if tidal is not None else 0
            compute = (usage.devices - lent) * device * factor + lent * device * (tidal or 0)
        else:
            compute = usage.cpu_millis * 1024 * (value_at(units["cpu"], at) or 0) * factor
        memory = usage.memory_mib * 1000 * self._flavor_price(units["memory"], usage, at) if usage.memory_mib else 0
        return compute, memory * factor

    def hourly(self, usage: Usage, at: float) -> float:
        """What `usage` costs per hour at `at`: its devices (or, with none, its CPU) and its memory."""
        compute, memory = self._rates(usage, at)
        return (compute + memory) / RATE_SCALE

    def memory_hourly(self, usage: Usage, at: float) -> float:
        """The part of `hourly` its memory request costs."""
        return self._rates(usage, at)[1] / RATE_SCALE if usage.memory_mib else 0.0

    def _amounts(self, usage: Usage, start: float, end: float) -> tuple[Any, Any]:
        """Rate x seconds from `start` to `end`, each piece at the prices then in force: (devices or CPU, memory);
        integers, exact, for whole seconds."""
        if end <= start:
            return 0, 0
        cuts = sorted({start, end, *(at for line in self._timelines(usage) for at in _changes(line, start, end))})
        compute: Any = 0
        memory: Any = 0
        for a, b in zip(cuts, cuts[1:], strict=False):
            compute_rate, memory_rate = self._rates(usage, a)
            compute += compute_rate * (b - a)
            memory += memory_rate * (b - a)
        return compute, memory

    def micros(self, usage: Usage, start: int, end: int) -> tuple[int, int]:
        """What `usage` cost from `start` to `end` (whole epoch seconds), in micro-units of the currency, each part
        rounded once: (everything, the part its memory cost). What the rollup stores and reports add up."""
        compute, memory = self._amounts(usage, start, end)
        memory_micros = rounded_division(memory, MICRO_DIVISOR)
        return rounded_division(compute, MICRO_DIVISOR) + memory_micros, memory_micros

    def costs(self, usage: Usage, start: float, end: float) -> tuple[float, float]:
        """What `usage` cost from `start` to `end` (epoch seconds, fractions too: the GPU analysis cuts at points'
        milliseconds) as floats, for the analyses' estimates: (everything, the part its memory cost). Reports add
        `micros`, which are exact."""
        compute, memory = self._amounts(usage, start, end)
        return (compute + memory) / RATE_SCALE / HOUR, memory / RATE_SCALE / HOUR

    def cost(self, usage: Usage, start: float, end: float) -> float:
        """What `usage` cost from `start` to `end`, memory included (see `costs`)."""
        return self.costs(usage, start, end)[0]

    def memory_cost(self, usage: Usage, start: float, end: float) -> float:
        """The part of `cost` that `usage`'s memory request cost."""
        return self.costs(usage, start, end)[1] if usage.memory_mib else 0.0


def day_pieces(start: int, end: int) -> Iterator[tuple[int, int, int]]:
    """Cut [start, end) at UTC midnights: (day number since the epoch, piece start, piece end)."""
    while start < end:
        day = start // DAY
        stop = min(end, (day + 1) * DAY)
        yield day, start, stop
        start = stop


def hour_pieces(start: int, end: int) -> Iterator[tuple[int, int]]:
    """Cut [start, end) at UTC hours: (piece start, piece end)."""
    while start < end:
        stop = min(end, (start // 3600 + 1) * 3600)
        yield start, stop
        start = stop
