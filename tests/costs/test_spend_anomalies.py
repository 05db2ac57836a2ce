"""Spend anomaly alerts: a project's day over a multiple of the median of the days before it alerts once per project
and day through the notifications (webhooks, mail to its owners and admins); per-project terms through the API
(shared cross-tenant tests, 400s naming the field); exact Decimal comparisons; the periodic wiring."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta
from decimal import Decimal
from unittest import mock

import pytest
from django.test import override_settings

from costs.budgets.anomalies import Terms, anomalous, check_spend_anomalies
from costs.metering.rollup import roll_segments
from costs.models import SpendAnomalyAlert, SpendAnomalyRule, UsageSegment
from quotas.models import PriorityClass
from tests.crosstenant import CrossTenantMixin

pytestmark = pytest.mark.django_db
NOW = datetime(2026, 6, 15, 12, tzinfo=UTC)
TODAY = NOW.date()
D = Decimal


# pure -------------------------------------------------------------------------------------------------------------

def days(values: list[str], today: str) -> dict[date, Decimal]:
    """The trailing days' spend, most recent last, then today's."""
    found = {TODAY - timedelta(days=len(values) - i): D(v) for i, v in enumerate(values)}
    return {**found, TODAY: D(today)}


def test_a_day_over_the_multiple_of_the_trailing_median_is_an_anomaly_exactly():
    terms = Terms(D("3.00"), 14)
    assert anomalous(days(["10.0000"] * 14, "30.0000"), TODAY, terms) is None  # at the multiple: not over it
    found = anomalous(days(["10.0000"] * 14, "30.0001"), TODAY, terms)
    assert found is not None and (found.spent, found.median, found.ratio) == (D("30.0001"), D("10.0000"), D("3.00"))
    # the median, not the mean: one expensive day in the window does not raise the baseline
    assert anomalous(days(["10"] * 13 + ["500"], "31"), TODAY, terms).median == D("10.0000")
    # an even count's median is the mean of the middle two; days without spend count as 0
    seven = {TODAY - timedelta(days=back): D("10") for back in range(1, 8)}
    assert anomalous({**seven, TODAY: D("15.01")}, TODAY, terms).median == D("5.0000")
    assert anomalous({**seven, TODAY: D("15.00")}, TODAY, terms) is None


def test_no_baseline_no_anomaly():
    terms = Terms(D("3.00"), 14)
    assert anomalous({TODAY: D("1000")}, TODAY, terms) is None  # a new project's first day
    five = {TODAY - timedelta(days=back): D("10") for back in range(1, 6)}  # five days of 14 spent: median 0
    assert anomalous({**five, TODAY: D("1000")}, TODAY, terms) is None


# the check ---------------------------------------------------------------------------------------------------------

def spend(project, flavor, day: date, devices: int, hours: float, start_hour: int = 0) -> None:
    start = int(datetime.combine(day, datetime.min.time(), UTC).timestamp()) + start_hour * 3600
    UsageSegment.objects.create(attempt_number=1, organization=project.organization, project=project, flavor=flavor,
                                priority_class=PriorityClass.objects.get(name="normal"), stage="sft",
                                devices=devices, cpu_millis=0, start_ts=start, end_ts=start + int(hours * 3600),
                                outcome="succeeded")


@pytest.fixture
def history(tenant, prices):
    """Vision and the outsider's project: 14 days of 10.00 (1 h100 x 5 h at 2.00), then today 40.00 so far (8 x
    2.5 h) for vision and 20.00 for the outsider's."""
    for project in (tenant.project, tenant.other_project):
        for back in range(1, 15):
            spend(project, prices["h100"], TODAY - timedelta(days=back), 1, 5)
    spend(tenant.project, prices["h100"], TODAY, 8, 2.5)
    spend(tenant.other_project, prices["h100"], TODAY, 4, 2.5)
    roll_segments(now=NOW)
    return prices


