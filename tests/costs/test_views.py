"""The cost pages: /costs/ shows the caller's projects only (staff all), refuses bad parameters and another tenant's
project with the report's 400 message on the page; /costs/admin/ is for staff only; the project page shows this
month's cost. The chart's stacking and the fragmentation rule are pure and tested without the database."""

from __future__ import annotations

import csv
import io
import re
from datetime import UTC, date, datetime, timedelta

import pytest
from django.urls import reverse
from django.utils import timezone

from costs.metering.rollup import roll_segments
from costs.reports.staff import capacity_hours, fragmentation
from costs.reports.usage import Report, ReportQuery, Row, Window
from costs.reports.views import OTHER, stacked_series
from jobs.lifecycle import transition
from jobs.scheduling.model import Node, PendingJob, ReplicaGroup
from jobs.states import State
from quotas.models import Quota
from tests.conftest import make_user
from tests.costs.conftest import at
from tests.jobs.conftest import run, submit
from tests.ui.conftest import login

pytestmark = pytest.mark.django_db
JANUARY = {"month": "2026-01"}


def held(tenant, flavor, cluster, node, start, end, *, project=None, user="member", devices=8):
    """A job of `devices` on `node` from `start` to `end` (datetimes), through the state machine."""
    job = run(submit(tenant, flavor, project=project, user=user, devices=devices), cluster, [node], now=start)
    if end is not None:
        transition(job, State.CANCELLED, reason="stop", actor="member", now=end)
    return job


@pytest.fixture
def usage(tenant, prices):
    """January 2026: vision holds 8 h100 for 2 h (32.00) and 8 a100 for 3 h (24.00); the outsider's project
    `secret` holds 8 h100 for 1 h (16.00)."""
    h100, a100, cluster = prices["h100"], prices["a100"], prices["cluster"]
    Quota.objects.create(project=tenant.other_project, flavor=h100, guaranteed=8, borrow_limit=0)
    held(tenant, h100, cluster, "r1-n1", at(0), at(2))
    held(tenant, a100, cluster, "a-n1", at(24), at(27))
    held(tenant, h100, cluster, "r1-n2", at(5), at(6), project=tenant.other_project, user="outsider")
    return prices


def page(client, **params):
    return client.get(reverse("costs"), params)


def projects_in(response) -> set[str]:
    return {row["groups"][0] for row in response.context["rows"]}


def test_a_member_sees_only_their_projects_rows(tenant, usage):
    response = page(login(tenant.users["member"]), **JANUARY)
    assert response.status_code == 200
    assert projects_in(response) == {"vision"}
    assert response.context["total"].cost == pytest.approx(32.0 + 24.0)
    body = response.content.decode()
    assert "secret" not in body
    assert re.search(r'id="total-cost">56\.00 USD<', body)
    assert [s["label"] for s in response.context["chart"]["series"]] == [
        "vision · nvidia-h100-80gb", "vision · nvidia-a100-40gb"]


def test_an_outsider_sees_their_own_project_and_naming_another_tenants_is_the_400_of_a_missing_one(tenant, usage):
    outsider = login(tenant.users["outsider"])
    own = page(outsider, **JANUARY)
    assert own.status_code == 200 and projects_in(own) == {"secret"}
    assert own.context["total"].cost == pytest.approx(16.0)
    refused = page(outsider, project="vision", **JANUARY)
    assert refused.status_code == 400
    body = refused.content.decode()
    assert "project: No project named &#x27;vision&#x27;." in body
    assert "report" not in refused.context and 'id="cost-table"' not in body and 'id="total-cost"' not in body
    missing = page(outsider, project="bogus", **JANUARY)
    assert missing.status_code == 400 and "No project named &#x27;bogus&#x27;." in missing.content.decode()


def test_platform_staff_see_every_project(tenant, usage):
    staff = make_user("platform-admin", is_staff=True)
    response = page(login(staff), **JANUARY)
    assert projects_in(response) == {"vision", "secret"}
    assert response.context["total"].cost == pytest.approx(72.0)
    assert 'id="costs-admin-tab"' in response.content.decode()


def test_filters_by_project_flavor_and_cluster(tenant, usage):
    owner = login(tenant.users["owner"])
    by_flavor = page(owner, flavor="nvidia-a100-40gb", **JANUARY)
    assert by_flavor.context["total"].cost == pytest.approx(24.0)
    assert page(owner, project="speech", **JANUARY).context["total"].cost == 0
    assert page(owner, cluster="sim", **JANUARY).context["total"].cost == pytest.approx(56.0)
    assert page(owner, cluster="nowhere", **JANUARY).status_code == 400


