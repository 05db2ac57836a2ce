"""The pools API: figures for staff and for the projects that borrowed (their own jobs only), the demand endpoint
with a pool token, bad input as a 400 naming the field, and the staff write path audited."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.urls import reverse
from django.utils import timezone
from rest_framework.test import APIClient

from pools import services
from pools.models import Pool, PoolSample
from quotas.models import Quota
from tenancy.models import AuditEntry
from tenancy.services import token_create as personal_token
from tests.conftest import make_user
from tests.jobs.conftest import admit, submit


def demand_client(secret: str) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {secret}")
    return client


def url(name: str = "chat") -> str:
    return reverse("pool-demand", kwargs={"name": name})


def test_the_demand_api_puts_a_pools_demand_with_its_token(pool):
    token, secret = services.token_create(actor=None, pool=pool, name="autoscaler")
    assert secret.startswith("tdp_") and token.digest != secret and secret not in token.digest
    response = demand_client(secret).put(url(), {"devices": 12}, format="json")
    assert response.status_code == 200, response.content
    pool.refresh_from_db()
    assert pool.demand == 12 and pool.demand_at is not None


def test_bad_demand_is_a_400_naming_the_field(pool):
    _, secret = services.token_create(actor=None, pool=pool, name="autoscaler")
    for body in ({}, {"devices": -1}, {"devices": "lots"}, {"devices": 10**9}):
        response = demand_client(secret).put(url(), body, format="json")
        assert response.status_code == 400, body
        assert "devices" in response.json()["error"]["fields"]


def test_the_demand_api_refuses_wrong_revoked_and_missing_tokens(pool, tenant, inventory):
    other = Pool.objects.create(name="batch", cluster=inventory["cluster"], flavor=inventory["h100"], devices=8)
    _, theirs = services.token_create(actor=None, pool=other, name="x")
    assert demand_client(theirs).put(url(), {"devices": 1}, format="json").status_code == 404
    token, secret = services.token_create(actor=None, pool=pool, name="y")
    services.token_revoke(actor=None, token=token)
    assert demand_client(secret).put(url(), {"devices": 1}, format="json").status_code == 401
    assert APIClient().put(url(), {"devices": 1}, format="json").status_code in (401, 403)
    # A personal token is not a pool token, and a pool token is not a personal token.
    _, personal = personal_token(user=tenant.users["owner"], name="me")
    refused = demand_client(personal).put(url(), {"devices": 1}, format="json")
    assert refused.status_code == 403 and "pool token" in refused.json()["error"]["message"]
    _, good = services.token_create(actor=None, pool=pool, name="z")
    response = demand_client(good).get(reverse("pool-list"))
    assert response.status_code == 401 and "pool token" in response.json()["error"]["message"]


def test_staff_see_every_pool_and_every_job_on_it(pool, tenant, inventory, staff_client):
    job = submit(tenant, inventory["a100"], priority="preemptible")
    admit(job, inventory["cluster"], ["a-n1"])
    rows = staff_client.get(reverse("pool-list")).json()
    assert [(r["name"], r["capacity"], r["used"]) for r in rows] == [("chat", 16, 8)]
    detail = staff_client.get(reverse("pool-detail", kwargs={"name": "chat"})).json()
    assert [j["id"] for j in detail["jobs"]] == [job.pk]
    assert "series" in detail and "give_back_p99" in detail


def test_the_24h_hours_come_from_the_minute_samples(pool, staff_client):
    now = timezone.now()
    for minute, (demand, lent, used) in enumerate([(4, 12, 12), (10, 6, 12), (10, 6, 6)]):
        PoolSample.objects.create(pool=pool, at=now - timedelta(minutes=3 - minute), capacity=16, demand=demand,
                                  headroom=0, lent=lent, used=used)
    PoolSample.objects.create(pool=pool, at=now - timedelta(hours=25), capacity=16, demand=16, headroom=0, lent=0,
                              used=16)  # older than 24 h
    detail = staff_client.get(reverse("pool-detail", kwargs={"name": "chat"})).json()
    assert (detail["lent_hours_24h"], detail["used_hours_24h"]) == (0.4, 0.5)  # 24 and 30 device-minutes
    assert detail["unmet_hours_24h"] == 0.1  # the minute serving wanted 10 while training held 12 of 16


def test_a_project_that_borrowed_sees_the_pool_and_its_own_jobs_only(pool, tenant, inventory, clients):
    mine = submit(tenant, inventory["a100"], priority="preemptible")
    admit(mine, inventory["cluster"], ["a-n1"])
    Quota.objects.create(project=tenant.other_project, flavor=inventory["a100"], guaranteed=0, borrow_limit=8)
    theirs = submit(tenant, inventory["a100"], project=tenant.other_project, user="outsider", priority="preemptible")
    admit(theirs, inventory["cluster"], ["a-n2"])
    detail = clients["viewer"].get(reverse("pool-detail", kwargs={"name": "chat"})).json()
    assert [j["id"] for j in detail["jobs"]] == [mine.pk]
    assert detail["used"] == 16  # the pool's total, without naming the other organization's job
    outsider = clients["outsider"].get(reverse("pool-detail", kwargs={"name": "chat"})).json()
    assert [j["id"] for j in outsider["jobs"]] == [theirs.pk]


def test_a_project_that_never_borrowed_sees_no_pool(pool, tenant, clients):
    assert clients["viewer"].get(reverse("pool-list")).json() == []
    response = clients["viewer"].get(reverse("pool-detail", kwargs={"name": "chat"}))
    assert response.status_code == 404 and response.json()["error"]["code"] == "not_found"


def test_staff_writes_are_audited_and_refuse_bad_settings_naming_the_field(pool, tenant):
    from core.errors import DomainError

    staff = make_user("root", is_staff=True)
    services.pool_save(actor=staff, pool=pool, values={"headroom_percent": 20})
    assert AuditEntry.objects.filter(action="pool.change", changes__headroom_percent=[0, 20]).exists()
    for field, value in (("schedule", ["22:00-25:00"]), ("time_zone", "Mars/Olympus"), ("headroom_percent", 150)):
        try:
            services.pool_save(actor=staff, pool=pool, values={field: value})
        except DomainError as error:
            assert error.field == field
        else:
            raise AssertionError(f"{field}={value!r} was accepted")
        pool.refresh_from_db()  # the refused value is not kept on the object the next write starts from


def test_the_pools_pages_show_staff_everything_and_others_their_own_jobs(pool, tenant, inventory, client):
    mine = submit(tenant, inventory["a100"], name="mine-job", priority="preemptible")
    admit(mine, inventory["cluster"], ["a-n1"])
    Quota.objects.create(project=tenant.other_project, flavor=inventory["a100"], guaranteed=0, borrow_limit=8)
    theirs = submit(tenant, inventory["a100"], project=tenant.other_project, user="outsider", name="secret-job",
                    priority="preemptible")
    admit(theirs, inventory["cluster"], ["a-n2"])
    PoolSample.objects.create(pool=pool, at=timezone.now(), capacity=16, demand=0, headroom=0, lent=16, used=16)
    client.force_login(tenant.users["viewer"])
    page = client.get(reverse("pool", kwargs={"name": "chat"})).content.decode()
    assert "mine-job" in page and "secret-job" not in page and "<polyline" in page
    assert "chat" in client.get(reverse("pools")).content.decode()
    client.force_login(make_user("root", is_staff=True))
    page = client.get(reverse("pool", kwargs={"name": "chat"})).content.decode()
    assert "mine-job" in page and "secret-job" in page


def test_the_pool_page_of_a_pool_that_never_lent_to_you_is_a_404(pool, tenant, client):
    client.force_login(tenant.users["viewer"])
    assert client.get(reverse("pool", kwargs={"name": "chat"})).status_code == 404
    assert "No pool lent" in client.get(reverse("pools")).content.decode()


def test_the_job_page_says_when_a_job_runs_on_capacity_a_pool_lent(pool, tenant, inventory, client):
    now = timezone.now()
    ends = f"{now + timedelta(hours=2):%H:%M}"
    pool.schedule, pool.time_zone, pool.schedule_floor = [f"{now - timedelta(hours=1):%H:%M}-{ends}"], "UTC", 0
    pool.save()
    lent = submit(tenant, inventory["a100"], name="night-run", priority="preemptible")
    admit(lent, inventory["cluster"], ["a-n1"])
    own = submit(tenant, inventory["h100"], name="own-nodes")
    admit(own, inventory["cluster"], ["r1-n1"])
    client.force_login(tenant.users["viewer"])
    page = client.get(reverse("job_detail", kwargs={"pk": lent.pk})).content.decode()
    assert "Runs on capacity lent by pool" in page and f"(8 devices), expected back at about {ends} UTC" in page
    assert "lent by pool" not in client.get(reverse("job_detail", kwargs={"pk": own.pk})).content.decode()


def test_two_pools_may_not_share_a_node(pool, inventory):
    from core.errors import DomainError

    staff = make_user("root", is_staff=True)
    with pytest.raises(DomainError) as refused:
        services.pool_save(actor=staff, pool=Pool(name="batch", cluster=inventory["cluster"],
                                                  flavor=inventory["a100"], node_pattern="a-n2"))
    assert refused.value.field == "node_pattern" and "a-n2 already lends for pool chat" in refused.value.message
    services.pool_save(actor=staff, pool=Pool(name="other", cluster=inventory["cluster"], flavor=inventory["h100"],
                                              devices=8))  # h100 nodes: nobody's



def test_who_sees_a_pool_borrowers_see_its_figures_never_another_organizations_jobs(pool, tenant, inventory,
                                                                                     client):
    """Issue 30: "a pool's figures are visible to staff and to the projects that borrowed from it, never another
    organization's jobs". Vision borrows; Globex's secret project borrows too; Speech (vision's organization) never
    did: its member gets a 404 like a missing pool, on the API and the page."""
    from tenancy.models import Membership
    from tests.conftest import client_for

    mine = submit(tenant, inventory["a100"], name="mine-job", priority="preemptible")
    admit(mine, inventory["cluster"], ["a-n1"])
    Quota.objects.create(project=tenant.other_project, flavor=inventory["a100"], guaranteed=0, borrow_limit=8)
    theirs = submit(tenant, inventory["a100"], project=tenant.other_project, user="outsider", name="globex-secret",
                    priority="preemptible")
    admit(theirs, inventory["cluster"], ["a-n2"])
    member = client_for(tenant.users["member"])
    detail = member.get(reverse("pool-detail", kwargs={"name": "chat"}))
    assert detail.status_code == 200
    body = detail.json()
    assert (body["capacity"], body["used"]) == (16, 16)  # the pool's figures, every project's
    assert [j["name"] for j in body["jobs"]] == ["mine-job"]
    assert "globex-secret" not in detail.content.decode() and "secret" not in {j["project"] for j in body["jobs"]}
    listed = member.get(reverse("pool-list")).json()
    assert "globex-secret" not in str(listed) and [r["name"] for r in listed] == ["chat"]

    speech_member = make_user("speaker")
    Membership.objects.create(project=inventory["speech"], user=speech_member, role="member")
    other = client_for(speech_member)
    assert other.get(reverse("pool-detail", kwargs={"name": "chat"})).status_code == 404
    assert other.get(reverse("pool-list")).json() == []
    client.force_login(speech_member)
    assert client.get(reverse("pool", kwargs={"name": "chat"})).status_code == 404


def _samples(pool, minutes_ago: list[float], **values) -> None:
    now = timezone.now()
    PoolSample.objects.bulk_create([
        PoolSample(pool=pool, at=now - timedelta(minutes=m), capacity=16, demand=values.get("demand", 4), headroom=1,
                   lent=values.get("lent", 11), used=values.get("used", 5)) for m in minutes_ago])


def test_the_detail_charts_the_last_hour_24h_or_7_days_with_the_give_backs_in_them(pool, staff_client):
    from pools.models import GiveBack

    _samples(pool, [3 * 24 * 60], demand=12)  # three days ago
    _samples(pool, [5 * 60], demand=8)  # five hours ago
    _samples(pool, [10], demand=2)
    now = timezone.now()
    GiveBack.objects.create(pool=pool, started_at=now - timedelta(days=2), freed_at=now - timedelta(days=2), devices=6)
    GiveBack.objects.create(pool=pool, started_at=now - timedelta(minutes=20), devices=3)  # under way
    detail = staff_client.get(reverse("pool-detail", kwargs={"name": "chat"}), {"span": "7d"}).json()
    assert [s["demand"] for s in detail["series"]] == [12, 8, 2]
    assert [(g["devices"], g["seconds"]) for g in detail["given_back"]] == [(3, None), (6, 0.0)]
    detail = staff_client.get(reverse("pool-detail", kwargs={"name": "chat"})).json()  # 24 h
    assert [s["demand"] for s in detail["series"]] == [8, 2] and [g["devices"] for g in detail["given_back"]] == [3]
    assert detail["lent_hours_24h"] == round(2 * 11 / 60, 2)  # the 24 h figures stay those of 24 h
    detail = staff_client.get(reverse("pool-detail", kwargs={"name": "chat"}), {"span": "1h"}).json()
    assert [s["demand"] for s in detail["series"]] == [2]
    response = staff_client.get(reverse("pool-detail", kwargs={"name": "chat"}), {"span": "30d"})
    assert response.status_code == 400 and "span" in response.json()["error"]["fields"]


def test_a_week_of_minutes_is_charted_as_720_means(pool, staff_client):
    _samples(pool, [m + 0.5 for m in range(7 * 24 * 60 - 1)], demand=4)
    _samples(pool, [0.1], demand=16)  # in the last 14 minutes (a 720th of a week), with 14 others
    series = staff_client.get(reverse("pool-detail", kwargs={"name": "chat"}), {"span": "7d"}).json()["series"]
    assert len(series) == 720 and all(s["demand"] == 4 for s in series[:-1])
    assert series[-1]["demand"] == round((16 + 14 * 4) / 15, 1)


def test_the_pool_page_charts_the_span_asked_for_and_refuses_another(pool, tenant, inventory, client):
    from pools.models import GiveBack

    mine = submit(tenant, inventory["a100"], priority="preemptible")
    admit(mine, inventory["cluster"], ["a-n1"])
    _samples(pool, [3 * 24 * 60, 10])
    GiveBack.objects.create(pool=pool, started_at=timezone.now() - timedelta(days=2), devices=6)
    client.force_login(tenant.users["viewer"])
    page = client.get(reverse("pool", kwargs={"name": "chat"}), {"span": "7d"}).content.decode()
    assert "Last 7 days" in page and 'id="pool-given-back"' in page and 'href="?span=24h"' in page
    page = client.get(reverse("pool", kwargs={"name": "chat"})).content.decode()
    assert "Last 24 hours" in page and 'id="pool-given-back"' not in page  # the give-back is two days old
    response = client.get(reverse("pool", kwargs={"name": "chat"}), {"span": "forever"})
    assert response.status_code == 400 and b"span" in response.content
