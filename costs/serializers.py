"""Report parameters (checked before any query: a bad one is a 400 naming it), the price catalog and budgets."""

from __future__ import annotations

import re
from datetime import UTC, date, datetime, timedelta
from typing import Any

from django.conf import settings
from django.utils import timezone
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from clusters.selectors import clusters
from core import k8snames
from core.serializers import StrictModelSerializer
from costs.budgets.status import BudgetStatus
from costs.budgets.status import statuses as budget_statuses
from costs.models import (
    Budget,
    ClassDiscount,
    CpuPrice,
    DevicePrice,
    MemoryPrice,
    OrganizationBudget,
    SpendAnomalyRule,
    TidalRate,
    UserBudget,
)
from costs.reports.usage import GROUPS, LABEL_PREFIX, STEPS, ReportQuery, Window, label_key
from costs.selectors import budget_organizations, budget_users
from quotas.selectors import flavors, priority_classes
from tenancy.selectors import organizations_for_user, projects_for_user
from tenancy.serializers import ScopedProjectField

MONTH = re.compile(r"(\d{4})-(\d{2})\Z")
# The first day no report covers. A report's window ends the day after its last day, and a week or month period
# may end later still: the calendar's last month is left out so that no end falls past 9999-12-31 (an
# OverflowError, a 500, before).
CALENDAR_END = date(date.max.year, 12, 1)


def month_window(text: str) -> Window:
    """`2026-12` as the window of that month (ValueError when it is not a month)."""
    match = MONTH.match(text)
    if not match:
        raise ValueError("Use YYYY-MM, e.g. 2026-12.")
    first = date(int(match[1]), int(match[2]), 1)  # ValueError for month 13
    if first >= CALENDAR_END:
        raise ValueError(f"The last month a report covers is {CALENDAR_END - timedelta(days=1):%Y-%m}.")
    following = (first + timedelta(days=32)).replace(day=1)
    return Window(first, following)