@pytest.mark.parametrize("params, message", [
    ({"month": "2026-13"}, "month: "),
    ({"month": "January"}, "month: Use YYYY-MM, e.g. 2026-12."),
    ({"month": "2026-01", "start": "2026-01-01", "end": "2026-01-02"}, "month: Give a month or a start and an end"),
    ({"start": "2026-01-05", "end": "2026-01-01"}, "end: The range ends before it starts."),
    ({"start": "2026-01-05"}, "end: Required"),
    ({"start": "2024-01-01", "end": "2026-01-01"}, "end: The range covers more than 400 days."),
    ({"month": "2026-01", "group_by": "bogus"}, "group_by: Unknown group &#x27;bogus&#x27;"),
    ({"month": "2026-01", "step": "hour"}, "step: "),
    ({"month": "2026-01", "flavor": "bogus"}, "flavor: No flavor named &#x27;bogus&#x27;."),
])
def test_bad_parameters_answer_400_with_the_message_on_the_page(tenant, usage, params, message):
    response = page(login(tenant.users["member"]), **params)
    assert response.status_code == 400
    body = response.content.decode()
    assert 'id="report-errors"' in body and message in body
    assert 'id="report-form"' in body  # the form stays, to correct the parameter


def test_defaults_are_this_utc_month_by_project_and_flavor_per_day(tenant, usage):
    response = page(login(tenant.users["member"]))
    assert response.status_code == 200
    month = timezone.now().astimezone(UTC).strftime("%Y-%m")
    params = dict(response.context["params"])
    as_of = datetime.fromisoformat(params.pop("as_of"))
    assert params == {"month": month, "group_by": "project,flavor", "step": "day"}
    assert timezone.now() - timedelta(seconds=5) < as_of <= timezone.now()
    assert f'value="{month}"' in response.content.decode()
    assert response.context["total"].cost == 0  # January's usage is not this month's


def test_the_group_by_multi_select_and_an_empty_choice_meaning_totals_only(tenant, usage):
    member = login(tenant.users["member"])
    grouped = member.get(reverse("costs") + "?month=2026-01&group_by=&group_by=flavor&group_by=user")
    assert grouped.context["report"].query.group_by == ("flavor", "user")
    totals = member.get(reverse("costs") + "?month=2026-01&group_by=&step=month")
    assert totals.context["report"].query.group_by == ()
    assert [s["label"] for s in totals.context["chart"]["series"]] == ["total"]
    assert totals.context["chart"]["series"][0]["values"] == [pytest.approx(56.0)]


@pytest.mark.parametrize("rolled", [False, True])
@pytest.mark.parametrize("step, periods", [("week", 5), ("month", 1)])
def test_weekly_and_monthly_charts_hold_every_row_rolled_or_not(tenant, usage, rolled, step, periods):
    if rolled:
        assert roll_segments() == 3
    chart = page(login(tenant.users["member"]), step=step, **JANUARY).context["chart"]
    assert len(chart["x"]) == periods  # January 2026 touches the weeks of Dec 29, Jan 5, 12, 19 and 26
    by_group = {s["label"]: s["values"] for s in chart["series"]}
    assert by_group["vision · nvidia-h100-80gb"][0] == pytest.approx(32.0)
    assert by_group["vision · nvidia-a100-40gb"][0] == pytest.approx(24.0)


def test_the_csv_link_carries_the_pages_query_and_works_with_the_session(tenant, usage):
    member = login(tenant.users["member"])
    response = page(member, flavor="nvidia-h100-80gb", **JANUARY)
    url = response.context["csv_url"]
    as_of = response.context["params"]["as_of"]
    assert url == ("/api/v1/costs/csv/?month=2026-01&flavor=nvidia-h100-80gb&group_by=project%2Cflavor&step=day"
                   f"&as_of={as_of.replace(':', '%3A')}")
    assert f'href="{url.replace("&", "&amp;")}"' in response.content.decode()
    download = member.get(url)
    assert download.status_code == 200
    rows = list(csv.reader(io.StringIO(b"".join(download.streaming_content).decode())))
    assert rows[0] == ["period", "project", "flavor", "device_hours", "cpu_hours", "memory_gib_hours", "cost_usd",
                       "memory_cost_usd"]
    assert rows[1][:4] == ["2026-01-01", "vision", "nvidia-h100-80gb", "16.0000"] and rows[1][5] == "32.0000"
    assert len(rows) == 2


