"""The pages work under their Content-Security-Policy: nothing is refused on any of them (every browser test runs
with the policy on; this one visits the pages the others do not, the admin console and the API docs included),
and the confirmation ui.js gives a form works (test_tokens.py uses the project switcher it submits)."""

from __future__ import annotations

import pytest

from jobs.services import job_submit
from tests.browser.conftest import sign_in
from tests.conftest import make_user
from tests.jobs.conftest import run
from tests.ui.conftest import spec

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def refusals(page) -> list[str]:
    """What the policy refuses on `page` from now on, as the console reports it."""
    refused: list[str] = []
    page.on("console", lambda message: refused.append(f"{page.url}: {message.text}")
            if "Content Security Policy" in message.text else None)
    return refused


def test_no_page_breaks_the_policy(tenant, infra, browser_page):
    page = browser_page
    refused = refusals(page)
    job = job_submit(actor=tenant.users["member"], project=tenant.project,
                     spec=spec(infra["flavor"], name="shown", env={"HF_TOKEN": "hf_secret"})).job
    run(job, infra["cluster"], ["node-1"], devices=4)
    sign_in(page, tenant.users["member"])
    for path in ("/jobs/", "/queue/", "/clusters/", f"/jobs/{job.pk}/", "/jobs/new/",
                 f"/projects/{tenant.project.slug}/", f"/projects/{tenant.project.slug}/settings/",
                 "/experiments/", "/costs/", "/costs/efficiency/", "/costs/waste/", "/costs/queueing/",
                 "/api/v1/jobs/", "/api/docs/"):
        page.goto(path)
        page.wait_for_load_state("networkidle")
    assert page.locator(".swagger-ui").count() == 1  # its set-up script came as a file and ran
    make_user("root", is_staff=True, is_superuser=True)
    page.context.clear_cookies()
    page.goto("/admin/login/")
    page.fill("#id_username", "root")
    page.fill("#id_password", "pw-root-123")
    page.click("input[type=submit]")
    for path in ("/admin/", "/admin/clusters/cluster/add/", f"/admin/clusters/cluster/{infra['cluster'].pk}/change/",
                 "/admin/replays/replayrun/what-if/", "/costs/admin/", "/admin/costs/deviceprice/add/"):
        page.goto(path)
        page.wait_for_load_state("networkidle")
    assert refused == [], "\n".join(refused)


def test_a_cancel_asks_first(tenant, infra, browser_page):
    page = browser_page
    job = job_submit(actor=tenant.users["member"], project=tenant.project, spec=spec(infra["flavor"])).job
    sign_in(page, tenant.users["member"])
    page.goto(f"/jobs/{job.pk}/")
    questions: list[str] = []
    page.once("dialog", lambda dialog: (questions.append(dialog.message), dialog.dismiss()))
    page.click("#cancel-job")
    assert questions == [f"Cancel job #{job.pk}?"]
    assert page.locator("#job-state").inner_text() == "queued"  # dismissed: nothing was sent
    page.once("dialog", lambda dialog: dialog.accept())
    page.click("#cancel-job")
    page.wait_for_selector("#job-state.cancelled")
