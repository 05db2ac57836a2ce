"""The shared cross-tenant tests on the services API: another project's service is a 404, a viewer cannot write."""

from __future__ import annotations

import pytest

from quotas.models import Quota
from tests.crosstenant import CrossTenantMixin
from tests.serving.conftest import make_service, service_body


@pytest.mark.django_db
class TestServices(CrossTenantMixin):
    basename = "service"
    detail_actions = ()

    @pytest.fixture(autouse=True)
    def _pool(self, pool):
        return pool

    def make_object(self, tenant, project):
        if project == tenant.other_project:
            from quotas.models import ResourceFlavor

            Quota.objects.get_or_create(project=project, flavor=ResourceFlavor.objects.get(name="nvidia-a100-40gb"))
            return make_service(tenant, project, user="outsider")
        return make_service(tenant)

    def create_payload(self, tenant, project):
        return service_body(project=project.slug, name="other")

    def update_payload(self, tenant, obj):
        return {"replicas": {"max": 1}}

    def test_outsider_cannot_push_the_metric(self, tenant, clients):
        from django.urls import reverse

        service = self.victim(tenant)
        url = reverse("service-metric", kwargs={"pk": service.pk})
        assert clients["outsider"].put(url, {"value": 1}, format="json").status_code == 404
        assert clients["viewer"].put(url, {"value": 1}, format="json").status_code == 403
        service.refresh_from_db()
        assert service.metric_value is None
