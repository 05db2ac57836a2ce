"""Money is exact from the price to the API: each piece of use is priced exactly and rounded once to the
micro-unit, pieces are added as whole micro-units (in SQL for rolled days), and the API, the CSV and the page round
the exact sum once, to the cent.

Ten pieces of 0.0045 each (1 device at 0.0162 an hour for 1,000 s) make 0.045 exactly, a half cent. As floats
they make 0.045's nearest float, 0.04499999999999999833 (or 0.04499999999999999, added in another order), which is
not 0.045 and rounds to 0.04 instead of 0.05."""

from __future__ import annotations

import csv
import io
from datetime import UTC, datetime, timedelta
from decimal import Decimal

import pytest

from costs.metering.pricing import PriceBook, Usage
from costs.metering.rollup import roll_segments
from costs.models import UsageSegment
from costs.reports.usage import ReportQuery, Window, usage_report
from quotas.models import PriorityClass
from tenancy.models import Project
from tests.costs.conftest import T0, at, price
from tests.ui.conftest import login

pytestmark = pytest.mark.django_db
JAN = {"month": "2026-01", "group_by": ""}


@pytest.fixture
def small_pieces(tenant, inventory):
    """Ten closed segments of the member's project, each 1 device for 1,000 s at 0.0162 a device-hour; six rolled."""
    price(inventory["h100"], "0.0162", datetime(2025, 1, 1, tzinfo=UTC))
    start = int(T0.timestamp())
    normal = PriorityClass.objects.get(name="normal")
    UsageSegment.objects.bulk_create(
        UsageSegment(attempt_number=1, organization_id=tenant.project.organization_id, project=tenant.project,
                     flavor=inventory["h100"], priority_class=normal, stage="other", devices=1, cpu_millis=0,
                     start_ts=start + 2000 * n, end_ts=start + 2000 * n + 1000) for n in range(10))
    assert roll_segments(batch=6, now=at(24)) == 6


def test_a_piece_is_priced_exactly_in_micro_units():
    book = PriceBook(device={(1, None): [(0, Decimal("0.0162"))]}, discount={2: [(0, Decimal("0.3"))]})
    assert book.micros(Usage(1, None, 9, 1, 0), 0, 1000) == (4500, 0)
    # 0.0162 x 0.3 x 1,000 s = 0.00135 exactly; 7 s of it 0.00000945: rounded once, half up, to 0.000009
    assert book.micros(Usage(1, None, 2, 1, 0), 0, 7) == (9, 0)


def test_many_small_costs_add_up_to_the_exact_decimal_total(tenant, small_pieces):
    january = Window(T0.date(), T0.date() + timedelta(days=31))
    report = usage_report(Project.objects.values("id"), ReportQuery(january, ()), at(24))
    assert report.total.cost == Decimal("0.045")  # a float sum: 0.04499999999999999


def test_the_api_and_the_csv_round_the_exact_total_once_to_the_cent(clients, small_pieces):
    response = clients["member"].get("/api/v1/costs/", {**JAN, "as_of": "2026-01-02T00:00:00Z"})
    assert response.status_code == 200, response.content
    assert b'"cost":0.05' in response.content.replace(b" ", b"")
    assert response.json()["total"]["cost"] == 0.05 and response.json()["rows"][0]["cost"] == 0.05
    response = clients["member"].get("/api/v1/costs/csv/", {**JAN, "as_of": "2026-01-02T00:00:00Z"})
    lines = list(csv.reader(io.StringIO(b"".join(response.streaming_content).decode())))
    assert lines[1][-2:] == ["0.05", "0.00"]


def test_the_page_shows_the_exact_total_to_the_cent(tenant, small_pieces):
    response = login(tenant.users["member"]).get("/costs/", {"month": "2026-01", "step": "month"})
    assert response.status_code == 200
    assert b'id="total-cost">0.05 ' in response.content