@override_settings(EMAIL_HOST="mail.example.com")
def test_a_spike_alerts_once_per_project_and_day_by_webhook_and_mail(tenant, history, mailoutbox,
                                                                     django_capture_on_commit_callbacks):
    from django.contrib.auth import get_user_model

    get_user_model().objects.filter(username__in=["owner", "admin", "outsider"]).update(email="a@example.com")
    with mock.patch("notifications.send.to_webhooks") as hooks, django_capture_on_commit_callbacks(execute=True):
        assert check_spend_anomalies(now=NOW) == 1
    alert = SpendAnomalyAlert.objects.get()
    assert (alert.project_id, alert.day, alert.spent, alert.median, alert.multiple, alert.trailing_days) == (
        tenant.project.pk, TODAY, D("40.0000"), D("10.0000"), D("3.00"), 14)
    (project_id, body, event), = [call.args for call in hooks.call_args_list]
    assert (project_id, event) == (tenant.project.pk, "cost.anomaly")
    assert '"project":"vision"' in body and '"ratio":4.0' in body and '"spent":40.0' in body
    assert [(m.subject, m.to) for m in mailoutbox] == [
        ("[Tidal] vision spent 4.0x its usual on 2026-06-15", ["a@example.com"])]
    with mock.patch("notifications.send.to_webhooks") as hooks, django_capture_on_commit_callbacks(execute=True):
        spend(tenant.project, history["h100"], TODAY, 8, 1, start_hour=5)  # more of the same day: no second alert
        assert check_spend_anomalies(now=NOW + timedelta(minutes=5)) == 0
    assert hooks.call_count == 0 and len(mailoutbox) == 1
    # the next day alerts again if it is anomalous too; yesterday (today here) is not alerted twice
    spend(tenant.project, history["h100"], TODAY + timedelta(days=1), 8, 3)
    assert check_spend_anomalies(now=NOW + timedelta(days=1)) == 1


def test_a_projects_own_terms_and_a_disabled_rule(tenant, history):
    rule = SpendAnomalyRule.objects.create(project=tenant.project, multiple=D("5.00"), trailing_days=14)
    assert check_spend_anomalies(now=NOW) == 0  # 4x is under vision's 5x
    rule.multiple = D("3.50")
    rule.save()
    rule.enabled = False
    rule.save()
    assert check_spend_anomalies(now=NOW) == 0
    rule.enabled = True
    rule.save()
    assert check_spend_anomalies(now=NOW) == 1
    with override_settings(TIDAL={**__import__("django.conf").conf.settings.TIDAL, "COST_ANOMALY_MULTIPLE": 1.5}):
        assert check_spend_anomalies(now=NOW) == 1  # the outsider's 2x is over a 1.5x default
    assert set(SpendAnomalyAlert.objects.values_list("project__slug", flat=True)) == {"vision", "secret"}


def test_a_missed_check_still_alerts_yesterday(tenant, history):
    assert check_spend_anomalies(now=NOW + timedelta(days=1)) == 1
    assert SpendAnomalyAlert.objects.get().day == TODAY


def test_the_check_runs_periodically(settings):
    from core.embedded import EMBEDDED_LOOPS

    assert settings.CELERY_BEAT_SCHEDULE["costs-check-spend-anomalies"]["task"] == "costs.tasks.check_spend_anomalies"
    assert "costs-check-spend-anomalies" in {loop.name for loop in EMBEDDED_LOOPS}


# the API -------------------------------------------------------------------------------------------------------------

class TestSpendAnomalyRules(CrossTenantMixin):
    basename = "spendanomalyrule"

    def make_object(self, tenant, project):
        return SpendAnomalyRule.objects.create(project=project, multiple=D("4"))

    def create_payload(self, tenant, project):
        return {"project": project.slug, "multiple": "2.5", "trailing_days": 7}

    def update_payload(self, tenant, obj):
        return {"multiple": "6"}

    def test_admins_write_members_read(self, tenant, clients):
        payload = self.create_payload(tenant, tenant.project)
        assert clients["member"].post(self.list_url(), payload, format="json").status_code == 403
        created = clients["admin"].post(self.list_url(), payload, format="json")
        assert created.status_code == 201, created.content
        assert clients["viewer"].get(self.list_url()).json()["results"][0]["multiple"] == "2.50"
        again = clients["admin"].post(self.list_url(), payload, format="json")
        assert again.status_code == 400 and "project" in again.json()["error"]["fields"]

    @pytest.mark.parametrize(("body", "field"), [
        ({"multiple": "1"}, "multiple"), ({"multiple": "0.5"}, "multiple"), ({"multiple": "2000"}, "multiple"),
        ({"multiple": "lots"}, "multiple"), ({"multiple": "3", "trailing_days": 2}, "trailing_days"),
        ({"multiple": "3", "trailing_days": 91}, "trailing_days"), ({}, "multiple"),
    ])
    def test_bad_terms_are_400s_naming_the_field(self, tenant, clients, body, field):
        response = clients["admin"].post(self.list_url(), {"project": "vision", **body}, format="json")
        assert response.status_code == 400, response.content
        assert field in response.json()["error"]["fields"]
        assert not SpendAnomalyRule.objects.exists()
