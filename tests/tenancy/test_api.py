from datetime import timedelta

import pytest
from django.core.cache import cache
from django.test import override_settings
from django.utils import timezone
from rest_framework.settings import api_settings
from rest_framework.test import APIClient

from tenancy.models import ApiToken, AuditEntry, Membership, hash_token
from tenancy.services import token_create, token_revoke
from tests.conftest import client_for, make_user


def error_of(response):
    body = response.json()
    assert set(body) == {"error"}, body
    return body["error"]


class TestTokens:
    def test_secret_shown_once_and_only_hash_stored(self, tenant, clients):
        response = clients["member"].post("/api/v1/tokens/", {"name": "laptop"}, format="json")
        assert response.status_code == 201
        secret = response.json()["token"]
        token = ApiToken.objects.get(pk=response.json()["id"])
        assert token.digest == hash_token(secret) and secret not in (token.digest, token.prefix)
        detail = clients["member"].get(f"/api/v1/tokens/{token.pk}/").json()
        assert "token" not in detail and secret not in str(detail)
        fresh = APIClient()
        fresh.credentials(HTTP_AUTHORIZATION=f"Bearer {secret}")
        assert fresh.get("/api/v1/me/").json()["username"] == "member"
        token.refresh_from_db()
        assert token.last_used_at is not None

    @pytest.mark.parametrize("header", ["Bearer tdl_wrong", "Bearer ", "Bearer a b"])
    def test_wrong_token_is_401(self, db, header):
        client = APIClient()
        client.credentials(HTTP_AUTHORIZATION=header)
        response = client.get("/api/v1/projects/")
        assert response.status_code == 401
        assert response["WWW-Authenticate"] == "Bearer"

    def test_expired_and_revoked_tokens_are_401(self, tenant, monkeypatch):
        import tenancy.models

        user = tenant.users["member"]
        token, secret = token_create(user=user, name="short", expires_at=timezone.now() + timedelta(seconds=60))
        client = APIClient()
        client.credentials(HTTP_AUTHORIZATION=f"Bearer {secret}")
        assert client.get("/api/v1/me/").status_code == 200  # now cached
        later = timezone.now() + timedelta(seconds=61)
        monkeypatch.setattr(tenancy.models.timezone, "now", lambda: later)
        assert client.get("/api/v1/me/").status_code == 401
        monkeypatch.undo()
        token2, secret2 = token_create(user=user, name="revoked")
        client.credentials(HTTP_AUTHORIZATION=f"Bearer {secret2}")
        assert client.get("/api/v1/me/").status_code == 200  # now cached
        token_revoke(actor=user, token=token2)
        assert client.get("/api/v1/me/").status_code == 401

    def test_delete_revokes_and_is_audited(self, tenant, clients):
        token = token_create(user=tenant.users["member"], name="old")[0]
        assert clients["member"].delete(f"/api/v1/tokens/{token.pk}/").status_code == 204
        token.refresh_from_db()
        assert token.revoked_at is not None
        assert AuditEntry.objects.filter(action="token.revoke", target_id=str(token.pk)).exists()

    def test_expiry_in_the_past_is_refused(self, tenant, clients):
        past = (timezone.now() - timedelta(days=1)).isoformat()
        response = clients["member"].post("/api/v1/tokens/", {"name": "x", "expires_at": past}, format="json")
        assert response.status_code == 400
        assert "expires_at" in error_of(response)["fields"]

    def test_unauthenticated_is_401(self, db):
        assert APIClient().get("/api/v1/projects/").status_code in (401, 403)
        assert error_of(APIClient().get("/api/v1/projects/"))["code"] == "not_authenticated"


class TestBadInput:
    def test_malformed_json(self, tenant, clients):
        response = clients["owner"].generic(
            "POST", "/api/v1/memberships/", "{not json", content_type="application/json"
        )
        assert response.status_code == 400
        assert error_of(response)["code"] == "parse_error"

    def test_unknown_field_is_named(self, tenant, clients):
        make_user("newbie")
        response = clients["owner"].post(
            "/api/v1/memberships/", {"project": "vision", "user": "newbie", "rol": "member"}, format="json"
        )
        assert response.status_code == 400
        assert error_of(response)["fields"] == {"rol": ["Unknown field."]}

    def test_overlong_and_wrong_type(self, tenant, clients):
        response = clients["owner"].post("/api/v1/tokens/", {"name": "x" * 101}, format="json")
        assert response.status_code == 400 and "name" in error_of(response)["fields"]
        response = clients["owner"].post("/api/v1/tokens/", {"name": ["a"]}, format="json")
        assert response.status_code == 400 and "name" in error_of(response)["fields"]
        response = clients["owner"].post("/api/v1/memberships/", ["not", "an", "object"], format="json")
        assert response.status_code == 400

    def test_bad_role_choice(self, tenant, clients):
        make_user("newbie")
        response = clients["owner"].post(
            "/api/v1/memberships/", {"project": "vision", "user": "newbie", "role": "god"}, format="json"
        )
        assert response.status_code == 400 and "role" in error_of(response)["fields"]


