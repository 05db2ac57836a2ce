"""Chart panels in a browser (issue 31): a panel saved from the experiment page draws several metrics of several
runs overlaid; grouped by a param it draws each group's mean over a min-max band, the raw mean faint beneath a
smoothed one; a panel downloads as PNG and its data as CSV; relative time and a log scale are drawn."""

from __future__ import annotations

import csv
import math
import re
import time
from datetime import UTC, datetime

import pytest

from tests.browser.conftest import sign_in, wait_until
from tracking import services
from tracking.models import ChartPanel

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

STEPS = 200
PANEL = "figure.panel"


def logged_run(tenant, name: str, lr: str, scale: float):
    experiment = services.experiment_get_or_create(project=tenant.project, name="sweep")
    start = int(time.time() * 1000) - STEPS * 1000
    run = services.run_create(project=tenant.project, experiment=experiment, name=name, user=tenant.users["member"],
                              params={"lr": lr}, started_at=datetime.fromtimestamp(start / 1000, tz=UTC))
    points = [{"key": key, "value": scale * factor * math.exp(-s / 50) + 0.01, "step": s,
               "timestamp": start + s * 1000}
              for s in range(STEPS) for key, factor in (("train/loss", 1.0), ("eval/loss", 1.5))]
    services.run_log_batch(run_id=run.pk, metrics=points)
    return run


def read_csv(path) -> list[list[str]]:
    with open(path, encoding="utf-8", newline="") as f:
        return list(csv.reader(f))


def panel_eval(page, expression: str, index: int = 0):
    script = (f"(() => {{ const p = document.querySelectorAll('{PANEL}')[{index}].panel; const u = p.plot; "
              f"return {expression}; }})()")
    return page.evaluate(script)


def panel_drawn(page, index: int = 0) -> None:
    wait_until(page, f"document.querySelectorAll('{PANEL}')[{index}]?.panel?.plot?.data[0].length > 0")


def test_a_panel_saved_from_the_page_overlays_metrics_of_runs_and_downloads(tenant, browser_page):
    page = browser_page
    runs = [logged_run(tenant, "lr-0.1", "0.1", 2.0), logged_run(tenant, "lr-0.01", "0.01", 3.0)]
    sign_in(page, tenant.users["member"])
    page.goto(f"/experiments/{runs[0].experiment_id}/")
    page.fill("#panel-form input[name=title]", "losses")
    page.select_option("#panel-keys", ["train/loss", "eval/loss"])
    page.select_option("#panel-scale", "log")
    page.select_option("#panel-x", "relative")
    page.click("#panel-save")
    panel_drawn(page)
    saved = ChartPanel.objects.get()
    assert (saved.title, sorted(saved.keys), saved.scale, saved.x_axis) == (
        "losses", ["eval/loss", "train/loss"], "log", "relative")
    labels = panel_eval(page, "u.series.slice(1).map(s => s.label)")
    assert sorted(labels) == sorted(f"{run} · {key}" for run in ("lr-0.1", "lr-0.01")
                                    for key in ("train/loss", "eval/loss"))
    assert panel_eval(page, "u.scales.y.distr") == 3  # log
    # Relative time: the x axis spans the runs' duration in seconds, labelled as durations.
    assert panel_eval(page, "[u.scales.x.min, u.scales.x.max]") == [0, STEPS - 1]
    labels = panel_eval(page, "u.axes[0]._values")
    assert labels and all(re.fullmatch(r"\d+(s|m(\d\ds)?)", label) for label in labels), labels

    with page.expect_download() as png:
        page.click(f"{PANEL} .panel-png")
    assert png.value.suggested_filename == f"panel-{saved.pk}-losses.png"
    with open(png.value.path(), "rb") as image:
        assert image.read(8) == b"\x89PNG\r\n\x1a\n"
    with page.expect_download() as data:
        page.click(f"{PANEL} .panel-csv")
    rows = read_csv(data.value.path())
    assert rows[0] == ["series", "key", "relative_time_s", "value"]
    assert len(rows) == 1 + 2 * 2 * STEPS
    assert {(r[0], r[1]) for r in rows[1:]} == {(run, key) for run in ("lr-0.1", "lr-0.01")
                                                for key in ("train/loss", "eval/loss")}

    page.click(f"{PANEL} .panel-edit")  # the form takes its settings; saving them changes the panel
    assert page.input_value("#panel-scale") == "log"
    page.select_option("#panel-scale", "linear")
    page.select_option("#panel-keys", ["train/loss"])
    page.click("#panel-save")
    wait_until(page, f"document.querySelector('{PANEL}').panel.spec.scale === 'linear'")
    panel_drawn(page)
    assert panel_eval(page, "u.series.length") == 3  # x, and train/loss of the two runs
    saved.refresh_from_db()
    assert (saved.scale, saved.keys, ChartPanel.objects.count()) == ("linear", ["train/loss"], 1)

    page.reload()  # saved: drawn again after a reload, for a viewer too
    panel_drawn(page)
    page.context.clear_cookies()
    sign_in(page, tenant.users["viewer"])
    page.goto(f"/experiments/{runs[0].experiment_id}/")
    panel_drawn(page)
    assert page.locator("#panel-form").count() == 0 and page.locator(".panel-remove").count() == 0


def test_grouping_draws_each_groups_mean_over_a_min_max_band_raw_faint_beneath(tenant, browser_page):
    page = browser_page
    experiment = logged_run(tenant, "a1", "0.1", 1.0).experiment
    logged_run(tenant, "a2", "0.1", 3.0)
    logged_run(tenant, "b1", "0.01", 5.0)
    ChartPanel.objects.create(experiment=experiment, keys=["train/loss"], smoothing=0.6, group_by="param.lr")
    sign_in(page, tenant.users["member"])
    page.goto(f"/experiments/{experiment.pk}/")
    panel_drawn(page)
    labels = panel_eval(page, "u.series.slice(1).map(s => s.label)")
    assert labels == [f"param.lr={lr} ({n}) · train/loss {what}".replace(f"({n})", f"({n} run{'s' if n > 1 else ''})")
                      for lr, n in (("0.01", 1), ("0.1", 2)) for what in ("mean (raw)", "mean", "min", "max")]
    assert panel_eval(page, "u.bands.length") == 2
    alphas = panel_eval(page, "u.series.slice(1).map(s => s.alpha ?? 1)")
    assert alphas[4] < 0.5 and alphas[5] == 1  # the 0.1 group's raw mean faint, its smoothed mean solid
    # At step 0 the 0.1 group's raw mean is the mean of its two runs, its band their min and max.
    first = panel_eval(page, "[u.data[5][0], u.data[7][0], u.data[8][0]]")
    assert first[0] == pytest.approx((1.01 + 3.01) / 2)
    assert first[1:] == [pytest.approx(1.01), pytest.approx(3.01)]  # smoothing starts where the raw values do
    with page.expect_download() as data:
        page.click(f"{PANEL} .panel-csv")
    rows = read_csv(data.value.path())
    assert rows[0] == ["series", "key", "step", "value", "smoothed", "min", "max"]
    assert rows[1 + STEPS][:4] == ["param.lr=0.1", "train/loss", "0", str((1.01 + 3.01) / 2)]
    page.click(f"{PANEL} .panel-remove")
    wait_until(page, f"document.querySelectorAll('{PANEL}').length === 0")
    assert not ChartPanel.objects.exists()
