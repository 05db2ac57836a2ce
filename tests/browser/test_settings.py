"""Settings in the browser: the htmx actions on members answer in the swapped fragment, at once and without a page
load, and what they said does not follow the user to the next page."""

from __future__ import annotations

import pytest

from tenancy.models import Membership, Role
from tests.browser.conftest import sign_in

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

LAST_OWNER = "A project must keep at least one owner."


def open_settings(page, tenant) -> None:
    page.goto(f"/projects/{tenant.project.slug}/settings/")
    # A marker on the window: a page load would drop it, an htmx swap keeps it.
    page.evaluate("window.stillTheSamePage = true")
    page.on("dialog", lambda dialog: dialog.accept())  # hx-confirm asks before removing


def row_of(page, username: str):
    return page.locator(f"#members tbody tr:has(select[aria-label='Role of {username}'])")


def test_removing_the_last_owner_says_why_in_place(tenant, browser_page):
    page = browser_page
    sign_in(page, tenant.users["owner"])
    open_settings(page, tenant)

    row_of(page, "owner").locator("button.danger").click()
    message = page.locator("#members .messages li.error")
    message.wait_for()
    assert message.inner_text() == LAST_OWNER
    assert page.evaluate("window.stillTheSamePage === true")
    assert Membership.objects.filter(project=tenant.project, user=tenant.users["owner"]).exists()

    page.goto("/jobs/")
    assert LAST_OWNER not in page.content()


def test_role_change_confirms_in_place(tenant, browser_page):
    page = browser_page
    sign_in(page, tenant.users["admin"])
    open_settings(page, tenant)

    row = row_of(page, "viewer")
    row.locator("select").select_option(Role.MEMBER)
    row.locator("button[type=submit]", has_text="Save").click()
    message = page.locator("#members .messages li.success")
    message.wait_for()
    assert message.inner_text() == "viewer is now member."
    assert page.evaluate("window.stillTheSamePage === true")
    assert Membership.objects.get(project=tenant.project, user=tenant.users["viewer"]).role == Role.MEMBER

    page.goto(f"/projects/{tenant.project.slug}/")
    assert "is now member" not in page.content()


def test_a_refused_htmx_action_shows_the_reason_in_place(tenant, browser_page):
    """htmx swaps nothing on an error answer; the reason of the error page shows in the fragment instead. Here the
    page is stale: another admin removed the viewer after it was opened."""
    page = browser_page
    sign_in(page, tenant.users["admin"])
    open_settings(page, tenant)
    Membership.objects.filter(project=tenant.project, user=tenant.users["viewer"]).delete()

    row_of(page, "viewer").locator("button.danger").click()
    message = page.locator("#members .messages li.error")
    message.wait_for()
    assert message.inner_text() == "No such member."
    assert page.evaluate("window.stillTheSamePage === true")
