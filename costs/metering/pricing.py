"""Pricing, pure: what an interval of use cost under effective-dated prices. Plain data in, money out; no Django.

A price is in force from its date until the next one of the same key. A device price may be set per flavor (every
cluster) and per flavor and cluster (that cluster only, from its own first date on); a CPU core-hour prices jobs
that hold no device; a GiB-hour of memory is priced per flavor and cluster as devices are, for every segment (its
memory request, devices or not); a priority class pays `factor` of the price (preemptible capacity cheaper). An
interval is cut at every change of any of these, so a price change in the middle of a segment costs each side at
its own price.
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
    memory_mib: int = 0


def value_at(timeline: Timeline, at: float) -> float | None:
    """The value in force at `at`, or None before the first date."""
    index = bisect_right(timeline, (at, float("inf"))) - 1
    return timeline[index][1] if index >= 0 else None


def _changes(timeline: Timeline, start: float, end: float) -> list[int]:
    return [since for since, _ in timeline if start < since < end]


@dataclass(frozen=True)
class PriceBook:
    """Every price timeline: device prices by (flavor, cluster or None), the CPU core-hour, class discounts, memory
    prices (per GiB-hour) by (flavor, cluster or None)."""

    device: Mapping[tuple[int, int | None], Timeline] = field(default_factory=dict)
    cpu: Timeline = ()
    discount: Mapping[int, Timeline] = field(default_factory=dict)
    memory: Mapping[tuple[int, int | None], Timeline] = field(default_factory=dict)

    def _timelines(self, usage: Usage) -> list[Timeline]:
        if usage.devices:
            prices = [self.device.get((usage.flavor_id, None), ()),
                      self.device.get((usage.flavor_id, usage.cluster_id), ())]
        else:
            prices = [self.cpu]
        if usage.memory_mib:
            prices += [self.memory.get((usage.flavor_id, None), ()),
                       self.memory.get((usage.flavor_id, usage.cluster_id), ())]
        return [*prices, self.discount.get(usage.priority_class_id, ())]

    @staticmethod
    def _flavor_price(table: Mapping[tuple[int, int | None], Timeline], usage: Usage, at: float) -> float:
        """The flavor's price at `at`: its cluster's own when that has started, else the flavor's, else 0."""
        own = table.get((usage.flavor_id, usage.cluster_id), ()) if usage.cluster_id is not None else ()
        price = value_at(own, at)
        if price is None:
            price = value_at(table.get((usage.flavor_id, None), ()), at) or 0.0
        return price

    def _hourly_parts(self, usage: Usage, at: float) -> tuple[float, float]:
        """What `usage` costs per hour at `at`: its devices (or, with none, its CPU) and its memory (GiB = 1024
        MiB), each at the class's factor."""
        if usage.devices:
            amount = usage.devices * self._flavor_price(self.device, usage, at)
        else:
            amount = usage.cpu_millis / 1000 * (value_at(self.cpu, at) or 0.0)
        memory = usage.memory_mib / 1024 * self._flavor_price(self.memory, usage, at) if usage.memory_mib else 0.0
        factor = value_at(self.discount.get(usage.priority_class_id, ()), at)
        factor = 1.0 if factor is None else factor
        return amount * factor, memory * factor

    def hourly(self, usage: Usage, at: float) -> float:
        """What `usage` costs per hour at `at`: its devices (or, with none, its CPU) and its memory."""
        compute, memory = self._hourly_parts(usage, at)
        return compute + memory

    def memory_hourly(self, usage: Usage, at: float) -> float:
        """The part of `hourly` its memory request costs."""
        return self._hourly_parts(usage, at)[1] if usage.memory_mib else 0.0

    def costs(self, usage: Usage, start: float, end: float) -> tuple[float, float]:
        """What `usage` cost from `start` to `end` (epoch seconds, fractions too: the GPU analysis cuts at points'
        milliseconds), each piece at the prices then in force: (everything, the part its memory cost), in one pass
        (the rollup and the reports need both)."""
        if end <= start:
            return 0.0, 0.0
        cuts = sorted({start, end, *(at for line in self._timelines(usage) for at in _changes(line, start, end))})
        total = memory = 0.0
        for a, b in zip(cuts, cuts[1:], strict=False):
            compute_part, memory_part = self._hourly_parts(usage, a)
            total += (compute_part + memory_part) * (b - a)
            memory += memory_part * (b - a)
        return total / HOUR, memory / HOUR

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
