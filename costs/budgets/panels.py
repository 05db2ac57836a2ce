"""The project page's budget panel (registered with tenancy's project page at start-up): the month's budget, spend,
percent, forecast and the thresholds reached this month. Every role of the project sees it; admins get the form."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from django.conf import settings
from django.http import HttpRequest
from django.utils import timezone

from costs import selectors
from costs.budgets.status import BudgetStatus, status_of
from costs.budgets.views import can_set_budget
from costs.models import BudgetAlert
from tenancy.models import Project


def budget_panel(request: HttpRequest, project: Project) -> dict:
    budget = selectors.budget_of(project)
    editable = {"can_edit": can_set_budget(request.user, project), "currency": settings.TIDAL["CURRENCY"]}
    if budget is None:
        return {"budget": None, **editable}
    status = status_of(budget, timezone.now())
    alerts = selectors.budget_alerts(project, status.month)
    return {"budget": budget, "status": status, "reached": reached(status, alerts), **editable}


def reached(status: BudgetStatus, alerts: Iterable[BudgetAlert]) -> list[dict[str, Any]]:
    """The thresholds reached this month, in order: those the current spend reaches (computed now, so the panel
    does not wait for the minute's check to record them) and those an alert recorded (a budget since raised may no
    longer reach them), each with its alert if the check recorded one."""
    recorded = {alert.threshold: alert for alert in alerts}
    return [{"threshold": threshold, "alert": recorded.get(threshold)}
            for threshold in sorted(set(status.crossed) | set(recorded))]
