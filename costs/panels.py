"""The project page's budget panel (registered with tenancy's project page at start-up): the month's budget, spend,
percent, forecast and the alerts of the month. Every role of the project sees it; admins get the form."""

from __future__ import annotations

from django.conf import settings
from django.http import HttpRequest
from django.utils import timezone

from costs import selectors
from costs.budget_views import can_set_budget
from costs.budgets import status_of
from tenancy.models import Project


def budget_panel(request: HttpRequest, project: Project) -> dict:
    budget = selectors.budget_of(project)
    editable = {"can_edit": can_set_budget(request.user, project), "currency": settings.TIDAL["CURRENCY"]}
    if budget is None:
        return {"budget": None, **editable}
    status = status_of(budget, timezone.now())
    return {"budget": budget, "status": status, "alerts": list(selectors.budget_alerts(project, status.month)),
            **editable}