class TestMemberships:
    def test_admin_adds_member_and_it_is_audited(self, tenant, clients):
        make_user("newbie")
        response = clients["admin"].post(
            "/api/v1/memberships/", {"project": "vision", "user": "newbie", "role": "member"}, format="json"
        )
        assert response.status_code == 201, response.content
        entry = AuditEntry.objects.get(action="membership.add")
        assert entry.actor_name == "admin" and entry.project == tenant.project
        assert entry.changes == {"user": "newbie", "role": "member"}

    def test_member_cannot_add(self, tenant, clients):
        make_user("newbie")
        response = clients["member"].post(
            "/api/v1/memberships/", {"project": "vision", "user": "newbie"}, format="json"
        )
        assert response.status_code == 403

    def test_admin_cannot_grant_owner_but_owner_can(self, tenant, clients):
        membership = Membership.objects.get(project=tenant.project, user=tenant.users["member"])
        url = f"/api/v1/memberships/{membership.pk}/"
        assert clients["admin"].patch(url, {"role": "owner"}, format="json").status_code == 403
        assert clients["owner"].patch(url, {"role": "owner"}, format="json").status_code == 200

    def test_last_owner_cannot_leave(self, tenant, clients):
        owner = Membership.objects.get(project=tenant.project, user=tenant.users["owner"])
        response = clients["owner"].delete(f"/api/v1/memberships/{owner.pk}/")
        assert response.status_code == 409
        assert error_of(response)["code"] == "last_owner"

    def test_anyone_may_leave(self, tenant, clients):
        viewer = Membership.objects.get(project=tenant.project, user=tenant.users["viewer"])
        assert clients["viewer"].delete(f"/api/v1/memberships/{viewer.pk}/").status_code == 204
        assert not Membership.objects.filter(pk=viewer.pk).exists()

    def test_duplicate_member_is_409(self, tenant, clients):
        response = clients["owner"].post(
            "/api/v1/memberships/", {"project": "vision", "user": "viewer"}, format="json"
        )
        assert response.status_code in (400, 409)


