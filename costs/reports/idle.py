"""The idle guarantee of the main report: per project, the device-hours its guarantees held ready that it did not
use, and what they cost at list price. The analysis room counts it (`costs.analysis.idle`, exactly as the quota
efficiency page does); reports sit below analysis, so they ask through `idle_sources`, connected in
`CostsConfig.ready()`."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime

from django.db.models import QuerySet

from core.hooks import Hook
from costs.metering.pricing import HOUR
from costs.reports.usage import ReportQuery


@dataclass
class IdleRow:
    project_id: int
    organization_id: int
    guaranteed_seconds: float = 0.0
    idle_seconds: float = 0.0
    idle_cost: float = 0.0
    labels: dict[str, str] = field(default_factory=dict)

    @property
    def guaranteed_device_hours(self) -> float:
        return self.guaranteed_seconds / HOUR

    @property
    def idle_device_hours(self) -> float:
        return self.idle_seconds / HOUR


@dataclass
class IdleGuarantee:
    rows: list[IdleRow]

    @property
    def total(self) -> IdleRow:
        total = IdleRow(0, 0)
        for row in self.rows:
            total.guaranteed_seconds += row.guaranteed_seconds
            total.idle_seconds += row.idle_seconds
            total.idle_cost += row.idle_cost
        return total


# fn(visible project ids, the report's query, its moment) -> the idle guarantee, or None when the query's filters
# leave guarantees out (a cluster). Connected by costs.analysis.idle in CostsConfig.ready().
IdleSource = Callable[[QuerySet, ReportQuery, datetime], "IdleGuarantee | None"]
idle_sources: Hook[IdleSource] = Hook("costs.reports.idle.idle_sources", single=True, required=True)


def idle_guarantee(projects: QuerySet, query: ReportQuery, now: datetime) -> IdleGuarantee | None:
    return idle_sources.one()(projects, query, now)
