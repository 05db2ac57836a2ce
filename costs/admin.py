"""Admin console for the price catalog and budgets: the form refuses what the service would (price history is
never edited), and every save and delete goes through `costs.services` (validated, audited)."""

from __future__ import annotations

import copy

from django import forms
from django.contrib import admin

from core.admin import ModelAdmin, WritesThroughServices
from core.errors import DomainError
from costs import services
from costs.models import (
    Budget,
    BudgetAlert,
    ClassDiscount,
    CpuPrice,
    DevicePrice,
    MemoryPrice,
    OrganizationBudget,
    ScopedBudgetAlert,
    SpendAnomalyAlert,
    SpendAnomalyRule,
    TidalRate,
    UserBudget,
)


class PriceForm(forms.ModelForm):
    def clean(self) -> dict:
        cleaned = super().clean()
        candidate = copy.copy(self.instance)
        for name, value in cleaned.items():
            setattr(candidate, name, value)
        try:
            services.price_check(candidate)
        except DomainError as error:
            self.add_error(error.field if error.field in self.fields else None, error.message)
        return cleaned


class PriceAdmin(WritesThroughServices, ModelAdmin):
    form = PriceForm

    def save_model(self, request, obj, form, change):
        services.price_save(actor=request.user, price=obj)

    def delete_model(self, request, obj):
        services.price_delete(actor=request.user, price=obj)


@admin.register(DevicePrice)
class DevicePriceAdmin(PriceAdmin):
    list_display = ["flavor", "cluster", "per_device_hour", "effective_from", "note"]
    list_filter = ["flavor", "cluster"]


@admin.register(CpuPrice)
class CpuPriceAdmin(PriceAdmin):
    list_display = ["per_core_hour", "effective_from", "note"]


@admin.register(MemoryPrice)
class MemoryPriceAdmin(PriceAdmin):
    list_display = ["flavor", "cluster", "per_gib_hour", "effective_from", "note"]
    list_filter = ["flavor", "cluster"]


@admin.register(ClassDiscount)
class ClassDiscountAdmin(PriceAdmin):
    list_display = ["priority_class", "factor", "effective_from", "note"]
    list_filter = ["priority_class"]


@admin.register(TidalRate)
class TidalRateAdmin(PriceAdmin):
    list_display = ["factor", "effective_from", "note"]


@admin.register(Budget)
class BudgetAdmin(WritesThroughServices, ModelAdmin):
    """Staff edit any project's budget; the form checks the model's rules, the service audits and wakes the
    scheduler."""

    list_display = ["project", "amount", "hard", "thresholds"]
    list_filter = ["hard"]
    autocomplete_fields = ["project"]

    def save_model(self, request, obj, form, change):
        services.budget_save(actor=request.user, budget=obj)

    def delete_model(self, request, obj):
        services.budget_delete(actor=request.user, budget=obj)


class ScopedBudgetAdmin(WritesThroughServices, ModelAdmin):
    """Staff set organizations' and users' budgets; the service audits and wakes the scheduler."""

    list_filter = ["hard"]

    def save_model(self, request, obj, form, change):
        services.scoped_budget_save(actor=request.user, budget=obj)

    def delete_model(self, request, obj):
        services.scoped_budget_delete(actor=request.user, budget=obj)


@admin.register(OrganizationBudget)
class OrganizationBudgetAdmin(ScopedBudgetAdmin):
    list_display = ["organization", "amount", "hard", "thresholds"]


@admin.register(UserBudget)
class UserBudgetAdmin(ScopedBudgetAdmin):
    list_display = ["user", "amount", "hard", "thresholds"]
    autocomplete_fields = ["user"]


@admin.register(ScopedBudgetAlert)
class ScopedBudgetAlertAdmin(ModelAdmin):
    """The record of organizations' and users' thresholds crossed: written only by the budget check."""

    list_display = ["organization", "user", "month", "threshold", "amount", "cost", "created_at"]
    list_filter = ["month"]

    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False


@admin.register(BudgetAlert)
class BudgetAlertAdmin(ModelAdmin):
    """The record of thresholds crossed: written only by the budget check."""

    list_display = ["project", "month", "threshold", "amount", "cost", "created_at"]
    list_filter = ["month"]

    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False


@admin.register(SpendAnomalyRule)
class SpendAnomalyRuleAdmin(WritesThroughServices, ModelAdmin):
    list_display = ["project", "multiple", "trailing_days", "enabled"]
    autocomplete_fields = ["project"]

    def save_model(self, request, obj, form, change):
        services.anomaly_rule_save(actor=request.user, rule=obj)

    def delete_model(self, request, obj):
        services.anomaly_rule_delete(actor=request.user, rule=obj)


@admin.register(SpendAnomalyAlert)
class SpendAnomalyAlertAdmin(ModelAdmin):
    """The record of anomalous days: written only by the check."""

    list_display = ["project", "day", "spent", "median", "multiple", "created_at"]
    list_filter = ["day"]

    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False
