"""Every jobs, queue, quota and inventory endpoint gets the shared cross-tenant tests."""

import pytest
from django.urls import reverse

from clusters.models import Node
from quotas.models import Quota
from tests.crosstenant import CrossTenantMixin
from tests.jobs.conftest import api_body, submit


@pytest.fixture(autouse=True)
def _inventory(inventory):
    return inventory


class TestJobs(CrossTenantMixin):
    basename = "job"
    detail_writes = ()  # jobs are never edited or deleted; their writes are actions
    detail_actions = ("cancel", "resubmit", "checkpoint", "scale")

    def make_object(self, tenant, project):
        from quotas.models import ResourceFlavor

        flavor = ResourceFlavor.objects.get(name="nvidia-a100-40gb")
        if project == tenant.other_project:
            Quota.objects.get_or_create(project=project, flavor=flavor, defaults={"guaranteed": 8})
            return submit(tenant, flavor, project=project, user="outsider", devices=1)
        return submit(tenant, flavor, devices=1)

    def create_payload(self, tenant, project):
        return api_body("nvidia-a100-40gb", project=project.slug, devices=1)

    def test_failed_attacks_leave_the_job_queued(self, tenant, clients):
        job = self.victim(tenant)
        for name in ("outsider", "viewer"):
            clients[name].post(self.action_url(job, "cancel"))
        job.refresh_from_db()
        assert job.state == "queued" and job.project.jobs.count() == 1


class TestQueue(CrossTenantMixin):
    basename = "queue"
    writable = False

    def make_object(self, tenant, project):
        return TestJobs().make_object(tenant, project)

    def detail_url(self, obj):
        return reverse("job-detail", kwargs={"pk": obj.pk})


class TestQuotas(CrossTenantMixin):
    basename = "quota"

    def make_object(self, tenant, project):
        from quotas.models import ResourceFlavor

        flavor = ResourceFlavor.objects.get(name="nvidia-a100-40gb")
        return Quota.objects.get_or_create(project=project, flavor=flavor, defaults={"guaranteed": 4})[0]

    def update_payload(self, tenant, obj):
        return {"guaranteed": 1000}

    def test_only_staff_changes_quotas_and_it_is_audited(self, tenant, clients, staff_client):
        quota = self.victim(tenant)
        url = self.detail_url(quota)
        assert clients["owner"].patch(url, {"guaranteed": 64}, format="json").status_code == 403
        response = staff_client.patch(url, {"guaranteed": 64}, format="json")
        assert response.status_code == 200 and response.json()["guaranteed"] == 64
        from tenancy.models import AuditEntry

        entry = AuditEntry.objects.get(action="quota.change")
        assert entry.changes == {"guaranteed": [8, 64]} and entry.actor_name == "platform-admin"


class GlobalCatalogTests:
    """Catalogs and inventory are not tenant data: everyone signed in reads them, only staff writes."""

    basename: str
    lookup = "name"

    def make_object(self):
        raise NotImplementedError

    def test_everyone_reads_only_staff_writes(self, tenant, clients, staff_client):
        obj = self.make_object()
        url = reverse(f"{self.basename}-detail", kwargs={self.lookup: getattr(obj, self.lookup)})
        for name in ("outsider", "viewer", "owner"):
            assert clients[name].get(url).status_code == 200
            assert clients[name].patch(url, {"description": "x"}, format="json").status_code == 403
            assert clients[name].delete(url).status_code == 403
        assert staff_client.patch(url, {"description": "changed"}, format="json").status_code == 200

    def test_anonymous_sees_nothing(self, tenant):
        from rest_framework.test import APIClient

        assert APIClient().get(reverse(f"{self.basename}-list")).status_code in (401, 403)


class TestFlavors(GlobalCatalogTests):
    basename = "flavor"

    def make_object(self):
        from quotas.models import ResourceFlavor

        return ResourceFlavor.objects.get(name="nvidia-h100-80gb")


class TestPriorityClasses(GlobalCatalogTests):
    basename = "priorityclass"

    def make_object(self):
        from quotas.models import PriorityClass

        return PriorityClass.objects.get(name="normal")


class TestClusters(GlobalCatalogTests):
    basename = "cluster"

    def make_object(self):
        from clusters.models import Cluster

        return Cluster.objects.get(name="sim")

    def test_a_name_of_digits_beyond_any_id_is_still_a_name(self, clients):
        """An id beyond a 64-bit key is a 404 (tests/crosstenant.py), but only where the URL names an object by an
        integer field: a cluster named by digits is found."""
        from clusters.models import Cluster

        digits = Cluster.objects.create(name="9" * 25)
        assert clients["viewer"].get(reverse("cluster-detail", kwargs={"name": digits.name})).status_code == 200


class TestNodes:
    def test_occupancy_hides_other_tenants_projects(self, tenant, clients, inventory, cycle):
        from quotas.models import ResourceFlavor

        a100 = ResourceFlavor.objects.get(name="nvidia-a100-40gb")
        Quota.objects.create(project=tenant.other_project, flavor=a100, guaranteed=8)
        submit(tenant, a100, project=tenant.other_project, user="outsider", devices=8)
        cycle()
        rows = clients["member"].get("/api/v1/nodes/?flavor=nvidia-a100-40gb").json()["results"]
        used = [entry for row in rows for entry in row["used_by"]]
        assert used == [{"project": "other", "job": None, "devices": 8}]
        rows = clients["outsider"].get("/api/v1/nodes/?flavor=nvidia-a100-40gb").json()["results"]
        assert [e["project"] for row in rows for e in row["used_by"]] == ["secret"]

    def test_only_staff_marks_a_node_not_ready(self, tenant, clients, staff_client, inventory):
        node = Node.objects.get(name="r1-n1")
        assert clients["owner"].patch(f"/api/v1/nodes/{node.pk}/", {"ready": False}, format="json").status_code == 403
        assert staff_client.patch(f"/api/v1/nodes/{node.pk}/", {"ready": False}, format="json").status_code == 200
        node.refresh_from_db()
        assert node.ready is False
