"""The three analyses: quota efficiency (idle guarantee, borrowed and lent capacity), waste (failed attempts, work
lost since the last checkpoint, low GPU utilization) and queueing (device-hours waited, median and p90), their
arithmetic on hand-made histories, the same before and after a roll, and their API and pages: bad parameters are
400s naming them, and a caller sees only their projects."""

from __future__ import annotations

from datetime import date, timedelta
from unittest import mock

import pytest
from django.utils import timezone

from costs.analysis import Scope, percentile
from costs.analysis.efficiency import quota_efficiency
from costs.analysis.queueing import queueing
from costs.analysis.waste import waste
from costs.metering.rollup import roll_segments
from costs.reports.usage import Window
from jobs.lifecycle import Admission, AttemptEnd, record_checkpoint, transition, transition_many
from jobs.states import State
from tenancy.models import Project
from tests.conftest import make_user
from tests.costs.conftest import at, installed_since
from tests.jobs.conftest import spec
from tracking.services import run_log_batch

pytestmark = pytest.mark.django_db
DAY_ONE = Window(date(2026, 1, 1), date(2026, 1, 2))
HOUR = 3600


def submit(tenant, flavor, when, *, project=None, **kwargs):
    """Submit at `when` (the service stamps submission with the clock)."""
    from jobs.services import job_submit

    with mock.patch("django.utils.timezone.now", return_value=when):
        return job_submit(actor=tenant.users["owner"], project=project or tenant.project,
                          spec=spec(flavor, **kwargs)).job


def admit(job, cluster, nodes, when, borrowed=0):
    each = job.total_devices // len(nodes)
    placement = [{"role": "worker", "index": i, "node": node, "devices": each} for i, node in enumerate(nodes)]
    transition_many([Admission(job.pk, cluster.pk, placement, borrowed=borrowed)], now=when)
    job.refresh_from_db()
    return job


def start(job, when):
    for state in (State.DISPATCHING, State.RUNNING):
        job = transition(job, state, reason="test", actor="backend", now=when)
    return job


def end(job, target, when, **how):
    return transition(job, target, reason=str(target), actor="backend", now=when, end=AttemptEnd(**how))


def requeue(job, when):
    return transition(job, State.QUEUED, reason="requeued", actor="scheduler", now=when)


def scope(projects=None, window=DAY_ONE, now=None, **filters):
    projects = projects if projects is not None else Project.objects.values("id")
    return Scope(projects, window, filters, now or at(24 * 30))


def by(rows, *names):
    return {tuple(row.labels[name] for name in names): row for row in rows}


# ------------------------------------------------------------------------------------------------ efficiency

@pytest.fixture
def lending(tenant, prices):
    """Vision (16 h100 guaranteed) runs 8 for 10 h; Speech (16 guaranteed, same organization) runs 24 for 5 h, 8 of
    them borrowed."""
    cluster, h100 = prices["cluster"], prices["h100"]
    vision = admit(submit(tenant, h100, at(0)), cluster, ["r1-n1"], at(0))
    end(start(vision, at(0)), State.SUCCEEDED, at(10))
    speech = admit(submit(tenant, h100, at(0), project=prices["speech"], replicas=3), cluster,
                   ["r1-n2", "r2-n1", "r2-n2"], at(1), borrowed=8)
    end(start(speech, at(1)), State.SUCCEEDED, at(6))
    return prices


def test_idle_guarantee_is_priced_and_a_borrower_s_hours_are_lent_by_the_idle_project(tenant, lending):
    rows = by(quota_efficiency(scope()).rows, "project", "flavor")
    vision = rows["vision", "nvidia-h100-80gb"]
    assert vision.guaranteed_seconds == 16 * 24 * HOUR
    assert (vision.used_seconds, vision.borrowed_seconds) == (8 * 10 * HOUR, 0)
    assert vision.idle_seconds == (16 * 24 - 80) * HOUR
    assert vision.idle_cost == pytest.approx((16 * 24 - 80) * 2.00)
    assert vision.lent_seconds == 8 * 5 * HOUR  # all Speech borrowed came from Vision, the only idle lender
    speech = rows["speech", "nvidia-h100-80gb"]
    assert (speech.used_seconds, speech.borrowed_seconds, speech.within_seconds) == (
        24 * 5 * HOUR, 8 * 5 * HOUR, 16 * 5 * HOUR)
    assert speech.idle_seconds == (16 * 24 - 80) * HOUR and speech.lent_seconds == 0
    unused = rows["vision", "nvidia-a100-40gb"]  # 8 a100 guaranteed, never used
    assert (unused.idle_seconds, unused.idle_cost) == (8 * 24 * HOUR, pytest.approx(8 * 24 * 1.00))


