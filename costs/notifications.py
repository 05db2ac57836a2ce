"""Budget alerts, told where every alert is told (the notifications app): the project's webhooks (signed, retried)
and, with a mail server, an e-mail to the project's owners and admins. Tasks: in embedded mode and tests they run
in-process."""

from __future__ import annotations

import json
from datetime import datetime
from typing import TYPE_CHECKING

from celery import shared_task
from django.conf import settings

from notifications import send
from tenancy.models import Project, Role

if TYPE_CHECKING:
    from costs.budgets import BudgetStatus

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


@shared_task
def notify_budget_task(project_id: int, body: str) -> None:
    """Fan a budget alert out to the project's enabled webhooks and, with a mail server, its owners and admins."""
    send.to_webhooks(project_id, body, EVENT)
    if send.mail_configured():
        mail_budget_task.delay(project_id, body)


@shared_task
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
