"""Interference (issue 30): serving reports its p99 latency and its SLO; over it while training runs on its nodes,
the pool stops lending there for its cool-down and the training there is moved off, with the reason. Within the SLO
nothing moves. Bad input is a 400 naming the field; another pool's token is a 404."""

from __future__ import annotations

from datetime import timedelta

from django.urls import reverse
from django.utils import timezone
from rest_framework.test import APIClient

from jobs.models import Attempt, Job
from pools import interference, services
from pools.models import Interference, Pool
from tests.jobs.conftest import submit


def running_on(job) -> str:
    job.refresh_from_db()
    assert job.state in ("admitted", "dispatching", "running"), job.state
    return Attempt.objects.get(pk=job.current_attempt_id).placement[0]["node"]


def two_borrowers(tenant, inventory, cycle):
    first = submit(tenant, inventory["a100"], name="first", priority="preemptible")
    second = submit(tenant, inventory["a100"], name="second", priority="preemptible")
    cycle()
    return first, second


def test_a_missed_slo_moves_training_off_the_nodes_until_the_cool_down_ends(tenant, inventory, pool, cycle):
    first, second = two_borrowers(tenant, inventory, cycle)
    node = running_on(first)
    other = running_on(second)
    assert {node, other} == {"a-n1", "a-n2"}

    miss = interference.report_latency(pool, [node], p99_ms=180.0, slo_ms=100.0)
    assert miss is not None and miss.until == miss.at + timedelta(seconds=900)
    cycle()
    first.refresh_from_db()
    assert first.state in ("preempted", "queued")
    assert first.events.filter(to_state="preempted", reason__contains=(
        f"moved off {node}: serving p99 180 ms over its SLO 100 ms")).exists()
    assert running_on(second) == other  # the pool still lends its other node

    cycle()  # the moved job waits: nothing is lent on that node during the cool-down
    first.refresh_from_db()
    assert first.state == "queued"

    Interference.objects.update(until=timezone.now() - timedelta(seconds=1))  # the cool-down is over
    cycle()
    assert running_on(first) == node


def test_a_report_within_the_slo_moves_nothing(tenant, inventory, pool, cycle):
    first, second = two_borrowers(tenant, inventory, cycle)
    assert interference.report_latency(pool, None, p99_ms=95.0, slo_ms=100.0) is None
    cycle()
    assert running_on(first) and running_on(second)
    assert not Interference.objects.exists()


def test_a_miss_without_nodes_closes_every_node_of_the_pool(tenant, inventory, pool, cycle):
    first, second = two_borrowers(tenant, inventory, cycle)
    interference.report_latency(pool, None, p99_ms=250, slo_ms=200)
    cycle()
    assert set(Job.objects.filter(pk__in=[first.pk, second.pk]).values_list("state", flat=True)) <= {
        "preempted", "queued"}


def client(secret: str) -> APIClient:
    api = APIClient()
    api.credentials(HTTP_AUTHORIZATION=f"Bearer {secret}")
    return api


def url(name: str = "chat") -> str:
    return reverse("pool-demand", kwargs={"name": name})


def test_the_demand_api_takes_the_latency_and_its_slo(tenant, inventory, pool, cycle):
    first, _ = two_borrowers(tenant, inventory, cycle)
    node = running_on(first)
    _, secret = services.token_create(actor=None, pool=pool, name="kserve")
    response = client(secret).put(url(), {"devices": 0, "p99_latency_ms": 340.5, "latency_slo_ms": 300,
                                          "nodes": [node]}, format="json")
    assert response.status_code == 200, response.content
    assert response.json()["unlent_until"] is not None
    assert Interference.objects.get().nodes == [node]
    cycle()
    assert first.events.filter(reason__contains=f"moved off {node}: serving p99 340.5 ms over its SLO 300 ms")
    met = client(secret).put(url(), {"p99_latency_ms": 20, "latency_slo_ms": 300}, format="json")
    assert met.status_code == 200 and met.json()["unlent_until"] is None


def test_bad_latency_reports_are_a_400_naming_the_field(pool):
    _, secret = services.token_create(actor=None, pool=pool, name="kserve")
    cases = [
        ({"p99_latency_ms": 120}, "latency_slo_ms"),
        ({"latency_slo_ms": 120}, "p99_latency_ms"),
        ({"p99_latency_ms": -1, "latency_slo_ms": 100}, "p99_latency_ms"),
        ({"p99_latency_ms": 10, "latency_slo_ms": 0}, "latency_slo_ms"),
        ({"p99_latency_ms": "slow", "latency_slo_ms": 100}, "p99_latency_ms"),
        ({"p99_latency_ms": 200, "latency_slo_ms": 100, "nodes": ["r1-n1"]}, "nodes"),  # not the pool's node
        ({"p99_latency_ms": 200, "latency_slo_ms": 100, "nodes": []}, "nodes"),
        ({"nodes": ["a-n1"]}, "p99_latency_ms"),
        ({"devices": 3, "p99_latency_ms": 200, "latency_slo_ms": 100, "nodes": ["nope"]}, "nodes"),
    ]
    for body, field in cases:
        response = client(secret).put(url(), body, format="json")
        assert response.status_code == 400, body
        assert field in response.json()["error"]["fields"], (body, response.json())
    assert not Interference.objects.exists()
    assert Pool.objects.get(pk=pool.pk).demand is None  # the refused report left the demand as it was


def test_another_pools_token_cannot_report_for_this_pool(pool, inventory):
    other = Pool.objects.create(name="batch", cluster=inventory["cluster"], flavor=inventory["h100"], devices=8)
    _, theirs = services.token_create(actor=None, pool=other, name="x")
    response = client(theirs).put(url(), {"p99_latency_ms": 500, "latency_slo_ms": 100}, format="json")
    assert response.status_code == 404
    assert client("tdp_unknown").put(url(), {"p99_latency_ms": 500, "latency_slo_ms": 100},
                                     format="json").status_code == 401
    assert not Interference.objects.exists()


def test_the_pool_page_and_api_list_the_interference(pool, tenant, inventory):
    from django.test import Client

    from tests.conftest import make_user

    interference.report_latency(pool, ["a-n2"], p99_ms=180.0, slo_ms=100.0)
    staff = make_user("ops", is_staff=True)
    web = Client()
    web.force_login(staff)
    page = web.get(reverse("pool", kwargs={"name": "chat"}))
    assert page.status_code == 200
    assert b"a-n2" in page.content and b"180 / 100 ms" in page.content
    api = APIClient()
    api.force_authenticate(staff)
    body = api.get(f"/api/v1/pools/{pool.name}/").json()
    assert [(m["nodes"], m["p99_ms"], m["slo_ms"]) for m in body["interferences"]] == [(["a-n2"], 180.0, 100.0)]


def test_nodes_may_be_named_as_the_scheduler_names_them(tenant, inventory, pool, cycle):
    """serving.interference passes `pools.source.pool_nodes` names (cluster/node)."""
    first, _ = two_borrowers(tenant, inventory, cycle)
    node = running_on(first)
    miss = interference.report_latency(pool, [f"sim/{node}"], p99_ms=180.0, slo_ms=100.0)
    assert miss is not None and miss.nodes == [node]
    cycle()
    first.refresh_from_db()
    assert first.state in ("preempted", "queued")
