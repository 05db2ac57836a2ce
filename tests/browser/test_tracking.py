"""Tracking pages in a browser: a run's charts are drawn from the series API, a drag zooms into a step range fetched
at full resolution, and two runs compared share one chart with their params diff."""

from __future__ import annotations

import math
import re
import time

import pytest

from tests.browser.conftest import sign_in, wait_until
from tracking import services

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

STEPS = 2000
LOSS = 'figure.chart[data-key="train/loss"]'


def logged_run(tenant, name: str, lr: str, speed: float):
    experiment = services.experiment_get_or_create(project=tenant.project, name="sweep")
    run = services.run_create(project=tenant.project, experiment=experiment, name=name, user=tenant.users["member"],
                              params={"lr": lr, "batch": "64"})
    start = int(time.time() * 1000) - STEPS * 1000
    points = [{"key": "train/loss", "value": 2.5 * math.exp(-s / speed), "step": s, "timestamp": start + s * 1000}
              for s in range(STEPS)]
    points += [{"key": "eval/acc", "value": s / STEPS, "step": s, "timestamp": start + s * 1000}
               for s in range(0, STEPS, 100)]
    points.append({"key": "eval/acc", "value": "NaN", "step": STEPS, "timestamp": start + STEPS * 1000})
    services.run_log_batch(run_id=run.pk, metrics=points)
    return run


def while_the_page_polls(write):
    """Run a write while the live page polls the server. The test database is SQLite in shared-cache memory, where
    a read by the server's thread during the write fails at once ("database table is locked") instead of waiting
    as the file database of `make run` does (busy timeout, WAL): try again, as a second writer would."""
    from django.db import OperationalError

    for _ in range(50):
        try:
            return write()
        except OperationalError as e:
            if "locked" not in str(e):
                raise
            time.sleep(0.1)
    raise AssertionError("the test database stayed locked for 5 s")


def plot(page, selector: str, expression: str):
    """Evaluates `expression` over the uPlot instance `u` of the chart at `selector`."""
    script = f"(() => {{ const u = document.querySelector('{selector}').chart.plot; return {expression}; }})()"
    return page.evaluate(script)


def wait_drawn(page, selector: str) -> None:
    wait_until(page, f"document.querySelector('{selector}')?.chart?.plot?.data[0].length > 0")


def run_page_drawn(page, tenant, run) -> None:
    """Signed in as the member, on the run's page, its loss chart drawn."""
    sign_in(page, tenant.users["member"])
    page.goto(f"/runs/{run.pk}/")
    wait_drawn(page, LOSS)


def test_run_charts_are_drawn_and_a_drag_zooms_at_full_resolution(tenant, browser_page):
    page = browser_page
    run = logged_run(tenant, "lr-0.1", "0.1", 300)
    requests: list[str] = []
    page.on("request", lambda request: requests.append(request.url) if "/series/" in request.url else None)
    sign_in(page, tenant.users["member"])
    page.goto(f"/runs/{run.pk}/")
    wait_drawn(page, LOSS)
    wait_drawn(page, 'figure.chart[data-key="eval/acc"]')
    assert page.locator("figure.chart canvas").count() == 2
    assert plot(page, LOSS, "u.series.length") == 2  # the x series and the loss
    assert page.locator(".chart-group h3").all_inner_texts() == ["Training", "Evaluation"]
    assert any("max_points=" in url and "min_step" not in url for url in requests)
    before = plot(page, LOSS, "[u.scales.x.min, u.scales.x.max]")
    assert before[1] - before[0] > STEPS * 0.9

    box = page.locator(f"{LOSS} .u-over").bounding_box()
    page.mouse.move(box["x"] + box["width"] * 0.25, box["y"] + box["height"] / 2)
    page.mouse.down()
    page.mouse.move(box["x"] + box["width"] * 0.5, box["y"] + box["height"] / 2, steps=8)
    page.mouse.up()
    wait_until(page, f"document.querySelector('{LOSS}').chart.plot.scales.x.max < {before[1] * 0.7}")
    zoomed = [url for url in requests if "min_step=" in url and "train%2Floss" in url]
    assert zoomed, requests
    low, high = (int(re.search(rf"{name}=(\d+)", zoomed[-1])[1]) for name in ("min_step", "max_step"))
    assert 0 < low < high < STEPS
    # Every step of the range came back: a range narrower than the chart is at full resolution.
    assert plot(page, LOSS, "u.data[0].length") == high - low + 1
    assert page.locator("#reset-zoom").is_visible()
    page.click("#reset-zoom")
    wait_until(page, f"document.querySelector('{LOSS}').chart.plot.scales.x.max > {STEPS * 0.9}")


