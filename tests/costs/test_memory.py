"""Memory is priced per GiB-hour of each segment's memory request, per flavor and optionally per cluster, with the
same effective-dated history rules as device prices: pure pricing, the price API, and reports before and after a
roll."""

from __future__ import annotations

import csv
import io
from datetime import UTC, datetime, timedelta
from decimal import Decimal

import pytest
from django.utils import timezone

from costs import services
from costs.metering.pricing import PriceBook, Usage
from costs.metering.rollup import roll_segments
from costs.models import MemoryPrice, UsageDay, UsageSegment
from jobs.lifecycle import transition
from jobs.states import State
from tenancy.models import AuditEntry
from tests.costs.conftest import at
from tests.jobs.conftest import run, submit

JAN = {"month": "2026-01"}
H = 3600


def money(value: float) -> Decimal:
    """A float amount as the Decimal it stands for, to the 1e-9 of the currency the report keeps exactly."""
    return Decimal(value).quantize(Decimal("0.000000001"))


# pure pricing -----------------------------------------------------------------------------------------------------

def test_memory_is_priced_per_gib_hour_beside_devices_and_cut_at_a_price_change():
    book = PriceBook(device={(1, None): [(0, 2.0)]}, memory={(1, None): [(0, 0.5), (H, 0.75)]})
    usage = Usage(1, None, 9, devices=2, cpu_millis=0, memory_mib=3 * 1024)
    # devices: 2 x 2.00 x 3 h = 12; memory: 3 GiB x (0.50 x 1 h + 0.75 x 2 h) = 1.5 + 4.5 = 6
    assert money(book.memory_cost(usage, 0, 3 * H)) == Decimal("6.000000000")
    assert money(book.cost(usage, 0, 3 * H)) == Decimal("18.000000000")


def test_a_clusters_own_memory_price_wins_from_its_date_and_the_class_discount_applies():
    book = PriceBook(memory={(1, None): [(0, 0.5)], (1, 7): [(2 * H, 0.1)]}, discount={3: [(0, 0.5)]})
    usage = Usage(1, 7, 3, devices=0, cpu_millis=0, memory_mib=1024)
    # 1 GiB: 2 h at the flavor's 0.50 then 2 h at the cluster's 0.10, all at half price: (1.0 + 0.2) x 0.5
    assert money(book.memory_cost(usage, 0, 4 * H)) == Decimal("0.600000000")
    elsewhere = Usage(1, 8, 3, devices=0, cpu_millis=0, memory_mib=1024)
    assert money(book.memory_cost(elsewhere, 0, 4 * H)) == Decimal("1.000000000")


def test_no_memory_request_or_no_memory_price_costs_nothing_more():
    book = PriceBook(device={(1, None): [(0, 2.0)]}, memory={(1, None): [(0, 0.5)]})
    assert book.memory_cost(Usage(1, None, 9, 1, 0, 0), 0, H) == 0.0
    assert money(PriceBook(device={(1, None): [(0, 2.0)]}).cost(Usage(1, None, 9, 1, 0, 4096), 0, H)) == 2


# the price API ------------------------------------------------------------------------------------------------------

def future(days: int = 1) -> str:
    return (timezone.now() + timedelta(days=days)).isoformat()


@pytest.mark.django_db
def test_everybody_reads_memory_prices_and_only_staff_write_them(clients, staff_client, prices):
    body = {"flavor": "nvidia-h100-80gb", "per_gib_hour": "0.0125", "effective_from": future()}
    assert clients["owner"].post("/api/v1/prices/memory/", body, format="json").status_code == 403
    response = staff_client.post("/api/v1/prices/memory/", body, format="json")
    assert response.status_code == 201, response.content
    assert AuditEntry.objects.filter(action="memoryprice.create", target_id=str(response.json()["id"])).exists()
    listed = clients["viewer"].get("/api/v1/prices/memory/").json()["results"]
    assert [(row["flavor"], row["cluster"], row["per_gib_hour"]) for row in listed] == [
        ("nvidia-h100-80gb", None, "0.0125")]


@pytest.mark.django_db
@pytest.mark.parametrize(("body", "field"), [
    ({"flavor": "nvidia-h100-80gb", "per_gib_hour": "-1", "effective_from": future()}, "per_gib_hour"),
    ({"flavor": "nvidia-h100-80gb", "per_gib_hour": "lots", "effective_from": future()}, "per_gib_hour"),
    ({"flavor": "nvidia-h100-80gb", "per_gib_hour": "1", "effective_from": "2020-01-01T00:00:00Z"},
     "effective_from"),
    ({"flavor": "tpu", "per_gib_hour": "1", "effective_from": future()}, "flavor"),
    ({"flavor": "nvidia-h100-80gb", "cluster": "nowhere", "per_gib_hour": "1", "effective_from": future()},
     "cluster"),
    ({"flavor": "nvidia-h100-80gb", "per_gib_hour": "1"}, "effective_from"),
])
def test_bad_memory_prices_are_400s_naming_the_field(staff_client, prices, body, field):
    response = staff_client.post("/api/v1/prices/memory/", body, format="json")
    assert response.status_code == 400, response.content
    assert field in response.json()["error"]["fields"]
    assert not MemoryPrice.objects.exists()


