"""The idle guarantee in the main report (its JSON, its CSV section and its page), counted as the efficiency page
counts it: per project, the guarantee's device-hours not used within it, at the flavor's list price."""

from __future__ import annotations

import csv
import io
from decimal import Decimal

import pytest

from costs.metering.rollup import roll_segments
from tests.costs.conftest import at
from tests.costs.test_analysis import lending  # noqa: F401  (fixture)

pytestmark = pytest.mark.django_db
DAY = {"start": "2026-01-01", "end": "2026-01-01"}


def idle(response) -> dict:
    assert response.status_code == 200, response.content
    body = response.json()["idle_guarantee"]
    return {row["project"]: (row["guaranteed_device_hours"], row["idle_device_hours"],
                             Decimal(row["idle_cost"]).quantize(Decimal("0.0001"))) for row in body["rows"]}


def test_the_report_shows_each_projects_idle_guarantee_and_its_money(clients, staff_client, lending):  # noqa: F811
    # Vision: 16 h100 x 24 h guaranteed, 8 x 10 h used -> 304 idle at 2.00; 8 a100 x 24 h, unused -> 192 at 1.00.
    # Speech: 16 h100 x 24 h, 24 x 5 h used of which 8 x 5 borrowed -> 80 within, 304 idle at 2.00.
    vision = (576.0, 496.0, Decimal("800.0000"))
    speech = (384.0, 304.0, Decimal("608.0000"))
    assert idle(clients["viewer"].get("/api/v1/costs/", DAY)) == {"vision": vision}
    assert idle(staff_client.get("/api/v1/costs/", DAY)) == {"vision": vision, "speech": speech}
    total = staff_client.get("/api/v1/costs/", DAY).json()["idle_guarantee"]["total"]
    assert (total["idle_device_hours"], Decimal(total["idle_cost"])) == (800.0, Decimal("1408"))
    roll_segments(now=at(48))
    assert idle(staff_client.get("/api/v1/costs/", DAY)) == {"vision": vision, "speech": speech}


def test_another_tenant_sees_none_of_it_and_filters_narrow_it(clients, staff_client, lending):  # noqa: F811
    assert idle(clients["outsider"].get("/api/v1/costs/", DAY)) == {}
    assert idle(staff_client.get("/api/v1/costs/", {**DAY, "flavor": "nvidia-a100-40gb"})) == {
        "vision": (192.0, 192.0, Decimal("192.0000"))}
    assert idle(staff_client.get("/api/v1/costs/", {**DAY, "project": "speech"})) == {
        "speech": (384.0, 304.0, Decimal("608.0000"))}
    # guarantees are not per cluster
    response = staff_client.get("/api/v1/costs/", {**DAY, "cluster": "sim"})
    assert response.status_code == 200 and response.json()["idle_guarantee"] is None


def test_the_csv_has_an_idle_section(clients, lending):  # noqa: F811
    response = clients["viewer"].get("/api/v1/costs/csv/", {**DAY, "section": "idle"})
    assert response.status_code == 200
    assert "costs-idle-2026-01-01" in response["Content-Disposition"]
    lines = list(csv.reader(io.StringIO(b"".join(response.streaming_content).decode())))
    assert lines == [["project", "organization", "guaranteed_device_hours", "idle_device_hours", "idle_cost_usd"],
                     ["vision", "Acme", "576.0000", "496.0000", "800.0000"]]
    outsider = clients["outsider"].get("/api/v1/costs/csv/", {**DAY, "section": "idle"})
    assert len(list(csv.reader(io.StringIO(b"".join(outsider.streaming_content).decode())))) == 1
    bad = clients["viewer"].get("/api/v1/costs/csv/", {**DAY, "section": "everything"})
    assert bad.status_code == 400 and "section" in bad.json()["error"]["fields"]


def test_the_page_shows_the_idle_guarantee(lending):  # noqa: F811
    from django.contrib.auth import get_user_model

    from tests.ui.conftest import login

    page = login(get_user_model().objects.get(username="viewer")).get("/costs/", DAY)
    assert page.status_code == 200
    text = page.content.decode()
    assert 'id="idle-total-hours">496' in text and 'id="idle-total-cost">800' in text
    assert "section=idle" in text
