"""The report and price APIs: every rule tried to break (tenancy, bad ranges and groups, history of prices)."""

from __future__ import annotations

import csv
import io
from datetime import UTC, datetime, timedelta

import pytest
from django.utils import timezone

from costs.models import DevicePrice
from jobs.lifecycle import transition
from jobs.states import State
from tenancy.models import AuditEntry
from tests.costs.conftest import at
from tests.jobs.conftest import run, submit

pytestmark = pytest.mark.django_db
JAN = {"month": "2026-01"}


@pytest.fixture
def usage(tenant, prices):
    """Vision: an 8-device h100 job for 2 h; the outsider's project (another organization): 4 a100 for 1 h."""
    mine = run(submit(tenant, prices["h100"]), prices["cluster"], ["r1-n1"], now=at(1))
    transition(mine, State.CANCELLED, reason="stop", actor="member", now=at(3))
    from jobs.models import Job
    from quotas.models import Quota

    Quota.objects.create(project=tenant.other_project, flavor=prices["a100"], guaranteed=8)
    theirs = submit(tenant, prices["a100"], project=tenant.other_project, user="outsider", devices=4)
    theirs = run(theirs, prices["cluster"], ["a-n2"], now=at(5))
    transition(theirs, State.CANCELLED, reason="stop", actor="outsider", now=at(6))
    return Job.objects.get(pk=mine.pk), theirs


def rows(response) -> dict[str, float]:
    assert response.status_code == 200, response.content
    return {row["group"]["project"]: row["cost"] for row in response.json()["rows"]}


def test_members_see_their_projects_costs_and_staff_see_all(tenant, clients, staff_client, usage):
    assert rows(clients["viewer"].get("/api/v1/costs/", JAN)) == {"vision": pytest.approx(32.0)}
    assert rows(clients["outsider"].get("/api/v1/costs/", JAN)) == {"secret": pytest.approx(4.0)}
    assert rows(staff_client.get("/api/v1/costs/", JAN)) == {"vision": pytest.approx(32.0),
                                                             "secret": pytest.approx(4.0)}
    body = staff_client.get("/api/v1/costs/", JAN).json()
    assert body["total"]["cost"] == pytest.approx(36.0) and body["currency"] == "USD"
    assert (body["start"], body["end"]) == ("2026-01-01", "2026-01-31")


def test_another_tenants_project_is_an_unknown_name_and_anonymous_is_refused(clients, usage):
    response = clients["outsider"].get("/api/v1/costs/", {**JAN, "project": "vision"})
    assert response.status_code == 400 and "project" in response.json()["error"]["fields"]
    from rest_framework.test import APIClient

    assert APIClient().get("/api/v1/costs/", JAN).status_code in (401, 403)
    assert APIClient().get("/api/v1/costs/csv/", JAN).status_code in (401, 403)


@pytest.mark.parametrize(("params", "field"), [
    ({"start": "2026-02-01", "end": "2026-01-01"}, "end"),  # reversed
    ({"start": "2026-01-01"}, "end"),  # unbounded
    ({"end": "2026-01-01"}, "start"),
    ({"start": "2024-01-01", "end": "2026-01-01"}, "end"),  # over the allowed span
    ({"month": "2026-13"}, "month"),
    ({"month": "december"}, "month"),
    ({"month": "2026-01", "start": "2026-01-01"}, "month"),
    ({**JAN, "group_by": "project,colour"}, "group_by"),
    ({**JAN, "group_by": "project,project"}, "group_by"),
    ({**JAN, "step": "hour"}, "step"),
    ({**JAN, "flavor": "tpu-v9"}, "flavor"),
    ({"start": "2026-01-01T00:00:00+22:00", "end": "2026-01-02"}, "start"),
])
def test_bad_parameters_are_400s_naming_the_field(clients, usage, params, field):
    for url in ("/api/v1/costs/", "/api/v1/costs/csv/"):
        response = clients["member"].get(url, params)
        assert response.status_code == 400, (url, response.content)
        assert field in response.json()["error"]["fields"]


def test_group_by_several_fields_and_per_day(clients, usage, prices):
    body = clients["member"].get("/api/v1/costs/", {**JAN, "group_by": "user,flavor,priority_class,stage",
                                                    "step": "day"}).json()
    assert [(r["period"], r["group"]) for r in body["rows"]] == [
        ("2026-01-01", {"user": "member", "flavor": "nvidia-h100-80gb", "priority_class": "normal",
                        "stage": "other"})]
    assert body["rows"][0]["device_hours"] == pytest.approx(16.0)


