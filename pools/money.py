"""What a pool's lending saved in money, priced by the costs app above this one: costs connects `saved_source` in
its AppConfig.ready(); without it the Pools page and API show no money (null)."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Any

from core.hooks import Hook

# saved(pool name, cluster id, start, end) -> {"device_hours", "cost", "normal_cost", "saved", "currency"}: the
# device-hours training held on the pool's capacity in [start, end), at the tidal rate and at its class's rate.
SavedSource = Callable[[str, int, datetime, datetime], dict[str, Any]]
saved_source: Hook[SavedSource] = Hook("pools.money.saved_source", single=True)


def saved(pool_name: str, cluster_id: int, start: datetime, end: datetime) -> dict[str, Any] | None:
    return saved_source.one()(pool_name, cluster_id, start, end) if saved_source.receivers else None
