"""What borrowing tidal capacity saved: the device-hours training ran on capacity a pool lent (docs/pools.md), what
they cost at the tidal rate (`TidalRate`), what they would have cost at their priority class's rate, and the
difference. Read from the segments that held tidal devices (`UsageSegment.tidal_devices`, copied from the attempt),
each piece inside a UTC day priced once to the micro-unit, as the report's rolled days are, with the same price
book, so a figure never disagrees with the report it is shown beside."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal
from typing import Any

from django.conf import settings
from django.db.models import Q, QuerySet
from django.http import HttpRequest
from django.utils import timezone

from costs.metering.prices import price_book
from costs.metering.pricing import MICROS, PriceBook, Usage, day_pieces
from costs.models import UsageSegment
from costs.reports.usage import money
from jobs.models import Attempt


@dataclass
class Saved:
    device_seconds: int = 0
    cost_micros: int = 0  # at the tidal rate
    normal_micros: int = 0  # at the class's rate

    @property
    def device_hours(self) -> float:
        return round(self.device_seconds / 3600, 3)

    @property
    def cost(self) -> Decimal:
        return money(Decimal(self.cost_micros) / MICROS)

    @property
    def normal_cost(self) -> Decimal:
        return money(Decimal(self.normal_micros) / MICROS)

    @property
    def saved(self) -> Decimal:
        return money(Decimal(self.normal_micros - self.cost_micros) / MICROS)

    def as_data(self) -> dict[str, Any]:
        """JSON-ready: money to the cent, as the report's `cost`."""
        return {"device_hours": self.device_hours, "cost": float(self.cost), "normal_cost": float(self.normal_cost),
                "saved": float(self.saved), "currency": settings.TIDAL["CURRENCY"]}


def add_segment(total: Saved, segment: Any, start: int, end: int, book: PriceBook) -> None:
    """The segment's tidal devices from `start` to `end`, priced a UTC day at a time at both rates."""
    lent = Usage(segment.flavor_id, segment.cluster_id, segment.priority_class_id, segment.tidal_devices, 0, 0,
                 segment.tidal_devices)
    normal = Usage(segment.flavor_id, segment.cluster_id, segment.priority_class_id, segment.tidal_devices, 0)
    for _, a, b in day_pieces(start, end):
        total.device_seconds += segment.tidal_devices * (b - a)
        total.cost_micros += book.micros(lent, a, b)[0]
        total.normal_micros += book.micros(normal, a, b)[0]


def tidal_segments(start: int, end: int, **filters: Any) -> QuerySet[UsageSegment]:
    """Segments that held tidal devices at some time in [start, end)."""
    return (UsageSegment.objects.filter(tidal_devices__gt=0, start_ts__lt=end, **filters)
            .filter(Q(end_ts__isnull=True) | Q(end_ts__gt=start)))


def saved(segments: Iterable[Any], start: int, end: int, now: int) -> Saved:
    """What the segments' tidal devices cost and saved inside [start, end), up to `now` (open ones run to it)."""
    book, total = price_book(), Saved()
    until = min(end, now)
    for segment in segments:
        add_segment(total, segment, max(start, segment.start_ts), min(until, segment.end_ts or until), book)
    return total


def _report_saved(projects: QuerySet, start: datetime, end: datetime) -> Saved:
    segments = tidal_segments(int(start.timestamp()), int(end.timestamp()), project_id__in=projects)
    return saved(segments, int(start.timestamp()), int(end.timestamp()), int(timezone.now().timestamp()))


def report_panel(request: HttpRequest, projects: QuerySet, start: datetime, end: datetime) -> dict[str, Any]:
    """The cost report's "Borrowed from tidal pools" over its projects (the caller's) and range."""
    return {"saved": _report_saved(projects, start, end)}


def report_figure(request: HttpRequest, projects: QuerySet, start: datetime, end: datetime) -> dict[str, Any]:
    """The cost report API's `figures.tidal`: the panel's figures as data."""
    return _report_saved(projects, start, end).as_data()


def pool_saved(pool: str, cluster_id: int, start: datetime, end: datetime) -> dict[str, Any]:
    """What training on pool `pool`'s capacity saved in [start, end) (pools.money.saved_source): the segments on
    its cluster that held tidal devices, of attempts whose placement names the pool, every project's (the pool's
    totals are every project's, as its other figures)."""
    since, until = int(start.timestamp()), int(end.timestamp())
    segments = list(tidal_segments(since, until, cluster_id=cluster_id))
    placements = Attempt.objects.filter(job_id__in={s.job_id for s in segments}).values_list("job_id", "number",
                                                                                             "placement")
    on_pool = {(job, number) for job, number, placement in placements if any(r.get("pool") == pool
                                                                            for r in placement)}
    mine = [s for s in segments if (s.job_id, s.attempt_number) in on_pool]
    return saved(mine, since, until, int(timezone.now().timestamp())).as_data()
