"""Project pages of tenancy: the audit log (who may read it, and that the page and the API agree)."""

from __future__ import annotations

import pytest
from django.urls import reverse

from tenancy import services
from tenancy.models import Role
from tests.conftest import client_for, make_user
from tests.ui.conftest import login

pytestmark = pytest.mark.django_db

@pytest.fixture
def audited(tenant):
    """One audit entry in the tenant's project and one in the other tenant's, each naming a distinct new user."""
    services.membership_add(actor=tenant.users["owner"], project=tenant.project, user=make_user("newcomer"),
                            role=Role.VIEWER)
    services.membership_add(actor=tenant.users["outsider"], project=tenant.other_project,
                            user=make_user("secret-hire"), role=Role.VIEWER)
    return tenant


class TestAuditPage:
    """The API's audit endpoint lists a project's entries to its admins and owners only (selectors.audit_for_user);
    the page follows the same rule, but says so to the members it refuses instead of pretending the project is
    missing. Outsiders get the 404 of a missing project."""

    def url(self, tenant, project=None) -> str:
        return reverse("project_audit", args=[(project or tenant.project).slug])

    @pytest.mark.parametrize("role", ["owner", "admin"])
    def test_admins_and_owners_read_it(self, audited, role):
        response = login(audited.users[role]).get(self.url(audited))
        body = response.content.decode()
        assert response.status_code == 200
        assert "membership.add" in body and "newcomer" in body
        assert "secret-hire" not in body  # only this project's entries

    @pytest.mark.parametrize("role", ["member", "viewer"])
    def test_members_below_admin_are_refused_with_the_reason(self, audited, role):
        response = login(audited.users[role]).get(self.url(audited))
        body = response.content.decode()
        assert response.status_code == 403
        assert "Reading the audit log needs the admin role." in body
        assert "No such project." not in body
        assert 'class="topbar"' in body and 'id="project-switcher"' in body
        assert "newcomer" not in body and "membership.add" not in body

    def test_outsider_gets_the_404_of_a_missing_project(self, audited):
        outsider = login(audited.users["outsider"])
        foreign = outsider.get(self.url(audited))
        assert foreign.status_code == 404 and "No such project." in foreign.content.decode()
        assert "newcomer" not in foreign.content.decode()
        assert outsider.get(reverse("project_audit", args=["no-such-project"])).status_code == 404
        assert outsider.get(self.url(audited, audited.other_project)).status_code == 200  # their own project

    def test_platform_staff_read_every_project(self, audited):
        staff = make_user("platform", is_staff=True)
        assert login(staff).get(self.url(audited)).status_code == 200

    @pytest.mark.parametrize("role", ["owner", "admin", "member", "viewer", "outsider"])
    def test_page_and_api_agree(self, audited, role):
        """A role reads the page exactly when the API lists it the project's entries."""
        api = client_for(audited.users[role]).get("/api/v1/audit/", {"project": audited.project.slug}).json()
        api_reads = any(entry["action"] == "membership.add" for entry in api["results"])
        page = login(audited.users[role]).get(self.url(audited))
        assert (page.status_code == 200) == api_reads


class TestSettingsLinks:
    def test_audit_link_only_for_those_who_may_read_it(self, tenant):
        url = reverse("project_settings", args=[tenant.project.slug])
        audit = reverse("project_audit", args=[tenant.project.slug])
        assert audit in login(tenant.users["admin"]).get(url).content.decode()
        assert audit not in login(tenant.users["viewer"]).get(url).content.decode()
