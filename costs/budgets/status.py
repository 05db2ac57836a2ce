"""Where a budget stands: what a project (an organization, a user) spent this month and where the month is
heading. The threshold alerts (`costs.budgets.alerts`) and the hard stop the scheduler sees
(`costs.budgets.hard_stop`) read it.

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
from costs.models import Budget, OrganizationBudget, UsageSegment, UserBudget
from costs.reports.usage import ReportQuery, Window, usage_report
from tenancy.models import Project

AnyBudget = Budget | OrganizationBudget | UserBudget
# Each kind of budget: the report group and the segment column of what it covers.
SCOPES: dict[type, str] = {Budget: "project", OrganizationBudget: "organization", UserBudget: "user"}


def scope_of(budget: AnyBudget) -> str:
    """"project", "organization" or "user"."""
    return SCOPES[type(budget)]


def owner_id(budget: AnyBudget) -> int:
    """The id of what the budget covers: its project, organization or user."""
    return getattr(budget, f"{scope_of(budget)}_id")

RATE_DAYS = 7


def month_of(now: datetime) -> Window:
    """The UTC calendar month `now` falls in."""
    first = now.astimezone(UTC).date().replace(day=1)
    return Window(first, (first + timedelta(days=32)).replace(day=1))


def spent(project_ids: Collection[int], window: Window, now: datetime, scope: str = "project") -> dict[int, float]:
    """What each project (organization, user: `scope`) spent in `window` up to `now`: one report for all of them.
    A user's spend is in every project."""
    if not project_ids:
        return {}
    ids = list(project_ids)
    if scope == "project":
        projects = Project.objects.filter(pk__in=ids).values("id")
    elif scope == "organization":
        projects = Project.objects.filter(organization_id__in=ids).values("id")
    else:
        projects = Project.objects.values("id")
    filters = {"user_id": ids[0]} if scope == "user" and len(ids) == 1 else {}
    report = usage_report(projects, ReportQuery(window, (scope,), None, filters), now)
    wanted = set(ids)
    # The report's exact sum; a float from here on, for the forecast's rates (see docs/costs.md, Money).
    return {row.keys[0]: float(row.cost) for row in report.rows if row.keys[0] in wanted}


def committed(project_ids: Collection[int], now: datetime, until: int, scope: str = "project") -> dict[int, float]:
    """What each project's running jobs with a max runtime will cost from now until it ends (at most `until`,
    epoch seconds), at their hourly prices now. A job's runtime is counted from its start (its segment's start, as
    the max runtime is enforced)."""
    book, at = price_book(), int(now.timestamp())
    found: defaultdict[int, float] = defaultdict(float)
    column = f"{scope}_id"
    segments = (UsageSegment.objects.filter(end_ts__isnull=True, job__max_runtime__isnull=False,
                                            **{f"{column}__in": list(project_ids)})
                .annotate(max_runtime=F("job__max_runtime")))
    for segment in segments:
        left = min(segment.start_ts + segment.max_runtime, until) - at
        if left > 0:
            found[getattr(segment, column)] += book.hourly(usage_of(segment), at) * left / HOUR
    return dict(found)


@dataclass(frozen=True)
class Forecast:
    total: float  # the month's expected cost at its end
    basis: str  # which estimate of the rest it used: "run rate of the last 7 days", ..., "cost committed by ..."
    daily_rate: float  # what a day costs at the run rate
    committed: float  # what running jobs with a max runtime will cost until it ends, within the month


@dataclass(frozen=True)
class BudgetStatus:
    budget: AnyBudget
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


def statuses(budgets: Sequence[AnyBudget], now: datetime) -> list[BudgetStatus]:
    """Spend and forecast of each budget this month, in the order given: per kind of budget (project, organization,
    user), two reports and one segment query for all of them."""
    kinds: dict[str, list[AnyBudget]] = defaultdict(list)
    for budget in budgets:
        kinds[scope_of(budget)].append(budget)
    found = {}
    for scope, same in kinds.items():
        for status in _statuses(same, now, scope):
            found[id(status.budget)] = status
    return [found[id(budget)] for budget in budgets]


def _statuses(budgets: Sequence[AnyBudget], now: datetime, scope: str) -> list[BudgetStatus]:
    if not budgets:
        return []
    ids = [owner_id(b) for b in budgets]
    month = month_of(now)
    to_date = spent(ids, month, now, scope)
    at = int(now.timestamp())
    rate_start = now.astimezone(UTC).date() - timedelta(days=RATE_DAYS)
    if rate_start <= month.start:
        rate_window, rate_cost, basis = month, to_date, "run rate of the month so far"
    else:
        rate_window = Window(rate_start, month.end)
        rate_cost, basis = spent(ids, rate_window, now, scope), f"run rate of the last {RATE_DAYS} days"
    elapsed, left = max(1, at - rate_window.start_ts), max(0, month.end_ts - at)
    bound = committed(ids, now, month.end_ts, scope)
    found = []
    for budget in budgets:
        pk = owner_id(budget)
        rate = rate_cost.get(pk, 0.0) / elapsed
        by_rate, by_commitment = rate * left, bound.get(pk, 0.0)
        rest, why = (by_rate, basis) if by_rate >= by_commitment else (by_commitment, "cost committed by running jobs")
        forecast = Forecast(to_date.get(pk, 0.0) + rest, why, rate * 86_400, by_commitment)
        found.append(BudgetStatus(budget, month.start, to_date.get(pk, 0.0), forecast))
    return found


def status_of(budget: AnyBudget, now: datetime | None = None) -> BudgetStatus:
    return statuses([budget], now or timezone.now())[0]
