"""The shared cross-tenant tests on the pools API: a pool is seen by the projects it lent to (and staff) only."""

from __future__ import annotations

import pytest

from clusters.models import Cluster, Node
from pools.models import Pool
from quotas.models import Quota, ResourceFlavor
from tests.crosstenant import CrossTenantMixin
from tests.jobs.conftest import admit, submit


@pytest.mark.django_db
class TestPools(CrossTenantMixin):
    basename = "pool"
    lookup = "name"
    writable = False
    detail_writes = ()

    def make_object(self, tenant, project):
        """A pool that lent to `project`: one of its preemptible jobs runs on the pool's node."""
        a100 = ResourceFlavor.objects.create(name="nvidia-a100-40gb", vendor="nvidia", device_resource="nvidia.com/gpu")
        cluster = Cluster.objects.create(name="sim")
        Node.objects.create(cluster=cluster, name="serve-1", flavor=a100, devices=8)
        Quota.objects.create(project=project, flavor=a100, guaranteed=0, borrow_limit=8)
        pool = Pool.objects.create(name="chat", cluster=cluster, flavor=a100, node_pattern="serve-*")
        owner = "owner" if project == tenant.project else "outsider"
        admit(submit(tenant, a100, project=project, user=owner, priority="preemptible"), cluster, ["serve-1"])
        return pool