def test_the_page_and_its_csv_are_as_of_the_same_moment_whatever_ends_starts_or_rolls_between(tenant, usage):
    """A job running when the page is drawn goes on running, and others end, start and are rolled, before the CSV
    link is followed: the CSV still gives the page's figures, and both say the moment."""
    from datetime import timedelta as td
    from unittest import mock

    h100, cluster = usage["h100"], usage["cluster"]
    moment = datetime(2026, 2, 15, 12, tzinfo=UTC)  # mid-month, past: the page is drawn then
    running = held(tenant, h100, cluster, "r2-n1", moment - td(hours=2), None)  # runs on after the page
    ending = held(tenant, h100, cluster, "r2-n2", moment - td(hours=1), None)  # ends after the page
    member = login(tenant.users["member"])
    month = {"month": moment.strftime("%Y-%m"), "group_by": "project,job", "step": "day"}
    with mock.patch("django.utils.timezone.now", return_value=moment):
        shown = page(member, **month)
    assert shown.context["as_of"] == moment and moment.strftime("%Y-%m-%d %H:%M:%S UTC") in shown.content.decode()
    page_rows = {(row["period"], tuple(row["groups"])): round(row["cost"], 6) for row in shown.context["rows"]}
    assert round(shown.context["total"].cost, 6) == round(8 * 3 * 2.00, 6)

    transition(ending, State.CANCELLED, reason="stop", actor="member", now=moment + td(minutes=10))
    later = held(tenant, h100, cluster, "r1-n2", moment + td(minutes=5), moment + td(minutes=20))
    roll_segments()  # the ended job's days and the later one's hold time past the page's moment
    from costs.models import UsageSegment

    assert UsageSegment.objects.filter(job__in=[ending, later], rolled=True).count() == 2
    download = member.get(shown.context["csv_url"])
    assert download.status_code == 200 and download["X-Tidal-As-Of"] == moment.isoformat()
    assert f"as-of-{moment:%Y%m%dT%H%M%S}Z.csv" in download["Content-Disposition"]
    rows = list(csv.reader(io.StringIO(b"".join(download.streaming_content).decode())))
    csv_rows = {(date.fromisoformat(r[0]), (r[1], r[2])): round(float(r[5]), 4) for r in rows[1:]}
    assert csv_rows == {key: round(cost, 4) for key, cost in page_rows.items()}
    assert f"#{later.pk} train" not in {key[1][1] for key in csv_rows}
    assert running.state == State.RUNNING
    # Without the moment the same report is as of now: the running job and the rolled ones count on.
    now_rows = member.get(shown.context["csv_url"].split("&as_of=")[0])
    assert len(list(csv.reader(io.StringIO(b"".join(now_rows.streaming_content).decode())))) > len(rows)


@pytest.mark.parametrize(("as_of", "says"), [("2999-01-01T00:00:00Z", "in the future"), ("soon", "as_of"),
                                             ("9999-12-31T23:00:00-05:00", "as_of")])
def test_a_bad_or_future_moment_is_a_400_naming_as_of(tenant, usage, as_of, says):
    response = login(tenant.users["member"]).get("/api/v1/costs/", {**JANUARY, "as_of": as_of})
    assert response.status_code == 400 and "as_of" in response.json()["error"]["fields"], response.content
    assert says in response.content.decode()


def test_the_group_by_choice_shows_every_group_and_so_its_default(tenant, usage):
    body = page(login(tenant.users["member"]), **JANUARY).content.decode()
    select = body[body.index('id="report-group-by"'):body.index("</select>", body.index('id="report-group-by"'))]
    assert 'size="9"' in select and select.count("<option") == 9
    assert re.search(r'value="flavor"\s+selected', select) and re.search(r'value="project"\s+selected', select)


def test_a_fresh_installation_says_why_there_is_no_cost_history(tenant, prices):
    body = page(login(tenant.users["member"]), **JANUARY).content.decode()
    assert 'id="no-usage"' in body and 'id="never-metered"' in body and "Philly trace" in body


def test_a_range_without_usage_of_an_installation_that_metered_some_says_only_that(tenant, usage):
    body = page(login(tenant.users["member"]), month="2026-03").content.decode()
    assert 'id="no-usage"' in body and 'id="never-metered"' not in body


def test_the_table_keeps_the_costliest_rows_beyond_its_limit(tenant, usage, monkeypatch):
    monkeypatch.setattr("costs.reports.views.MAX_TABLE_ROWS", 1)
    response = page(login(tenant.users["member"]), **JANUARY)
    assert response.context["row_count"] == 2
    assert [row["cost"] for row in response.context["rows"]] == [pytest.approx(32.0)]
    assert "the 1 costliest shown, the CSV has all" in response.content.decode()


