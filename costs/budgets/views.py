"""The project page's budget form: project admins and owners (and platform staff) set or remove the monthly budget
through the same service as the API and the CLI; errors come back as messages naming the field."""

from __future__ import annotations

from decimal import Decimal, InvalidOperation

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect
from django.views.decorators.http import require_POST

from core.errors import DomainError
from costs import selectors, services
from costs.models import Budget
from tenancy.models import Project, Role
from tenancy.permissions import has_role
from tenancy.views import project_or_404


def can_set_budget(user, project: Project) -> bool:
    return has_role(user, project, Role.ADMIN)  # platform staff act as owners


def _amount(text: str) -> Decimal:
    try:
        return Decimal(text.strip())
    except InvalidOperation:
        raise DomainError("Must be a number, e.g. 10000.", field="amount") from None


def _thresholds(text: str) -> list[int]:
    try:
        return [int(part) for part in text.replace("%", "").split(",") if part.strip()]
    except ValueError:
        raise DomainError("Whole percents separated by commas, e.g. 50,80,100.", field="thresholds") from None


@login_required
@require_POST
def budget_edit(request: HttpRequest, slug: str) -> HttpResponse:
    project = project_or_404(request, slug)
    if not can_set_budget(request.user, project):
        raise PermissionDenied("Setting the budget needs the admin role in the project.")
    budget = selectors.budget_of(project)
    try:
        if request.POST.get("action") == "remove":
            if budget is not None:
                services.budget_delete(actor=request.user, budget=budget)
            messages.success(request, "Budget removed.")
        else:
            services.budget_save(actor=request.user, budget=budget or Budget(project=project), values={
                "amount": _amount(request.POST.get("amount", "")),
                "thresholds": _thresholds(request.POST.get("thresholds", "")),
                "hard": request.POST.get("hard") == "on"})
            messages.success(request, "Budget saved.")
    except DomainError as error:
        messages.error(request, f"{error.field}: {error.message}" if error.field else error.message)
    return redirect("project_detail", slug=project.slug)
