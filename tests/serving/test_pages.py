"""The Services pages: the list and a service's page (replicas and load charts, scale events with reasons) for its
project's members only, and the pool page's panel of the pool's services."""

from __future__ import annotations

import time

from django.urls import reverse
from django.utils import timezone

from pools.models import PoolSample
from serving import scaler, services
from tests.conftest import make_user
from tests.serving.conftest import make_service


def test_the_service_page_draws_replicas_and_load_and_lists_scale_events(tenant, pool, service, client):
    services.metric_set(service=service, value=20.0)
    scaler.tick(time.time())
    client.force_login(tenant.users["viewer"])
    page = client.get(reverse("service", kwargs={"pk": service.pk})).content.decode()
    assert page.count("<polyline") == 4  # desired, ready; metric, target x desired
    assert "20 / 10 per replica wants 2: up at once" in page and "created at its minimum of 1" in page
    listed = client.get(reverse("services")).content.decode()
    assert reverse("service", kwargs={"pk": service.pk}) in listed and "<td>2 / 2</td>" in listed  # ready / desired


def test_another_projects_service_is_a_404_and_not_listed(tenant, pool, service, client):
    client.force_login(tenant.users["outsider"])
    assert client.get(reverse("service", kwargs={"pk": service.pk})).status_code == 404
    assert "No services in your projects." in client.get(reverse("services")).content.decode()


def test_the_pool_page_lists_your_services_and_counts_the_others(tenant, inventory, pool, service, client):
    from quotas.models import Quota

    Quota.objects.create(project=tenant.other_project, flavor=inventory["a100"])
    make_service(tenant, tenant.other_project, user="outsider", name="secret-svc")
    PoolSample.objects.create(pool=pool, at=timezone.now(), capacity=16, demand=8, headroom=0, lent=8, used=0)
    staff = make_user("root", is_staff=True)
    client.force_login(staff)
    page = client.get(reverse("pool", kwargs={"name": "chat"})).content.decode()
    assert "Services in this pool" in page and "secret-svc" in page and "hold 8 devices" in page
    client.force_login(tenant.users["outsider"])
    assert client.get(reverse("pool", kwargs={"name": "chat"})).status_code == 404  # never lent to them
