"""Submissions read flavors, priority classes, nodes and quotas from per-process copies a few seconds old
(mlplatform/snapshots.py): what a copy lacks is confirmed on fresh data before any rejection, and what it keeps
too long is bounded by its TTL."""

import time

import pytest

from core import snapshots
from jobs.models import Job
from quotas.models import Quota, ResourceFlavor
from tests.jobs.conftest import api_body


@pytest.fixture(autouse=True)
def _inventory(inventory):
    return inventory


def post(clients, **kwargs):
    return clients["member"].post("/api/v1/jobs/", api_body(**kwargs), format="json")


def test_a_quota_raised_a_moment_ago_admits_at_once(tenant, clients, inventory):
    assert post(clients).status_code == 201  # warms the copies
    Quota.objects.filter(project=tenant.project, flavor=inventory["a100"]).update(guaranteed=16)
    response = post(clients, flavor_name="nvidia-a100-40gb", replicas=2)
    assert response.status_code == 201, response.content


def test_a_flavor_created_a_moment_ago_is_known(tenant, clients, inventory):
    assert post(clients).status_code == 201
    b200 = ResourceFlavor.objects.create(name="nvidia-b200", vendor="nvidia", device_resource="nvidia.com/gpu")
    inventory["cluster"].nodes.create(name="b-n1", flavor=b200, devices=8, rack="r9")
    Quota.objects.create(project=tenant.project, flavor=b200, guaranteed=8)
    response = post(clients, flavor_name="nvidia-b200")
    assert response.status_code == 201, response.content
    assert response.json()["flavor"] == "nvidia-b200"


def test_a_lowered_quota_applies_once_the_copy_expires(tenant, clients, inventory, monkeypatch):
    assert post(clients, flavor_name="nvidia-a100-40gb").status_code == 201
    Quota.objects.filter(project=tenant.project, flavor=inventory["a100"]).delete()
    # Within the TTL the copy still holds the quota: the same as having submitted a moment earlier.
    assert post(clients, flavor_name="nvidia-a100-40gb").status_code == 201
    later = time.monotonic() + snapshots.TTL_SECONDS + 1
    monkeypatch.setattr(snapshots.time, "monotonic", lambda: later)
    response = post(clients, flavor_name="nvidia-a100-40gb")
    assert response.status_code == 400 and response.json()["error"]["code"] == "never_fits"
    assert "no quota for nvidia-a100-40gb" in response.json()["error"]["message"]


def test_a_deleted_default_priority_class_is_not_used_after_the_ttl(tenant, clients, monkeypatch):
    from quotas.models import PriorityClass

    assert post(clients).json()["priority_class"] == "normal"
    PriorityClass.objects.filter(name="normal").update(is_default=False)
    PriorityClass.objects.filter(name="low").update(is_default=True)
    later = time.monotonic() + snapshots.TTL_SECONDS + 1
    monkeypatch.setattr(snapshots.time, "monotonic", lambda: later)
    assert post(clients).json()["priority_class"] == "low"


def test_a_warm_submission_reads_only_the_project_and_writes_the_job(tenant, clients,
                                                                     django_assert_max_num_queries):
    assert post(clients).status_code == 201
    # token, membership with its project, then savepoint, job, groups, event, release: no catalog or inventory
    # reads, nothing read back
    with django_assert_max_num_queries(7):
        response = post(clients)
    assert response.status_code == 201
    body = response.json()
    job = Job.objects.get(pk=body["id"])
    assert body["groups"][0]["flavor"] == "nvidia-h100-80gb" and [e["reason"] for e in body["events"]] == [
        "submitted"]
    assert job.groups.get().devices == 8 and job.events.get().to_state == "queued"


@pytest.mark.parametrize("change, field", [
    ({"groups": [{"replicas": 1, "devices": 8, "flavor": 7}]}, "groups[0].flavor"),
    ({"priority_class": ["high"]}, "priority_class"),
    ({"project": {"slug": "vision"}}, "project"),
    ({"project": "secret"}, "project"),  # another tenant's project reads as missing
])
def test_names_of_the_wrong_type_or_tenant_are_a_400(tenant, clients, change, field):
    response = clients["member"].post("/api/v1/jobs/", {**api_body(), **change}, format="json")
    assert response.status_code == 400 and field in response.json()["error"]["fields"]
    assert Job.objects.count() == 0