@pytest.mark.django_db
def test_memory_prices_from_the_same_moment_overlap_and_history_is_never_edited(staff_client, prices):
    when = future(3)
    body = {"flavor": "nvidia-h100-80gb", "per_gib_hour": "0.02", "effective_from": when}
    assert staff_client.post("/api/v1/prices/memory/", body, format="json").status_code == 201
    again = staff_client.post("/api/v1/prices/memory/", {**body, "per_gib_hour": "0.03"}, format="json")
    assert again.status_code == 400 and "effective_from" in again.json()["error"]["fields"]
    # a cluster's own price from the same moment is another key, not an overlap
    own = staff_client.post("/api/v1/prices/memory/", {**body, "cluster": "sim"}, format="json")
    assert own.status_code == 201, own.content
    past = services.price_save(actor=None, price=MemoryPrice(flavor=prices["h100"], per_gib_hour=Decimal("0.01"),
                                                             effective_from=datetime(2025, 1, 1, tzinfo=UTC)),
                               backdate=True)
    url = f"/api/v1/prices/memory/{past.pk}/"
    changed = staff_client.patch(url, {"per_gib_hour": "9"}, format="json")
    assert changed.status_code == 400 and "effective_from" in changed.json()["error"]["fields"]
    assert staff_client.delete(url).status_code == 400
    past.refresh_from_db()
    assert past.per_gib_hour == Decimal("0.0100")
    upcoming = MemoryPrice.objects.filter(effective_from__gt=datetime.now(UTC), cluster=None).get()
    assert staff_client.patch(f"/api/v1/prices/memory/{upcoming.pk}/", {"per_gib_hour": "0.025"},
                              format="json").status_code == 200
    assert staff_client.delete(f"/api/v1/prices/memory/{upcoming.pk}/").status_code == 204
    assert AuditEntry.objects.filter(action="memoryprice.delete").count() == 1


@pytest.mark.django_db
def test_the_admin_console_refuses_an_edit_of_memory_price_history(prices):
    from costs.admin import PriceForm

    class Form(PriceForm):
        class Meta:
            model = MemoryPrice
            fields = ["flavor", "cluster", "per_gib_hour", "effective_from", "note"]

    form = Form(data={"flavor": prices["h100"].pk, "per_gib_hour": "1", "effective_from": "2020-01-01 00:00"})
    assert not form.is_valid() and "effective_from" in form.errors


# billed in reports ---------------------------------------------------------------------------------------------------

def memory_price(flavor, per_gib_hour: str, since: datetime, cluster=None) -> MemoryPrice:
    return services.price_save(actor=None, price=MemoryPrice(flavor=flavor, cluster=cluster,
                                                             per_gib_hour=Decimal(per_gib_hour),
                                                             effective_from=since), backdate=True)


@pytest.fixture
def memory_usage(tenant, prices):
    """Vision: 8 h100 with 2 replicas of 24 GiB each (48 GiB) for 2 h, from 01:00; h100 memory at 0.25 a
    GiB-hour, the cluster's own 0.125 from 02:00."""
    memory_price(prices["h100"], "0.25", datetime(2025, 1, 1, tzinfo=UTC))
    memory_price(prices["h100"], "0.125", at(2), cluster=prices["cluster"])
    job = submit(tenant, prices["h100"], replicas=2, devices=4)
    job.groups.update(memory_mib=24 * 1024)
    job = run(job, prices["cluster"], ["r1-n1", "r1-n2"], now=at(1))
    transition(job, State.CANCELLED, reason="stop", actor="member", now=at(3))
    return job


@pytest.mark.django_db
def test_a_segment_carries_its_memory_request_and_reports_bill_it_before_and_after_a_roll(clients, memory_usage):
    assert UsageSegment.objects.get(job=memory_usage).memory_mib == 48 * 1024
    # devices: 8 x 2.00 x 2 h = 32; memory: 48 GiB x (0.25 x 1 h + 0.125 x 1 h) = 12 + 6 = 18
    expected = {"device_hours": 16.0, "memory_gib_hours": 96.0, "memory_cost": 18.0, "cost": 50.0}

    def figures() -> dict:
        response = clients["member"].get("/api/v1/costs/", {**JAN, "group_by": "project"})
        assert response.status_code == 200, response.content
        row = response.json()["rows"][0]
        return {name: row[name] for name in expected}

    assert figures() == expected
    assert roll_segments(now=at(10)) == 1
    day = UsageDay.objects.get(segment__job=memory_usage)
    assert (day.memory_seconds, day.memory_cost_micros, day.cost_micros) == (48 * 1024 * 2 * H, 18_000_000,
                                                                              50_000_000)
    assert figures() == expected


@pytest.mark.django_db
def test_the_csv_has_memory_beside_devices_and_cpu(clients, memory_usage):
    response = clients["member"].get("/api/v1/costs/csv/", {**JAN, "group_by": "project"})
    lines = list(csv.reader(io.StringIO(b"".join(response.streaming_content).decode())))
    assert lines[0][-4:] == ["cpu_hours", "memory_gib_hours", "cost_usd", "memory_cost_usd"]
    assert lines[1][0] == "vision" and lines[1][-3:] == ["96.0000", "50.00", "18.00"]


@pytest.mark.django_db
def test_the_report_page_shows_memory(clients, memory_usage):
    from tests.ui.conftest import login

    page = login(memory_usage.submitter).get("/costs/", {**JAN, "group_by": "project"})
    assert page.status_code == 200
    text = page.content.decode()
    assert 'id="total-memory-gib-hours">96' in text and 'id="total-memory-cost">18' in text
