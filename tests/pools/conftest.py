"""A pool over the a100 nodes of the jobs tests' simulated cluster (a-n1, a-n2: 16 devices)."""

from __future__ import annotations

import pytest

from pools.models import Pool
from quotas.models import Quota
from tests.jobs.conftest import cycle, inventory  # noqa: F401  (fixtures shared with the jobs tests)


@pytest.fixture
def pool(tenant, inventory):  # noqa: F811
    Quota.objects.filter(project=tenant.project, flavor=inventory["a100"]).update(guaranteed=0, borrow_limit=16)
    return Pool.objects.create(name="chat", cluster=inventory["cluster"], flavor=inventory["a100"],
                               node_pattern="a-n*", headroom_percent=0, use_foreign_pods=True)
