"""Replays are priced: every replayed attempt at the prices in force when the run is priced (a trace's times are
relative), per project and in total, for the baseline and each candidate side by side with the difference, in the
API result, the report and the what-if page."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from decimal import Decimal

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from costs import services
from costs.models import ClassDiscount, DevicePrice
from quotas.models import PriorityClass
from replays.models import ReplayRun
from tests.conftest import make_user
from tests.replays.conftest import HEADER, make_job

URL = "/api/v1/replays/"
SINCE = datetime(2025, 1, 1, tzinfo=UTC)


def price(flavor, per_hour: str, since: datetime = SINCE, cluster=None) -> None:
    services.price_save(actor=None, price=DevicePrice(flavor=flavor, cluster=cluster, per_device_hour=Decimal(per_hour),
                                                      effective_from=since), backdate=since < timezone.now())


def factor(name: str, value: str) -> None:
    services.price_save(actor=None, price=ClassDiscount(priority_class=PriorityClass.objects.get(name=name),
                                                        factor=Decimal(value), effective_from=SINCE), backdate=True)


def replay(client, capture, trace: str, **data) -> dict:
    with capture(execute=True):
        response = client.post(URL, {"trace": SimpleUploadedFile("t.csv", trace.encode(), content_type="text/csv"),
                                     "cluster": "current", "quotas": "current", **data}, format="multipart")
    assert response.status_code == 201, response.content
    run = client.get(f"{URL}{response.json()['id']}/").json()
    assert run["status"] == "succeeded", run["message"]
    return run


def test_a_small_replay_costs_what_its_attempts_cost_at_todays_prices(
        inventory, staff_client, django_capture_on_commit_callbacks):
    """All four jobs start at once (32 h100 and 4 a100 free). h100 costs 3.00 a device-hour on the cluster `sim`
    now (2.00 elsewhere, and 10.00 from tomorrow: not today's price); a100 1.00; preemptible pays 0.3, low 0.5."""
    h100, a100 = inventory["h100"], inventory["a100"]
    price(h100, "2.00")
    price(h100, "3.00", timezone.now() - timedelta(days=30), cluster=inventory["cluster"])
    price(h100, "10.00", timezone.now() + timedelta(days=1), cluster=inventory["cluster"])
    price(a100, "1.00")
    factor("preemptible", "0.3")
    factor("low", "0.5")
    trace = HEADER + "".join(f"{row}\n" for row in (
        f"j1,0,3600,8,1,{h100.name},vision,normal,u,",  # 8 x 1 h x 3.00 = 24.00
        f"j2,0,1800,8,1,{h100.name},speech,preemptible,u,",  # 8 x 0.5 h x 3.00 x 0.3 = 3.60
        f"j3,0,900,8,2,{h100.name},vision,high,u,",  # 16 x 0.25 h x 3.00 = 12.00
        f"j4,0,7200,4,1,{a100.name},vision,low,u,"))  # 4 x 2 h x 1.00 x 0.5 = 4.00
    run = replay(staff_client, django_capture_on_commit_callbacks, trace, policy="production",
                 compare=["strict-fifo"])
    cost = run["summary"][0]["cost"]
    assert cost["currency"] == "USD" and cost["unpriced_device_hours"] == 0
    assert cost["projects"] == {"speech": {"device_hours": pytest.approx(4.0), "cost": pytest.approx(3.60)},
                                "vision": {"device_hours": pytest.approx(20.0), "cost": pytest.approx(40.00)}}
    assert cost["total"] == {"device_hours": pytest.approx(24.0), "cost": pytest.approx(43.60)}
    # The other policy runs the same jobs (nothing waits): the same cost, side by side, a difference of 0.
    difference = run["comparison"][0]["cost"]
    assert difference["total"]["cost"] == {"a": pytest.approx(43.60), "b": pytest.approx(43.60),
                                           "delta": pytest.approx(0.0)}
    assert difference["projects"]["vision"]["cost"]["a"] == pytest.approx(40.00)
    report = staff_client.get(f"{URL}{run['id']}/report/", HTTP_ACCEPT="text/html")
    html = b"".join(report.streaming_content).decode()
    assert "production: 43.60 USD for 24.0 device-hours" in html and "vision" in html


def test_a_flavor_without_a_price_is_counted_unpriced_not_free(
        inventory, staff_client, django_capture_on_commit_callbacks):
    price(inventory["h100"], "2.00")
    trace = HEADER + f"j1,0,3600,8,1,{inventory['h100'].name},vision,normal,u,\n" \
                     f"j2,0,3600,4,1,{inventory['a100'].name},vision,normal,u,\n"
    cost = replay(staff_client, django_capture_on_commit_callbacks, trace)["summary"][0]["cost"]
    assert cost["total"]["cost"] == pytest.approx(16.0)
    assert cost["unpriced_device_hours"] == pytest.approx(4.0) and cost["unpriced_flavors"] == [inventory["a100"].name]


@pytest.fixture
def admin_client(db) -> Client:
    client = Client()
    client.force_login(make_user("root", is_staff=True, is_superuser=True))
    return client


def test_a_what_if_shows_what_a_quota_change_would_cost(
        history, tenant, inventory, admin_client, django_capture_on_commit_callbacks):
    """Vision also ran a 24-device job (its guarantee of 16 plus its borrow limit of 8). With a guarantee of 8 it
    could never start: the proposed quota costs vision at least those 24 device-hours less, at 2.00 each."""
    h100 = inventory["h100"]
    price(h100, "2.00")
    make_job(tenant.project, h100, submitted=timezone.now() - timedelta(days=1), ran=3600, devices=8, replicas=3,
             cluster=inventory["cluster"])
    with django_capture_on_commit_callbacks(execute=True):
        response = admin_client.post(reverse("admin:replays_whatif"), {
            "days": 7, "kind": "quota", "project": "vision", "flavor": h100.name, "quota_field": "guaranteed",
            "quota_value": 8})
    assert response.status_code == 302, response.content.decode()[:2000]
    run = ReplayRun.objects.get()
    assert run.status == "succeeded", run.message
    assert run.summary[1]["projects"]["vision"]["never_started"] == 1
    vision = run.comparison[0]["cost"]["projects"]["vision"]
    assert vision["device_hours"]["delta"] <= -24
    assert vision["cost"]["delta"] == pytest.approx(2.00 * vision["device_hours"]["delta"])
    total = run.comparison[0]["cost"]["total"]
    assert total["cost"]["b"] < total["cost"]["a"]
    assert total["cost"]["delta"] == pytest.approx(total["cost"]["b"] - total["cost"]["a"])

    page = admin_client.get(reverse("admin:replays_whatif_result", args=[run.pk])).content.decode()
    assert 'id="costs"' in page and 'id="cost-vision"' in page and 'id="cost-ALL"' in page
    assert f"{vision['cost']['a']:.2f}" in page and f"{vision['cost']['delta']:.2f}" in page
    # Vision's job never started on the proposed side: its lower cost is work not run, not a (green) saving.
    vision_row = page[page.index('id="cost-vision"'):page.index("</tr>", page.index('id="cost-vision"'))]
    assert "not run within the replay" in vision_row and "gains" not in vision_row
    api = Client()
    api.force_login(make_user("platform", is_staff=True))
    assert api.get(f"{URL}{run.pk}/").json()["comparison"][0]["cost"] == run.comparison[0]["cost"]
