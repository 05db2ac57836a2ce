"""Reports grouped by any job label (beside the fixed dimensions) and per hour: the API, the CSV, the page and the
CLI's parameter checks; the same figures before and after a roll; bad label keys and too long hourly ranges are
400s naming the field."""

from __future__ import annotations

import csv
import io
from decimal import Decimal

import pytest
from django.test import override_settings

from costs.metering.rollup import roll_segments
from costs.models import UsageDay, UsageSegment
from jobs.lifecycle import transition
from jobs.states import State
from tests.costs.conftest import at
from tests.jobs.conftest import run, submit

pytestmark = pytest.mark.django_db
JAN = {"month": "2026-01"}


def exact(value: float) -> Decimal:
    return Decimal(value).quantize(Decimal("0.000001"))


@pytest.fixture
def labelled(tenant, prices):
    """Vision: team nlp (8 h100, 01:00-03:00: 32.00), team vision with a cost center (4 h100, 02:30-03:15: 6.00)
    and a job without labels (8 a100, 00:00-01:30: 12.00). The outsider's project: team nlp too (4 a100 for 1 h)."""
    def job(flavor, nodes, start, end, *, project=None, user="member", devices=8, **labels):
        made = submit(tenant, flavor, project=project, user=user, devices=devices, labels=labels)
        made = run(made, prices["cluster"], nodes, now=at(start))
        transition(made, State.CANCELLED, reason="stop", actor=user, now=at(end))
        return made

    from quotas.models import Quota

    Quota.objects.create(project=tenant.other_project, flavor=prices["a100"], guaranteed=8)
    return {"nlp": job(prices["h100"], ["r1-n1"], 1, 3, team="nlp"),
            "vision": job(prices["h100"], ["r1-n2"], 2.5, 3.25, devices=4, team="vision", **{"cost-center": "cc-7"}),
            "none": job(prices["a100"], ["a-n1"], 0, 1.5),
            "theirs": job(prices["a100"], ["a-n2"], 5, 6, project=tenant.other_project, user="outsider",
                          devices=4, team="nlp")}


def by(response, group: str) -> dict:
    assert response.status_code == 200, response.content
    return {row["group"][group]: exact(row["cost"]) for row in response.json()["rows"]}


def test_a_segment_and_its_days_carry_the_jobs_labels(labelled):
    segment = UsageSegment.objects.get(job=labelled["vision"])
    assert segment.labels == {"team": "vision", "cost-center": "cc-7"}
    roll_segments(now=at(24))
    assert UsageDay.objects.get(segment=segment).labels == {"team": "vision", "cost-center": "cc-7"}


def test_group_by_a_label_with_a_none_group_the_same_before_and_after_a_roll(clients, labelled):
    expected = {"nlp": Decimal("32.000000"), "vision": Decimal("6.000000"), "(none)": Decimal("12.000000")}
    params = {**JAN, "group_by": "label:team"}
    assert by(clients["member"].get("/api/v1/costs/", params), "label:team") == expected
    assert roll_segments(now=at(24)) == 4  # the outsider's job too
    assert by(clients["member"].get("/api/v1/costs/", params), "label:team") == expected
    # a key with a dash, and a label beside a fixed dimension
    both = clients["member"].get("/api/v1/costs/", {**JAN, "group_by": "flavor,label:cost-center"}).json()["rows"]
    assert sorted((row["group"]["flavor"], row["group"]["label:cost-center"], round(row["cost"], 6))
                  for row in both) == [("nvidia-a100-40gb", "(none)", 12.0), ("nvidia-h100-80gb", "(none)", 32.0),
                                       ("nvidia-h100-80gb", "cc-7", 6.0)]


def test_another_tenants_jobs_never_join_a_label_group(clients, staff_client, labelled):
    params = {**JAN, "group_by": "label:team"}
    assert by(clients["outsider"].get("/api/v1/costs/", params), "label:team") == {"nlp": Decimal("4.000000")}
    assert by(clients["member"].get("/api/v1/costs/", params), "label:team")["nlp"] == Decimal("32.000000")
    assert by(staff_client.get("/api/v1/costs/", params), "label:team")["nlp"] == Decimal("36.000000")
    lines = list(csv.reader(io.StringIO(b"".join(clients["outsider"].get(
        "/api/v1/costs/csv/", params).streaming_content).decode())))
    assert [line[0] for line in lines] == ["label:team", "nlp"]


@pytest.mark.parametrize("group_by", ["label:", "label:Bad Key!", "label:a/b/c", "project,label:-x", "colour"])
def test_a_bad_label_key_is_a_400_naming_group_by(clients, labelled, group_by):
    for url in ("/api/v1/costs/", "/api/v1/costs/csv/"):
        response = clients["member"].get(url, {**JAN, "group_by": group_by})
        assert response.status_code == 400, (url, response.content)
        assert "group_by" in response.json()["error"]["fields"]


def test_the_csv_groups_by_a_label(clients, labelled):
    response = clients["member"].get("/api/v1/costs/csv/", {**JAN, "group_by": "label:team"})
    lines = list(csv.reader(io.StringIO(b"".join(response.streaming_content).decode())))
    assert lines[0][0] == "label:team"
    assert sorted((line[0], line[-2]) for line in lines[1:]) == [("(none)", "12.00"), ("nlp", "32.00"),
                                                                 ("vision", "6.00")]


