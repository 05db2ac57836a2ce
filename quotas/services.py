"""Writes for quotas, flavors and priority classes (platform staff only); every quota change is audited."""

from __future__ import annotations

from typing import Any

from django.db import transaction

from core import wakeup
from quotas.models import Quota
from tenancy.audit import audit_record

QUOTA_FIELDS = ("guaranteed", "borrow_limit", "lend_limit")


@transaction.atomic
def quota_save(*, actor: Any, quota: Quota, values: dict[str, Any]) -> Quota:
    """Create or change a quota. A guarantee below current use is allowed: the scheduler reclaims by preemption."""
    created = quota.pk is None
    before = {name: getattr(quota, name) for name in QUOTA_FIELDS} if not created else {}
    for name, value in values.items():
        setattr(quota, name, value)
    quota.full_clean()
    quota.save()
    after = {name: getattr(quota, name) for name in QUOTA_FIELDS}
    changes = {name: [before.get(name), after[name]] for name in QUOTA_FIELDS if before.get(name) != after[name]}
    audit_record(actor=actor, action="quota.create" if created else "quota.change", target=quota,
                 project=quota.project, changes=changes)
    transaction.on_commit(wakeup.wake_scheduler)
    return quota


@transaction.atomic
def quota_delete(*, actor: Any, quota: Quota) -> None:
    audit_record(actor=actor, action="quota.delete", target=quota, project=quota.project,
                 changes={name: getattr(quota, name) for name in QUOTA_FIELDS})
    quota.delete()
    transaction.on_commit(wakeup.wake_scheduler)
