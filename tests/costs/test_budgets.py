"""Budgets: the month's spend and forecast from the cost reports, threshold alerts exactly once a month (under
concurrent checks too, on PostgreSQL), their webhooks and e-mail, and the hard stop the scheduler is told about."""

from __future__ import annotations

import json
import threading
from datetime import date
from decimal import Decimal
from unittest import mock

import pytest
from django.db import connection, connections

from core.errors import DomainError
from costs import services
from costs.budgets import alerts
from costs.budgets.alerts import check_budgets
from costs.budgets.hard_stop import spent_hard_budgets
from costs.budgets.status import status_of
from costs.models import Budget, BudgetAlert
from jobs import ports
from jobs.lifecycle import transition
from jobs.states import State
from tests.costs.conftest import at
from tests.jobs.conftest import run, submit
from tracking.models import Webhook

pytestmark = pytest.mark.django_db
SECRET = "s3cret-s3cret-s3cret"


def budget(tenant, amount="1000", **values) -> Budget:
    return services.budget_save(actor=tenant.users["admin"], budget=Budget(project=tenant.project),
                                values={"amount": Decimal(amount), **values})


def running_h100(tenant, prices, since, **spec):
    """8 h100 (16.00 an hour at the fixture's prices) admitted at `since` and still holding them."""
    return run(submit(tenant, prices["h100"], **spec), prices["cluster"], ["r1-n1"], now=since)


# ------------------------------------------------------------------------------------------ rules of the model

@pytest.mark.parametrize(("values", "field"), [
    ({"amount": Decimal("-1")}, "amount"),
    ({"amount": None}, "amount"),
    ({"thresholds": [80, 50]}, "thresholds"),
    ({"thresholds": [50, 50]}, "thresholds"),
    ({"thresholds": [0, 50]}, "thresholds"),
    ({"thresholds": [50, 1001]}, "thresholds"),
    ({"thresholds": [50.5]}, "thresholds"),
    ({"thresholds": [True]}, "thresholds"),
    ({"thresholds": "50,80"}, "thresholds"),
])
def test_a_broken_rule_is_refused_naming_the_field(tenant, values, field):
    with pytest.raises(DomainError) as refused:
        services.budget_save(actor=None, budget=Budget(project=tenant.project), values={"amount": 5, **values})
    assert refused.value.field == field
    assert not Budget.objects.exists()


def test_one_budget_per_project_and_every_write_is_audited(tenant):
    saved = budget(tenant)
    assert saved.thresholds == [50, 80, 100] and saved.hard is False
    with pytest.raises(DomainError) as refused:
        budget(tenant, "5")
    assert refused.value.field == "project"
    services.budget_save(actor=tenant.users["admin"], budget=saved, values={"hard": True, "thresholds": [90]})
    services.budget_delete(actor=tenant.users["admin"], budget=saved)
    from tenancy.models import AuditEntry

    assert list(AuditEntry.objects.filter(project=tenant.project).order_by("id")
                .values_list("action", flat=True)) == ["budget.create", "budget.change", "budget.delete"]


# ------------------------------------------------------------------------------------------- spend and forecast

def test_spend_is_the_months_report_and_the_forecast_takes_the_last_seven_days_run_rate(tenant, prices):
    running_h100(tenant, prices, at(24 * 9), max_runtime=48 * 3600)  # from Jan 10 00:00, still running
    earlier = running_h100(tenant, prices, at(-24))  # Dec 31 00:00 to Jan 2 00:00: only January's day counts
    transition(earlier, State.CANCELLED, reason="test", actor="member", now=at(24))
    status = status_of(budget(tenant, "2000"), at(24 * 10))  # Jan 11 00:00
    assert status.spent == pytest.approx(16 * 24 * 2)
    assert status.percent == pytest.approx(status.spent / 20)
    # The run rate is from Jan 4 00:00: 7 days that cost 384 (the earlier job ended before), for the 21 days left.
    assert status.forecast.basis == "run rate of the last 7 days"
    assert status.forecast.daily_rate == pytest.approx(384 / 7)
    assert status.forecast.total == pytest.approx(768 + 384 / 7 * 21)
    assert status.forecast.committed == pytest.approx(16 * 24)  # the running job's last day of max runtime