class TestProjects:
    def test_owner_creates_project_in_own_org(self, tenant, clients):
        response = clients["owner"].post(
            "/api/v1/projects/", {"organization_slug": "acme", "name": "Speech", "slug": "speech"}, format="json"
        )
        assert response.status_code == 201, response.content
        assert response.json()["role"] == "owner"

    def test_member_cannot_create_and_outsider_org_is_unknown(self, tenant, clients):
        body = {"organization_slug": "acme", "name": "Speech", "slug": "speech"}
        assert clients["member"].post("/api/v1/projects/", body, format="json").status_code == 403
        response = clients["outsider"].post("/api/v1/projects/", body, format="json")
        assert response.status_code == 400 and "organization_slug" in error_of(response)["fields"]

    def test_bad_slug(self, tenant, clients):
        body = {"organization_slug": "acme", "name": "Speech", "slug": "Not A Slug"}
        response = clients["owner"].post("/api/v1/projects/", body, format="json")
        assert response.status_code == 400 and "slug" in error_of(response)["fields"]

    def test_archive_is_audited(self, tenant, clients):
        response = clients["admin"].patch("/api/v1/projects/vision/", {"archived": True}, format="json")
        assert response.status_code == 200 and response.json()["archived"] is True
        assert AuditEntry.objects.filter(action="project.archive").exists()

    @pytest.mark.parametrize("archived", [False, True])
    def test_creating_with_archived_given(self, tenant, clients, archived):
        """`archived` is a field of the project: given on creation it was passed to a service that takes none (500)."""
        body = {"organization_slug": "acme", "name": "Speech", "slug": "speech", "archived": archived}
        response = clients["owner"].post("/api/v1/projects/", body, format="json")
        assert response.status_code == 201, response.content
        assert response.json()["archived"] is archived
        assert AuditEntry.objects.filter(action="project.archive").exists() is archived

    def test_a_name_the_organization_has_is_a_400_naming_it(self, tenant, clients):
        taken = {"organization_slug": "acme", "name": "Vision", "slug": "vision-2"}
        error = error_of(clients["owner"].post("/api/v1/projects/", taken, format="json"))
        assert error["fields"] == {"name": ["Acme already has a project named Vision."]}
        clients["owner"].post("/api/v1/projects/", {**taken, "name": "Speech", "slug": "speech"}, format="json")
        renamed = clients["owner"].patch("/api/v1/projects/speech/", {"name": "Vision"}, format="json")
        assert renamed.status_code == 400 and error_of(renamed)["fields"] == {
            "name": ["Acme already has a project named Vision."]}
        other_org = clients["outsider"].patch("/api/v1/projects/secret/", {"name": "Vision"}, format="json")
        assert other_org.status_code == 200  # the name is per organization

    def test_a_name_taken_between_the_check_and_the_write_is_the_same_400(self, tenant, clients, monkeypatch):
        """Two requests racing for one name: the loser's insert breaks the constraint (IntegrityError, a 500)."""
        from tenancy.models import Project

        validate = Project.validate_constraints
        raced = []

        def taken_meanwhile(project, exclude=None):
            validate(project, exclude=exclude)
            if not raced:  # the other request commits the name just after this one checked it
                raced.append(Project.objects.create(organization=tenant.organization, name="Speech", slug="other"))

        monkeypatch.setattr(Project, "validate_constraints", taken_meanwhile)
        body = {"organization_slug": "acme", "name": "Speech", "slug": "speech"}
        error = error_of(clients["owner"].post("/api/v1/projects/", body, format="json"))
        assert error["fields"] == {"name": ["Acme already has a project named Speech."]}
        assert not Project.objects.filter(slug="speech").exists()

    def test_only_owner_deletes(self, tenant, clients):
        assert clients["admin"].delete("/api/v1/projects/vision/").status_code == 403
        assert clients["owner"].delete("/api/v1/projects/vision/").status_code == 204


class TestMeAndAudit:
    def test_me_lists_memberships(self, tenant, clients):
        body = clients["viewer"].get("/api/v1/me/").json()
        assert body["memberships"] == [{"project": "vision", "organization": "acme", "role": "viewer"}]

    def test_audit_visible_to_admins_only(self, tenant, clients):
        make_user("newbie")
        clients["owner"].post("/api/v1/memberships/", {"project": "vision", "user": "newbie"}, format="json")
        assert clients["admin"].get("/api/v1/audit/").json()["count"] >= 1
        assert clients["member"].get("/api/v1/audit/").json()["count"] == 0


class TestThrottling:
    def test_429_with_retry_after(self, tenant):
        cache.clear()
        rates = {**api_settings.DEFAULT_THROTTLE_RATES, "user": "3/min"}
        client = client_for(tenant.users["member"])
        with override_settings(REST_FRAMEWORK={**_rest_settings(), "DEFAULT_THROTTLE_RATES": rates}):
            codes = [client.get("/api/v1/me/").status_code for _ in range(4)]
            response = client.get("/api/v1/me/")
        cache.clear()
        assert codes[:3] == [200, 200, 200] and codes[3] == 429
        assert int(response["Retry-After"]) > 0
        assert error_of(response)["code"] == "throttled"

    def test_a_users_tokens_and_session_share_one_count_and_a_new_window_starts_afresh(self, tenant, monkeypatch):
        import tenancy.throttling

        rates = {**api_settings.DEFAULT_THROTTLE_RATES, "user": "2/min"}
        first, second = client_for(tenant.users["member"]), client_for(tenant.users["member"])
        session = APIClient()
        session.force_login(tenant.users["member"])
        now = 1_000_000 * 60.0 + 1  # the start of a window
        monkeypatch.setattr(tenancy.throttling.time, "time", lambda: now)
        with override_settings(REST_FRAMEWORK={**_rest_settings(), "DEFAULT_THROTTLE_RATES": rates}):
            assert [first.get("/api/v1/me/").status_code for _ in range(3)] == [200, 200, 429]
            assert second.get("/api/v1/me/").status_code == 429  # another token of the same user: no new allowance
            assert session.get("/api/v1/me/").status_code == 429
            assert client_for(tenant.users["viewer"]).get("/api/v1/me/").status_code == 200  # another user
            blocked = first.get("/api/v1/me/")
            now += 60
            assert second.get("/api/v1/me/").status_code == 200
        assert int(blocked["Retry-After"]) == 59  # until the window ends

    def test_an_unreachable_counter_lets_requests_through(self, tenant, monkeypatch):
        import tenancy.throttling

        def down(*args, **kwargs):
            raise ConnectionError("redis down")

        monkeypatch.setattr(tenancy.throttling.cache, "incr", down)
        rates = {**api_settings.DEFAULT_THROTTLE_RATES, "user": "1/min"}
        client = client_for(tenant.users["member"])
        with override_settings(REST_FRAMEWORK={**_rest_settings(), "DEFAULT_THROTTLE_RATES": rates}):
            assert [client.get("/api/v1/me/").status_code for _ in range(3)] == [200, 200, 200]


