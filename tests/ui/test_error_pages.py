"""Refusals and missing pages answer inside the normal page frame (top bar, project switcher, navigation) with the
reason the code gave and a way back; the API keeps its JSON error body."""

from __future__ import annotations

import json

import pytest
from django.test import Client
from django.urls import reverse

from tests.conftest import client_for
from tests.ui.conftest import spec

pytestmark = pytest.mark.django_db

FRAME = ('class="topbar"', 'id="project-switcher"', 'class="mainnav"')


def assert_framed(body: str) -> None:
    for marker in FRAME:
        assert marker in body, f"{marker} missing: the error page is not inside the page frame"


def main_of(response) -> str:
    """The page's own content, without the frame (whose CSRF token differs on every render)."""
    body = response.content.decode()
    return body[body.index("<main"):body.index("</main>")]


class TestForbidden:
    def test_viewer_on_the_submit_page_sees_the_reason_in_the_frame(self, tenant, infra, ui):
        response = ui["viewer"].get(reverse("job_new"))
        body = response.content.decode()
        assert response.status_code == 403
        assert_framed(body)
        assert "Submitting jobs needs the member role." in body
        assert f'href="{reverse("project_detail", args=[tenant.project.slug])}"' in body  # the way back
        assert "<h1>403 Forbidden</h1>" not in body

    def test_a_refused_post_is_framed_too(self, tenant, infra, ui):
        response = ui["viewer"].post(reverse("job_new"), {"spec": "name: x\n"})
        assert response.status_code == 403
        assert_framed(response.content.decode())
        assert "Submitting jobs needs the member role." in response.content.decode()

    def test_a_member_is_not_refused(self, tenant, infra, ui):
        """The frame must not turn every page into a refusal: the submit form still opens for a member."""
        response = ui["member"].get(reverse("job_new"))
        assert response.status_code == 200 and "Submitting jobs needs" not in response.content.decode()

    def test_refusal_without_a_reason_says_so_generically(self, rf, tenant):
        from django.contrib.auth.models import AnonymousUser
        from django.core.exceptions import PermissionDenied

        from mlplatform.errorpages import permission_denied

        request = rf.get("/somewhere/")
        request.user = AnonymousUser()
        request.project = None
        response = permission_denied(request, PermissionDenied())
        body = response.content.decode()
        assert response.status_code == 403
        assert "You may not open this page." in body and 'class="topbar"' in body
        assert f'href="{reverse("login")}' in body  # signed out: the way back is signing in


class TestNotFound:
    def test_missing_job_is_framed_with_the_reason(self, tenant, infra, ui):
        response = ui["member"].get(reverse("job_detail", args=[999999]))
        assert response.status_code == 404
        assert_framed(response.content.decode())
        assert "No such job." in response.content.decode()

    def test_another_tenants_project_reads_like_a_missing_one(self, tenant, infra, ui):
        foreign = ui["member"].get(reverse("project_detail", args=[tenant.other_project.slug]))
        missing = ui["member"].get(reverse("project_detail", args=["no-such-project"]))
        assert foreign.status_code == missing.status_code == 404
        assert_framed(foreign.content.decode())
        assert "No such project." in foreign.content.decode()
        assert tenant.other_project.name not in foreign.content.decode()
        assert main_of(foreign).replace(tenant.other_project.slug, "no-such-project") == main_of(missing)

    def test_unknown_address_gets_a_plain_reason_not_the_resolver_internals(self, tenant, ui):
        response = ui["member"].get("/no/such/page/")
        body = response.content.decode()
        assert response.status_code == 404
        assert_framed(body)
        assert "There is no page at this address." in body
        assert "Resolver404" not in body and "tried" not in body

    def test_with_debug_on_an_unknown_address_still_gets_the_product_page(self, tenant, ui, settings):
        """`make run` runs with DEBUG on: a mistyped address is the product's page there too, not Django's list of
        URL patterns; the API keeps its JSON body and a missing final slash still redirects."""
        settings.DEBUG = True
        response = ui["member"].get("/no/such/page/")
        body = response.content.decode()
        assert response.status_code == 404
        assert_framed(body)
        assert "There is no page at this address." in body and "URLconf" not in body
        api = client_for(tenant.users["member"]).get("/api/v1/no-such-thing/")
        assert api.status_code == 404 and api.json()["error"]["code"] == "not_found"
        assert ui["member"].get("/jobs").status_code == 301
        # A view's own 404 keeps Django's debugging page while DEBUG is on.
        assert "standard 404 page" in ui["member"].get(reverse("job_detail", args=[999999])).content.decode()

    def test_the_favicon_is_served(self, db):
        response = Client().get("/favicon.ico")
        assert response.status_code == 301 and response["Location"].endswith("/static/favicon.svg")
        from pathlib import Path

        from django.contrib.staticfiles import finders

        icon = finders.find("favicon.svg")
        assert icon and Path(icon).read_text(encoding="utf-8").startswith("<svg")

    def test_signed_out_visitor_gets_the_frame_without_projects(self, db):
        response = Client().get("/no/such/page/")
        body = response.content.decode()
        assert response.status_code == 404 and 'class="topbar"' in body
        assert 'id="project-switcher"' not in body and f'href="{reverse("login")}' in body


