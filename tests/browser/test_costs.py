"""The cost report in a browser: the stacked chart is drawn from the data the page carries, a header click sorts the
table, the CSV downloads with the page's query; the staff page draws a utilization chart per flavor."""

from __future__ import annotations

import csv
import io

import pytest

from jobs.lifecycle import transition
from jobs.states import State
from tests.browser.conftest import sign_in
from tests.costs.conftest import at, prices  # noqa: F401  (fixture)
from tests.jobs.conftest import inventory, run, submit  # noqa: F401  (fixture)

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

CHART = "#cost-chart"


def held(tenant, flavor, cluster, node, start, end, project=None):
    job = run(submit(tenant, flavor, project=project, user="owner"), cluster, [node], now=start)
    transition(job, State.CANCELLED, reason="stop", actor="owner", now=end)


@pytest.fixture
def january(tenant, prices):  # noqa: F811
    """Vision: 8 h100 for 2 h on Jan 1 (32.00), 8 a100 for 3 h on Jan 2 (24.00); speech: 8 h100 for 1 h (16.00)."""
    h100, a100, cluster = prices["h100"], prices["a100"], prices["cluster"]
    held(tenant, h100, cluster, "r1-n1", at(0), at(2))
    held(tenant, a100, cluster, "a-n1", at(24), at(27))
    held(tenant, h100, cluster, "r1-n2", at(5), at(6), project=prices["speech"])
    return prices


def painted_pixels(page, selector: str) -> int:
    """Non-transparent pixels of the chart's canvas: more than its axes when bars are drawn."""
    return page.evaluate("""(selector) => {
        const canvas = document.querySelector(`${selector} canvas`);
        const data = canvas.getContext("2d").getImageData(0, 0, canvas.width, canvas.height).data;
        let painted = 0;
        for (let i = 3; i < data.length; i += 4) if (data[i] > 0) painted += 1;
        return painted;
    }""", selector)


def plot(page, selector: str, expression: str):
    """Evaluates `expression` over the uPlot instance `u` the page keeps on the chart's element."""
    return page.evaluate(f"(selector) => {{ const u = document.querySelector(selector).plot; return {expression}; }}",
                         selector)


def wait_drawn(page, selector: str, periods: int) -> None:
    page.wait_for_function(
        "([selector, periods]) => document.querySelector(selector)?.plot?.data[0].length === periods",
        arg=[selector, periods])


def column(page, index: int) -> list[str]:
    return page.locator(f"#cost-table tbody tr td:nth-child({index})").all_inner_texts()


def test_the_report_draws_the_stacked_chart_sorts_the_table_and_downloads_the_csv(tenant, january, browser_page):
    page = browser_page
    sign_in(page, tenant.users["owner"])
    page.goto("/costs/?month=2026-01")
    wait_drawn(page, CHART, 31)
    labels = plot(page, CHART, "u.series.slice(1).map(s => s.label)")
    # Drawn tallest stack first: the costliest group is the bottom of the stack, drawn last.
    assert labels == ["speech · nvidia-h100-80gb", "vision · nvidia-a100-40gb", "vision · nvidia-h100-80gb"]
    # Day one's top of the stack is vision's 32.00 plus speech's 16.00.
    assert plot(page, CHART, "u.data[1][0]") == pytest.approx(48.0)
    assert painted_pixels(page, CHART) > 2000
    assert page.locator("#total-cost").inner_text() == "72.00 USD"

    assert column(page, 2) == ["vision", "speech", "vision"]  # period order
    page.click("#cost-table th:nth-child(8) button")  # cost (after memory's GiB-hours and cost), ascending
    assert column(page, 8) == ["16.00", "24.00", "32.00"]
    assert page.locator("#cost-table th:nth-child(8)").get_attribute("aria-sort") == "ascending"
    page.click("#cost-table th:nth-child(8) button")
    assert column(page, 8) == ["32.00", "24.00", "16.00"]
    page.click("#cost-table th:nth-child(2) button")  # project, by name
    assert column(page, 2) == ["speech", "vision", "vision"]
    assert page.locator("#cost-table tfoot td").last.inner_text() == "72.00"

    with page.expect_download() as info:
        page.click("#csv-download")
    download = info.value
    as_of = page.locator("#as-of time").get_attribute("datetime")  # the page's moment, the CSV's too
    assert download.suggested_filename == (
        f"costs-2026-01-01-2026-01-31-as-of-{as_of[:19].replace('-', '').replace(':', '')}Z.csv")
    with open(download.path(), encoding="utf-8") as f:
        rows = list(csv.reader(io.StringIO(f.read())))
    assert rows[0] == ["period", "project", "flavor", "device_hours", "cpu_hours", "memory_gib_hours", "cost_usd",
                       "memory_cost_usd"]
    assert ["2026-01-01", "vision", "nvidia-h100-80gb", "16.0000", "8.0000", "32.00"] in [r[:5] + r[6:7]
                                                                                             for r in rows]
    assert len(rows) == 4


def test_the_form_takes_a_month_or_a_range_and_shows_a_bad_one_on_the_page(tenant, january, browser_page):
    page = browser_page
    sign_in(page, tenant.users["owner"])
    page.goto("/costs/?month=2026-01")
    page.fill("#range-start", "2026-01-02")
    assert page.input_value("#range-month") == ""  # a range replaces the month
    page.fill("#range-end", "2026-01-01")
    page.click("#report-form button[type=submit]")
    page.wait_for_selector("#report-errors")
    assert "end: The range ends before it starts." in page.locator("#report-errors").inner_text()
    page.fill("#range-end", "2026-01-31")
    page.select_option("#report-group-by", ["flavor"])
    page.click("#report-form button[type=submit]")
    wait_drawn(page, CHART, 30)
    assert column(page, 2) == ["nvidia-a100-40gb"]  # Jan 2 onwards: the a100 job only


def test_the_staff_page_draws_a_utilization_chart_per_flavor(tenant, january, browser_page):
    from tests.conftest import make_user

    staff = make_user("platform-admin", is_staff=True)
    page = browser_page
    sign_in(page, staff)
    page.goto("/costs/admin/?month=2026-01")
    chart = '.util-chart[data-index="1"]'  # nvidia-h100-80gb, after the a100 by name
    wait_drawn(page, chart, 31)
    assert plot(page, chart, "u.series.slice(1).map(s => s.label)") == ["allocated", "capacity"]
    assert plot(page, chart, "u.data[1][0]") == pytest.approx(24.0)  # vision's 16 and speech's 8 device-hours
    assert plot(page, chart, "u.data[2][0]") == 32 * 24
    assert painted_pixels(page, chart) > 2000


def test_at_phone_width_the_cost_column_stays_on_screen(tenant, january, chromium, live_server):
    context = chromium.new_context(viewport={"width": 390, "height": 844}, base_url=live_server.url)
    try:
        page = context.new_page()
        sign_in(page, tenant.users["owner"])
        page.goto("/costs/?month=2026-01&step=day&group_by=project&group_by=flavor&group_by=user")
        for cell in (page.locator("#cost-table thead th").last, page.locator("#cost-table tbody tr td").last):
            box = cell.bounding_box()
            assert box is not None and box["x"] >= 0 and box["x"] + box["width"] <= 390, box
        assert page.locator("#cost-table thead th").last.is_visible()
    finally:
        context.close()
