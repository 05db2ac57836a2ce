"""Project pages of tenancy: the audit log (who may read it, and that the page and the API agree), and the htmx
actions of Settings (members and tokens), whose errors and confirmations show in the swapped fragment at once and
never on a later page."""

from __future__ import annotations

import pytest
from django.urls import reverse

from tenancy import services
from tenancy.models import ApiToken, Membership, Role
from tests.conftest import client_for, make_user
from tests.ui.conftest import login

pytestmark = pytest.mark.django_db

HTMX = {"HTTP_HX_REQUEST": "true"}
LAST_OWNER = "A project must keep at least one owner."


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
        api = client_for(audited.users[role]).get("/api/v1/audit/", {"project": audited.project.slug})
        # An outsider naming the project gets the 400 of an unknown name: no entries either way.
        api_reads = api.status_code == 200 and any(e["action"] == "membership.add" for e in api.json()["results"])
        page = login(audited.users[role]).get(self.url(audited))
        assert (page.status_code == 200) == api_reads


class TestSettingsLinks:
    def test_audit_link_only_for_those_who_may_read_it(self, tenant):
        url = reverse("project_settings", args=[tenant.project.slug])
        audit = reverse("project_audit", args=[tenant.project.slug])
        assert audit in login(tenant.users["admin"]).get(url).content.decode()
        assert audit not in login(tenant.users["viewer"]).get(url).content.decode()


def member_url(tenant, user_role: str) -> str:
    membership = Membership.objects.get(project=tenant.project, user=tenant.users[user_role])
    return reverse("member_update", args=[tenant.project.slug, membership.pk])


def fragment_messages(response) -> str:
    """The messages list inside the swapped fragment (an htmx response is the fragment alone, no frame)."""
    body = response.content.decode()
    assert "<html" not in body and 'class="topbar"' not in body, "an htmx action must answer with its fragment"
    start = body.find('class="messages"')
    return body[start:body.index("</ul>", start)] if start >= 0 else ""


def later_page(client) -> str:
    """A page opened afterwards: nothing of the htmx action may show there any more."""
    return client.get(reverse("jobs")).content.decode()


