"""Pricing, pure: what an interval of use cost under effective-dated prices. Plain data in, money out; no Django.

A price is in force from its date until the next one of the same key. A device price may be set per flavor (every
cluster) and per flavor and cluster (that cluster only, from its own first date on); a CPU core-hour prices jobs
that hold no device; a priority class pays `factor` of the price (preemptible capacity cheaper). An interval is cut
at every change of any of these, so a price change in the middle of a segment costs each side at its own price.
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field

DAY = 86_400
HOUR = 3_600.0

Timeline = Sequence[tuple[int, float]]  # (in force from, UTC epoch seconds; value), sorted by time


@dataclass(frozen=True, slots=True)
class Usage:
    """What a segment holds: its devices (or, with none, its CPU) of a flavor on a cluster, in a priority class."""

    flavor_id: int
    cluster_id: int | None
    priority_class_id: int
    devices: int
    cpu_millis: int


def value_at(timeline: Timeline, at: float) -> float | None:
    """The value in force at `at`, or None before the first date."""
    index = bisect_right(timeline, (at, float("inf"))) - 1
    return timeline[index][1] if index >= 0 else None


def _changes(timeline: Timeline, start: float, end: float) -> list[int]:
    return [since for since, _ in timeline if start < since < end]


@dataclass(frozen=True)
class PriceBook:
    """Every price timeline: device prices by (flavor, cluster or None), the CPU core-hour, class discounts."""

    device: Mapping[tuple[int, int | None], Timeline] = field(default_factory=dict)
    cpu: Timeline = ()
    discount: Mapping[int, Timeline] = field(default_factory=dict)

    def _timelines(self, usage: Usage) -> list[Timeline]:
        if usage.devices:
            prices = [self.device.get((usage.flavor_id, None), ()),
                      self.device.get((usage.flavor_id, usage.cluster_id), ())]
        else:
            prices = [self.cpu]
        return [*prices, self.discount.get(usage.priority_class_id, ())]

    def hourly(self, usage: Usage, at: float) -> float:
        """What `usage` costs per hour at `at`."""
        if usage.devices:
            own = self.device.get((usage.flavor_id, usage.cluster_id), ()) if usage.cluster_id is not None else ()
            price = value_at(own, at)
            if price is None:
                price = value_at(self.device.get((usage.flavor_id, None), ()), at) or 0.0
            amount = usage.devices * price
        else:
            amount = usage.cpu_millis / 1000 * (value_at(self.cpu, at) or 0.0)
        factor = value_at(self.discount.get(usage.priority_class_id, ()), at)
        return amount * (1.0 if factor is None else factor)

    def cost(self, usage: Usage, start: float, end: float) -> float:
        """What `usage` cost from `start` to `end` (epoch seconds, fractions too: the GPU analysis cuts at points'
        milliseconds), each piece at the prices then in force."""
        if end <= start:
            return 0.0
        cuts = sorted({start, end, *(at for line in self._timelines(usage) for at in _changes(line, start, end))})
        return sum(self.hourly(usage, a) * (b - a) for a, b in zip(cuts, cuts[1:], strict=False)) / HOUR


def day_pieces(start: int, end: int) -> Iterator[tuple[int, int, int]]:
    """Cut [start, end) at UTC midnights: (day number since the epoch, piece start, piece end)."""
    while start < end:
        day = start // DAY
        stop = min(end, (day + 1) * DAY)
        yield day, start, stop
        start = stop