class ReportParamsSerializer(serializers.Serializer):
    start = serializers.DateField(required=False, help_text="First UTC day (with end; or use month).")
    end = serializers.DateField(required=False, help_text="Last UTC day, included.")
    month = serializers.CharField(required=False, help_text="A calendar month, YYYY-MM, instead of start and end.")
    group_by = serializers.CharField(required=False, default="project",
                                     help_text=(f"Comma-separated, any of: {', '.join(GROUPS)}, or label:<key> for a "
                                                "job label (jobs without it: '(none)'). Empty: totals only."),
                                     allow_blank=True)
    step = serializers.ChoiceField(choices=STEPS, required=False, help_text=(
        "A row per hour, day, week or month (hourly: a range of at most TIDAL_COST_MAX_HOURLY_DAYS days)."))
    project = serializers.CharField(required=False, help_text="Only this project (slug).")
    organization = serializers.CharField(required=False, help_text="Only this organization (name).")
    flavor = serializers.CharField(required=False, help_text="Only this flavor (name).")
    cluster = serializers.CharField(required=False, help_text="Only this cluster (name).")
    as_of = serializers.DateTimeField(required=False, help_text=(
        "The moment the report is as of (default: now): running jobs count up to it. A page's CSV link passes the "
        "page's moment, so both give the same figures."))

    def validate_as_of(self, value: datetime) -> int:
        try:
            moment = int(value.astimezone(UTC).timestamp())
        except (OverflowError, ValueError):  # past the calendar once in UTC
            raise serializers.ValidationError("The moment is outside the years 1 to 9999 in UTC.") from None
        if moment > timezone.now().timestamp():
            raise serializers.ValidationError("The moment is in the future: a report is as of now or earlier.")
        return moment

    def validate_group_by(self, value: str) -> list[str]:
        names = [name.strip() for name in value.split(",") if name.strip()]
        for name in names:
            key = label_key(name)
            if key is not None:
                problem = k8snames.label_key_problem(key)
                if problem:
                    raise serializers.ValidationError(f"Label key {key!r} is not valid: {problem}.")
        unknown = [name for name in names if name not in GROUPS and label_key(name) is None]
        if unknown:
            raise serializers.ValidationError(f"Unknown group {unknown[0]!r}; choose from {', '.join(GROUPS)} "
                                              f"or {LABEL_PREFIX}<label key>.")
        if len(set(names)) != len(names):
            raise serializers.ValidationError("A group is named twice.")
        return names

    def _window(self, attrs: dict[str, Any]) -> Window:
        if "month" in attrs:
            if "start" in attrs or "end" in attrs:
                raise serializers.ValidationError({"month": ["Give a month or a start and an end, not both."]})
            try:
                return month_window(attrs["month"])
            except ValueError as error:
                raise serializers.ValidationError({"month": [str(error)]}) from None
        for name in ("start", "end"):
            if name not in attrs:
                raise serializers.ValidationError({name: ["Required (a range needs both ends), or give month."]})
        if attrs["end"] < attrs["start"]:
            raise serializers.ValidationError({"end": ["The range ends before it starts."]})
        if attrs["end"] >= CALENDAR_END:
            last = CALENDAR_END - timedelta(days=1)
            raise serializers.ValidationError({"end": [f"The last day a report covers is {last}."]})
        window = Window(attrs["start"], attrs["end"] + timedelta(days=1))
        longest = settings.TIDAL["COST_MAX_RANGE_DAYS"]
        if (window.end - window.start).days > longest:
            raise serializers.ValidationError({"end": [f"The range covers more than {longest} days."]})
        return window

    @staticmethod
    def _check_hourly(window: Window, step: str | None) -> None:
        """An hourly report prices segments one by one (days have no hours): its range is bounded."""
        longest = settings.TIDAL["COST_MAX_HOURLY_DAYS"]
        if step == "hour" and (window.end - window.start).days > longest:
            raise serializers.ValidationError({"step": [
                f"An hourly report covers at most {longest} days and this range has {(window.end - window.start).days}"
                "; choose a shorter range or a daily step."]})

    def _filters(self, attrs: dict[str, Any]) -> dict[str, int]:
        user = self.context["request"].user
        catalogs = {"project": (projects_for_user(user), "slug", "project_id"),
                    "organization": (organizations_for_user(user), "name", "organization_id"),
                    "flavor": (flavors(), "name", "flavor_id"),
                    "cluster": (clusters(), "name", "cluster_id")}
        filters = {}
        for name, (visible, field, column) in catalogs.items():
            if name in attrs:
                found = visible.filter(**{field: attrs[name]}).values_list("id", flat=True).first()
                if found is None:
                    raise serializers.ValidationError({name: [f"No {name} named {attrs[name]!r}."]})
                filters[column] = found
        return filters

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        window = self._window(attrs)
        self._check_hourly(window, attrs.get("step"))
        return {"query": ReportQuery(window, tuple(attrs.get("group_by", ["project"])),
                                     attrs.get("step"), self._filters(attrs), attrs.get("as_of"))}


class ReportCsvParamsSerializer(ReportParamsSerializer):
    """The report's parameters, and which part of it the CSV holds."""

    section = serializers.ChoiceField(choices=("usage", "idle"), required=False, default="usage", help_text=(
        "The report's rows (usage, default) or its idle guarantee per project (idle)."))

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        return {**super().validate(attrs), "section": attrs.get("section", "usage")}


def currency() -> str:
    return settings.TIDAL["CURRENCY"]


class DevicePriceSerializer(StrictModelSerializer):
    flavor = serializers.SlugRelatedField(slug_field="name", queryset=flavors())
    cluster = serializers.SlugRelatedField(slug_field="name", queryset=clusters(), required=False,
                                           allow_null=True, default=None)

    class Meta:
        model = DevicePrice
        fields = ["id", "flavor", "cluster", "per_device_hour", "effective_from", "note"]
        validators: list = []  # overlapping dates are the service's rule, named on effective_from


