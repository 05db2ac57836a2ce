"""Budget alerts: each threshold crossed recorded once a month, and told where every alert is told (the
notifications app): the project's webhooks (signed, retried) and, with a mail server, an e-mail to the project's
owners and admins. Tasks: in embedded mode and tests they run in-process."""

from __future__ import annotations

import json
from collections.abc import Collection
from datetime import date, datetime

from celery import shared_task
from django.conf import settings
from django.db import IntegrityError, transaction
from django.utils import timezone

from costs.budgets.scoped import check_scoped_budgets
from costs.budgets.status import BudgetStatus, month_of, statuses
from costs.models import Budget, BudgetAlert
from notifications import send
from tenancy.models import Project, Role

EVENT = "budget.threshold"


def budget_body(status: BudgetStatus, thresholds: list[int], now: datetime) -> str:
    """What a webhook receives (docs/costs.md): the thresholds just crossed and where the month stands."""
    budget = status.budget
    percent = status.percent
    payload = {
        "event": EVENT,
        "sent_at": now.isoformat(),
        "project": budget.project.slug,
        "thresholds": thresholds,
        "budget": {"month": f"{status.month:%Y-%m}", "amount": float(budget.amount),
                   "currency": settings.TIDAL["CURRENCY"], "hard": budget.hard,
                   "spent": round(status.spent, 2), "percent": None if percent is None else round(percent, 1),
                   "forecast": round(status.forecast.total, 2), "forecast_basis": status.forecast.basis,
                   "url": f"{settings.TIDAL['URL']}/projects/{budget.project.slug}/"},
    }
    return json.dumps(payload, separators=(",", ":"))


# The tasks keep the names they had in costs.notifications: alerts already queued name them so.
@shared_task(name="costs.notifications.notify_budget_task")
def notify_budget_task(project_id: int, body: str) -> None:
    """Fan a budget alert out to the project's enabled webhooks and, with a mail server, its owners and admins."""
    send.to_webhooks(project_id, body, EVENT)
    if send.mail_configured():
        mail_budget_task.delay(project_id, body)


@shared_task(name="costs.notifications.mail_budget_task")
def mail_budget_task(project_id: int, body: str) -> None:
    project = Project.objects.filter(pk=project_id).first()
    if project is None:
        return
    data = json.loads(body)
    budget = data["budget"]
    reached = max(data["thresholds"])
    amount, spent, forecast = (f"{budget[key]:,.2f} {budget['currency']}" for key in ("amount", "spent", "forecast"))
    lines = [f"Project {project.slug} has spent {spent} of its {amount} budget for {budget['month']} "
             f"({reached}% threshold reached).",
             f"Forecast for the month: {forecast} ({budget['forecast_basis']}).",
             "Its budget is hard: only preemptible jobs are admitted once it is spent." if budget["hard"] else "",
             f"\nProject: {budget['url']}"]
    send.to_members(project.pk, [Role.OWNER, Role.ADMIN],
                    subject=f"[Tidal] {project.slug} reached {reached}% of its budget for {budget['month']}",
                    message="\n".join(line for line in lines if line) + "\n")


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
    the ones this check recorded (one notification per project and check), and the same for organizations' and
    users' budgets (`costs.budgets.scoped`). Returns how many alerts it recorded.
    Celery beat runs it every minute, as does the embedded loop."""
    now = now or timezone.now()
    recorded = check_scoped_budgets(now)  # organizations' and users' budgets (costs.budgets.scoped)
    budgets = list(Budget.objects.select_related("project"))
    if not budgets:
        return recorded
    done = _alerted([b.project_id for b in budgets], month_of(now).start)
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