def test_the_page_groups_by_the_label_keys_typed(clients, labelled):
    from tests.ui.conftest import login

    page = login(labelled["nlp"].submitter).get("/costs/", {**JAN, "group_by": "project", "labels": "team"})
    assert page.status_code == 200, page.content[:500]
    text = page.content.decode()
    assert ">Label:team<" in text and ">(none)<" in text and 'value="team"' in text
    assert "group_by=project%2Clabel%3Ateam" in text  # the CSV link carries it
    bad = login(labelled["nlp"].submitter).get("/costs/", {**JAN, "labels": "Bad Key!"})
    assert bad.status_code == 400 and "group_by" in bad.content.decode()


# hourly ---------------------------------------------------------------------------------------------------------

def test_an_hourly_report_cuts_at_hours_and_is_the_same_before_and_after_a_roll(clients, labelled):
    params = {"start": "2026-01-01", "end": "2026-01-01", "step": "hour", "group_by": "label:team"}

    def hours() -> list:
        response = clients["member"].get("/api/v1/costs/", params)
        assert response.status_code == 200, response.content
        return [(row["period"], row["group"]["label:team"], exact(row["cost"])) for row in response.json()["rows"]]

    # a100 1.00, h100 2.00 a device-hour: "none" 8 a100 00:00-01:30, nlp 8 h100 01:00-03:00,
    # vision 4 h100 02:30-03:15
    expected = [("2026-01-01T00:00:00Z", "(none)", Decimal("8.000000")),
                ("2026-01-01T01:00:00Z", "nlp", Decimal("16.000000")),
                ("2026-01-01T01:00:00Z", "(none)", Decimal("4.000000")),
                ("2026-01-01T02:00:00Z", "nlp", Decimal("16.000000")),
                ("2026-01-01T02:00:00Z", "vision", Decimal("4.000000")),
                ("2026-01-01T03:00:00Z", "vision", Decimal("2.000000"))]
    assert hours() == expected
    roll_segments(now=at(24))
    assert hours() == expected
    daily = clients["member"].get("/api/v1/costs/", {**params, "step": "day"}).json()
    assert exact(daily["total"]["cost"]) == sum(cost for _, _, cost in expected) == Decimal("50.000000")
    lines = list(csv.reader(io.StringIO(b"".join(clients["member"].get(
        "/api/v1/costs/csv/", params).streaming_content).decode())))
    assert lines[1][:2] == ["2026-01-01T00:00:00Z", "(none)"]


def test_an_hourly_report_as_of_a_moment_counts_up_to_it(clients, labelled):
    response = clients["member"].get("/api/v1/costs/", {"start": "2026-01-01", "end": "2026-01-01", "step": "hour",
                                                        "group_by": "", "as_of": "2026-01-01T01:30:00Z"})
    assert [(row["period"], round(row["cost"], 6)) for row in response.json()["rows"]] == [
        ("2026-01-01T00:00:00Z", 8.0), ("2026-01-01T01:00:00Z", 12.0)]  # a100 8 x 0.5 h + h100 8 x 0.5 h x 2


def test_an_hourly_range_beyond_the_limit_is_a_400_naming_step(clients, labelled):
    params = {"start": "2026-01-01", "end": "2026-01-08", "step": "hour"}
    for url in ("/api/v1/costs/", "/api/v1/costs/csv/"):
        response = clients["member"].get(url, params)
        assert response.status_code == 400, response.content
        assert "step" in response.json()["error"]["fields"]
        assert "at most 7 days" in str(response.json()["error"]["fields"]["step"])
    assert clients["member"].get("/api/v1/costs/", {**params, "end": "2026-01-07"}).status_code == 200
    with override_settings(TIDAL={**__import__("django.conf").conf.settings.TIDAL, "COST_MAX_HOURLY_DAYS": 1}):
        assert clients["member"].get("/api/v1/costs/", {**params, "end": "2026-01-02"}).status_code == 400


def test_the_page_shows_an_hourly_report(clients, labelled):
    from tests.ui.conftest import login

    page = login(labelled["nlp"].submitter).get("/costs/", {"start": "2026-01-01", "end": "2026-01-01",
                                                           "step": "hour", "group_by": "project"})
    assert page.status_code == 200
    assert "2026-01-01 03:00" in page.content.decode()


def test_an_hourly_report_shows_another_tenant_nothing_of_yours(clients, staff_client, labelled):
    params = {"start": "2026-01-01", "end": "2026-01-01", "step": "hour", "group_by": "project"}
    theirs = clients["outsider"].get("/api/v1/costs/", params).json()["rows"]
    assert [(row["period"], row["group"]["project"], round(row["cost"], 6)) for row in theirs] == [
        ("2026-01-01T05:00:00Z", "secret", 4.0)]
    assert {row["group"]["project"] for row in clients["member"].get("/api/v1/costs/", params).json()["rows"]} == {
        "vision"}
    assert {row["group"]["project"] for row in staff_client.get("/api/v1/costs/", params).json()["rows"]} == {
        "vision", "secret"}
    named = clients["outsider"].get("/api/v1/costs/", {**params, "project": "vision"})
    assert named.status_code == 400 and "project" in named.json()["error"]["fields"]
