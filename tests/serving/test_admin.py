"""Staff see services in the admin console, read only (members write them through the API and the CLI)."""

from __future__ import annotations

from django.urls import reverse

from tests.conftest import make_user


def test_staff_see_a_service_and_its_scale_events_read_only(service, client):
    client.force_login(make_user("root", is_staff=True, is_superuser=True))
    listed = client.get(reverse("admin:serving_service_changelist")).content.decode()
    assert "chat" in listed
    page = client.get(reverse("admin:serving_service_change", args=[service.pk]))
    assert page.status_code == 200 and "created at its minimum of 1" in page.content.decode()
    assert b'name="_save"' not in page.content
    assert client.get(reverse("admin:serving_service_add")).status_code == 403
