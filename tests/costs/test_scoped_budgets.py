"""Budgets of an organization (all its projects) and of a user (their jobs in every project): the API with the shared
cross-tenant tests (staff write; members of the organization's projects read its budget, a user reads their own),
bad input named, the month's spend from the reports, alerts once a month through the notifications, and the hard
stop through the real scheduler loop: an organization's stops its every project, a user's only that user's
non-preemptible jobs."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from decimal import Decimal
from unittest import mock

import pytest
from django.test import override_settings

from costs import services
from costs.budgets.alerts import check_budgets
from costs.models import OrganizationBudget, ScopedBudgetAlert, UserBudget
from jobs.loop import run_once
from jobs.states import State
from tenancy.models import AuditEntry
from tests.crosstenant import CrossTenantMixin
from tests.jobs.conftest import run, submit

pytestmark = pytest.mark.django_db
NOW = datetime(2026, 6, 15, 12, tzinfo=UTC)


class TestOrganizationBudgets(CrossTenantMixin):
    basename = "organizationbudget"

    def make_object(self, tenant, project):
        return OrganizationBudget.objects.create(organization=project.organization, amount=Decimal("1000"))

    def create_payload(self, tenant, project):
        return {"organization": project.organization.slug, "amount": "5000", "hard": True}

    def update_payload(self, tenant, obj):
        return {"amount": "1"}

    def test_cannot_create_in_another_tenants_project(self, tenant, clients):
        """Staff write organizations' budgets: an owner of a project is refused whatever organization it names."""
        for organization in ("acme", "globex"):
            response = clients["owner"].post(self.list_url(), {"organization": organization, "amount": "1"},
                                             format="json")
            assert response.status_code == 403
        assert not OrganizationBudget.objects.exists()

    def test_staff_write_members_read_with_the_months_spend(self, tenant, clients, staff_client, prices):
        with mock.patch("django.utils.timezone.now", return_value=NOW):
            run(submit(tenant, prices["h100"]), prices["cluster"], ["r1-n1"], now=NOW - timedelta(hours=1))
            run(submit(tenant, prices["h100"], project=prices["speech"], user="owner"), prices["cluster"], ["r1-n2"],
                now=NOW - timedelta(hours=2))
            created = staff_client.post(self.list_url(), {"organization": "acme", "amount": "100.00",
                                                          "thresholds": [10, 50]}, format="json")
            assert created.status_code == 201, created.content
            # Vision 8 x 1 h and Speech 8 x 2 h of h100 at 2.00: 48.00 of 100.00
            body = clients["viewer"].get(self.detail_url(OrganizationBudget.objects.get())).json()
        assert (body["organization"], body["amount"], body["spent_this_month"], body["percent"], body["month"]) == (
            "acme", "100.00", 48.0, 48.0, "2026-06")
        assert AuditEntry.objects.filter(action="organizationbudget.create").exists()
        second = staff_client.post(self.list_url(), {"organization": "acme", "amount": "1"}, format="json")
        assert second.status_code == 400 and "organization" in second.json()["error"]["fields"]

    @pytest.mark.parametrize(("body", "field"), [
        ({"organization": "acme", "amount": "-1"}, "amount"),
        ({"organization": "acme"}, "amount"),
        ({"organization": "acme", "amount": "1", "thresholds": [80, 50]}, "thresholds"),
        ({"organization": "acme", "amount": "1", "thresholds": [0]}, "thresholds"),
        ({"organization": "nowhere", "amount": "1"}, "organization"),
    ])
    def test_bad_input_is_a_400_naming_the_field(self, tenant, staff_client, body, field):
        response = staff_client.post(self.list_url(), body, format="json")
        assert response.status_code == 400, response.content
        assert field in response.json()["error"]["fields"]
        assert not OrganizationBudget.objects.exists()


class TestUserBudgets(CrossTenantMixin):
    basename = "userbudget"
    user_owned = True

    def make_object(self, tenant, user):
        return UserBudget.objects.create(user=user, amount=Decimal("1000"))

    def update_payload(self, tenant, obj):
        return {"amount": "1"}

    def test_only_staff_write_and_a_user_reads_their_own(self, tenant, clients, staff_client):
        payload = {"user": "member", "amount": "20", "hard": True}
        assert clients["member"].post(self.list_url(), payload, format="json").status_code == 403
        created = staff_client.post(self.list_url(), payload, format="json")
        assert created.status_code == 201, created.content
        url = self.detail_url(UserBudget.objects.get())
        assert clients["member"].get(url).json()["user"] == "member"
        assert clients["member"].patch(url, {"amount": "999"}, format="json").status_code == 403
        assert clients["owner"].get(url).status_code == 404  # another user's, even an owner of their project
        assert clients["owner"].get(self.list_url()).json()["results"] == []
        bad = staff_client.post(self.list_url(), {"user": "nobody", "amount": "1"}, format="json")
        assert bad.status_code == 400 and "user" in bad.json()["error"]["fields"]
        again = staff_client.post(self.list_url(), payload, format="json")
        assert again.status_code == 400 and "user" in again.json()["error"]["fields"]


# ------------------------------------------------------------------------------------------------ alerts

