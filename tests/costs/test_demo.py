"""The demo's prices and past usage: seeded once, audited, rolled, and the same on a second run."""

from __future__ import annotations

import pytest
from django.utils import timezone

from costs import demo
from costs.models import DevicePrice, UsageDay, UsageSegment
from costs.reports.usage import ReportQuery, Window, usage_report
from replay.paths import trace_path
from tenancy.models import AuditEntry, Project
from tests.costs.conftest import T0

pytestmark = pytest.mark.django_db


def test_demo_prices_are_seeded_once_through_the_audited_service(tenant, inventory):
    demo.seed_prices(T0)
    demo.seed_prices(T0)
    assert set(DevicePrice.objects.values_list("flavor__name", flat=True)) == {"nvidia-h100-80gb",
                                                                              "nvidia-a100-40gb"}
    assert AuditEntry.objects.filter(action="deviceprice.create").count() == 2
    assert AuditEntry.objects.filter(action="tidalrate.create").count() == 1  # the demo pool's training is cheaper


@pytest.mark.skipif(not trace_path(demo.TRACE).exists(), reason="the shared Philly trace is not beside the repo")
def test_demo_history_replays_the_trace_once_and_is_rolled_and_priced(tenant, inventory):
    now = timezone.now()
    demo.seed_prices(T0)
    added = demo.seed_history(now)
    assert added > 1000 and demo.seed_history(now) == 0 and UsageSegment.objects.count() == added
    assert not UsageSegment.objects.filter(rolled=False).exists() and UsageDay.objects.exists()
    window = Window((now - timezone.timedelta(days=demo.HISTORY_DAYS + 1)).date(),
                    (now + timezone.timedelta(days=1)).date())
    report = usage_report(Project.objects.values("id"), ReportQuery(window, ("project",)), now)
    assert report.total.cost > 0 and {r.labels["project"] for r in report.rows} <= {"vision", "secret", "speech"}