def test_a_guarantee_counts_from_when_its_quota_or_its_project_was_created(tenant, prices):
    """Not from the range's start: a month-old range of a demo minutes old showed a month of idle guarantees."""
    from quotas.models import Quota
    from quotas.services import quota_save
    from tenancy.models import AuditEntry

    Quota.objects.filter(project=prices["speech"]).delete()
    quota = quota_save(actor=None, quota=Quota(project=prices["speech"], flavor=prices["h100"]),
                       values={"guaranteed": 16})
    AuditEntry.objects.filter(action="quota.create", target_id=str(quota.pk)).update(created_at=at(18))
    Project.objects.filter(pk=tenant.project.pk).update(created_at=at(6))  # its quotas have no audit entry
    rows = by(quota_efficiency(scope()).rows, "project", "flavor")
    assert rows["speech", "nvidia-h100-80gb"].guaranteed_seconds == 16 * 6 * HOUR
    assert rows["speech", "nvidia-h100-80gb"].idle_cost == pytest.approx(16 * 6 * 2.00)
    assert rows["vision", "nvidia-h100-80gb"].guaranteed_seconds == 16 * 18 * HOUR
    assert rows["vision", "nvidia-a100-40gb"].idle_seconds == 8 * 18 * HOUR
    # A project created after the range guarantees nothing in it.
    Project.objects.filter(pk=tenant.project.pk).update(created_at=at(48))
    later = by(quota_efficiency(scope()).rows, "project", "flavor")["vision", "nvidia-h100-80gb"]
    assert (later.guaranteed_seconds, later.idle_seconds, later.idle_cost) == (0, 0, 0)


def test_a_demo_minutes_old_shows_minutes_of_idle_guarantee_not_a_month(tenant, prices):
    now = at(24 * 9 + 12)  # 2026-01-10 12:00
    installed_since(now - timedelta(minutes=10))
    month = Window(date(2026, 1, 1), date(2026, 2, 1))
    total = quota_efficiency(scope(window=month, now=now)).total
    assert total.guaranteed_seconds == (16 + 8 + 16) * 600  # vision h100 and a100, speech h100, for 10 minutes
    assert total.idle_cost == pytest.approx((16 * 2 + 8 * 1 + 16 * 2) * 600 / HOUR)


def test_lending_is_shared_by_idle_guarantee_and_never_exceeds_it(tenant, lending):
    from quotas.models import Quota

    third = Project.objects.create(organization=tenant.organization, name="Audio", slug="audio")
    Quota.objects.create(project=third, flavor=lending["h100"], guaranteed=8)
    installed_since(at(-1))
    rows = by(quota_efficiency(scope(flavor_id=lending["h100"].pk)).rows, "project")
    idle_vision, idle_audio = (16 * 24 - 80) * HOUR, 8 * 24 * HOUR
    borrowed = 40 * HOUR
    assert rows["vision",].lent_seconds == pytest.approx(borrowed * idle_vision / (idle_vision + idle_audio))
    assert rows["audio",].lent_seconds == pytest.approx(borrowed * idle_audio / (idle_vision + idle_audio))
    # A guarantee cut to almost nothing lends at most what it left idle.
    Quota.objects.filter(project=tenant.project, flavor=lending["h100"]).update(guaranteed=4)
    Quota.objects.filter(project=third).delete()
    vision = by(quota_efficiency(scope()).rows, "project", "flavor")["vision", "nvidia-h100-80gb"]
    assert vision.idle_seconds == (4 * 24 - 80) * HOUR == vision.lent_seconds


