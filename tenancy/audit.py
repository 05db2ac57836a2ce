"""One way to write the audit log, used by every service that changes memberships, tokens, quotas or prices."""

from __future__ import annotations

from typing import Any

from django.db import models

from tenancy.models import AuditEntry, Project


def audit_record(
    *,
    actor: Any,
    action: str,
    target: models.Model,
    project: Project | None = None,
    changes: dict[str, Any] | None = None,
) -> AuditEntry:
    authenticated = actor is not None and getattr(actor, "is_authenticated", False)
    return AuditEntry.objects.create(
        actor=actor if authenticated else None,
        actor_name=actor.get_username() if authenticated else "system",
        project=project,
        action=action,
        target_type=target._meta.label,
        target_id=str(target.pk),
        target_repr=str(target)[:200],
        changes=changes or {},
    )