def test_compare_two_runs_overlays_them_and_shows_the_params_diff(tenant, browser_page):
    page = browser_page
    first = logged_run(tenant, "lr-0.1", "0.1", 300)
    second = logged_run(tenant, "lr-0.01", "0.01", 600)
    sign_in(page, tenant.users["member"])
    page.goto(f"/experiments/{first.experiment_id}/")
    for run in (first, second):
        page.check(f'#runs-table input[name="run"][value="{run.pk}"]')
    page.click("#compare-button")
    page.wait_for_url(re.compile(r".*/runs/compare/\?run=\d+&run=\d+"))
    wait_drawn(page, LOSS)
    assert plot(page, LOSS, "u.series.length") == 3  # x, and one series per run
    assert sorted(plot(page, LOSS, "u.series.slice(1).map(s => s.label)")) == ["lr-0.01", "lr-0.1"]
    differs = page.locator("#params-diff tr.differs th").all_inner_texts()
    assert differs == ["lr"]
    assert page.locator("#params-diff tr.same th").all_inner_texts() == ["batch"]
    assert page.locator("#parallel-plot path.pc-line").count() == 2


def test_live_mode_appends_new_points_and_stops_when_the_run_ends(tenant, browser_page):
    page = browser_page
    run = logged_run(tenant, "live", "0.1", 300)
    run_page_drawn(page, tenant, run)
    assert page.locator("#live").is_checked()
    while_the_page_polls(lambda: services.run_log_batch(
        run_id=run.pk, metrics=[{"key": "train/loss", "value": 0.01, "step": STEPS + s} for s in range(1, 11)]))
    wait_until(page, f"document.querySelector('{LOSS}').chart.plot.data[0].at(-1) === {STEPS + 10}", timeout=20_000)
    while_the_page_polls(lambda: services.run_update(run=run, status="FINISHED"))
    wait_until(page, "document.querySelector('#live-state').textContent === 'the run has ended'", timeout=20_000)
    assert page.locator("#run-status").inner_text() == "Finished"


def test_the_links_mlflows_client_prints_open_the_run_in_tidal(tenant, browser_page):
    run = logged_run(tenant, "from-mlflow", "0.1", 300)
    sign_in(browser_page, tenant.users["member"])
    browser_page.goto(f"/mlflow/{tenant.project.slug}/#/experiments/{run.experiment_id}/runs/{run.pk}")
    browser_page.wait_for_url(re.compile(rf"/runs/{run.pk}/$"))
    browser_page.goto(f"/mlflow/{tenant.project.slug}/#/experiments/{run.experiment_id}")
    browser_page.wait_for_url(re.compile(rf"/experiments/{run.experiment_id}/$"))