def test_signed_out_visitors_are_sent_to_sign_in(client):
    for name in ("costs", "costs-admin"):
        response = client.get(reverse(name))
        assert response.status_code == 302 and "/accounts/login/" in response["Location"]


# ---- the chart's data


def row(day: int, label: str, cost: float) -> Row:
    return Row(date(2026, 1, day), (label,), cost_micros=round(cost * 1_000_000), labels={"project": label})


def test_the_chart_stacks_the_costliest_groups_and_sums_the_rest_as_other():
    window = Window(date(2026, 1, 1), date(2026, 2, 1))
    rows = [row(1 + n % 3, f"p{n}", float(n + 1)) for n in range(10)]  # p9 costs most, p0 least
    chart = stacked_series(Report(ReportQuery(window, ("project",), "day"), rows), top=3)
    assert [s["label"] for s in chart["series"]] == ["p9", "p8", "p7", OTHER]
    assert len(chart["x"]) == 31 and chart["x"][0] == int(datetime(2026, 1, 1, tzinfo=UTC).timestamp())
    assert all(len(s["values"]) == 31 for s in chart["series"])
    other = chart["series"][-1]["values"]
    assert other[:3] == [1 + 4 + 7, 2 + 5, 3 + 6] and sum(other[3:]) == 0  # p0..p6 by day
    assert sum(sum(s["values"]) for s in chart["series"]) == pytest.approx(sum(range(1, 11)))


def test_weekly_periods_start_on_mondays_and_cover_the_window():
    window = Window(date(2026, 1, 1), date(2026, 1, 15))  # a Thursday to a Wednesday
    chart = stacked_series(Report(ReportQuery(window, (), "week"), []))
    days = [datetime.fromtimestamp(x, UTC).date() for x in chart["x"]]
    assert days == [date(2025, 12, 29), date(2026, 1, 5), date(2026, 1, 12)]


# ---- the staff page


def test_the_cluster_page_is_for_staff_only(tenant, usage):
    for name in ("owner", "member", "outsider"):
        response = login(tenant.users[name]).get(reverse("costs-admin"))
        assert response.status_code == 403
        assert "Cluster-wide costs are for platform staff." in response.content.decode()
    assert 'id="costs-admin-tab"' not in page(login(tenant.users["owner"]), **JANUARY).content.decode()


def test_the_cluster_page_shows_utilization_fragmentation_top_projects_and_chargeback(tenant, usage):
    h100, cluster = usage["h100"], usage["cluster"]
    # Now: 6 of r2-n1's 8 devices held, and a job waiting for 8 a replica: r2-n1's 2 free devices are stranded.
    held(tenant, h100, cluster, "r2-n1", timezone.now() - timedelta(minutes=5), None, devices=6)
    waiting = submit(tenant, h100, devices=8)
    staff = login(make_user("platform-admin", is_staff=True))
    response = staff.get(reverse("costs-admin"), JANUARY)
    assert response.status_code == 200
    data = response.context["data"]

    h100_use = next(f for f in data.utilization if f.flavor == "nvidia-h100-80gb")
    assert h100_use.devices == 32 and len(h100_use.days) == 31
    assert (h100_use.days[0].allocated, h100_use.days[0].capacity) == (pytest.approx(24.0), 32 * 24)
    assert h100_use.days[0].cost == pytest.approx(48.0) and h100_use.days[1].allocated == 0
    assert h100_use.percent == pytest.approx(100 * 24 / (32 * 24 * 31))

    frag = {entry.flavor: entry for entry in data.fragmentation}
    assert frag["nvidia-h100-80gb"].smallest_request == waiting.groups.get().devices == 8
    assert frag["nvidia-h100-80gb"].nodes == (("sim/r2-n1", 2),)
    assert frag["nvidia-h100-80gb"].fragmented == 2 and frag["nvidia-h100-80gb"].free == 26
    assert frag["nvidia-a100-40gb"].smallest_request is None and frag["nvidia-a100-40gb"].fragmented == 0

    assert [(r.labels["project"], r.cost) for r in data.top_projects] == [
        ("vision", pytest.approx(56.0)), ("secret", pytest.approx(16.0))]
    assert [(r.labels["organization"], r.labels["project"]) for r in data.chargeback] == [
        ("Acme", "vision"), ("Globex", "secret")]
    assert data.chargeback_total.cost == pytest.approx(72.0)
    body = response.content.decode()
    assert 'href="/api/v1/costs/csv/?month=2026-01&amp;group_by=organization%2Cproject"' in body
    assert "current</strong> node inventory" in body


