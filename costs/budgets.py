"""Budgets: what a project spent this month, where the month is heading, threshold alerts (each once a month) and
the hard stop the scheduler sees.

Every number comes from the cost reports (`costs.reports.usage_report`, one report for all the projects asked
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

from django.conf import settings
from django.db import IntegrityError, transaction
from django.db.models import F
from django.utils import timezone

from costs.models import Budget, BudgetAlert, UsageSegment
from costs.notifications import budget_body, notify_budget_task
from costs.prices import price_book
from costs.pricing import HOUR
from costs.reports import ReportQuery, Window, usage_report
from costs.rollup import usage_of
from tenancy.models import Project

RATE_DAYS = 7


def month_of(now: datetime) -> Window:
    """The UTC calendar month `now` falls in."""
    first = now.astimezone(UTC).date().replace(day=1)
    return Window(first, (first + timedelta(days=32)).replace(day=1))


def money(value: float) -> str:
    """`10,240 USD`: whole units, so a reason quoting a spend changes (and is written again) once a unit, not each
    cycle."""
    return f"{value:,.0f} {settings.TIDAL['CURRENCY']}"


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
    book, at, found = price_book(), int(now.timestamp()), defaultdict(float)
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


# ----------------------------------------------------------------------------------------- the scheduler's stop

def stop_reason(slug: str, spent_so_far: float, amount: float, month: date) -> str:
    return (f"project {slug} has spent {money(spent_so_far)} of its {money(amount)} budget for {month:%B}; only "
            f"preemptible jobs are admitted")


def spent_hard_budgets(now: datetime) -> dict[int, str]:
    """Projects whose hard budget this month is spent, with the reason their queued jobs show: registered with
    `jobs.ports.register_budget_source`, asked once per scheduling cycle. One query when no budget is hard; else
    one report for all hard-budget projects."""
    hard = list(Budget.objects.filter(hard=True).values_list("project_id", "project__slug", "amount"))
    if not hard:
        return {}
    month = month_of(now)
    to_date = spent([pk for pk, _, _ in hard], month, now)
    return {pk: stop_reason(slug, to_date.get(pk, 0.0), float(amount), month.start)
            for pk, slug, amount in hard if to_date.get(pk, 0.0) >= float(amount)}


# ---------------------------------------------------------------------------------------------------- alerts

def _alerted(project_ids: Collection[int], month: date) -> set[tuple[int, int]]:
    """(project, threshold) of the month's alerts already recorded."""
    return set(BudgetAlert.objects.filter(project_id__in=list(project_ids), month=month)
               .values_list("project_id", "threshold"))


def _record(status: BudgetStatus, threshold: int, now: datetime) -> bool:
    """Insert the month's alert of this threshold; False when another check inserted it first (the unique
    constraint decides, whatever the number of checks running at once)."""
    try:
        with transaction.atomic():
            BudgetAlert.objects.create(project_id=status.budget.project_id, month=status.month, threshold=threshold,
                                       amount=status.budget.amount, cost=status.spent, created_at=now)
    except IntegrityError:
        return False
    return True


def check_budgets(now: datetime | None = None) -> int:
    """Record each threshold crossed this month once, and notify the project's webhooks and owners and admins of
    the ones this check recorded (one notification per project and check). Returns how many alerts it recorded.
    Celery beat runs it every minute, as does the embedded loop."""
    now = now or timezone.now()
    budgets = list(Budget.objects.select_related("project"))
    if not budgets:
        return 0
    done = _alerted([b.project_id for b in budgets], month_of(now).start)
    recorded = 0
    for status in statuses(budgets, now):
        fresh = [t for t in status.crossed if (status.budget.project_id, t) not in done]
        won = [t for t in fresh if _record(status, t, now)]
        if won:
            recorded += len(won)
            body = budget_body(status, won, now)
            project_id = status.budget.project_id
            # robust: a broken notifier must not undo or fail the check; the alert rows are the record.
            transaction.on_commit(lambda p=project_id, b=body: notify_budget_task.delay(p, b), robust=True)
    return recorded
