"""Budgets of an organization (all its projects together) and of a user (their jobs in every project), beside each
project's own (`costs.budgets.alerts`, `costs.budgets.hard_stop`), read from the same reports
(`costs.budgets.status`).

Alerts: each threshold crossed is recorded once a month (`ScopedBudgetAlert`, whose unique constraints make the
insert the arbiter) and told through the notifications app: an organization's to the enabled webhooks of each of its
projects (event `budget.threshold`, `scope` "organization") and, with a mail server, to the owners and admins of its
projects; a user's by mail to the user.

Hard stops, through the scheduler's ports: a spent hard organization budget stops every project of the organization
(`jobs.ports.budget_sources`, project id -> reason, the contract project budgets use); a spent hard user budget stops
that user's non-preemptible jobs only (`jobs.ports.user_budget_sources`, user id -> reason)."""

from __future__ import annotations

import json
from datetime import datetime

from celery import shared_task
from django.conf import settings
from django.db import IntegrityError, transaction
from django.utils import timezone

from costs.budgets.hard_stop import money
from costs.budgets.status import BudgetStatus, month_of, owner_id, scope_of, spent, statuses
from costs.models import OrganizationBudget, ScopedBudgetAlert, UserBudget
from notifications import send
from tenancy.models import Project, Role

EVENT = "budget.threshold"


def scoped_body(status: BudgetStatus, name: str, thresholds: list[int], now: datetime) -> str:
    """What a webhook receives: the project budget's payload with `scope` and the organization or user named."""
    budget, percent, scope = status.budget, status.percent, scope_of(status.budget)
    payload = {
        "event": EVENT, "sent_at": now.isoformat(), "scope": scope, scope: name, "thresholds": thresholds,
        "budget": {"month": f"{status.month:%Y-%m}", "amount": float(budget.amount),
                   "currency": settings.TIDAL["CURRENCY"], "hard": budget.hard, "spent": round(status.spent, 2),
                   "percent": None if percent is None else round(percent, 1),
                   "forecast": round(status.forecast.total, 2), "forecast_basis": status.forecast.basis},
    }
    return json.dumps(payload, separators=(",", ":"))


def _message(data: dict) -> tuple[str, str]:
    budget, scope = data["budget"], data["scope"]
    reached = max(data["thresholds"])
    amount, spent_, forecast = (f"{budget[key]:,.2f} {budget['currency']}" for key in ("amount", "spent", "forecast"))
    who = f"Organization {data[scope]}" if scope == "organization" else f"User {data[scope]}"
    stop = ("Its budget is hard: only preemptible jobs are admitted once it is spent." if budget["hard"] else "")
    lines = [f"{who} has spent {spent_} of its {amount} budget for {budget['month']} ({reached}% threshold reached).",
             f"Forecast for the month: {forecast} ({budget['forecast_basis']}).", stop]
    subject = f"[Tidal] {who.lower()} reached {reached}% of its budget for {budget['month']}"
    return subject, "\n".join(line for line in lines if line) + "\n"


@shared_task(name="costs.budgets.scoped.notify_scoped_budget_task")
def notify_scoped_budget_task(scope: str, owner: int, body: str) -> None:
    """An organization's alert to its projects' webhooks and, with a mail server, their owners and admins; a
    user's by mail to the user."""
    subject, message = _message(json.loads(body))
    if scope == "organization":
        for project_id in Project.objects.filter(organization_id=owner).values_list("id", flat=True):
            send.to_webhooks(project_id, body, EVENT)
        if send.mail_configured():
            send.to_organization_members(owner, [Role.OWNER, Role.ADMIN], subject, message)
    elif send.mail_configured():
        send.to_user(owner, subject, message)


def _record(status: BudgetStatus, threshold: int, now: datetime) -> bool:
    scope = scope_of(status.budget)
    try:
        with transaction.atomic():
            ScopedBudgetAlert.objects.create(**{f"{scope}_id": owner_id(status.budget)}, month=status.month,
                                             threshold=threshold, amount=status.budget.amount, cost=status.spent,
                                             created_at=now)
    except IntegrityError:
        return False
    return True


def _name(budget: OrganizationBudget | UserBudget) -> str:
    return budget.organization.name if isinstance(budget, OrganizationBudget) else budget.user.get_username()


def check_scoped_budgets(now: datetime | None = None) -> int:
    """Record each threshold of an organization's or a user's budget crossed this month once, and notify the ones
    this check recorded. Returns how many it recorded (run by `check_budgets`, every minute)."""
    now = now or timezone.now()
    budgets = [*OrganizationBudget.objects.select_related("organization"), *UserBudget.objects.select_related("user")]
    if not budgets:
        return 0
    month = month_of(now).start
    done = {(org or 0, user or 0, threshold) for org, user, threshold in ScopedBudgetAlert.objects.filter(
        month=month).values_list("organization_id", "user_id", "threshold")}
    recorded = 0
    for status in statuses(budgets, now):
        budget = status.budget
        key = (owner_id(budget), 0) if isinstance(budget, OrganizationBudget) else (0, owner_id(budget))
        won = [t for t in status.crossed if (*key, t) not in done and _record(status, t, now)]
        if won:
            recorded += len(won)
            body = scoped_body(status, _name(budget), won, now)
            scope, owner = scope_of(budget), owner_id(budget)
            transaction.on_commit(lambda s=scope, o=owner, b=body: notify_scoped_budget_task.delay(s, o, b),
                                  robust=True)
    return recorded


# ---------------------------------------------------------------------------------------------------- hard stops

def spent_hard_organization_budgets(now: datetime) -> dict[int, str]:
    """Every project of an organization whose hard budget this month is spent, with the reason its queued jobs
    show (`jobs.ports.budget_sources`). One query when no organization budget is hard."""
    hard = list(OrganizationBudget.objects.filter(hard=True).values_list("organization_id", "organization__name",
                                                                          "amount"))
    if not hard:
        return {}
    month = month_of(now)
    to_date = spent([pk for pk, _, _ in hard], month, now, "organization")
    stops = {}
    for pk, name, amount in hard:
        if to_date.get(pk, 0.0) >= float(amount):
            reason = (f"organization {name} has spent {money(to_date.get(pk, 0.0))} of its {money(float(amount))} "
                      f"budget for {month.start:%B}; only preemptible jobs are admitted")
            for project in Project.objects.filter(organization_id=pk).values_list("id", flat=True):
                stops[project] = reason
    return stops


def spent_hard_user_budgets(now: datetime) -> dict[int, str]:
    """Users whose hard budget this month is spent, with the reason their queued non-preemptible jobs show
    (`jobs.ports.user_budget_sources`). One query when no user budget is hard."""
    hard = list(UserBudget.objects.filter(hard=True).values_list("user_id", "user__username", "amount"))
    if not hard:
        return {}
    month = month_of(now)
    to_date = spent([pk for pk, _, _ in hard], month, now, "user")
    return {pk: (f"user {name} has spent {money(to_date.get(pk, 0.0))} of their {money(float(amount))} budget for "
                 f"{month.start:%B}; only their preemptible jobs are admitted")
            for pk, name, amount in hard if to_date.get(pk, 0.0) >= float(amount)}
