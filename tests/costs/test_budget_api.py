"""/api/v1/budgets/: every role of the project reads a budget with what was spent this month, its percent and
forecast; admins, owners and staff write; field-named 400s; the shared cross-tenant tests."""

from __future__ import annotations

from datetime import timedelta
from decimal import Decimal

import pytest
from django.utils import timezone

from costs.models import Budget
from tests.crosstenant import CrossTenantMixin
from tests.jobs.conftest import run, submit

pytestmark = pytest.mark.django_db


class TestBudgets(CrossTenantMixin):
    basename = "budget"

    def make_object(self, tenant, project):
        return Budget.objects.create(project=project, amount=Decimal("1000"))

    def create_payload(self, tenant, project):
        return {"project": project.slug, "amount": "5000", "hard": True, "thresholds": [75, 100]}

    def update_payload(self, tenant, obj):
        return {"amount": "1"}

    def test_an_admin_writes_members_and_viewers_read_with_the_months_spend(self, tenant, clients, prices):
        # 8 h100 at 2.00 an hour since 30 minutes ago (within this month unless it began less than 30 minutes ago).
        now = timezone.now()
        since = max(now - timedelta(minutes=30), now.replace(day=1, hour=0, minute=0, second=0, microsecond=0))
        run(submit(tenant, prices["h100"]), prices["cluster"], ["r1-n1"], now=since)
        payload = self.create_payload(tenant, tenant.project)
        for role in ("viewer", "member"):
            assert clients[role].post(self.list_url(), payload, format="json").status_code == 403
        created = clients["admin"].post(self.list_url(), payload, format="json")
        assert created.status_code == 201, created.content
        body = created.json()
        spent = 16 * (now - since).total_seconds() / 3600
        assert body["project"] == "vision" and body["amount"] == "5000.00" and body["hard"] is True
        assert body["thresholds"] == [75, 100] and body["currency"] == "USD"
        assert body["month"] == f"{now:%Y-%m}" and body["exhausted"] is False
        assert body["spent_this_month"] == pytest.approx(spent, abs=0.1)
        assert body["percent"] == pytest.approx(spent / 50, abs=0.1)
        assert body["forecast"] >= body["spent_this_month"] and body["forecast_basis"].startswith("run rate")
        listed = clients["viewer"].get(self.list_url(), {"project": "vision"}).json()["results"]
        assert [(row["id"], row["spent_this_month"]) for row in listed] == [
            (body["id"], pytest.approx(spent, abs=0.1))]
        url = self.detail_url(Budget.objects.get())
        for role in ("viewer", "member"):
            assert clients[role].patch(url, {"amount": "1"}, format="json").status_code == 403
            assert clients[role].delete(url).status_code == 403
        changed = clients["owner"].patch(url, {"amount": "1", "thresholds": []}, format="json")
        assert changed.status_code == 200 and changed.json()["exhausted"] is (spent >= 1)
        assert changed.json()["thresholds"] == []
        assert clients["admin"].delete(url).status_code == 204
        assert not Budget.objects.exists()

    def test_staff_write_any_projects_budget(self, tenant, staff_client):
        response = staff_client.post(self.list_url(), {"project": "secret", "amount": "10"}, format="json")
        assert response.status_code == 201, response.content
        assert response.json()["thresholds"] == [50, 80, 100] and response.json()["hard"] is False

    @pytest.mark.parametrize(("payload", "field"), [
        ({"amount": "-1"}, "amount"),
        ({"amount": "lots"}, "amount"),
        ({}, "amount"),
        ({"amount": "10", "thresholds": [80, 50]}, "thresholds"),
        ({"amount": "10", "thresholds": [0]}, "thresholds"),
        ({"amount": "10", "thresholds": [50, 2000]}, "thresholds"),
        ({"amount": "10", "thresholds": "50,80"}, "thresholds"),
        ({"amount": "10", "project": "nope"}, "project"),
    ])
    def test_bad_input_is_a_400_naming_the_field(self, tenant, clients, payload, field):
        response = clients["admin"].post(self.list_url(), {"project": "vision", **payload}, format="json")
        assert response.status_code == 400, response.content
        assert field in response.json()["error"]["fields"]
        assert not Budget.objects.exists()

    def test_a_second_budget_for_a_project_is_a_400_naming_the_project(self, tenant, clients):
        self.make_object(tenant, tenant.project)
        response = clients["admin"].post(self.list_url(), self.create_payload(tenant, tenant.project),
                                          format="json")
        assert response.status_code == 400 and "project" in response.json()["error"]["fields"]

    def test_a_budget_does_not_move_to_another_project(self, tenant, clients, inventory):
        obj = self.make_object(tenant, tenant.project)
        response = clients["owner"].patch(self.detail_url(obj), {"project": "speech"}, format="json")
        assert response.status_code == 400 and "project" in response.json()["error"]["fields"]

    def test_a_page_of_budgets_is_priced_with_one_set_of_reports(self, tenant, staff_client, inventory):
        from django.db import connection
        from django.test.utils import CaptureQueriesContext

        def queries() -> int:
            with CaptureQueriesContext(connection) as captured:
                assert staff_client.get(self.list_url()).status_code == 200
            return len(captured)

        self.make_object(tenant, tenant.project)
        queries()  # the token and role caches warm up
        one = queries()
        self.make_object(tenant, tenant.other_project)
        self.make_object(tenant, inventory["speech"])
        assert queries() == one