def test_the_cluster_page_refuses_a_bad_range_with_its_message(tenant, usage):
    staff = login(make_user("platform-admin", is_staff=True))
    response = staff.get(reverse("costs-admin"), {"month": "2026-1"})
    assert response.status_code == 400 and "month: Use YYYY-MM" in response.content.decode()


def test_utilization_counts_each_node_from_when_it_was_added(tenant, usage):
    """Nodes node sync found count from their cluster's creation, nodes added by hand from their audit entry; a
    demo minutes old is not measured against a month of capacity it never had."""
    from clusters.models import Cluster, Node
    from clusters.services import node_save
    from costs.reports.staff import utilization
    from tenancy.models import AuditEntry, Project

    Cluster.objects.filter(pk=usage["cluster"].pk).update(created_at=at(12))
    node = node_save(actor=None, node=Node(cluster=usage["cluster"], name="late", flavor=usage["h100"], devices=8,
                                           rack="r9"))
    AuditEntry.objects.filter(action="node.create", target_id=str(node.pk)).update(created_at=at(18))
    days = {f.flavor: f.days for f in utilization(Project.objects.values("id"), Window(date(2026, 1, 1),
                                                                                       date(2026, 1, 3)), at(30))}
    assert [day.capacity for day in days["nvidia-h100-80gb"]] == [32 * 12 + 8 * 6, 40 * 6]
    assert [day.capacity for day in days["nvidia-a100-40gb"]] == [16 * 12, 16 * 6]


def test_capacity_counts_today_up_to_now_only():
    now = datetime(2026, 1, 2, 6, tzinfo=UTC)
    assert capacity_hours(date(2026, 1, 1), 8, now) == 8 * 24
    assert capacity_hours(date(2026, 1, 2), 8, now) == 8 * 6
    assert capacity_hours(date(2026, 1, 2), 8, now, since=int(datetime(2026, 1, 2, 4, tzinfo=UTC).timestamp())) == 16
    assert capacity_hours(date(2026, 1, 3), 8, now) == 0


def node(name, free, flavor="h100", schedulable=True) -> Node:
    return Node(name=name, flavor=flavor, devices=8, free=free, schedulable=schedulable)


def waiting_job(job_id, *groups) -> PendingJob:
    return PendingJob(id=job_id, project="p", priority=0, submitted_at=0.0,
                      groups=tuple(ReplicaGroup("worker", 1, devices, flavor) for devices, flavor in groups))


def test_free_devices_are_fragmented_when_fewer_than_every_waiting_replica_of_the_flavor():
    nodes = [node("a", 8), node("b", 3), node("c", 2), node("d", 0), node("cordoned", 2, schedulable=False),
             node("x", 1, flavor="a100")]
    pending = [waiting_job(1, (6, "h100")), waiting_job(2, (4, "h100"), (0, "h100")),  # a CPU-only group
               waiting_job(3, (8, "other"))]
    result = {entry.flavor: entry for entry in fragmentation(nodes, pending)}
    assert result["h100"].smallest_request == 4
    assert result["h100"].nodes == (("b", 3), ("c", 2))
    assert (result["h100"].free, result["h100"].fragmented) == (13, 5)
    # Nothing waits for a100: its free device is idle, not fragmented.
    assert (result["a100"].free, result["a100"].fragmented, result["a100"].smallest_request) == (1, 0, None)
    assert "other" not in result  # a flavor without nodes has nothing to strand
    # A replica of 3 fits node b: only c's 2 devices are stranded.
    smaller = {e.flavor: e for e in fragmentation(nodes, [*pending, waiting_job(4, (3, "h100"))])}
    assert smaller["h100"].nodes == (("c", 2),)


# ---- the project page's panel


def test_the_project_page_shows_this_months_cost_and_links_the_report(tenant, prices):
    now = timezone.now()
    month_start = now.astimezone(UTC).replace(day=1, hour=0, minute=0, second=0, microsecond=0)
    start = max(month_start, now - timedelta(hours=1))
    held(tenant, prices["h100"], prices["cluster"], "r1-n1", start, now)
    held(tenant, prices["h100"], prices["cluster"], "r1-n2", at(0), at(5))  # January: not this month
    body = login(tenant.users["viewer"]).get(reverse("project_detail", args=["vision"])).content.decode()
    expected = 8 * 2.00 * (int(now.timestamp()) - int(start.timestamp())) / 3600
    assert 'id="project-costs"' in body and 'href="/costs/?project=vision"' in body
    assert f"{expected:,.2f} USD" in body