def test_the_csv_streams_the_same_rows(clients, usage):
    response = clients["member"].get("/api/v1/costs/csv/", {**JAN, "group_by": "project,job", "step": "month"})
    assert response.status_code == 200 and response.streaming
    assert "attachment" in response["Content-Disposition"]
    lines = list(csv.reader(io.StringIO(b"".join(response.streaming_content).decode())))
    job = usage[0]
    assert lines == [["period", "project", "job", "device_hours", "cpu_hours", "memory_gib_hours", "cost_usd",
                      "memory_cost_usd"],
                     ["2026-01-01", "vision", f"#{job.pk} train", "16.0000", "8.0000", "32.0000", "32.00",
                      "0.00"]]


def test_the_csv_writes_no_cell_a_spreadsheet_would_run(clients, usage):
    """An experiment is named by whoever submits the job: as a cell it must stay text."""
    from costs.models import UsageSegment

    UsageSegment.objects.filter(job=usage[0]).update(experiment='=HYPERLINK("http://evil.example","x")')
    response = clients["member"].get("/api/v1/costs/csv/", {**JAN, "group_by": "experiment"})
    lines = list(csv.reader(io.StringIO(b"".join(response.streaming_content).decode())))
    assert lines[1][0] == "'=HYPERLINK(\"http://evil.example\",\"x\")"


# prices --------------------------------------------------------------------------------------------------------

def future(days: int = 1) -> str:
    return (timezone.now() + timedelta(days=days)).isoformat()


def test_everybody_reads_prices_and_only_staff_write_them(clients, staff_client, prices):
    assert len(clients["viewer"].get("/api/v1/prices/devices/").json()["results"]) == 2
    body = {"flavor": "nvidia-h100-80gb", "per_device_hour": "2.50", "effective_from": future()}
    assert clients["owner"].post("/api/v1/prices/devices/", body, format="json").status_code == 403
    response = staff_client.post("/api/v1/prices/devices/", body, format="json")
    assert response.status_code == 201, response.content
    assert AuditEntry.objects.filter(action="deviceprice.create", target_id=str(response.json()["id"])).exists()


@pytest.mark.parametrize(("body", "field"), [
    ({"flavor": "nvidia-h100-80gb", "per_device_hour": "-1", "effective_from": future()}, "per_device_hour"),
    ({"flavor": "nvidia-h100-80gb", "per_device_hour": "1", "effective_from": "2020-01-01T00:00:00Z"},
     "effective_from"),
    ({"flavor": "tpu", "per_device_hour": "1", "effective_from": future()}, "flavor"),
    ({"flavor": "nvidia-h100-80gb", "per_device_hour": "1"}, "effective_from"),
])
def test_bad_prices_are_400s_naming_the_field(staff_client, prices, body, field):
    response = staff_client.post("/api/v1/prices/devices/", body, format="json")
    assert response.status_code == 400, response.content
    assert field in response.json()["error"]["fields"]


def test_prices_from_the_same_moment_overlap_and_history_is_never_edited(staff_client, prices):
    when = future(3)
    body = {"flavor": "nvidia-h100-80gb", "per_device_hour": "2.5", "effective_from": when}
    assert staff_client.post("/api/v1/prices/devices/", body, format="json").status_code == 201
    again = staff_client.post("/api/v1/prices/devices/", {**body, "per_device_hour": "3"}, format="json")
    assert again.status_code == 400 and "effective_from" in again.json()["error"]["fields"]
    in_force = DevicePrice.objects.get(flavor__name="nvidia-h100-80gb", effective_from__lt=datetime.now(UTC))
    url = f"/api/v1/prices/devices/{in_force.pk}/"
    changed = staff_client.patch(url, {"per_device_hour": "9"}, format="json")
    assert changed.status_code == 400 and "effective_from" in changed.json()["error"]["fields"]
    assert staff_client.delete(url).status_code == 400
    in_force.refresh_from_db()
    assert str(in_force.per_device_hour) == "2.0000"
    upcoming = DevicePrice.objects.get(effective_from__gt=datetime.now(UTC))
    assert staff_client.patch(f"/api/v1/prices/devices/{upcoming.pk}/", {"per_device_hour": "2.75"},
                              format="json").status_code == 200
    assert staff_client.delete(f"/api/v1/prices/devices/{upcoming.pk}/").status_code == 204
    assert AuditEntry.objects.filter(action="deviceprice.delete").count() == 1