class TestApiKeepsItsJsonErrors:
    def test_missing_object_and_refusal_keep_the_json_body(self, tenant, infra):
        member, viewer = client_for(tenant.users["member"]), client_for(tenant.users["viewer"])
        missing = member.get("/api/v1/jobs/999999/")
        assert missing.status_code == 404 and missing["Content-Type"] == "application/json"
        assert missing.json() == {"error": {"code": "not_found", "message": "Not found.", "fields": {}}}
        body = {**spec("nvidia-h100-80gb"), "project": tenant.project.slug}
        refused = viewer.post("/api/v1/jobs/", body, format="json")
        assert refused.status_code == 403 and refused["Content-Type"] == "application/json"
        assert refused.json()["error"]["code"] == "permission_denied" and b"topbar" not in refused.content

    def test_unknown_api_address_answers_json_not_a_page(self, tenant):
        response = client_for(tenant.users["member"]).get("/api/v1/no-such-endpoint/")
        assert response.status_code == 404 and response["Content-Type"] == "application/json"
        assert response.json() == {"error": {"code": "not_found", "message": "Not found.", "fields": {}}}
        assert b"topbar" not in response.content


def api_error(response, status: int, code: str) -> str:
    assert response.status_code == status, response.content
    assert response["Content-Type"] == "application/json"
    error = json.loads(response.content)["error"]  # a handler's response, called directly, has no .json()
    assert error["code"] == code and b"<html" not in response.content
    return error["message"]


class TestEveryApiErrorIsJson:
    """What Django answers before a view, or after one fails, had its HTML pages under /api/ too."""

    def test_the_bare_api_prefix(self, tenant):
        api_error(client_for(tenant.users["member"]).get("/api"), 404, "not_found")

    def test_a_host_not_allowed(self, tenant):
        message = api_error(Client().get("/api/v1/jobs/", HTTP_HOST="evil.example"), 400, "disallowed_host")
        assert "evil.example" not in message
        page = Client().get("/jobs/", HTTP_HOST="evil.example")
        assert page.status_code == 400 and page["Content-Type"].startswith("text/html")

    def test_a_form_body_over_the_upload_limit_is_a_413(self, tenant, settings):
        settings.DATA_UPLOAD_MAX_MEMORY_SIZE = 1_000
        response = client_for(tenant.users["member"]).post("/api/v1/experiments/", {"project": "vision",
                                                                                    "name": "x" * 2_000})
        assert "1,000 bytes" in api_error(response, 413, "too_large")

    def test_what_django_refuses_before_a_view(self, rf, settings):
        from django.core.exceptions import RequestDataTooBig, TooManyFieldsSent

        from mlplatform.errorpages import bad_request

        settings.DATA_UPLOAD_MAX_MEMORY_SIZE = 1_000
        assert "1,000 bytes" in api_error(bad_request(rf.post("/api/v1/jobs/"), RequestDataTooBig()), 413, "too_large")
        api_error(bad_request(rf.get("/api/v1/jobs/"), TooManyFieldsSent()), 400, "too_many_fields")
        page = bad_request(rf.get("/jobs/"), TooManyFieldsSent())
        assert page.status_code == 400 and page["Content-Type"].startswith("text/html")

    def test_an_address_too_long(self, tenant):
        member = client_for(tenant.users["member"])
        message = api_error(member.get("/api/v1/jobs/", {"submitter": "x" * 5_000}), 414, "uri_too_long")
        assert "at most 4,096" in message
        assert member.get("/api/v1/jobs/", {"submitter": "x" * 3_000}).status_code == 200
        assert Client().get("/jobs/", {"q": "x" * 5_000}).status_code == 414

    def test_a_server_error(self, tenant, monkeypatch):
        from jobs.api import JobViewSet

        def fail(*args, **kwargs):
            raise RuntimeError("a bug")

        monkeypatch.setattr(JobViewSet, "list", fail)
        member = client_for(tenant.users["member"])
        member.raise_request_exception = False
        message = api_error(member.get("/api/v1/jobs/"), 500, "server_error")
        assert "a bug" not in message
