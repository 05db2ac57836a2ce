"""Tidal capacity is priced at its own rate (issue 30: "Costs: tidal capacity is priced with its own priority-class
rate, so the report shows what borrowing saved"): the devices an attempt holds on a pool's nodes are copied to its
segment, priced at the tidal factor (staff-set, audited, effective-dated like the class factors), and the cost
report and the Pools page show what they would have cost at the class's rate and what borrowing saved."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from decimal import Decimal

import pytest
from django.utils import timezone

from costs import services
from costs.metering.pricing import PriceBook, Usage
from costs.metering.rollup import roll_segments
from costs.models import TidalRate, UsageDay, UsageSegment
from costs.reports import tidal
from jobs.lifecycle import Admission, transition, transition_many
from jobs.models import Attempt
from jobs.states import State
from pools.models import Pool
from quotas.models import Quota
from tenancy.models import AuditEntry
from tests.conftest import make_user
from tests.costs.conftest import at
from tests.jobs.conftest import submit

SINCE = datetime(2025, 1, 1, tzinfo=UTC)


def test_tidal_devices_pay_the_tidal_factor_to_the_micro_unit():
    book = PriceBook(device={(1, None): [(0, Decimal("1.40"))]}, discount={7: [(0, Decimal("0.35"))]},
                     tidal=[(10_000, Decimal("0.2"))])
    usage = Usage(1, None, 7, devices=8, cpu_millis=0, tidal_devices=4)
    # 4 devices at the class's 0.35 and 4 at the tidal 0.2, for 2,220 s: (1.96 + 1.12) x 2220 / 3600 = 1.899333...
    assert book.micros(usage, 10_000, 12_220) == (1_899_333, 0)
    # Before the tidal rate's first date they pay their class's: 8 x 1.40 x 0.35 x 2220 / 3600 = 2.417333...
    assert book.micros(usage, 1000, 3220) == (2_417_333, 0)
    assert book.micros(Usage(1, None, 7, 8, 0), 1000, 3220) == (2_417_333, 0)


@pytest.fixture
def lent(tenant, prices):
    """A preemptible job that ran 37 minutes on all 8 devices of pool chat's node a-n1 (a100: 1.00 a device-hour,
    preemptible 0.3 of it, tidal capacity 0.1)."""
    services.price_save(actor=None, price=TidalRate(factor=Decimal("0.1"), effective_from=SINCE), backdate=True)
    Quota.objects.filter(project=tenant.project, flavor=prices["a100"]).update(guaranteed=0, borrow_limit=8)
    Pool.objects.create(name="chat", cluster=prices["cluster"], flavor=prices["a100"], node_pattern="a-n*")
    job = submit(tenant, prices["a100"], priority="preemptible")
    placement = [{"role": "worker", "index": 0, "node": "a-n1", "devices": 8, "pool": "chat"}]
    transition_many([Admission(job.pk, prices["cluster"].pk, placement)], now=at(0))
    job.refresh_from_db()
    for state, when in ((State.DISPATCHING, at(0)), (State.RUNNING, at(1)), (State.SUCCEEDED, at(1) + timedelta(
            seconds=2220))):
        job = transition(job, state, reason="test", actor="backend", now=when)
    return job


def test_a_segment_on_tidal_capacity_costs_the_tidal_rate_exactly(lent):
    assert Attempt.objects.get(job=lent).tidal_devices == 8
    segment = UsageSegment.objects.get(job=lent)
    assert segment.tidal_devices == 8
    figures = tidal.saved([segment], int(at(0).timestamp()), int(at(24).timestamp()), int(at(24).timestamp()))
    # 8 x 1.00 x 0.1 x 2220 / 3600 = 0.493333... at the tidal rate; 8 x 1.00 x 0.3 x 2220 / 3600 = 1.48 at the class's
    assert (figures.device_seconds, figures.cost_micros, figures.normal_micros) == (8 * 2220, 493_333, 1_480_000)
    assert figures.as_data() == {"device_hours": 4.933, "cost": 0.49, "normal_cost": 1.48, "saved": 0.99,
                                 "currency": "USD"}
    roll_segments(now=at(48))
    assert UsageDay.objects.get(segment=segment).cost_micros == 493_333  # the report's own money, to the micro-unit


def test_the_cost_report_shows_what_borrowing_saved_to_its_projects_only(lent, tenant, clients):
    query = {"start": "2026-01-01", "end": "2026-01-01", "group_by": "project"}
    mine = clients["member"].get("/api/v1/costs/", query).json()
    assert mine["total"]["cost"] == 0.49
    assert mine["figures"]["tidal"] == {"device_hours": 4.933, "cost": 0.49, "normal_cost": 1.48, "saved": 0.99,
                                        "currency": "USD"}
    theirs = clients["outsider"].get("/api/v1/costs/", query).json()  # another organization's member
    assert theirs["figures"]["tidal"]["device_hours"] == 0 and theirs["figures"]["tidal"]["saved"] == 0
    page = clients["member"].get("/api/v1/costs/", {**query, "project": "secret"})
    assert page.status_code == 400  # not theirs to ask for


def test_the_pools_page_saved_figure_uses_the_same_prices(lent, tenant, prices, monkeypatch):
    from pools import selectors

    monkeypatch.setattr(timezone, "now", lambda: at(12))
    staff = make_user("ops", is_staff=True)
    figures = selectors.figures(Pool.objects.get(name="chat"), staff)
    assert figures.saved_24h == {"device_hours": 4.933, "cost": 0.49, "normal_cost": 1.48, "saved": 0.99,
                                 "currency": "USD"}
    other = Pool.objects.create(name="batch", cluster=prices["cluster"], flavor=prices["h100"], node_pattern="r1-*")
    assert selectors.figures(other, staff).saved_24h["device_hours"] == 0  # the job's placement names chat only


def test_the_tidal_rate_is_staff_written_audited_and_history_is_kept(staff_client, clients, db):
    body = {"factor": "0.2500", "effective_from": (timezone.now() + timedelta(days=1)).isoformat()}
    created = staff_client.post("/api/v1/prices/tidal/", body, format="json")
    assert created.status_code == 201, created.content
    assert AuditEntry.objects.filter(action__contains="tidalrate").exists()
    assert clients["member"].post("/api/v1/prices/tidal/", body, format="json").status_code == 403
    past = staff_client.post("/api/v1/prices/tidal/", {"factor": "0.2", "effective_from": "2020-01-01T00:00:00Z"},
                             format="json")
    assert past.status_code == 400 and "effective_from" in past.json()["error"]["fields"]
    over = staff_client.post("/api/v1/prices/tidal/", {**body, "factor": "1.5"}, format="json")
    assert over.status_code == 400 and "factor" in over.json()["error"]["fields"]


def test_the_cost_page_shows_the_saving(lent, tenant):
    from django.test import Client

    web = Client()
    web.force_login(tenant.users["member"])
    page = web.get("/costs/", {"start": "2026-01-01", "end": "2026-01-01"}).content.decode()
    assert 'id="tidal-saved">0.99 USD' in page and 'id="tidal-normal-cost">1.48 USD' in page
    web.force_login(tenant.users["outsider"])
    assert "tidal-savings" not in web.get("/costs/", {"start": "2026-01-01", "end": "2026-01-01"}).content.decode()
