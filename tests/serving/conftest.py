"""A service's pool: the pools tests' pool over the a100 nodes a-n1, a-n2 (16 devices, no headroom); vision holds a
quota of a100, so its members may run services there."""

from __future__ import annotations

import pytest

from serving import services
from tests.jobs.conftest import cycle, inventory  # noqa: F401  (fixtures shared with the jobs tests)
from tests.pools.conftest import pool  # noqa: F401


def service_body(project="vision", **extra) -> dict:
    body = {"project": project, "launcher": "service", "name": "chat", "pool": "chat",
            "image": "ghcr.io/acme/vllm:1", "command": ["python", "-m", "serve"], "port": 8000,
            "devices_per_replica": 4, "replicas": {"min": 1, "max": 4}, "metric": "requests_per_second",
            "target_per_replica": 10}
    body.update(extra)
    return body


def make_service(tenant, project=None, *, user="member", name="chat", pool_name="chat", **values):
    fields = {"name": name, "pool": pool_name, "image": "ghcr.io/acme/vllm:1", "devices_per_replica": 4,
              "min_replicas": 1, "max_replicas": 4, "target_per_replica": 10.0, **values}
    return services.service_create(actor=tenant.users[user], project=project or tenant.project, values=fields)


@pytest.fixture
def service(tenant, pool):  # noqa: F811
    return make_service(tenant)