def test_early_in_the_month_the_rate_is_the_month_so_far_and_a_long_commitment_can_win(tenant, prices):
    running_h100(tenant, prices, at(24), max_runtime=40 * 86_400)  # from Jan 2, for 40 days
    status = status_of(budget(tenant, "100000"), at(48))  # Jan 3 00:00
    assert status.spent == pytest.approx(16 * 24)
    by_rate = 16 * 24 / 2 * 29  # 384 over the month's 2 days, for 29 days
    committed = 16 * 24 * 29  # running until the month ends (its max runtime reaches beyond)
    assert committed > by_rate
    assert status.forecast.basis == "cost committed by running jobs"
    assert status.forecast.total == pytest.approx(16 * 24 + committed)


def test_a_zero_budget_has_no_percent_and_alerts_only_once_something_is_spent(tenant, prices):
    zero = budget(tenant, "0")
    assert status_of(zero, at(1)).percent is None and status_of(zero, at(1)).crossed == []
    running_h100(tenant, prices, at(0))
    assert status_of(zero, at(1)).crossed == [50, 80, 100]


# ------------------------------------------------------------------------------------------------------ alerts

def test_each_threshold_alerts_once_a_month_with_one_webhook_call_and_one_mail(
        tenant, prices, settings, mailoutbox, django_capture_on_commit_callbacks):
    settings.EMAIL_HOST = "smtp.example.com"
    settings.EMAIL_BACKEND = "django.core.mail.backends.locmem.EmailBackend"
    Webhook.objects.create(project=tenant.project, url="http://93.184.215.14/hook", secret=SECRET)
    Webhook.objects.create(project=tenant.project, url="http://93.184.215.15/off", secret=SECRET, enabled=False)
    Webhook.objects.create(project=tenant.other_project, url="http://93.184.215.16/other", secret=SECRET)
    budget(tenant, "100", hard=True)
    running_h100(tenant, prices, at(0))
    with mock.patch("notifications.webhooks._send", return_value=200) as send, \
            django_capture_on_commit_callbacks(execute=True):
        assert check_budgets(at(3)) == 0  # 48 of 100
        assert check_budgets(at(4)) == 1  # 64: 50% crossed
        assert check_budgets(at(4.5)) == 0  # 72: nothing new
        assert check_budgets(at(7)) == 2  # 112: 80% and 100% at once, one notification
        assert check_budgets(at(8)) == 0
    assert list(BudgetAlert.objects.values_list("threshold", "cost")) == [(50, pytest.approx(64)),
                                                                       (80, pytest.approx(112)),
                                                                       (100, pytest.approx(112))]
    assert send.call_count == 2
    address, body, headers = send.call_args.args[1], json.loads(send.call_args.args[2]), send.call_args.args[3]
    assert address == "93.184.215.14" and headers["X-Tidal-Event"] == "budget.threshold"
    assert body["project"] == "vision" and body["thresholds"] == [80, 100]
    assert body["budget"] | {"url": ""} == {"month": "2026-01", "amount": 100.0, "currency": "USD", "hard": True,
                                            "spent": 112.0, "percent": 112.0, "forecast": pytest.approx(16 * 24 * 31),
                                            "forecast_basis": "run rate of the month so far", "url": ""}
    assert len(mailoutbox) == 2
    assert sorted(mailoutbox[1].to) == [tenant.users["admin"].email, tenant.users["owner"].email]
    assert mailoutbox[1].subject == "[Tidal] vision reached 100% of its budget for 2026-01"
    assert "112.00 USD of its 100.00 USD" in mailoutbox[1].body and "only preemptible" in mailoutbox[1].body


