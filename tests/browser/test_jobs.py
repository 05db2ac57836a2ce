"""Issue 3: a member submits a job through the form (from a launcher template, with a new name), lands on its
detail page and finds it on the queue page (no scheduler runs in tests, so it stays queued). Also screenshots of
the main pages at desktop and phone widths, checking that the page itself never scrolls sideways."""

from __future__ import annotations

import re
from datetime import timedelta
from pathlib import Path

import pytest
from django.utils import timezone

from jobs.models import Job
from jobs.services import job_submit
from tests.browser.conftest import sign_in, wait_until
from tests.jobs.conftest import run
from tests.ui.conftest import spec

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

SHOTS = Path("/tmp/tidal-shots")


def test_submit_from_template_then_see_it_queued(tenant, infra, browser_page):
    page = browser_page
    sign_in(page, tenant.users["member"])
    page.goto("/jobs/")
    page.click("#new-job")
    page.wait_for_url("**/jobs/new/")

    page.select_option("#launcher-select", "command")  # htmx swaps the editor for the command template
    editor = page.locator("#spec-editor")
    wait_until(page, "document.querySelector('#spec-editor').value.includes('launcher: command')")
    text = editor.input_value()
    assert "name: my-command-job" in text
    editor.fill(text.replace("name: my-command-job", "name: browser-job-1"))
    page.click("#submit-job")

    page.wait_for_url(re.compile(r".*/jobs/\d+/$"))
    assert "browser-job-1" in page.locator("h1").inner_text()
    assert page.locator("#job-state").inner_text() == "queued"
    job = Job.objects.get(name="browser-job-1")
    assert job.project == tenant.project and job.launcher == "command"

    page.click("nav.mainnav >> text=Queue")
    page.wait_for_url("**/queue/")
    row = page.locator("table.queue tr", has_text="browser-job-1")
    assert row.count() == 1
    assert "unknown" in row.inner_text()  # no ETA before the scheduler has looked at it


def test_form_errors_are_shown_next_to_the_editor(tenant, infra, browser_page):
    page = browser_page
    sign_in(page, tenant.users["member"])
    page.goto("/jobs/new/")
    editor = page.locator("#spec-editor")
    editor.fill(editor.input_value().replace("devices: 8", "devices: 99", 1))
    page.click("#submit-job")
    errors = page.locator("#form-errors")
    assert "groups[0].devices" in errors.inner_text()
    editor.fill("name: [broken\n")
    page.click("#submit-job")
    assert "Invalid YAML on line" in page.locator("#form-errors").inner_text()
    assert not Job.objects.exists()


def _demo_jobs(tenant, infra):
    """Some running jobs with placements (one of another tenant) and some waiting ones with reasons and ETAs."""
    users, flavor, now = tenant.users, infra["flavor"], timezone.now()
    running = [
        (users["member"], tenant.project, "resnet-sweep-17", "node-1", 6),
        (users["owner"], tenant.project, "vit-huge-pretrain-with-a-long-name", "node-2", 4),
        (users["outsider"], tenant.other_project, "secret-job", "node-2", 3),
    ]
    for user, project, name, node, devices in running:
        job = job_submit(actor=user, project=project, spec=spec(flavor, name=name, groups=[
            {"role": "worker", "replicas": 1, "devices": devices, "flavor": flavor}])).job
        run(job, infra["cluster"], [node], now=now)
    waiting = [("llama-finetune", 8, 25, "project vision uses 10 of its 8 guaranteed nvidia-h100-80gb and borrows 2; "
                "this job needs 8, so it would borrow 10, over its borrow limit of 8"),
               ("eval-mmlu", 2, None, "")]
    for position, (name, devices, minutes, reason) in enumerate(waiting, start=1):
        job = job_submit(actor=users["member"], project=tenant.project, spec=spec(flavor, name=name, groups=[
            {"role": "worker", "replicas": 1, "devices": devices, "flavor": flavor}])).job
        Job.objects.filter(pk=job.pk).update(wait_reason=reason, wait_code="quota" if reason else "",
                                             project_position=position, flavor_position=position,
                                             eta=now + timedelta(minutes=minutes) if minutes else None)
    return Job.objects.get(name="resnet-sweep-17")


@pytest.mark.parametrize("width", [1280, 390])
def test_screenshots_and_no_page_overflow(tenant, infra, chromium, live_server, width):
    job = _demo_jobs(tenant, infra)
    SHOTS.mkdir(parents=True, exist_ok=True)
    context = chromium.new_context(viewport={"width": width, "height": 900}, base_url=live_server.url)
    page = context.new_page()
    try:
        sign_in(page, tenant.users["member"])
        pages = {"jobs": "/jobs/", "queue": "/queue/", "clusters": "/clusters/", "job": f"/jobs/{job.pk}/",
                 "submit": "/jobs/new/", "project": f"/projects/{tenant.project.slug}/"}
        for name, path in pages.items():
            page.goto(path)
            page.screenshot(path=str(SHOTS / f"{name}-{width}.png"), full_page=True)
            overflow = page.evaluate("document.documentElement.scrollWidth - window.innerWidth")
            assert overflow <= 0, f"{path} scrolls sideways by {overflow}px at {width}px"
    finally:
        context.close()


def test_detail_page_polls_its_state(tenant, infra, browser_page):
    """htmx re-fetches the live part of the detail page: a state change shows up without a reload."""
    page = browser_page
    job = job_submit(actor=tenant.users["member"], project=tenant.project,
                     spec=spec(infra["flavor"], name="polled")).job
    sign_in(page, tenant.users["member"])
    page.goto(f"/jobs/{job.pk}/")
    assert page.locator("#job-state").inner_text() == "queued"
    run(job, infra["cluster"], ["node-1"], devices=4)
    page.wait_for_selector("#job-state.running", timeout=20_000)
    assert "node-1" in page.locator("table.placement").inner_text()