def test_the_x_axis_covers_a_nan_stretch_and_small_values_read_apart(tenant, browser_page):
    """The seeded NaN run's charts ended at its last finite step, its NaN markers outside the x range; a learning
    rate of 0-3e-4 read 0, 0, 0, 0; a one-point series drew nothing."""
    page = browser_page
    experiment = services.experiment_get_or_create(project=tenant.project, name="sweep")
    run = services.run_create(project=tenant.project, experiment=experiment, name="diverged",
                              user=tenant.users["member"])
    start = int(time.time() * 1000) - 400_000
    points = [{"key": "train/loss", "value": 2.0 + s / 1000, "step": s, "timestamp": start + s * 1000}
              for s in range(0, 300, 10)]
    points += [{"key": "train/loss", "value": "NaN", "step": s, "timestamp": start + s * 1000}
               for s in range(300, 410, 10)]
    points += [{"key": "train/lr", "value": 3e-4 * s / 400, "step": s, "timestamp": start + s * 1000}
               for s in range(0, 410, 10)]
    points.append({"key": "eval/acc", "value": 0.5, "step": 200, "timestamp": start + 200_000})
    services.run_log_batch(run_id=run.pk, metrics=points)
    sign_in(page, tenant.users["member"])
    page.goto(f"/runs/{run.pk}/")
    for key in ("train/loss", "train/lr", "eval/acc"):
        wait_drawn(page, f'figure.chart[data-key="{key}"]')
    assert plot(page, LOSS, "u.scales.x.max") >= 400  # the NaN stretch is on the chart
    assert plot(page, LOSS, "u.data[1].slice(-1)[0]") is None  # a gap, not a line to the last finite value
    labels = page.evaluate("document.querySelector('figure.chart[data-key=\"train/lr\"]').chart.yLabels")
    shown = [label for label in labels if label]
    assert len(set(shown)) == len(shown) > 2 and shown.count("0") <= 1, labels
    one = 'figure.chart[data-key="eval/acc"]'
    assert plot(page, one, "[u.scales.x.min < 200, u.scales.x.max > 200]") == [True, True]
    assert plot(page, one, "u.series[1].points.filter(u, 1)") == [0]  # drawn as a point


def test_smoothing_keeps_the_raw_line_faint_beneath(tenant, browser_page):
    page = browser_page
    run = logged_run(tenant, "smooth", "0.1", 300)
    run_page_drawn(page, tenant, run)
    page.locator("#smoothing").fill("0.9")
    wait_until(page, f"document.querySelector('{LOSS}').chart.plot.series.length === 3")
    raw, smoothed = plot(page, LOSS, "u.series.slice(1).map(s => [s.label, s.alpha])")
    assert raw == ["train/loss (raw)", 0.25] and smoothed == ["train/loss", 1]


def test_compare_selected_waits_for_a_ticked_run(tenant, browser_page):
    page = browser_page
    run = logged_run(tenant, "only", "0.1", 300)
    sign_in(page, tenant.users["member"])
    page.goto(f"/experiments/{run.experiment_id}/")
    assert page.locator("#compare-button").is_disabled()
    page.check(f'#runs-table input[name="run"][value="{run.pk}"]')
    assert page.locator("#compare-button").is_enabled()
    page.uncheck(f'#runs-table input[name="run"][value="{run.pk}"]')
    assert page.locator("#compare-button").is_disabled()


def test_the_run_page_shows_a_new_alert_and_its_state_without_a_reload(tenant, browser_page):
    page = browser_page
    run = logged_run(tenant, "live-alerts", "0.1", 300)
    run_page_drawn(page, tenant, run)
    assert "train/loss is NaN" not in page.locator("#run-alerts").inner_text()  # (eval/acc's NaN has one already)
    while_the_page_polls(lambda: services.run_log_batch(
        run_id=run.pk, metrics=[{"key": "train/loss", "value": "NaN", "step": STEPS + 1}]))
    wait_until(page, "document.querySelector('#run-alerts').textContent.includes('train/loss is NaN at step')",
               timeout=20_000)
    page.click('#run-alerts button[data-action="acknowledge"]')
    wait_until(page, "document.querySelector('#run-alerts').textContent.includes('acknowledged by member')")


def test_relative_time_on_the_run_page_is_drawn_with_duration_labels(tenant, browser_page):
    """Found with the chart panels: charts.js called an undefined fmtDuration, so choosing relative time threw and
    left the charts as they were."""
    page = browser_page
    run = logged_run(tenant, "lr-0.1", "0.1", 300)
    errors: list[str] = []
    page.on("pageerror", lambda error: errors.append(str(error)))
    run_page_drawn(page, tenant, run)
    page.select_option("#x-axis", "relative")
    wait_until(page, f"document.querySelector('{LOSS}').chart.plot.scales.x.max < {STEPS * 2}")
    assert errors == []
    labels = plot(page, LOSS, "u.axes[0]._values")
    assert labels and all(re.fullmatch(r"-?\d+(s|m(\d\ds)?)", label) for label in labels), labels
