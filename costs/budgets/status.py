"""Where a budget stands: what a project spent this month and where the month is heading. The threshold alerts
(`costs.budgets.alerts`) and the hard stop the scheduler sees (`costs.budgets.hard_stop`) read it.

Every number comes from the cost reports (`costs.reports.usage.usage_report`, one report for all the projects asked
about), so a budget and the cost page never disagree. Months are UTC calendar months.

The month-end forecast is the month so far plus the larger of two estimates of the rest, and says which it used:
- the run rate: what the last 7 days cost (or the month so far, when it is younger), per second, times the
  seconds left in the month;
- what is committed: every running job with a max runtime, at its current hourly price until that runtime ends
  (within the month).
They are not added: running jobs are already in the run rate, and counting them twice would alert on a forecast
nobody will reach. A job without a max runtime has no commitment (it could end any moment).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta

from django.db.models import F
from django.utils import timezone

from costs.metering.prices import price_book
from costs.metering.pricing import HOUR
from costs.metering.rollup import usage_of
from costs.models import Budget, UsageSegment
from costs.reports.usage import ReportQuery, Window, usage_report
from tenancy.models import Project

RATE_DAYS = 7


def month_of(now: datetime) -> Window:
    """The UTC calendar month `now` falls in."""
    first = now.astimezone(UTC).date().replace(day=1)
    return Window(first, (first + timedelta(days=32)).replace(day=1))


def spent(project_ids: Collection[int], window: Window, now: datetime) -> dict[int, float]:
    """What each project spent in `window` up to `now`: one report for all of them."""
    if not project_ids:
        return {}
    projects = Project.objects.filter(pk__in=list(project_ids)).values("id")
    report = usage_report(projects, ReportQuery(window, ("project",)), now)
    return {row.keys[0]: row.cost for row in report.rows}


def committed(project_ids: Collection[int], now: datetime, until: int) -> dict[int, float]:
    """What each project's running jobs with a max runtime will cost from now until it ends (at most `until`,
    epoch seconds), at their hourly prices now. A job's runtime is counted from its start (its segment's start, as
    the max runtime is enforced)."""
    book, at = price_book(), int(now.timestamp())
    found: defaultdict[int, float] = defaultdict(float)
    segments = (UsageSegment.objects.filter(end_ts__isnull=True, project_id__in=list(project_ids),
                                            job__max_runtime__isnull=False)
                .annotate(max_runtime=F("job__max_runtime")))
    for segment in segments:
        left = min(segment.start_ts + segment.max_runtime, until) - at
        if left > 0:
            found[segment.project_id] += book.hourly(usage_of(segment), at) * left / HOUR
    return dict(found)


@dataclass(frozen=True)
class Forecast:
    total: float  # the month's expected cost at its end
    basis: str  # which estimate of the rest it used: "run rate of the last 7 days", ..., "cost committed by ..."
    daily_rate: float  # what a day costs at the run rate
    committed: float  # what running jobs with a max runtime will cost until it ends, within the month


@dataclass(frozen=True)
class BudgetStatus:
    budget: Budget
    month: date
    spent: float
    forecast: Forecast

    @property
    def amount(self) -> float:
        return float(self.budget.amount)

    @property
    def percent(self) -> float | None:
        """Spent as a percent of the amount; None for a zero budget."""
        return self.spent * 100 / self.amount if self.amount else None

    @property
    def exhausted(self) -> bool:
        return self.spent >= self.amount

    @property
    def crossed(self) -> list[int]:
        """The thresholds the month's spend reached (none before anything is spent, even of a zero budget)."""
        return [t for t in self.budget.thresholds if self.spent > 0 and self.spent * 100 >= t * self.amount]


def statuses(budgets: Sequence[Budget], now: datetime) -> list[BudgetStatus]:
    """Spend and forecast of each budget this month: two reports and one segment query for all of them."""
    if not budgets:
        return []
    ids = [b.project_id for b in budgets]
    month = month_of(now)
    to_date = spent(ids, month, now)
    at = int(now.timestamp())
    rate_start = now.astimezone(UTC).date() - timedelta(days=RATE_DAYS)
    if rate_start <= month.start:
        rate_window, rate_cost, basis = month, to_date, "run rate of the month so far"
    else:
        rate_window = Window(rate_start, month.end)
        rate_cost, basis = spent(ids, rate_window, now), f"run rate of the last {RATE_DAYS} days"
    elapsed, left = max(1, at - rate_window.start_ts), max(0, month.end_ts - at)
    bound = committed(ids, now, month.end_ts)
    found = []
    for budget in budgets:
        pk = budget.project_id
        rate = rate_cost.get(pk, 0.0) / elapsed
        by_rate, by_commitment = rate * left, bound.get(pk, 0.0)
        rest, why = (by_rate, basis) if by_rate >= by_commitment else (by_commitment, "cost committed by running jobs")
        forecast = Forecast(to_date.get(pk, 0.0) + rest, why, rate * 86_400, by_commitment)
        found.append(BudgetStatus(budget, month.start, to_date.get(pk, 0.0), forecast))
    return found


def status_of(budget: Budget, now: datetime | None = None) -> BudgetStatus:
    return statuses([budget], now or timezone.now())[0]