def staff_page():
    from django.contrib.auth import get_user_model

    from tests.conftest import make_user
    from tests.ui.conftest import login

    staff = get_user_model().objects.filter(is_staff=True).first() or make_user("page-admin", is_staff=True)
    return login(staff)


CALENDAR_EDGES = [({"month": "9999-12"}, "month"), ({"start": "9999-12-01", "end": "9999-12-31"}, "end"),
                  ({"start": "9999-12-31", "end": "9999-12-31", "step": "month"}, "end")]
REPORTS = ["/api/v1/costs/", "/api/v1/costs/csv/", "/api/v1/costs/efficiency/", "/api/v1/costs/efficiency/csv/",
           "/api/v1/costs/waste/", "/api/v1/costs/waste/csv/", "/api/v1/costs/queueing/",
           "/api/v1/costs/queueing/csv/"]
PAGES = ["/costs/", "/costs/admin/", "/costs/efficiency/", "/costs/waste/", "/costs/queueing/"]


@pytest.mark.parametrize(("params", "field"), CALENDAR_EDGES)
def test_a_range_at_the_end_of_the_calendar_is_a_400_naming_it_not_a_500(staff_client, usage, params, field):
    for url in REPORTS:
        params_here = {k: v for k, v in params.items() if k != "step" or url.startswith("/api/v1/costs/csv")
                       or url == "/api/v1/costs/"}
        response = staff_client.get(url, params_here)
        assert response.status_code == 400, (url, response.status_code)
        assert field in response.json()["error"]["fields"], url
    page = staff_page()
    for url in PAGES:
        response = page.get(url, params)
        assert response.status_code == 400, (url, response.status_code)


def test_the_first_years_of_the_calendar_are_reports_of_nothing(staff_client, usage):
    for params in ({"month": "0001-01"}, {"start": "0001-01-01", "end": "0001-01-31", "step": "week"}):
        response = staff_client.get("/api/v1/costs/", params)
        assert response.status_code == 200 and response.json()["rows"] == [], response.content


def test_the_last_range_a_report_covers_is_answered_everywhere(staff_client, usage):
    for params in ({"month": "9999-11", "step": "month"}, {"start": "9999-11-01", "end": "9999-11-30",
                                                          "step": "week"}):
        for url in REPORTS:
            here = params if url in ("/api/v1/costs/", "/api/v1/costs/csv/") else {
                k: v for k, v in params.items() if k != "step"}
            assert staff_client.get(url, here).status_code == 200, url
        for url in PAGES:
            assert staff_page().get(url, params).status_code == 200, url


def test_a_job_naming_no_experiment_is_in_the_default_experiment_as_its_run_is(clients, usage):
    from costs.models import UsageSegment

    body = clients["member"].get("/api/v1/costs/", {**JAN, "group_by": "experiment"}).json()
    assert [row["group"]["experiment"] for row in body["rows"]] == ["Default"]
    # Usage metered before segments named it (an empty experiment) reads the same.
    UsageSegment.objects.update(experiment="")
    body = clients["member"].get("/api/v1/costs/", {**JAN, "group_by": "experiment"}).json()
    assert [row["group"]["experiment"] for row in body["rows"]] == ["Default"]


def test_the_report_says_the_moment_it_is_as_of_and_counts_running_jobs_up_to_it(tenant, clients, prices):
    from tests.jobs.conftest import run as run_job

    run_job(submit(tenant, prices["h100"]), prices["cluster"], ["r1-n1"], now=at(1))  # runs on
    body = clients["member"].get("/api/v1/costs/", {**JAN, "as_of": at(4).isoformat()}).json()
    assert body["as_of"] == "2026-01-01T04:00:00Z" and body["total"]["device_hours"] == pytest.approx(24.0)
    now = clients["member"].get("/api/v1/costs/", JAN).json()
    assert datetime.fromisoformat(now["as_of"]) <= timezone.now() and now["total"]["device_hours"] == pytest.approx(
        8 * 24 * 31 - 8)  # up to the end of January: from 01:00 on
