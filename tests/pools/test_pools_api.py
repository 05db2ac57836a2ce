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