def test_a_member_sees_their_projects_rows_with_what_others_borrowed_and_a_roll_changes_nothing(tenant, lending):
    from tenancy.selectors import project_ids_for_user

    member = scope(project_ids_for_user(tenant.users["member"]))  # a member of Vision, not of Speech
    before = quota_efficiency(member)
    assert {row.labels["project"] for row in before.rows} == {"vision"}
    assert roll_segments() == 2
    after = quota_efficiency(member)
    assert [(r.flavor_id, r.used_seconds, r.borrowed_seconds, r.lent_seconds, pytest.approx(r.idle_cost))
            for r in before.rows] == [(r.flavor_id, r.used_seconds, r.borrowed_seconds, r.lent_seconds, r.idle_cost)
                                      for r in after.rows]
    speech = by(quota_efficiency(scope()).rows, "project", "flavor")["speech", "nvidia-h100-80gb"]
    assert speech.borrowed_seconds == 8 * 5 * HOUR  # from the rolled days now


def test_a_segment_caught_in_the_middle_of_a_roll_counts_once(tenant, lending):
    """Its days written and the segment not yet marked rolled: both halves of the read see it, the union once."""
    from costs.models import UsageSegment

    before = by(quota_efficiency(scope()).rows, "project", "flavor")["speech", "nvidia-h100-80gb"]
    roll_segments()
    UsageSegment.objects.update(rolled=False)
    during = by(quota_efficiency(scope()).rows, "project", "flavor")["speech", "nvidia-h100-80gb"]
    assert during.borrowed_seconds == before.borrowed_seconds == 8 * 5 * HOUR


def test_a_range_reaching_into_the_future_counts_the_guarantee_up_to_now(tenant, lending):
    found = quota_efficiency(scope(now=at(12)))
    vision = by(found.rows, "project", "flavor")["vision", "nvidia-h100-80gb"]
    assert found.hours == 12 and vision.guaranteed_seconds == 16 * 12 * HOUR
    assert vision.idle_seconds == (16 * 12 - 80) * HOUR


def test_an_open_borrowing_segment_counts_up_to_now(tenant, prices):
    job = admit(submit(tenant, prices["h100"], at(0), project=prices["speech"], replicas=3), prices["cluster"],
                ["r1-n2", "r2-n1", "r2-n2"], at(20), borrowed=8)
    start(job, at(20))
    speech = by(quota_efficiency(scope(now=at(22))).rows, "project", "flavor")["speech", "nvidia-h100-80gb"]
    assert (speech.used_seconds, speech.borrowed_seconds) == (24 * 2 * HOUR, 8 * 2 * HOUR)


# ------------------------------------------------------------------------------------------------ waste

def test_work_lost_since_the_checkpoint_and_failed_attempts_are_counted_per_job(tenant, prices):
    cluster, h100 = prices["cluster"], prices["h100"]
    preempted = start(admit(submit(tenant, h100, at(0)), cluster, ["r1-n1"], at(0)), at(0.5))
    record_checkpoint(preempted.current_attempt, "s3://ckpt/1", now=at(2))
    preempted = requeue(end(preempted, State.PREEMPTED, at(3)), at(3))
    preempted = start(admit(preempted, cluster, ["r1-n1"], at(4)), at(4))
    end(preempted, State.SUCCEEDED, at(5))
    failed = start(admit(submit(tenant, h100, at(0)), cluster, ["r1-n2"], at(4)), at(4.5))
    end(failed, State.FAILED, at(6), cause="oom")
    lost = start(admit(submit(tenant, h100, at(0)), cluster, ["r2-n1"], at(7)), at(7.5))
    end(lost, State.RETRYING, at(8), lost=True, cause="node_lost")
    never = admit(submit(tenant, h100, at(0)), cluster, ["r2-n2"], at(7))  # lost before it ever ran: not billed
    end(never, State.RETRYING, at(8), lost=True, cause="node_lost")

    rows = {row.job_id: row for row in waste(scope()).rows}
    one = rows[preempted.pk]  # checkpoint at 2, preempted at 3: one hour of 8 devices to compute again
    assert (one.lost_seconds, one.lost_cost, one.failed_seconds) == (8 * HOUR, pytest.approx(16.0), 0)
    two = rows[failed.pk]  # failed at 6, never checkpointed: everything since it started at 4.5
    assert (two.failed_seconds, two.failed_cost) == (8 * 1.5 * HOUR, pytest.approx(24.0))  # billed from its start
    assert two.lost_seconds == 8 * 1.5 * HOUR
    three = rows[lost.pk]
    assert (three.failed_seconds, three.lost_seconds) == (8 * 0.5 * HOUR, 8 * 0.5 * HOUR)
    assert never.pk not in rows
    assert three.labels == {"job": f"#{lost.pk} train", "project": "vision", "flavor": "nvidia-h100-80gb"}
    roll_segments()
    assert {r.job_id: (r.failed_seconds, r.lost_seconds) for r in waste(scope()).rows} == {
        r.job_id: (r.failed_seconds, r.lost_seconds) for r in rows.values()}