class CpuPriceSerializer(StrictModelSerializer):
    class Meta:
        model = CpuPrice
        fields = ["id", "per_core_hour", "effective_from", "note"]
        validators: list = []


class MemoryPriceSerializer(StrictModelSerializer):
    flavor = serializers.SlugRelatedField(slug_field="name", queryset=flavors())
    cluster = serializers.SlugRelatedField(slug_field="name", queryset=clusters(), required=False,
                                           allow_null=True, default=None)

    class Meta:
        model = MemoryPrice
        fields = ["id", "flavor", "cluster", "per_gib_hour", "effective_from", "note"]
        validators: list = []


class ClassDiscountSerializer(StrictModelSerializer):
    priority_class = serializers.SlugRelatedField(slug_field="name", queryset=priority_classes())

    class Meta:
        model = ClassDiscount
        fields = ["id", "priority_class", "factor", "effective_from", "note"]
        validators: list = []


class TidalRateSerializer(StrictModelSerializer):
    class Meta:
        model = TidalRate
        fields = ["id", "factor", "effective_from", "note"]
        validators: list = []


class ReportRowSerializer(serializers.Serializer):
    period = serializers.CharField(allow_null=True, help_text=(
        "The period's first day (YYYY-MM-DD), or its hour (2026-01-01T05:00:00Z) with step=hour; null unstepped."))
    group = serializers.DictField(child=serializers.CharField(), help_text="The row's label per group.")
    device_hours = serializers.FloatField()
    cpu_hours = serializers.FloatField()
    memory_gib_hours = serializers.FloatField(help_text="GiB-hours of memory requested.")
    cost = serializers.FloatField(help_text=(
        "Everything: devices or CPU, and memory; to the cent, the exact sum rounded once (halves up)."))
    memory_cost = serializers.FloatField(help_text="The part of cost memory cost, to the cent.")


class IdleRowSerializer(serializers.Serializer):
    project = serializers.CharField()
    organization = serializers.CharField()
    guaranteed_device_hours = serializers.FloatField()
    idle_device_hours = serializers.FloatField(help_text="Guaranteed but not used within the guarantee.")
    idle_cost = serializers.FloatField(help_text="The idle device-hours at the flavor's list price.")


class IdleGuaranteeSerializer(serializers.Serializer):
    rows = IdleRowSerializer(many=True)
    total = IdleRowSerializer()


class ReportSerializer(serializers.Serializer):
    currency = serializers.CharField()
    start = serializers.DateField()
    end = serializers.DateField(help_text="Last day included.")
    as_of = serializers.DateTimeField(help_text="The moment the report is as of: running jobs count up to it.")
    group_by = serializers.ListField(child=serializers.CharField())
    step = serializers.CharField(allow_null=True)
    rows = ReportRowSerializer(many=True)
    total = ReportRowSerializer()
    idle_guarantee = IdleGuaranteeSerializer(allow_null=True, help_text=(
        "Per project, guaranteed device-hours not used and their cost (docs/costs.md); null when filtered by "
        "cluster (guarantees are not per cluster)."))
    figures = serializers.DictField(child=serializers.JSONField(), help_text=(
        "What other parts add over the report's projects and range, by name: `lost_to_failures` (reliability): "
        "GPU-hours and money failed attempts lost, in all and per project; `tidal`: the device-hours run on "
        "capacity pools lent, their cost at the tidal rate, `normal_cost` at their class's rate and `saved`."))


class BudgetListSerializer(serializers.ListSerializer):
    """Prices a page of budgets with one set of reports for all of them, not one per row."""

    def to_representation(self, data: Any) -> list:
        rows = list(data.all() if hasattr(data, "all") else data)
        found = self.context.setdefault("statuses", {})
        for status in budget_statuses([row for row in rows if row.pk not in found], self.context_now()):
            found[status.budget.pk] = status
        return super().to_representation(rows)

    def context_now(self) -> datetime:
        return self.context.setdefault("now", timezone.now())


