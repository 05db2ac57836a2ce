"""The project page's budget form: admins set, change and remove the budget through the service; members and
viewers are refused (403), outsiders see no project (404), bad values come back as messages and change nothing."""

from __future__ import annotations

from decimal import Decimal

import pytest
from django.test import Client

from costs.models import Budget
from tenancy.models import AuditEntry

pytestmark = pytest.mark.django_db


def browser(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


def post(tenant, role, **form):
    return browser(tenant.users[role]).post(f"/projects/{tenant.project.slug}/budget/", form, follow=True)


def test_an_admin_sets_changes_and_removes_the_budget_from_the_project_page(tenant):
    page = browser(tenant.users["admin"]).get(f"/projects/{tenant.project.slug}/").content.decode()
    assert 'id="budget-form"' in page
    response = post(tenant, "admin", amount="10000", thresholds="50, 90%", hard="on")
    assert response.status_code == 200 and "Budget saved." in response.content.decode()
    budget = Budget.objects.get(project=tenant.project)
    assert (budget.amount, budget.thresholds, budget.hard) == (Decimal("10000"), [50, 90], True)
    post(tenant, "owner", amount="12000", thresholds="80")
    budget.refresh_from_db()
    assert (budget.amount, budget.thresholds, budget.hard) == (Decimal("12000"), [80], False)
    assert "Budget removed." in post(tenant, "admin", action="remove").content.decode()
    assert not Budget.objects.filter(project=tenant.project).exists()
    assert AuditEntry.objects.filter(action__startswith="budget.").count() == 3


@pytest.mark.parametrize(("form", "says"), [
    ({"amount": "-5", "thresholds": "50"}, "amount:"),
    ({"amount": "lots", "thresholds": "50"}, "amount: Must be a number"),
    ({"amount": "100", "thresholds": "90,50"}, "thresholds:"),
    ({"amount": "100", "thresholds": "half"}, "thresholds: Whole percents"),
])
def test_bad_values_are_messages_naming_the_field_and_change_nothing(tenant, form, says):
    response = post(tenant, "admin", **form)
    assert says in response.content.decode()
    assert not Budget.objects.filter(project=tenant.project).exists()


@pytest.mark.parametrize(("role", "status"), [("member", 403), ("viewer", 403), ("outsider", 404)])
def test_only_admins_of_the_project_may_set_its_budget(tenant, role, status):
    response = browser(tenant.users[role]).post(f"/projects/{tenant.project.slug}/budget/",
                                                {"amount": "1", "thresholds": "50"})
    assert response.status_code == status
    assert not Budget.objects.exists()
    if role != "outsider":
        page = browser(tenant.users[role]).get(f"/projects/{tenant.project.slug}/").content.decode()
        assert 'id="budget-form"' not in page
