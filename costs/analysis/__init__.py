"""Three analyses of metered usage, each over a range of UTC days checked as the report checks it:

- quota efficiency (`costs.analysis.efficiency`): guarantees against what projects used, idle and lent capacity;
- waste down to the job (`costs.analysis.waste`): failed and lost attempts, work lost since the last checkpoint,
  and device-hours at low GPU utilization (`costs.analysis.gpu`, from tracking's system metrics);
- queueing (`costs.analysis.queueing`): device-hours jobs waited, median and p90 waits.

Each takes a `Scope`: the projects the caller may see, the window, the report's filters and now."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.db.models import Q, QuerySet

from costs.models import UsageDay, UsageSegment
from costs.reports.usage import LABELS, Window
from tenancy.models import Project

CHUNK = 500  # ids per IN list: under SQLite's oldest limit of 999 bound parameters


@dataclass(frozen=True)
class Scope:
    projects: QuerySet  # ids of the projects the caller may see (costs.selectors.report_projects)
    window: Window
    filters: Mapping[str, int]  # the report's filters: project_id, organization_id and flavor_id
    now: datetime

    @property
    def until_ts(self) -> int:
        """The end of the window, or now when the window reaches past it: nothing was held in the future."""
        return max(self.window.start_ts, min(self.window.end_ts, int(self.now.timestamp())))

    @property
    def seconds(self) -> int:
        return self.until_ts - self.window.start_ts

    def shown_projects(self) -> QuerySet:
        """The ids of the visible projects the filters keep."""
        narrowed = {"id": self.filters["project_id"]} if "project_id" in self.filters else {}
        if "organization_id" in self.filters:
            narrowed["organization_id"] = self.filters["organization_id"]
        return Project.objects.filter(id__in=self.projects, **narrowed).values("id")


def window_segments(projects: QuerySet, window: Window, filters: Mapping[str, Any], until: int,
                    fields: Sequence[str], **conditions: Any) -> Iterator[tuple]:
    """`fields` of every segment holding time in [window start, until): rolled ones found through their days in the
    window (the day index), the rest among unrolled segments (their partial index). One statement, a UNION, so a
    roll committing meanwhile neither hides a segment nor counts it twice. `fields` must hold "id"."""
    days = UsageDay.objects.filter(day__gte=window.start, day__lt=window.end, project_id__in=projects, **filters)
    rolled = UsageSegment.objects.filter(pk__in=days.values("segment_id"), **conditions)
    unrolled = (UsageSegment.objects.filter(rolled=False, start_ts__lt=until, project_id__in=projects, **filters,
                                            **conditions)
                .filter(Q(end_ts__isnull=True) | Q(end_ts__gt=window.start_ts)))
    both = rolled.order_by().values_list(*fields).union(unrolled.order_by().values_list(*fields))
    return both.iterator(chunk_size=2000)


def label(rows: Sequence[Any], groups: Sequence[tuple[str, str]]) -> None:
    """Name each row's ids as the report does: `groups` are (report group, the row's attribute holding its id)."""
    for name, attribute in groups:
        names = LABELS[name]({getattr(row, attribute) for row in rows})
        for row in rows:
            row.labels[name] = names.get(getattr(row, attribute), "")


def overlap(start: int, end: int | None, window_start: int, until: int) -> int:
    """Seconds of [start, end) inside [window_start, until); an open interval (end None) lasts until `until`."""
    return max(0, min(until if end is None else end, until) - max(start, window_start))


def chunks(ids: Iterable[int]) -> Iterator[list[int]]:
    batch: list[int] = []
    for value in ids:
        batch.append(value)
        if len(batch) == CHUNK:
            yield batch
            batch = []
    if batch:
        yield batch


def percentile(ordered: Sequence[float], fraction: float) -> float | None:
    """Linear interpolation between the closest ranks (PostgreSQL's percentile_cont, numpy's default)."""
    if not ordered:
        return None
    position = fraction * (len(ordered) - 1)
    low = int(position)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)
