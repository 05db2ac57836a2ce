"""The hard stop the scheduler sees: projects whose hard budget this month is spent admit only preemptible jobs."""

from __future__ import annotations

from datetime import date, datetime

from django.conf import settings

from costs.budgets.status import month_of, spent
from costs.models import Budget


def money(value: float) -> str:
    """`10,240 USD`: whole units, so a reason quoting a spend changes (and is written again) once a unit, not each
    cycle."""
    return f"{value:,.0f} {settings.TIDAL['CURRENCY']}"


def stop_reason(slug: str, spent_so_far: float, amount: float, month: date) -> str:
    return (f"project {slug} has spent {money(spent_so_far)} of its {money(amount)} budget for {month:%B}; only "
            f"preemptible jobs are admitted")


def spent_hard_budgets(now: datetime) -> dict[int, str]:
    """Projects whose hard budget this month is spent, with the reason their queued jobs show: registered with
    `jobs.ports.budget_sources`, asked once per scheduling cycle. One query when no budget is hard; else
    one report for all hard-budget projects."""
    hard = list(Budget.objects.filter(hard=True).values_list("project_id", "project__slug", "amount"))
    if not hard:
        return {}
    month = month_of(now)
    to_date = spent([pk for pk, _, _ in hard], month, now)
    return {pk: stop_reason(slug, to_date.get(pk, 0.0), float(amount), month.start)
            for pk, slug, amount in hard if to_date.get(pk, 0.0) >= float(amount)}