class BudgetStatusFields(StrictModelSerializer):
    """What every budget shows beside its own fields: this month's spend, percent and forecast, from the reports."""

    currency = serializers.SerializerMethodField()
    month = serializers.SerializerMethodField(help_text="The month the computed fields cover, YYYY-MM (UTC).")
    spent_this_month = serializers.SerializerMethodField()
    percent = serializers.SerializerMethodField(help_text="Spent as a percent of the amount; null for a zero budget.")
    forecast = serializers.SerializerMethodField(help_text="Expected cost of the month at its end.")
    forecast_basis = serializers.SerializerMethodField(help_text="Which estimate of the rest of the month it used.")
    exhausted = serializers.SerializerMethodField(help_text="Spent at least the amount this month.")

    def status(self, budget: Budget) -> BudgetStatus:
        found = self.context.setdefault("statuses", {})
        if budget.pk not in found:
            found[budget.pk] = budget_statuses([budget], self.context.setdefault("now", timezone.now()))[0]
        return found[budget.pk]

    def get_currency(self, budget: Budget) -> str:
        return currency()

    def get_month(self, budget: Budget) -> str:
        return f"{self.status(budget).month:%Y-%m}"

    @extend_schema_field(serializers.FloatField())
    def get_spent_this_month(self, budget: Budget) -> float:
        return round(self.status(budget).spent, 2)

    @extend_schema_field(serializers.FloatField(allow_null=True))
    def get_percent(self, budget: Budget) -> float | None:
        percent = self.status(budget).percent
        return None if percent is None else round(percent, 1)

    @extend_schema_field(serializers.FloatField())
    def get_forecast(self, budget: Budget) -> float:
        return round(self.status(budget).forecast.total, 2)

    def get_forecast_basis(self, budget: Budget) -> str:
        return self.status(budget).forecast.basis

    def get_exhausted(self, budget: Budget) -> bool:
        return self.status(budget).exhausted


COMPUTED = ["currency", "month", "spent_this_month", "percent", "forecast", "forecast_basis", "exhausted"]


class BudgetSerializer(BudgetStatusFields):
    """A project's monthly budget; what it spent this month, the percent and the forecast are computed from the
    cost reports (docs/costs.md#budgets)."""

    project = ScopedProjectField()

    class Meta:
        model = Budget
        fields = ["id", "project", "amount", "thresholds", "hard", *COMPUTED]
        list_serializer_class = BudgetListSerializer


class OrganizationBudgetSerializer(BudgetStatusFields):
    """An organization's monthly budget (all its projects together); staff write it."""

    organization = serializers.SlugRelatedField(slug_field="slug", queryset=budget_organizations())

    class Meta:
        model = OrganizationBudget
        fields = ["id", "organization", "amount", "thresholds", "hard", *COMPUTED]
        list_serializer_class = BudgetListSerializer
        validators: list = []  # one budget per organization: the service's rule, named on organization


class UserBudgetSerializer(BudgetStatusFields):
    """A user's monthly budget (their jobs in every project together); staff write it."""

    user = serializers.SlugRelatedField(slug_field="username", queryset=budget_users())

    class Meta:
        model = UserBudget
        fields = ["id", "user", "amount", "thresholds", "hard", *COMPUTED]
        list_serializer_class = BudgetListSerializer
        validators: list = []


class SpendAnomalyRuleSerializer(StrictModelSerializer):
    """A project's terms for spend anomaly alerts (docs/costs.md#spend-anomalies)."""

    project = ScopedProjectField()

    class Meta:
        model = SpendAnomalyRule
        fields = ["id", "project", "multiple", "trailing_days", "enabled"]