def test_lost_work_is_clipped_to_the_window(tenant, prices):
    job = start(admit(submit(tenant, prices["h100"], at(0)), prices["cluster"], ["r1-n1"], at(22)), at(22))
    end(job, State.PREEMPTED, at(26))  # four hours lost, two of them on January 2nd
    assert waste(scope()).rows[0].lost_seconds == 8 * 2 * HOUR


def log_gpu(job, key, values, every=60, since=0.0):
    """`values` logged once every `every` seconds from `since` hours."""
    first = int(at(since).timestamp() * 1000)
    points = [{"key": key, "value": value, "step": i, "timestamp": first + i * every * 1000}
              for i, value in enumerate(values)]
    run_log_batch(run_id=job.run.pk, metrics=points)


def test_device_hours_at_low_gpu_utilization_come_from_the_run_s_series(tenant, prices):
    job = start(admit(submit(tenant, prices["h100"], at(0)), prices["cluster"], ["r1-n1"], at(0)), at(0))
    log_gpu(job, "system/gpu.0.utilization", [5.0] * 60 + [90.0] * 60)  # low for the first hour
    log_gpu(job, "system/gpu.1.utilization", [90.0] * 90 + [10.0] + [90.0] * 29, since=0)
    # A low reading followed by 20 minutes of silence counts for 5 minutes only.
    log_gpu(job, "system/gpu.1.utilization", [12.0, 95.0], every=1200, since=2.5)
    log_gpu(job, "train/loss", [0.0] * 120)  # not a GPU key
    end(job, State.SUCCEEDED, at(3))
    expected_series_seconds = HOUR + 60 + 300  # gpu.0's hour, gpu.1's minute and its 5 capped minutes
    row = waste(scope()).rows[0]
    assert row.low_seconds == pytest.approx(8 * expected_series_seconds / 2)  # two series share 8 devices
    assert row.low_cost == pytest.approx(row.low_seconds / HOUR * 2.00)
    only_gpu0 = waste(scope(), gpu_util_below=8).rows[0]
    assert only_gpu0.low_seconds == pytest.approx(8 * HOUR / 2)
    assert waste(scope(), gpu_util_below=1).rows == []


def test_low_utilization_counts_only_while_the_attempt_held_devices_in_the_window(tenant, prices):
    job = start(admit(submit(tenant, prices["h100"], at(0)), prices["cluster"], ["r1-n1"], at(23)), at(23))
    log_gpu(job, "system/gpu_util", [1.0] * 120, since=23)  # the demo's single series: low for two hours
    end(job, State.SUCCEEDED, at(24.5))  # the last half hour of readings came after the attempt ended
    row = waste(scope()).rows[0]
    assert row.low_seconds == pytest.approx(8 * HOUR)  # 23:00 to midnight, one series for all 8 devices


# ------------------------------------------------------------------------------------------------ queueing

def test_waits_per_attempt_with_median_and_p90(tenant, prices):
    cluster, h100 = prices["cluster"], prices["h100"]
    a = admit(submit(tenant, h100, at(0)), cluster, ["r1-n1"], at(0.5))  # waits 0.5 h
    a = requeue(end(start(a, at(0.5)), State.PREEMPTED, at(1)), at(1))
    admit(a, cluster, ["r1-n1"], at(2))  # waits 1 h after its requeue
    admit(submit(tenant, h100, at(0)), cluster, ["r1-n2"], at(2))  # 2 h
    admit(submit(tenant, h100, at(0)), cluster, ["r2-n1"], at(4))  # 4 h
    d = start(admit(submit(tenant, h100, at(5)), cluster, ["r2-n2"], at(5)), at(5))  # no wait
    d = transition(d, State.RETRYING, reason="oom", actor="backend", now=at(6), end=AttemptEnd(cause="oom"),
                   retry_at=at(7))
    admit(requeue(d, at(7)), cluster, ["r2-n2"], at(7.5))  # its backoff (6 to 7) is no wait: 0.5 h
    admit(submit(tenant, prices["a100"], at(0)), cluster, ["a-n1"], at(1))  # another flavor, 1 h
    admit(submit(tenant, h100, at(0)), cluster, ["r1-n1"], at(25))  # admitted the next day: not in the range

    rows = by(queueing(scope()).rows, "project", "flavor")
    h = rows["vision", "nvidia-h100-80gb"]
    assert sorted(h.waits) == [0, 0.5 * HOUR, 0.5 * HOUR, HOUR, 2 * HOUR, 4 * HOUR]
    assert h.median == 0.75 * HOUR and h.p90 == pytest.approx(3 * HOUR)
    assert h.wait_device_seconds == 8 * 8 * HOUR
    assert rows["vision", "nvidia-a100-40gb"].waits == [HOUR]
    assert h.waiting_jobs == 0


