"""The services API: create (JSON or a `launcher: service` YAML), change the bounds and target, delete, push the
metric; every refusal is a 400 naming its field."""

from __future__ import annotations

import pytest
import yaml
from django.urls import reverse

from serving.models import ScaleEvent, Service
from tenancy.models import AuditEntry
from tests.serving.conftest import service_body

URL = "/api/v1/services/"


@pytest.fixture(autouse=True)
def _pool(pool):
    return pool


def test_a_member_creates_a_service_at_its_minimum(clients):
    response = clients["member"].post(URL, service_body(), format="json")
    assert response.status_code == 201, response.content
    body = response.json()
    assert body["replicas"] == {"min": 1, "max": 4, "desired": 1, "ready": 0}
    assert (body["pool"], body["devices"], body["state"]) == ("chat", 4, "pending")
    service = Service.objects.get()
    assert ScaleEvent.objects.get(service=service).reason == "created at its minimum of 1"
    assert AuditEntry.objects.filter(action="service.create").exists()


def test_a_yaml_service_file_is_accepted_as_tidal_submit_sends_it(clients):
    response = clients["member"].generic("POST", URL, yaml.safe_dump(service_body()),
                                         content_type="application/yaml")
    assert response.status_code == 201, response.content


@pytest.mark.parametrize(("change", "field"), [
    ({"devices_per_replica": 0}, "devices_per_replica"),
    ({"devices_per_replica": 9}, "devices_per_replica"),            # larger than any node of the pool (8)
    ({"replicas": {"min": 3, "max": 2}}, "replicas.min"),
    ({"replicas": {"min": 1, "max": 5}}, "replicas.max"),           # 5 x 4 devices > the pool's 16
    ({"replicas": {"min": 1}}, "replicas.max"),
    ({"pool": "nope"}, "pool"),
    ({"target_per_replica": 0}, "target_per_replica"),
    ({"target_per_replica": "NaN"}, "target_per_replica"),
    ({"metric": "latency"}, "metric"),
    ({"source": "prometheus", "query": "sum(rate(x[1m]))"}, "source"),  # no Prometheus configured
    ({"source": "prometheus"}, "query"),
    ({"name": "Not A Slug"}, "name"),
    ({"launcher": "pytorch"}, "launcher"),
    ({"project": "secret"}, "project"),                              # another tenant's: as if missing
    ({"replicas_max": 3}, "replicas_max"),                           # unknown field
])
def test_bad_input_is_a_400_naming_the_field(clients, change, field):
    response = clients["member"].post(URL, service_body(**change), format="json")
    assert response.status_code == 400, response.content
    assert field in response.json()["error"]["fields"], response.json()


def test_a_pool_of_a_flavor_the_project_has_no_quota_of_is_refused(clients, tenant, inventory):
    from quotas.models import Quota

    Quota.objects.filter(project=tenant.project, flavor=inventory["a100"]).delete()
    response = clients["member"].post(URL, service_body(), format="json")
    assert response.status_code == 400
    assert "no quota of nvidia-a100-40gb" in response.json()["error"]["fields"]["pool"][0]


def test_a_name_is_unique_per_project(clients):
    assert clients["member"].post(URL, service_body(), format="json").status_code == 201
    response = clients["member"].post(URL, service_body(), format="json")
    assert response.status_code == 400 and "name" in response.json()["error"]["fields"]


def test_change_bounds_and_target_but_not_the_shape(clients, service):
    url = reverse("service-detail", kwargs={"pk": service.pk})
    response = clients["member"].patch(url, {"replicas": {"max": 2}, "target_per_replica": 5}, format="json")
    assert response.status_code == 200, response.content
    assert response.json()["replicas"]["max"] == 2 and response.json()["target_per_replica"] == 5.0
    assert clients["member"].patch(url, {"replicas": {"min": 3}}, format="json").json()["error"]["fields"] == {
        "replicas.min": ["The minimum (3) is above the maximum (2)."]}
    assert "image" in clients["member"].patch(url, {"image": "x"}, format="json").json()["error"]["fields"]


def test_delete(clients, service):
    response = clients["member"].delete(reverse("service-detail", kwargs={"pk": service.pk}))
    assert response.status_code == 204 and not Service.objects.exists()