class TestMemberActionsShowTheirMessagesInTheFragment:
    def test_removing_the_last_owner_is_refused_in_the_fragment(self, tenant):
        owner = login(tenant.users["owner"])
        response = owner.post(member_url(tenant, "owner"), {"remove": "1"}, **HTMX)
        assert response.status_code == 200
        assert LAST_OWNER in fragment_messages(response)
        assert 'class="error"' in fragment_messages(response)
        assert Membership.objects.filter(project=tenant.project, user=tenant.users["owner"]).exists()
        assert LAST_OWNER not in later_page(owner)

    def test_message_does_not_leak_into_another_project(self, tenant):
        owner = login(tenant.users["owner"])
        Membership.objects.create(project=tenant.other_project, user=tenant.users["owner"], role=Role.VIEWER)
        owner.post(member_url(tenant, "owner"), {"remove": "1"}, **HTMX)
        other = owner.get(reverse("project_detail", args=[tenant.other_project.slug])).content.decode()
        assert LAST_OWNER not in other

    def test_removing_a_member_confirms_in_the_fragment(self, tenant):
        admin = login(tenant.users["admin"])
        response = admin.post(member_url(tenant, "viewer"), {"remove": "1"}, **HTMX)
        assert "Removed viewer." in fragment_messages(response)
        assert not Membership.objects.filter(project=tenant.project, user=tenant.users["viewer"]).exists()
        assert "Removed viewer." not in later_page(admin)

    def test_changing_a_role_confirms_in_the_fragment(self, tenant):
        admin = login(tenant.users["admin"])
        response = admin.post(member_url(tenant, "viewer"), {"role": Role.MEMBER}, **HTMX)
        assert "viewer is now member." in fragment_messages(response)
        assert Membership.objects.get(project=tenant.project, user=tenant.users["viewer"]).role == Role.MEMBER
        assert "is now member" not in later_page(admin)

    def test_refused_role_change_is_explained_in_the_fragment(self, tenant):
        """An admin may not take the owner role away; the reason shows where they clicked."""
        admin = login(tenant.users["admin"])
        response = admin.post(member_url(tenant, "owner"), {"role": Role.VIEWER}, **HTMX)
        assert "Only an owner can grant or take away the owner role." in fragment_messages(response)
        assert Membership.objects.get(project=tenant.project, user=tenant.users["owner"]).role == Role.OWNER
        assert "Only an owner" not in later_page(admin)

    @pytest.mark.parametrize("change", [{"role": Role.OWNER}, {"remove": "1"}])
    def test_a_viewer_changing_members_is_refused_with_a_403(self, tenant, change):
        """Refused like every page action a role does not allow (it answered 200 with a message)."""
        viewer = login(tenant.users["viewer"])
        response = viewer.post(member_url(tenant, "member"), change, **HTMX)
        assert response.status_code == 403
        assert "Changing or removing members needs the admin role." in response.content.decode()
        assert Membership.objects.get(project=tenant.project, user=tenant.users["member"]).role == Role.MEMBER

    def test_a_viewer_may_still_leave(self, tenant):
        viewer = login(tenant.users["viewer"])
        assert viewer.post(member_url(tenant, "viewer"), {"remove": "1"}, **HTMX).status_code == 200
        assert not Membership.objects.filter(project=tenant.project, user=tenant.users["viewer"]).exists()

    def test_adding_a_member_confirms_in_the_fragment(self, tenant):
        make_user("newcomer")
        admin = login(tenant.users["admin"])
        url = reverse("member_add", args=[tenant.project.slug])
        response = admin.post(url, {"username": "newcomer", "role": Role.MEMBER}, **HTMX)
        assert "Added newcomer." in fragment_messages(response)
        assert Membership.objects.filter(project=tenant.project, user__username="newcomer").exists()
        assert "Added newcomer." not in later_page(admin)

    def test_adding_an_existing_member_shows_the_error_in_the_form(self, tenant):
        admin = login(tenant.users["admin"])
        url = reverse("member_add", args=[tenant.project.slug])
        response = admin.post(url, {"username": "viewer", "role": Role.MEMBER}, **HTMX)
        assert "viewer is already a member of vision." in response.content.decode()
        assert Membership.objects.get(project=tenant.project, user=tenant.users["viewer"]).role == Role.VIEWER

    def test_viewer_adding_a_member_is_refused_not_told_the_project_is_missing(self, tenant):
        make_user("newcomer")
        viewer = login(tenant.users["viewer"])
        response = viewer.post(reverse("member_add", args=[tenant.project.slug]),
                               {"username": "newcomer", "role": Role.MEMBER}, **HTMX)
        assert response.status_code == 403 and "Adding members needs the admin role." in response.content.decode()
        assert not Membership.objects.filter(project=tenant.project, user__username="newcomer").exists()

    def test_outsider_cannot_touch_another_tenants_members(self, tenant):
        outsider = login(tenant.users["outsider"])
        assert outsider.post(member_url(tenant, "viewer"), {"remove": "1"}, **HTMX).status_code == 404
        assert outsider.post(reverse("member_add", args=[tenant.project.slug]),
                             {"username": "outsider", "role": Role.OWNER}, **HTMX).status_code == 404
        assert Membership.objects.filter(project=tenant.project, user=tenant.users["viewer"]).exists()
        assert not Membership.objects.filter(project=tenant.project, user=tenant.users["outsider"]).exists()

    def test_without_htmx_the_whole_page_shows_the_message_once(self, tenant):
        """A plain form post (no JavaScript) gets the settings page: the frame shows the message, the fragment
        does not repeat it."""
        owner = login(tenant.users["owner"])
        body = owner.post(member_url(tenant, "owner"), {"remove": "1"}).content.decode()
        assert 'class="topbar"' in body and body.count(LAST_OWNER) == 1
        assert LAST_OWNER not in later_page(owner)


class TestTokenActionsShowTheirMessagesInTheFragment:
    def test_creating_a_token_shows_the_secret_once_in_the_fragment(self, tenant):
        member = login(tenant.users["member"])
        response = member.post(reverse("token_create", args=[tenant.project.slug]), {"name": "laptop"}, **HTMX)
        body = response.content.decode()
        assert 'id="new-token-secret"' in body and "<html" not in body
        assert 'id="new-token-secret"' not in later_page(member)

    def test_revoking_a_token_confirms_in_the_fragment(self, tenant):
        token, _ = services.token_create(user=tenant.users["member"], name="laptop")
        member = login(tenant.users["member"])
        response = member.post(reverse("token_revoke", args=[tenant.project.slug, token.pk]), **HTMX)
        assert "Revoked token laptop." in fragment_messages(response)
        token.refresh_from_db()
        assert token.revoked_at is not None
        assert "Revoked token laptop." not in later_page(member)

    def test_another_users_token_is_404_and_stays_active(self, tenant):
        token, _ = services.token_create(user=tenant.users["owner"], name="owners")
        member = login(tenant.users["member"])
        assert member.post(reverse("token_revoke", args=[tenant.project.slug, token.pk]), **HTMX).status_code == 404
        assert ApiToken.objects.get(pk=token.pk).revoked_at is None