def test_jobs_still_waiting_are_counted_to_now_apart(tenant, prices):
    now = timezone.now()
    submit(tenant, prices["h100"], now - timedelta(hours=3))
    this_month = Window(now.date().replace(day=1), now.date() + timedelta(days=1))
    row = queueing(scope(window=this_month, now=now)).rows[0]
    assert (row.waiting_jobs, row.waiting_device_seconds, row.waits) == (1, pytest.approx(8 * 3 * HOUR), [])
    assert queueing(scope(now=now)).rows == []  # it entered the queue after January 1st


def test_percentiles_interpolate_between_ranks():
    assert percentile([], 0.5) is None
    assert percentile([7.0], 0.9) == 7.0
    assert percentile([1.0, 2.0, 3.0, 4.0], 0.5) == 2.5
    assert percentile([0.0, 10.0], 0.9) == pytest.approx(9.0)


# ------------------------------------------------------------------------------------------------ API and pages

API = {"efficiency": "/api/v1/costs/efficiency/", "waste": "/api/v1/costs/waste/",
       "queueing": "/api/v1/costs/queueing/"}


@pytest.mark.parametrize("name", list(API))
@pytest.mark.parametrize(("params", "field"), [
    ({"month": "2026-13"}, "month"), ({"start": "2026-01-01"}, "end"),
    ({"start": "2026-01-05", "end": "2026-01-01"}, "end"), ({"month": "2026-01", "start": "2026-01-01"}, "month"),
    ({"start": "2020-01-01", "end": "2026-01-01"}, "end"), ({"month": "2026-01", "flavor": "nope"}, "flavor"),
    ({"month": "2026-01", "project": "secret"}, "project"),  # another tenant's project is unknown to a member
])
def test_bad_parameters_are_400s_naming_them(clients, name, params, field):
    response = clients["member"].get(API[name], params)
    assert response.status_code == 400 and field in response.json()["error"]["fields"]


@pytest.mark.parametrize("value", ["-1", "101", "lots"])
def test_a_bad_threshold_is_a_400_naming_it(clients, value):
    response = clients["member"].get(API["waste"], {"month": "2026-01", "gpu_util_below": value})
    assert response.status_code == 400 and "gpu_util_below" in response.json()["error"]["fields"]


def test_each_caller_sees_their_projects(tenant, clients, staff_client, lending):
    def projects(client, name, **params):
        response = client.get(API[name], {"month": "2026-01", **params})
        assert response.status_code == 200, response.content
        return sorted({row["project"] for row in response.json()["rows"]})

    for project in (tenant.project, lending["speech"]):
        failed = admit(submit(tenant, lending["h100"], at(12), project=project), lending["cluster"], ["r1-n1"], at(12))
        end(start(failed, at(12)), State.FAILED, at(13), cause="oom")
    for name in API:
        assert projects(clients["viewer"], name) == ["vision"]  # a viewer reads
        assert projects(clients["outsider"], name) == []
        assert projects(staff_client, name) == ["speech", "vision"]
        assert projects(staff_client, name, project="speech") == ["speech"]
    body = clients["viewer"].get(API["efficiency"], {"month": "2026-01"}).json()
    vision = next(r for r in body["rows"] if r["flavor"] == "nvidia-h100-80gb")
    hours = 31 * 24
    assert body["hours"] == hours and body["currency"] == "USD"
    used = 80 + 8  # the fixture's ten hours of 8 devices and the failed hour
    assert vision["idle_device_hours"] == 16 * hours - used and vision["lent_device_hours"] == 40
    assert vision["idle_cost"] == pytest.approx((16 * hours - used) * 2.0)
    assert clients["viewer"].get(API["waste"], {"month": "2026-01"}).json()["gpu_util_below"] == 20.0