def test_push_the_metric(clients, service):
    url = reverse("service-metric", kwargs={"pk": service.pk})
    response = clients["member"].put(url, {"value": 35.5, "p99_latency_ms": 120}, format="json")
    assert response.status_code == 200, response.content
    assert (response.json()["metric_value"], response.json()["p99_latency_ms"]) == (35.5, 120.0)
    for bad in ({"value": -1}, {"value": "lots"}, {}, {"value": 1, "p99_latency_ms": -3}):
        response = clients["member"].put(url, bad, format="json")
        assert response.status_code == 400, bad
        assert set(response.json()["error"]["fields"]) <= {"value", "p99_latency_ms"}
    assert clients["viewer"].put(url, {"value": 1}, format="json").status_code == 403
    assert clients["outsider"].put(url, {"value": 1}, format="json").status_code == 404


def test_the_list_filters_by_pool_and_names_an_unknown_project(clients, service):
    assert [s["name"] for s in clients["viewer"].get(URL, {"pool": "chat"}).json()["results"]] == ["chat"]
    assert clients["viewer"].get(URL, {"pool": "other"}).json()["results"] == []
    response = clients["viewer"].get(URL, {"project": "secret"})
    assert response.status_code == 400 and "project" in response.json()["error"]["fields"]


# --------------------------------------------------------------------------- the metric with the pool's token

def pool_token_client(secret: str):
    from rest_framework.test import APIClient

    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {secret}")
    return client


def pool_metric_url(service, pool_name: str = "chat") -> str:
    from django.urls import reverse

    return reverse("pool-service-metric", kwargs={"name": pool_name, "pk": service.pk})


def test_a_pool_token_pushes_the_metric_of_its_pools_services(service, pool):
    from pools import services as pool_services

    _, secret = pool_services.token_create(actor=None, pool=pool, name="gateway")
    response = pool_token_client(secret).put(pool_metric_url(service), {"value": 37.5, "p99_latency_ms": 120},
                                             format="json")
    assert response.status_code == 200, response.content
    assert response.json()["metric_value"] == 37.5 and "project" not in response.json()
    service.refresh_from_db()
    assert (service.metric_value, service.p99_latency_ms) == (37.5, 120.0) and service.metric_at is not None


def test_the_pool_metric_refuses_other_pools_services_tokens_and_bad_input(tenant, inventory, service, pool):
    from pools import services as pool_services
    from pools.models import Pool
    from tenancy.services import token_create as personal_token

    _, secret = pool_services.token_create(actor=None, pool=pool, name="gateway")
    other = Pool.objects.create(name="batch", cluster=inventory["cluster"], flavor=inventory["h100"], devices=8)
    _, theirs = pool_services.token_create(actor=None, pool=other, name="x")
    body = {"value": 1}
    # Another pool's token, by its own pool's name or by this one's: 404, nothing written.
    assert pool_token_client(theirs).put(pool_metric_url(service), body, format="json").status_code == 404
    assert pool_token_client(theirs).put(pool_metric_url(service, "batch"), body, format="json").status_code == 404
    assert pool_token_client(secret).put(pool_metric_url(service, "batch"), body, format="json").status_code == 404
    missing = type("Missing", (), {"pk": service.pk + 1000})()
    assert pool_token_client(secret).put(pool_metric_url(missing), body, format="json").status_code == 404
    service.refresh_from_db()
    assert service.metric_at is None
    _, personal = personal_token(user=tenant.users["owner"], name="me")
    refused = pool_token_client(personal).put(pool_metric_url(service), body, format="json")
    assert refused.status_code == 403 and "pool token" in refused.json()["error"]["message"]
    from rest_framework.test import APIClient

    assert APIClient().put(pool_metric_url(service), body, format="json").status_code in (401, 403)
    for bad in ({}, {"value": -1}, {"value": "fast"}, {"value": 1, "p99_latency_ms": -5}):
        response = pool_token_client(secret).put(pool_metric_url(service), bad, format="json")
        assert response.status_code == 400, bad
        assert set(response.json()["error"]["fields"]) & {"value", "p99_latency_ms"}
    service.refresh_from_db()
    assert service.metric_at is None