def test_a_new_month_alerts_again(tenant, prices):
    budget(tenant, "10")
    running_h100(tenant, prices, at(-2))  # Dec 31 22:00
    assert check_budgets(at(-1)) == 3  # December: 16 of 10
    assert check_budgets(at(0.4)) == 1  # January: 6.40 of 10, the 50% threshold
    december, january = date(2025, 12, 1), date(2026, 1, 1)
    assert sorted(BudgetAlert.objects.values_list("month", "threshold")) == [
        (december, 50), (december, 80), (december, 100), (january, 50)]


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_concurrent_checks_alert_and_notify_exactly_once(tenant, prices):
    if connection.vendor != "postgresql":
        pytest.skip("concurrency is tested on PostgreSQL (CI sets DATABASE_URL); SQLite serializes all writers")
    budget(tenant, "100", thresholds=[50])
    running_h100(tenant, prices, at(0))
    checkers = 4
    barrier = threading.Barrier(checkers, timeout=30)
    real_alerted = alerts._alerted

    def alerted_then_wait(*args):
        found = real_alerted(*args)
        barrier.wait()  # every check has read "not alerted yet" before any inserts: the constraint must decide
        return found

    results, errors, sent = [], [], []

    def check():
        try:
            results.append(check_budgets(at(5)))
        except BaseException as error:  # surfaced below
            errors.append(error)
        finally:
            connections.close_all()

    with mock.patch.object(alerts, "_alerted", alerted_then_wait), \
            mock.patch.object(alerts.notify_budget_task, "delay", side_effect=lambda *a: sent.append(a)):
        threads = [threading.Thread(target=check) for _ in range(checkers)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(60)
    assert errors == []
    assert sorted(results) == [0] * (checkers - 1) + [1]
    assert BudgetAlert.objects.count() == 1
    assert len(sent) == 1 and json.loads(sent[0][1])["thresholds"] == [50]


# ------------------------------------------------------------------------------------------ the scheduler's stop

def test_only_spent_hard_budgets_stop_the_scheduler_with_a_readable_reason(tenant, prices,
                                                                           django_assert_num_queries):
    with django_assert_num_queries(1):  # no hard budget: one query, no report
        assert spent_hard_budgets(at(10)) == {}
    soft = budget(tenant, "1000")
    running_h100(tenant, prices, at(0))
    assert spent_hard_budgets(at(72)) == {}  # spent 1,152 but the budget is not hard
    services.budget_save(actor=None, budget=soft, values={"hard": True})
    assert spent_hard_budgets(at(48)) == {}  # 768 of 1,000
    assert ports.spent_budgets(at(72)) == {tenant.project.pk: (
        "project vision has spent 1,152 USD of its 1,000 USD budget for January; only preemptible jobs are "
        "admitted")}


# ------------------------------------------------------------------------------------------- the project page

def test_the_project_page_shows_the_budget_spend_forecast_and_the_months_alerts(tenant, prices, client):
    from django.urls import reverse
    from django.utils import timezone

    client.force_login(tenant.users["viewer"])
    page = reverse("project_detail", kwargs={"slug": "vision"})
    assert "No budget" in client.get(page).content.decode()
    now = timezone.now()
    saved = budget(tenant, "12345.5", hard=True, thresholds=[1])
    BudgetAlert.objects.create(project=tenant.project, month=now.date().replace(day=1), threshold=1,
                               amount=saved.amount, cost=150.25, created_at=now)
    BudgetAlert.objects.create(project=tenant.project, month=date(2020, 1, 1), threshold=1, amount=saved.amount,
                               cost=99999, created_at=now)  # another month's: not shown
    html = client.get(page).content.decode()
    assert 'id="budget"' in html and "12,345.50 USD" in html and "hard" in html
    assert "1% reached: 150.25 USD spent" in html and "99,999" not in html
    assert "Forecast: the month so far plus the run rate" in html


# ------------------------------------------------------------------------------------------ the admin console

def test_the_console_writes_through_the_service_and_wakes_the_scheduler_after_commit(
        tenant, monkeypatch, django_capture_on_commit_callbacks):
    from django.test import Client

    from core import wakeup
    from tenancy.models import AuditEntry
    from tests.conftest import make_user

    wakes = []
    monkeypatch.setattr(wakeup, "wake_scheduler", lambda: wakes.append("wake"))
    console = Client()
    console.force_login(make_user("root", is_staff=True, is_superuser=True))
    bad = console.post("/admin/costs/budget/add/", {"project": tenant.project.pk, "amount": "-1",
                                                    "thresholds": "[50]"})
    assert bad.status_code == 200 and not Budget.objects.exists()  # the form shows the error
    with django_capture_on_commit_callbacks(execute=True):
        added = console.post("/admin/costs/budget/add/", {"project": tenant.project.pk, "amount": "500",
                                                          "thresholds": "[50, 100]", "hard": "on"})
        assert wakes == []
    assert added.status_code == 302, added.content.decode()[:2000]
    assert wakes == ["wake"]
    saved = Budget.objects.get()
    assert (saved.amount, saved.thresholds, saved.hard) == (Decimal("500"), [50, 100], True)
    assert AuditEntry.objects.filter(action="budget.create", project=tenant.project).count() == 1
