"""Writes of the price catalog (platform staff only) and of budgets (a project's admins), whichever door they come
in by: validated and audited.

Prices are effective-dated history. A new price starts now or later (a backdated one would change reports already
issued) and a price whose date has passed is never changed or deleted: to change what something costs, add a price
from a later date. Only seeding an empty catalog may date prices in the past (`backdate=True`)."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from django.db import IntegrityError, transaction
from django.db.models import Model
from django.utils import timezone

from core import wakeup
from core.errors import DomainError
from costs.models import (
    Budget,
    ClassDiscount,
    CpuPrice,
    DevicePrice,
    EffectiveDated,
    MemoryPrice,
    OrganizationBudget,
    SpendAnomalyRule,
    TidalRate,
    UserBudget,
)
from tenancy.audit import delete_audited, save_audited

FIELDS = {DevicePrice: ("flavor", "cluster", "per_device_hour", "effective_from", "note"),
          CpuPrice: ("per_core_hour", "effective_from", "note"),
          MemoryPrice: ("flavor", "cluster", "per_gib_hour", "effective_from", "note"),
          ClassDiscount: ("priority_class", "factor", "effective_from", "note"),
          TidalRate: ("factor", "effective_from", "note")}
KEYS = {DevicePrice: ("flavor", "cluster"), CpuPrice: (), ClassDiscount: ("priority_class",),
        MemoryPrice: ("flavor", "cluster"), TidalRate: ()}


def _in_force_or_past(price: EffectiveDated, now: datetime) -> bool:
    stored = type(price).objects.filter(pk=price.pk).values_list("effective_from", flat=True).first()
    return stored is not None and stored <= now


def _check_dates(price: EffectiveDated, now: datetime, backdate: bool) -> None:
    if price.effective_from is None:
        raise DomainError("When the price takes effect is required.", field="effective_from")
    if price.effective_from < now and not backdate:
        raise DomainError("A price cannot start in the past: reports already issued would change. Start it now "
                          "or later.", field="effective_from")
    model = type(price)
    same_key = {name: getattr(price, name) for name in KEYS[model]}
    if model.objects.filter(effective_from=price.effective_from, **same_key).exclude(pk=price.pk).exists():
        raise DomainError("Another price of the same key already takes effect at that moment (overlapping "
                          "effective dates).", field="effective_from")


def price_check(price: EffectiveDated, *, now: datetime | None = None, backdate: bool = False) -> None:
    """Refuse (DomainError naming the field) a change to a price in force or past, a new price in the past, and
    two prices of one key from the same moment. `price` holds its new values, not saved yet."""
    now = now or timezone.now()
    if _in_force_or_past(price, now) and not backdate:
        raise DomainError("This price is in force or past and is kept as history; add a new price from a later "
                          "date instead.", field="effective_from")
    _check_dates(price, now, backdate)


@transaction.atomic
def price_save(*, actor: Any, price: EffectiveDated, values: dict[str, Any] | None = None,
               now: datetime | None = None, backdate: bool = False) -> EffectiveDated:
    """Create a price, or change one that has not taken effect yet."""
    for name, value in (values or {}).items():
        setattr(price, name, value)
    price_check(price, now=now, backdate=backdate)
    save_audited(actor=actor, obj=price, fields=FIELDS[type(price)])
    return price


@transaction.atomic
def price_delete(*, actor: Any, price: Model, now: datetime | None = None) -> None:
    """Delete a price that has not taken effect yet."""
    if _in_force_or_past(price, now or timezone.now()):
        raise DomainError("This price is in force or past and is kept as history.", field="effective_from")
    delete_audited(actor=actor, obj=price, fields=FIELDS[type(price)])


# ---------------------------------------------------------------------------------------------------- budgets

BUDGET_FIELDS = ("project", "amount", "thresholds", "hard")


@transaction.atomic
def budget_save(*, actor: Any, budget: Budget, values: dict[str, Any] | None = None) -> Budget:
    """Create or change a project's budget (its admins and owners, or staff: the API checks the role). The model's
    rules are 400s naming the field: `amount` below 0, `thresholds` not ascending whole percents from 1 to 1000, a
    second budget for one `project`. The scheduler is woken: a hard budget raised or lowered may change what it
    admits."""
    for name, value in (values or {}).items():
        setattr(budget, name, value)
    try:
        with transaction.atomic():
            save_audited(actor=actor, obj=budget, fields=BUDGET_FIELDS, project=budget.project)
    except IntegrityError:  # a budget created for the project at the same moment
        raise DomainError(f"Project {budget.project.slug} already has a budget; change it instead.",
                          field="project") from None
    transaction.on_commit(wakeup.wake_scheduler)
    return budget


@transaction.atomic
def budget_delete(*, actor: Any, budget: Budget) -> None:
    delete_audited(actor=actor, obj=budget, fields=BUDGET_FIELDS, project=budget.project)
    transaction.on_commit(wakeup.wake_scheduler)


# ------------------------------------------------------------------------------- organizations' and users' budgets

SCOPED_BUDGET_FIELDS = {OrganizationBudget: ("organization", "amount", "thresholds", "hard"),
                        UserBudget: ("user", "amount", "thresholds", "hard")}


@transaction.atomic
def scoped_budget_save(*, actor: Any, budget: OrganizationBudget | UserBudget,
                       values: dict[str, Any] | None = None) -> OrganizationBudget | UserBudget:
    """Create or change an organization's or a user's monthly budget (platform staff: the API and the admin console
    check it). The model's rules are 400s naming the field, as for a project's budget; a second budget of one
    organization or user names it. The scheduler is woken: a hard budget changed may change what it admits."""
    for name, value in (values or {}).items():
        setattr(budget, name, value)
    owner = "organization" if isinstance(budget, OrganizationBudget) else "user"
    try:
        with transaction.atomic():
            save_audited(actor=actor, obj=budget, fields=SCOPED_BUDGET_FIELDS[type(budget)])
    except DomainError as error:
        if error.field in (owner, f"{owner}_id"):
            raise DomainError(f"This {owner} already has a budget; change it instead.", field=owner) from None
        raise
    except IntegrityError:  # one created for the same organization or user at the same moment
        raise DomainError(f"This {owner} already has a budget; change it instead.", field=owner) from None
    transaction.on_commit(wakeup.wake_scheduler)
    return budget


@transaction.atomic
def scoped_budget_delete(*, actor: Any, budget: OrganizationBudget | UserBudget) -> None:
    delete_audited(actor=actor, obj=budget, fields=SCOPED_BUDGET_FIELDS[type(budget)])
    transaction.on_commit(wakeup.wake_scheduler)


# ------------------------------------------------------------------------------------------ spend anomaly rules

ANOMALY_RULE_FIELDS = ("project", "multiple", "trailing_days", "enabled")


@transaction.atomic
def anomaly_rule_save(*, actor: Any, rule: SpendAnomalyRule, values: dict[str, Any] | None = None
                      ) -> SpendAnomalyRule:
    """Create or change a project's spend anomaly terms (its admins and owners, or staff: the API checks the role);
    `multiple` above 1 and at most 1000, `trailing_days` 3 to 90, one rule per project: 400s naming the field."""
    for name, value in (values or {}).items():
        setattr(rule, name, value)
    try:
        with transaction.atomic():
            save_audited(actor=actor, obj=rule, fields=ANOMALY_RULE_FIELDS, project=rule.project)
    except IntegrityError:
        raise DomainError(f"Project {rule.project.slug} already has spend anomaly terms; change them instead.",
                          field="project") from None
    return rule


@transaction.atomic
def anomaly_rule_delete(*, actor: Any, rule: SpendAnomalyRule) -> None:
    delete_audited(actor=actor, obj=rule, fields=ANOMALY_RULE_FIELDS, project=rule.project)
