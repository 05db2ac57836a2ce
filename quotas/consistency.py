"""Rules quotas keep (see `core.consistency`): no project holds more of a flavor than its guarantee plus its borrow
limit. Reported only: it also happens, legitimately, after a quota was lowered under running jobs, and it resolves
as they end; no machine should decide which job to stop."""

from __future__ import annotations

from collections.abc import Iterator

from core.consistency import Check, Problem
from quotas.models import Quota
from quotas.selectors import live_usage


def quota_over_limit() -> Iterator[Problem]:
    quotas = list(Quota.objects.select_related("project__organization", "flavor"))
    usage = live_usage(quotas)
    for quota in quotas:
        limit = quota.guaranteed + quota.borrow_limit
        if usage[quota.pk].used > limit:
            yield Problem("quotas.over_limit",
                          f"project {quota.project.slug} holds {usage[quota.pk].used} {quota.flavor.name} devices, "
                          f"over its guarantee {quota.guaranteed} + borrow limit {quota.borrow_limit}", quota,
                          quota.project)


CHECKS: list[Check] = [quota_over_limit]