def test_an_anonymous_caller_is_refused(client):
    assert client.get(API["efficiency"], {"month": "2026-01"}).status_code in (401, 403)


def test_csv_has_the_json_rows(clients, lending):
    response = clients["member"].get(API["efficiency"] + "csv/", {"month": "2026-01"})
    assert response.status_code == 200 and response["Content-Type"] == "text/csv"
    lines = response.content.decode().splitlines()
    assert lines[0].startswith("project,organization,flavor,guaranteed,")
    assert len(lines) == 3 and all(line.startswith("vision,Acme,") for line in lines[1:])
    for name in ("waste", "queueing"):
        assert clients["member"].get(API[name] + "csv/", {"month": "2026-01"}).status_code == 200
    assert clients["member"].get(API["waste"] + "csv/", {"month": "x"}).status_code == 400


@pytest.fixture
def browser(client, tenant):
    def sign_in(role):
        client.force_login(tenant.users[role])
        return client

    return sign_in


@pytest.mark.parametrize("name", ["efficiency", "waste", "queueing"])
def test_pages_show_the_rows_of_the_caller_s_projects(browser, lending, name):
    page = browser("viewer").get(f"/costs/{name}/", {"month": "2026-01"})
    assert page.status_code == 200
    text = page.content.decode()
    assert f'id="analysis-{name}"' in text and "vision" in text and "speech</td>" not in text
    assert browser("viewer").get(f"/costs/{name}/").status_code == 200  # the current month


def test_a_page_sorts_by_any_column_and_explains_a_bad_parameter(browser, lending):
    def first_row(sort):
        text = browser("owner").get("/costs/efficiency/", {"month": "2026-01", "sort": sort}).content.decode()
        return text.split("<tbody>")[1].split("</tr>")[0]

    assert "vision" in first_row("-lent_device_hours") and "nvidia-h100" in first_row("-lent_device_hours")
    assert "nvidia-a100-40gb" in first_row("flavor") and "nvidia-h100-80gb" in first_row("-flavor")
    assert "speech" in first_row("project") and "vision" in first_row("-project")
    refused = browser("member").get("/costs/waste/", {"month": "2026-01", "project": "secret"})
    assert refused.status_code == 400 and "No project named" in refused.content.decode()
    assert browser("member").get("/costs/queueing/", {"month": "2026-01", "sort": "nonsense"}).status_code == 200


def test_pages_need_a_sign_in(client):
    assert client.get("/costs/efficiency/").status_code == 302


def test_a_project_filter_names_only_visible_projects(tenant, lending):
    other = make_user("stranger")
    from tests.conftest import client_for

    response = client_for(other).get(API["efficiency"], {"month": "2026-01", "project": "vision"})
    assert response.status_code == 400 and "project" in response.json()["error"]["fields"]


def test_a_run_with_sm_activity_is_judged_by_it_not_by_utilization(tenant, prices):
    """DCGM's utilization reads 95% while the SMs wait: with telemetry's SM activity the hour is low."""
    busy_looking = start(admit(submit(tenant, prices["h100"], at(0)), prices["cluster"], ["r1-n1"], at(0)), at(0))
    log_gpu(busy_looking, "system/gpu.0.utilization", [95.0] * 60)
    log_gpu(busy_looking, "system/gpu.0.sm_active", [3.0] * 60)
    utilization_only = start(admit(submit(tenant, prices["h100"], at(0)), prices["cluster"], ["r1-n2"], at(0)),
                             at(0))
    log_gpu(utilization_only, "system/gpu.0.utilization", [95.0] * 60)
    end(busy_looking, State.SUCCEEDED, at(2))
    end(utilization_only, State.SUCCEEDED, at(2))
    rows = waste(scope()).rows
    assert [row.job_id for row in rows if row.low_seconds] == [busy_looking.pk]
    # 60 readings a minute apart; the last counts until 5 minutes after it (GAP_CAP): 64 minutes on 8 devices.
    judged = next(row for row in rows if row.job_id == busy_looking.pk)
    assert judged.low_seconds == pytest.approx(8 * 64 * 60)
    assert judged.low_gpu_util_seconds == 0  # utilization alone, shown beside: 95% reads busy
