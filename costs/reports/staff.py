"""What the staff cost page shows, gathered outside the view: utilization per flavor against the current node
inventory, fragmentation now, the costliest projects and the chargeback of a range.

Capacity is today's inventory (every node's allocatable devices of the flavor, cordoned or not, x 24 h a day), each
node from when it was added (`costs.metering.existence`): node history is not kept, so a node removed during the
range is not counted, and one resized counts at its current size.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, timedelta
from decimal import Decimal
from typing import Any

from django.db.models import QuerySet

from clusters.selectors import nodes
from costs.metering.existence import node_starts
from costs.metering.pricing import DAY, HOUR
from costs.metering.rollup import EPOCH_DAY
from costs.reports.usage import ReportQuery, Row, Window, usage_report
from jobs.scheduling.model import Node, PendingJob
from jobs.snapshot import build_snapshot

CHARGEBACK_GROUPS = ("organization", "project")
TOP_PROJECTS = 10


# ---- utilization


@dataclass
class UtilizationDay:
    day: date
    allocated: float  # device-hours jobs held
    capacity: float  # device-hours the current inventory offers that day (up to now for today)
    cost: Decimal  # exact: the report's

    @property
    def percent(self) -> float | None:
        return 100 * self.allocated / self.capacity if self.capacity else None


@dataclass
class FlavorUtilization:
    flavor: str
    devices: int  # of the current inventory
    days: list[UtilizationDay] = field(default_factory=list)

    @property
    def allocated(self) -> float:
        return sum(day.allocated for day in self.days)

    @property
    def capacity(self) -> float:
        return sum(day.capacity for day in self.days)

    @property
    def cost(self) -> Decimal:
        return sum((day.cost for day in self.days), Decimal(0))

    @property
    def percent(self) -> float | None:
        return 100 * self.allocated / self.capacity if self.capacity else None

    def chart(self) -> dict[str, Any]:
        return {"flavor": self.flavor, "x": [(day.day - EPOCH_DAY).days * DAY for day in self.days],
                "allocated": [round(day.allocated, 2) for day in self.days],
                "capacity": [round(day.capacity, 2) for day in self.days]}


def capacity_hours(day: date, devices: int, now: datetime, since: int | None = None) -> float:
    """Device-hours `devices` offer on `day`: a whole day, or today up to now, and only from `since` (epoch
    seconds: when the node was added) on."""
    start = (day - EPOCH_DAY).days * DAY
    held = min(float(start + DAY), now.timestamp()) - max(start, since or start)
    return devices * max(0.0, held) / HOUR


@dataclass(frozen=True)
class InventoryNode:
    flavor: str
    devices: int
    since: int  # epoch seconds: when the node was added (costs.metering.existence)


def inventory_nodes() -> list[InventoryNode]:
    """Every node now, with when it was added."""
    rows = list(nodes().order_by().values_list("id", "flavor__name", "devices", "cluster__created_at"))
    since = node_starts([(pk, created) for pk, _, _, created in rows])
    return [InventoryNode(flavor, devices, since[pk]) for pk, flavor, devices, _ in rows]


def utilization(projects: QuerySet, window: Window, now: datetime) -> list[FlavorUtilization]:
    """Per flavor (those with nodes now, or with usage in the range), each day of the range up to today, each
    node counted from when it was added."""
    inventory: dict[str, list[InventoryNode]] = defaultdict(list)
    for node in inventory_nodes():
        inventory[node.flavor].append(node)
    report = usage_report(projects, ReportQuery(window, ("flavor",), "day"), now)
    used: dict[str, dict[date | None, Row]] = defaultdict(dict)  # a "day" report: its periods are days
    for row in report.rows:
        used[row.labels["flavor"]][row.period] = row
    today = now.astimezone(UTC).date()
    days = [window.start + timedelta(days=n) for n in range((min(window.end, today + timedelta(days=1))
                                                             - window.start).days)]
    result = []
    for flavor in sorted(inventory.keys() | used.keys()):
        entry = FlavorUtilization(flavor, sum(node.devices for node in inventory[flavor]))
        for day in days:
            day_row = used[flavor].get(day)
            capacity = sum(capacity_hours(day, node.devices, now, node.since) for node in inventory[flavor])
            entry.days.append(UtilizationDay(day, day_row.device_hours if day_row else 0.0, capacity,
                                             day_row.cost if day_row else Decimal(0)))
        result.append(entry)
    return result


# ---- fragmentation


@dataclass(frozen=True)
class Fragmentation:
    flavor: str
    free: int  # free devices on schedulable nodes
    fragmented: int  # of them, on nodes where no waiting job's replica fits
    smallest_request: int | None  # the smallest per-replica request of a waiting job; None: nothing waits
    nodes: tuple[tuple[str, int], ...]  # (node, free devices) of the fragmented nodes


def fragmentation(free_nodes: Iterable[Node], pending: Iterable[PendingJob]) -> list[Fragmentation]:
    """Free devices no waiting job can use now, per flavor: a node's free devices are fragmented when they are
    fewer than every waiting job's per-replica request of that flavor. With nothing waiting for a flavor its free
    devices are idle, not fragmented. Unschedulable nodes (cordoned, not ready, disabled cluster) offer nothing."""
    smallest: dict[str, int] = {}
    for job in pending:
        for group in job.groups:
            if group.devices > 0:  # a CPU-only replica needs no device
                smallest[group.flavor] = min(group.devices, smallest.get(group.flavor, group.devices))
    free: dict[str, int] = defaultdict(int)
    stranded: dict[str, list[tuple[str, int]]] = defaultdict(list)
    for node in free_nodes:
        if not node.schedulable or node.free <= 0:
            free.setdefault(node.flavor, 0)
            continue
        free[node.flavor] += node.free
        need = smallest.get(node.flavor)
        if need is not None and node.free < need:
            stranded[node.flavor].append((node.name, node.free))
    return [Fragmentation(flavor, free[flavor], sum(count for _, count in stranded[flavor]), smallest.get(flavor),
                          tuple(stranded[flavor])) for flavor in sorted(free)]


def fragmentation_now(now: datetime) -> list[Fragmentation]:
    """Over the scheduler's own view: nodes with running jobs' devices taken, and the queued jobs' groups."""
    snapshot = build_snapshot(now.timestamp()).snapshot
    return fragmentation(snapshot.nodes, snapshot.pending)


# ---- projects


@dataclass
class AdminReport:
    utilization: list[FlavorUtilization]
    fragmentation: list[Fragmentation]
    top_projects: list[Row]
    chargeback: list[Row]
    chargeback_total: Row


def gather(projects: QuerySet, window: Window, now: datetime) -> AdminReport:
    chargeback = usage_report(projects, ReportQuery(window, CHARGEBACK_GROUPS), now)
    rows = sorted(chargeback.rows, key=lambda row: (row.labels["organization"], row.labels["project"]))
    top = sorted(chargeback.rows, key=lambda row: -row.cost_micros)[:TOP_PROJECTS]
    return AdminReport(utilization(projects, window, now), fragmentation_now(now), top, rows, chargeback.total)
