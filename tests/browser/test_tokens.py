"""Issue 2: a user with two projects signs in, switches project, creates an API token in Settings, and the secret
shown on the page works against the API."""

from __future__ import annotations

import httpx
import pytest

from tenancy.models import Membership, Project, Role
from tests.browser.conftest import sign_in

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_switch_project_create_token_and_use_it(tenant, browser_page, live_server):
    page = browser_page
    member = tenant.users["member"]
    second = Project.objects.create(organization=tenant.organization, name="Language", slug="language")
    Membership.objects.create(project=second, user=member, role=Role.MEMBER)

    sign_in(page, member)
    # Switch from the jobs page: the switcher returns to the page it was used on (on a project's own page that would
    # lead back to the previous project; see the report of this change).
    page.goto("/jobs/")
    switcher = page.locator("#project-switcher")
    assert switcher.input_value() == "language"  # the first project by slug
    with page.expect_navigation():
        switcher.select_option("vision")
    assert page.locator("#project-switcher").input_value() == "vision"
    assert "vision" in page.locator("h1").inner_text()

    page.click("nav.mainnav >> text=Settings")
    page.wait_for_url("**/projects/vision/settings/")
    page.fill("input[name=name]", "laptop")
    page.click("#create-token")
    secret = page.locator("#new-token-secret").inner_text().strip()
    assert len(secret) > 20

    response = httpx.get(f"{live_server.url}/api/v1/me/", headers={"Authorization": f"Bearer {secret}"})
    assert response.status_code == 200
    assert response.json()["username"] == "member"
    wrong = httpx.get(f"{live_server.url}/api/v1/me/", headers={"Authorization": f"Bearer {secret}x"})
    assert wrong.status_code == 401


def test_a_read_only_token_from_settings_reads_and_cannot_write(tenant, browser_page, live_server):
    page = browser_page
    sign_in(page, tenant.users["owner"])
    page.goto("/projects/vision/settings/")
    page.fill("input[name=name]", "dashboard")
    page.check("input[name=read_only]")
    page.click("#create-token")
    secret = page.locator("#new-token-secret").inner_text().strip()
    row = page.locator("#tokens tr", has_text="dashboard")
    assert "read-only" in row.inner_text()

    headers = {"Authorization": f"Bearer {secret}"}
    assert httpx.get(f"{live_server.url}/api/v1/me/", headers=headers).json()["read_only"] is True
    refused = httpx.patch(f"{live_server.url}/api/v1/projects/vision/", headers=headers, json={"name": "Renamed"})
    assert refused.status_code == 403 and refused.json()["error"]["message"] == "This token is read-only."
