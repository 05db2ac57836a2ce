"""A spent hard budget through the real scheduler loop: prices and an open usage segment put project vision over
its budget, so its next non-preemptible job waits with the reason on the queue while its preemptible job starts;
raising the budget lets the waiting job in."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from decimal import Decimal

import pytest
from django.urls import reverse

from costs import services
from costs.models import Budget
from jobs.loop import run_once
from jobs.states import State
from tests.jobs.conftest import run, submit

pytestmark = pytest.mark.django_db
NOW = datetime(2026, 6, 15, 12, tzinfo=UTC)  # a fixed moment: the month's spend must not depend on today's date


def test_a_spent_hard_budget_admits_only_preemptible_jobs_until_it_is_raised(
        tenant, prices, clients, django_capture_on_commit_callbacks):
    def cycle():
        with django_capture_on_commit_callbacks(execute=True):
            run_once(now=NOW)

    budget = services.budget_save(actor=tenant.users["admin"], budget=Budget(project=tenant.project),
                                  values={"amount": Decimal("10"), "hard": True})
    run(submit(tenant, prices["h100"]), prices["cluster"], ["r1-n1"], now=NOW - timedelta(hours=1))  # 16.00
    normal = submit(tenant, prices["a100"], name="normal")
    spot = submit(tenant, prices["a100"], name="spot", priority="preemptible")
    cycle()
    normal.refresh_from_db()
    spot.refresh_from_db()
    assert spot.state != State.QUEUED
    reason = ("project vision has spent 16 USD of its 10 USD budget for June; only preemptible jobs are admitted")
    assert (normal.state, normal.wait_code, normal.wait_reason, normal.eta) == (State.QUEUED, "budget", reason, None)
    queue = clients["viewer"].get(reverse("queue-list"), {"project": "vision"}).json()["results"]
    assert [(row["id"], row["waiting"]["code"], row["waiting"]["reason"]) for row in queue] == [
        (normal.pk, "budget", reason)]

    services.budget_save(actor=tenant.users["admin"], budget=budget, values={"amount": Decimal("100")})
    cycle()
    normal.refresh_from_db()
    assert normal.state != State.QUEUED and normal.wait_code == ""


def test_a_budget_that_is_not_hard_or_not_spent_stops_nothing(tenant, prices, django_capture_on_commit_callbacks):
    budget = services.budget_save(actor=None, budget=Budget(project=tenant.project),
                                  values={"amount": Decimal("10"), "hard": False})
    run(submit(tenant, prices["h100"]), prices["cluster"], ["r1-n1"], now=NOW - timedelta(hours=1))
    first = submit(tenant, prices["a100"], name="first")
    with django_capture_on_commit_callbacks(execute=True):
        run_once(now=NOW)
    first.refresh_from_db()
    assert first.state != State.QUEUED  # spent 16 of 10, but the budget only alerts
    services.budget_save(actor=None, budget=budget, values={"hard": True, "amount": Decimal("20")})
    second = submit(tenant, prices["h100"], name="second")
    with django_capture_on_commit_callbacks(execute=True):
        run_once(now=NOW)
    second.refresh_from_db()
    assert second.state != State.QUEUED  # hard, but 16 of 20 is not spent yet
