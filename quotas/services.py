"""Writes for flavors, priority classes and quotas (platform staff only). Every door (API, admin console, what-if,
command) comes through here: each write is validated, audited, and wakes the scheduler once it committed."""

from __future__ import annotations

from typing import Any

from django.db import transaction

from core import wakeup
from quotas.models import PriorityClass, Quota, ResourceFlavor
from tenancy.audit import delete_audited, save_audited

FLAVOR_FIELDS = ("name", "vendor", "device_resource", "arch", "rdma", "description")
PRIORITY_CLASS_FIELDS = ("name", "value", "preemptible", "is_default", "description")
QUOTA_FIELDS = ("guaranteed", "borrow_limit", "lend_limit")


def _apply(obj: Any, values: dict[str, Any] | None) -> None:
    for name, value in (values or {}).items():
        setattr(obj, name, value)


@transaction.atomic
def flavor_save(*, actor: Any, flavor: ResourceFlavor, values: dict[str, Any] | None = None) -> ResourceFlavor:
    """Create or change a flavor (`values` on top of what `flavor` already holds)."""
    _apply(flavor, values)
    save_audited(actor=actor, obj=flavor, fields=FLAVOR_FIELDS)
    transaction.on_commit(wakeup.wake_scheduler)
    return flavor


@transaction.atomic
def flavor_delete(*, actor: Any, flavor: ResourceFlavor) -> None:
    """Delete a flavor no node, quota or job uses (ProtectedError otherwise: a 409)."""
    delete_audited(actor=actor, obj=flavor, fields=("name",))
    transaction.on_commit(wakeup.wake_scheduler)


@transaction.atomic
def priority_class_save(*, actor: Any, priority_class: PriorityClass,
                        values: dict[str, Any] | None = None) -> PriorityClass:
    """Create or change a priority class. Making it the default takes the default from the previous one."""
    _apply(priority_class, values)
    if priority_class.is_default:
        for previous in PriorityClass.objects.filter(is_default=True).exclude(pk=priority_class.pk):
            previous.is_default = False
            save_audited(actor=actor, obj=previous, fields=("is_default",))
    save_audited(actor=actor, obj=priority_class, fields=PRIORITY_CLASS_FIELDS)
    transaction.on_commit(wakeup.wake_scheduler)
    return priority_class


@transaction.atomic
def priority_class_delete(*, actor: Any, priority_class: PriorityClass) -> None:
    delete_audited(actor=actor, obj=priority_class, fields=("name", "value"))
    transaction.on_commit(wakeup.wake_scheduler)


@transaction.atomic
def quota_save(*, actor: Any, quota: Quota, values: dict[str, Any] | None = None) -> Quota:
    """Create or change a quota. A guarantee below current use is allowed: the scheduler reclaims by preemption."""
    _apply(quota, values)
    save_audited(actor=actor, obj=quota, fields=QUOTA_FIELDS, project=quota.project)
    transaction.on_commit(wakeup.wake_scheduler)
    return quota


@transaction.atomic
def quota_delete(*, actor: Any, quota: Quota) -> None:
    delete_audited(actor=actor, obj=quota, fields=QUOTA_FIELDS, project=quota.project)
    transaction.on_commit(wakeup.wake_scheduler)
