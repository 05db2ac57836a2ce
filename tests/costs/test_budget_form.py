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


def test_the_panel_shows_the_thresholds_the_spend_reached_before_the_check_records_them(tenant, prices):
    """At 58% of a budget alerting at 50 and 80, the panel says 50% is reached from the current spend, not "No
    threshold reached" until the next check; once the check records it, it shows when."""
    from datetime import timedelta

    from django.utils import timezone

    from costs.budgets.alerts import check_budgets
    from costs.models import UsageSegment
    from quotas.models import PriorityClass

    Budget.objects.create(project=tenant.project, amount=Decimal("100"), thresholds=[50, 80])
    now = timezone.now()
    UsageSegment.objects.create(  # 29 h100 for an hour at 2.00: 58.00
        attempt_number=1, organization=tenant.organization, project=tenant.project, flavor=prices["h100"],
        priority_class=PriorityClass.objects.get(name="normal"), stage="other", devices=29, cpu_millis=0,
        start_ts=int((now - timedelta(minutes=61)).timestamp()), end_ts=int((now - timedelta(minutes=1)).timestamp()))
    panel = browser(tenant.users["viewer"]).get(f"/projects/{tenant.project.slug}/").content.decode()
    budget = panel[panel.index('id="budget"'):]
    assert "No threshold reached" not in budget and "50% reached" in budget and "80% reached" not in budget
    assert "alert at the next check" in budget
    check_budgets()
    budget = browser(tenant.users["viewer"]).get(f"/projects/{tenant.project.slug}/").content.decode()
    assert "50% reached" in budget and "alert at the next check" not in budget
