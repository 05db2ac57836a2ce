"""An elastic job's resizes in a browser (issue 29): the run page's charts draw a vertical mark at each resize of the
job's attempt, named by its old and new world size, where the run's steps were at that moment; the job page draws
its workers over time."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from tests.browser.conftest import sign_in, wait_until
from tests.ui.conftest import submit  # noqa: F401  (fixture)
from tests.ui.test_elastic_pages import resized
from tracking import services
from tracking.models import Run

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

LOSS = 'figure.chart[data-key="train/loss"]'
MINUTES = 40


def test_the_run_charts_mark_each_resize_where_the_run_was(tenant, infra, submit, browser_page):  # noqa: F811
    page = browser_page
    start = timezone.now() - timedelta(minutes=MINUTES)
    job = resized(submit, tenant, infra, start)  # grown 1 -> 3 at +10 min, shrunk 3 -> 2 at +20 min
    run = Run.objects.get(job=job)
    first = int(start.timestamp() * 1000)
    services.run_log_batch(run_id=run.pk, metrics=[  # one step a minute
        {"key": "train/loss", "value": 1.0 / (1 + m), "step": m, "timestamp": first + m * 60_000}
        for m in range(MINUTES)])
    sign_in(page, tenant.users["member"])
    page.goto(f"/runs/{run.pk}/")
    wait_until(page, f"document.querySelector('{LOSS}')?.chart?.plot?.data[0].length > 0")
    marks = page.evaluate(f"document.querySelector('{LOSS}').chart.verticalMarkers()"
                          ".filter(m => m.label.includes('→')).map(m => [m.label, m.x])")
    assert marks == [["grew 1→3", 10], ["shrank 3→2", 20]]  # at the steps logged by then, by step
    page.select_option("#x-axis", "relative")
    wait_until(page, f"document.querySelector('{LOSS}').chart.view.mode === 'relative'")
    relative = page.evaluate(f"document.querySelector('{LOSS}').chart.verticalMarkers()"
                             ".filter(m => m.label.includes('→')).map(m => Math.round(m.x))")
    run_started = (run.started_at - start).total_seconds()
    assert relative == [round(600 - run_started), round(1200 - run_started)]
    assert "project speech reclaims its guarantee" in page.locator("#run-resizes").inner_text()

    page.goto(f"/jobs/{job.pk}/")
    box = page.locator("#workers-chart svg").bounding_box()
    assert box["width"] > 300 and box["height"] > 30  # stretched to the card, not a collapsed inline box
    assert page.locator("#workers-chart path").get_attribute("d").count("V") == 4  # admitted, grown, shrunk, now