def _rest_settings():
    from django.conf import settings

    return settings.REST_FRAMEWORK


class TestSessionCsrf:
    def test_session_write_needs_csrf(self, tenant):
        client = APIClient(enforce_csrf_checks=True)
        client.force_login(tenant.users["member"])
        response = client.post("/api/v1/tokens/", {"name": "x"}, format="json")
        assert response.status_code == 403
        assert "CSRF" in error_of(response)["message"]


class TestProjectSwitcher:
    def test_switching_on_a_project_page_opens_the_same_page_of_the_new_project(self, tenant, client):
        from tenancy.models import Membership, Project

        second = Project.objects.create(organization=tenant.organization, name="Speech", slug="speech")
        Membership.objects.create(project=second, user=tenant.users["member"], role="member")
        client.force_login(tenant.users["member"])
        response = client.post("/switch/", {"project": "speech", "next": "/projects/vision/settings/"})
        assert response.status_code == 302 and response["Location"] == "/projects/speech/settings/"
        assert client.get("/").url == "/projects/speech/"

    @pytest.mark.parametrize(("viewing", "lands_on"), [
        ("/costs/?project=vision&month=2026-01", "/costs/?project=speech&month=2026-01"),
        ("/costs/waste/?month=2026-01&project=vision", "/costs/waste/?month=2026-01&project=speech"),
        ("/mlflow/vision/", "/mlflow/speech/"),
        ("/jobs/?state=running", "/jobs/?state=running"),  # a page of the current project: it follows the session
        ("/jobs/12345/", "/jobs/"),  # one object of the old project: the list of its kind in the new one
        ("/jobs/12345/logs/?replica=0", "/jobs/"),
        ("/experiments/7/", "/experiments/"),
        ("/runs/7/", "/projects/speech/"),  # no list of runs: the new project's page
        ("/projects/vision/budget/", "/projects/speech/budget/"),
    ])
    def test_switching_follows_the_page_being_viewed(self, tenant, client, viewing, lands_on):
        from tenancy.models import Membership, Project

        second = Project.objects.create(organization=tenant.organization, name="Speech", slug="speech")
        Membership.objects.create(project=second, user=tenant.users["member"], role="member")
        client.force_login(tenant.users["member"])
        response = client.post("/switch/", {"project": "speech", "next": viewing})
        assert response.status_code == 302 and response["Location"] == lands_on

    def test_switching_to_another_tenants_project_is_404(self, tenant, client):
        client.force_login(tenant.users["member"])
        assert client.post("/switch/", {"project": "secret", "next": "/jobs/"}).status_code == 404

    @pytest.mark.parametrize("nowhere", ["abc", "²", "switch_project", "jobs/"])
    def test_a_next_that_is_no_path_of_this_site_goes_home(self, tenant, client, nowhere):
        """A word without "/" was taken for a view's name: "abc" and "²" answered 500 (a crawl posting odd values
        into every form found it), "switch_project" went to /switch/ by its view's name; "jobs/" went to a relative
        address."""
        client.force_login(tenant.users["member"])
        response = client.post("/switch/", {"project": "vision", "next": nowhere})
        assert response.status_code == 302 and response["Location"] == "/"

    def test_offsite_next_is_ignored(self, tenant, client):
        client.force_login(tenant.users["member"])
        response = client.post("/switch/", {"project": "vision", "next": "https://evil.example/"})
        assert response["Location"] == "/"