@override_settings(EMAIL_HOST="mail.example.com")
def test_organization_and_user_alerts_are_recorded_and_told_once_a_month(tenant, prices, mailoutbox,
                                                                           django_capture_on_commit_callbacks):
    from django.contrib.auth import get_user_model

    get_user_model().objects.filter(username__in=["owner", "admin", "member"]).update(email="x@example.com")
    get_user_model().objects.filter(username="member").update(email="member@example.com")
    run(submit(tenant, prices["h100"]), prices["cluster"], ["r1-n1"], now=NOW - timedelta(hours=1))  # 16.00
    services.scoped_budget_save(actor=None, budget=OrganizationBudget(organization=tenant.organization),
                                values={"amount": Decimal("20"), "thresholds": [50, 100]})
    services.scoped_budget_save(actor=None, budget=UserBudget(user=tenant.users["member"]),
                                values={"amount": Decimal("16"), "thresholds": [100]})
    with mock.patch("notifications.send.to_webhooks") as hooks, django_capture_on_commit_callbacks(execute=True):
        assert check_budgets(now=NOW) == 2  # the organization's 50% and the user's 100%
    assert sorted((a.organization_id is not None, a.threshold) for a in ScopedBudgetAlert.objects.all()) == [
        (False, 100), (True, 50)]
    body = hooks.call_args_list[0].args
    assert body[0] in (tenant.project.pk, prices["speech"].pk) and body[2] == "budget.threshold"
    assert '"scope":"organization"' in body[1] and '"organization":"Acme"' in body[1]
    assert hooks.call_count == 2  # the organization's two projects
    subjects = sorted((m.subject, tuple(m.to)) for m in mailoutbox)
    assert subjects == [("[Tidal] organization acme reached 50% of its budget for 2026-06", ("x@example.com",)),
                        ("[Tidal] user member reached 100% of its budget for 2026-06", ("member@example.com",))]
    with django_capture_on_commit_callbacks(execute=True):
        assert check_budgets(now=NOW + timedelta(minutes=1)) == 0
    assert len(mailoutbox) == 2


# ------------------------------------------------------------------------------------------------ hard stops

def cycle(capture):
    with capture(execute=True):
        run_once(now=NOW)


def test_a_spent_hard_organization_budget_stops_every_project_of_it(tenant, prices,
                                                                    django_capture_on_commit_callbacks):
    budget = services.scoped_budget_save(actor=None, budget=OrganizationBudget(organization=tenant.organization),
                                         values={"amount": Decimal("10"), "hard": True})
    run(submit(tenant, prices["h100"]), prices["cluster"], ["r1-n1"], now=NOW - timedelta(hours=1))  # 16.00
    from quotas.models import Quota

    Quota.objects.create(project=tenant.other_project, flavor=prices["a100"], guaranteed=8)
    speech = submit(tenant, prices["h100"], project=prices["speech"], user="owner", name="speech")
    spot = submit(tenant, prices["a100"], name="spot", priority="preemptible", devices=4)
    theirs = submit(tenant, prices["a100"], project=tenant.other_project, user="outsider", devices=4)
    cycle(django_capture_on_commit_callbacks)
    for job in (speech, spot, theirs):
        job.refresh_from_db()
    reason = "organization Acme has spent 16 USD of its 10 USD budget for June; only preemptible jobs are admitted"
    assert (speech.state, speech.wait_code, speech.wait_reason) == (State.QUEUED, "budget", reason)
    assert spot.state != State.QUEUED and theirs.state != State.QUEUED
    services.scoped_budget_save(actor=None, budget=budget, values={"amount": Decimal("100")})
    cycle(django_capture_on_commit_callbacks)
    speech.refresh_from_db()
    assert speech.state != State.QUEUED


def test_a_spent_hard_user_budget_stops_only_that_users_non_preemptible_jobs(tenant, prices,
                                                                             django_capture_on_commit_callbacks):
    budget = services.scoped_budget_save(actor=None, budget=UserBudget(user=tenant.users["member"]),
                                         values={"amount": Decimal("10"), "hard": True})
    run(submit(tenant, prices["h100"]), prices["cluster"], ["r1-n1"], now=NOW - timedelta(hours=1))  # 16.00
    mine = submit(tenant, prices["a100"], name="mine", devices=4)
    spot = submit(tenant, prices["a100"], name="spot", priority="preemptible", devices=2)
    colleague = submit(tenant, prices["a100"], user="admin", name="colleague", devices=2)
    cycle(django_capture_on_commit_callbacks)
    for job in (mine, spot, colleague):
        job.refresh_from_db()
    reason = ("user member has spent 16 USD of their 10 USD budget for June; only their preemptible jobs are "
              "admitted")
    assert (mine.state, mine.wait_code, mine.wait_reason, mine.eta, mine.eta_note) == (
        State.QUEUED, "budget", reason, None, "budget spent")
    assert spot.state != State.QUEUED and colleague.state != State.QUEUED
    cycle(django_capture_on_commit_callbacks)  # held again: nothing rewritten, nothing changed
    mine.refresh_from_db()
    assert (mine.state, mine.wait_code) == (State.QUEUED, "budget")
    services.scoped_budget_save(actor=None, budget=budget, values={"hard": False})
    cycle(django_capture_on_commit_callbacks)
    mine.refresh_from_db()
    assert mine.state != State.QUEUED and mine.wait_code == ""
