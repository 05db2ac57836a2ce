"""One way to write the audit log, used by every service that changes tenants, memberships, tokens, quotas, catalogs,
clusters or prices, whichever door the change came in by (API, admin console, what-if, command)."""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping
from typing import Any

from django.core.exceptions import ValidationError
from django.db import IntegrityError, models, transaction

from core.actors import actor_name
from core.errors import Conflict, DomainError
from tenancy.models import AuditEntry, Project

HIDDEN = "(replaced, not shown)"


def audit_record(
    *,
    actor: Any,
    action: str,
    target: models.Model | None,
    project: Project | None = None,
    changes: dict[str, Any] | None = None,
    about: str = "",
) -> AuditEntry:
    """Record `action` on `target`; with no row to name (a sign-in lockout of a username nobody has, an address),
    `about` says what it was about."""
    authenticated = actor is not None and getattr(actor, "is_authenticated", False)
    return AuditEntry.objects.create(
        actor=actor if authenticated else None,
        actor_name=actor_name(actor),
        project=project,
        action=action,
        target_type=target._meta.label if target is not None else "",
        target_id=str(target.pk) if target is not None else "",
        target_repr=(str(target) if target is not None else about)[:200],
        changes=changes or {},
    )


def _shown(value: Any) -> Any:
    """A value as the audit log keeps it (JSON): related objects and other types by their text."""
    return value if value is None or isinstance(value, bool | int | float | str | list | dict) else str(value)


def stored_values(obj: models.Model, fields: Iterable[str]) -> dict[str, Any]:
    """The values `fields` of `obj` have in the database (empty for an object not saved yet)."""
    if obj.pk is None:
        return {}
    stored = type(obj)._default_manager.filter(pk=obj.pk).first()
    return {} if stored is None else {name: getattr(stored, name) for name in fields}


def _validate(obj: models.Model) -> None:
    """The model's rules, a broken one as a DomainError naming the field."""
    try:
        obj.full_clean()
    except ValidationError as error:
        field, messages = next(iter(error.message_dict.items()))
        raise DomainError(messages[0], field=None if field == "__all__" else field) from None


def save_audited(*, actor: Any, obj: models.Model, fields: Collection[str], project: Project | None = None,
                 hidden: Mapping[str, str] | None = None) -> dict[str, Any]:
    """Validate and save `obj` (its new values already set) and record `<model>.create` or `<model>.change` with
    `{field: [before, after]}` for the `fields` that changed. `hidden` maps secret fields to the name the log
    gives them: recorded as replaced, never shown.
    A broken model rule (a unique name taken, a value out of range) is a DomainError naming the field."""
    before = stored_values(obj, fields)
    created = not before
    _validate(obj)
    try:
        with transaction.atomic():  # a savepoint: the failed write below must not spoil the caller's transaction
            obj.save()
    except IntegrityError:
        # A concurrent write took a unique value after the check above: checked again, now that it is visible, it
        # is the same 400 naming the field.
        _validate(obj)
        raise Conflict(f"This {obj._meta.verbose_name} conflicts with a change made at the same time; try again.",
                       code="concurrent_change") from None
    hidden = hidden or {}
    changes: dict[str, Any] = {}
    for name in fields:
        old, new = before.get(name), getattr(obj, name)
        if name in hidden and old != new:
            changes[hidden[name]] = HIDDEN
        elif name not in hidden and (created or old != new):
            changes[name] = [_shown(old), _shown(new)]
    action = f"{obj._meta.model_name}.{'create' if created else 'change'}"
    if changes or created:
        audit_record(actor=actor, action=action, target=obj, project=project, changes=changes)
    return changes


def delete_audited(*, actor: Any, obj: models.Model, fields: Iterable[str] = (),
                   project: Project | None = None) -> None:
    """Record `<model>.delete` with what `fields` held, then delete `obj`."""
    audit_record(actor=actor, action=f"{obj._meta.model_name}.delete", target=obj, project=project,
                 changes={name: _shown(getattr(obj, name)) for name in fields})
    obj.delete()
