"""`tidal budget` and `tidal budget set` against a live server: the month's spend from real usage segments, roles,
and the server's field-named refusals as one line."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from costs.models import Budget
from quotas.models import ResourceFlavor
from tests.costs.conftest import price
from tests.jobs.conftest import run, submit

pytestmark = pytest.mark.django_db(transaction=True)
NODE = "rack-a1-n1"  # an 8-device h100 node of the demo cluster


def test_set_then_show_a_budget_with_this_months_spend(cli, tenant, demo_cluster):
    # 8 h100 at 2.00 a device-hour, admitted 30 minutes ago (or at the month's start, if that was later).
    h100 = ResourceFlavor.objects.get(name="nvidia-h100-80gb")
    price(h100, "2.00", timezone.now() - timedelta(days=400))
    now = timezone.now()
    since = max(now - timedelta(minutes=30), now.replace(day=1, hour=0, minute=0, second=0, microsecond=0))
    run(submit(tenant, h100), demo_cluster, [NODE], now=since)

    assert cli("budget").out.strip() == "No budget in your projects."
    refused = cli("budget", "set", "--project", "vision", "--amount", "10000")  # a member
    assert refused.code == 1 and "admin role" in refused.err
    made = cli("budget", "set", "--project", "vision", "--amount", "10,000", "--hard", "--thresholds", "50,90",
               user="admin")
    assert made.code == 0, made.err
    assert made.out.startswith("Budget of vision: 10,000.00 USD a month (hard; alerts at 50%, 90%). Spent in ")
    table = cli("budget", user="viewer").out.splitlines()
    assert table[0].split()[:6] == ["PROJECT", "MONTH", "BUDGET", "SPENT", "%", "FORECAST"]
    assert table[1].split()[:4] == ["vision", f"{now:%Y-%m}", "10,000.00", "USD"]
    rows = cli("budget", "--project", "vision", "--json").json()
    spent = 16 * (now - since).total_seconds() / 3600
    assert [(r["amount"], r["hard"], r["thresholds"]) for r in rows] == [("10000.00", True, [50, 90])]
    assert rows[0]["spent_this_month"] == pytest.approx(spent, abs=0.05)

    changed = cli("budget", "set", "--project", "vision", "--no-hard", "--json", user="owner")
    assert changed.code == 0 and changed.json()["hard"] is False and changed.json()["amount"] == "10000.00"
    assert Budget.objects.get().thresholds == [50, 90]  # what was not given is kept
    assert cli("budget", user="outsider").out.strip() == "No budget in your projects."


def test_bad_values_are_refused_naming_the_field(cli, tenant):
    negative = cli("budget", "set", "--project", "vision", "--amount", "-5", user="admin")
    assert negative.code == 1 and "amount" in negative.err and len(negative.err.strip().splitlines()) == 1
    backwards = cli("budget", "set", "--project", "vision", "--amount", "5", "--thresholds", "90,50", "--json",
                    user="admin")
    assert backwards.code == 1 and "thresholds" in backwards.err
    missing = cli("budget", "set", "--project", "vision", user="admin")
    assert missing.code == 1 and "amount" in missing.err
    hidden = cli("budget", "set", "--project", "secret", "--amount", "5", user="admin")
    assert hidden.code == 1 and "project" in hidden.err
    assert cli("budget", "set", "--project", "vision", "--thresholds", "a,b").code == 2
    assert not Budget.objects.exists()
