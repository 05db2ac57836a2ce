"""Inventory for page tests: a flavor, priority classes, a cluster of two 8-device nodes and a quota for the
tenant's project, plus helpers to log in and to submit jobs through the service (as the API does)."""

from __future__ import annotations

import pytest
from django.test import Client

from clusters.models import Cluster, Node
from jobs.services import job_submit
from quotas.models import PriorityClass, Quota, ResourceFlavor

PASSWORD = "pw-{}-123"  # tests/conftest.py's make_user


@pytest.fixture
def infra(tenant):
    flavor = ResourceFlavor.objects.create(name="nvidia-h100-80gb", vendor="nvidia", device_resource="nvidia.com/gpu")
    for name, value, default in (("normal", 500, True), ("high", 1000, False)):  # a migration seeds them too
        PriorityClass.objects.get_or_create(name=name, defaults={"value": value, "is_default": default})
    cluster = Cluster.objects.create(name="sim-test")
    for i in (1, 2):
        Node.objects.create(cluster=cluster, name=f"node-{i}", flavor=flavor, devices=8, rack="rack-1", position=i)
    Node.objects.create(cluster=cluster, name="node-3", flavor=flavor, devices=8, rack="rack-2", position=3,
                        cordoned=True)
    Quota.objects.create(project=tenant.project, flavor=flavor, guaranteed=8, borrow_limit=8)
    Quota.objects.create(project=tenant.other_project, flavor=flavor, guaranteed=8, borrow_limit=0)
    return {"flavor": flavor, "cluster": cluster}


def login(user) -> Client:
    client = Client()
    assert client.login(username=user.username, password=PASSWORD.format(user.username))
    return client


@pytest.fixture
def ui(tenant):
    """role name -> logged-in test client."""
    return {name: login(user) for name, user in tenant.users.items()}


def spec(flavor, **overrides) -> dict:
    base = {"name": "train-1", "image": "ghcr.io/acme/trainer:1", "command": ["python", "train.py"],
            "groups": [{"role": "worker", "replicas": 1, "devices": 4, "flavor": flavor}]}
    return {**base, **overrides}


@pytest.fixture
def submit(infra):
    def _submit(user, project, **overrides):
        return job_submit(actor=user, project=project, spec=spec(infra["flavor"], **overrides)).job

    return _submit
