"""Costs around the shared tenant and inventory fixtures: prices dated in the past, as a seeded catalog has them."""

from __future__ import annotations

from datetime import UTC, datetime
from decimal import Decimal

import pytest

from costs import services
from costs.models import ClassDiscount, CpuPrice, DevicePrice
from tests.jobs.conftest import inventory  # noqa: F401  (fixture)

T0 = datetime(2026, 1, 1, tzinfo=UTC)


def at(hours: float) -> datetime:
    """`hours` after 2026-01-01 00:00 UTC."""
    from datetime import timedelta

    return T0 + timedelta(hours=hours)


def price(flavor, per_hour: str, since: datetime, cluster=None) -> DevicePrice:
    return services.price_save(actor=None, price=DevicePrice(flavor=flavor, cluster=cluster,
                                                             per_device_hour=Decimal(per_hour),
                                                             effective_from=since), backdate=True)


def installed_since(when: datetime) -> None:
    """Date the projects and clusters there are back to `when`: the analyses count guarantees and capacity only
    from when they existed (costs.metering.existence), and these tests' histories are in 2026 while their rows are
    created now."""
    from clusters.models import Cluster
    from tenancy.models import Project

    Project.objects.update(created_at=when)
    Cluster.objects.update(created_at=when)


@pytest.fixture
def prices(inventory):  # noqa: F811
    """h100 at 2.00 a device-hour and a100 at 1.00 from 2025; CPU at 0.05 a core-hour; preemptible pays 0.3. The
    projects and the cluster exist since 2025 too."""
    from quotas.models import PriorityClass

    since = datetime(2025, 1, 1, tzinfo=UTC)
    installed_since(since)
    price(inventory["h100"], "2.00", since)
    price(inventory["a100"], "1.00", since)
    services.price_save(actor=None, price=CpuPrice(per_core_hour=Decimal("0.05"), effective_from=since), backdate=True)
    preemptible = PriorityClass.objects.filter(preemptible=True).first()
    if preemptible is not None:
        services.price_save(actor=None, price=ClassDiscount(priority_class=preemptible, factor=Decimal("0.3"),
                                                            effective_from=since), backdate=True)
    return inventory
