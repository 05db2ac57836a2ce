"""REST API of cost reports (JSON and streamed CSV), of the price catalog (everybody reads, staff write) and of
budgets (a project's members read, its admins write)."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from datetime import UTC, date, datetime, timedelta
from itertools import islice

import django_filters
from django.http import StreamingHttpResponse
from django.utils import timezone
from drf_spectacular.utils import extend_schema
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from core.csvstream import line_writer
from costs import selectors, services
from costs.models import Budget, SpendAnomalyRule
from costs.reports.idle import IdleGuarantee, IdleRow, idle_guarantee
from costs.reports.panels import covered, report_extras
from costs.reports.usage import CHUNK, Report, ReportQuery, Row, money, report_rows, usage_report
from costs.serializers import (
    BudgetSerializer,
    ClassDiscountSerializer,
    CpuPriceSerializer,
    DevicePriceSerializer,
    MemoryPriceSerializer,
    OrganizationBudgetSerializer,
    ReportCsvParamsSerializer,
    ReportParamsSerializer,
    ReportSerializer,
    SpendAnomalyRuleSerializer,
    TidalRateSerializer,
    UserBudgetSerializer,
    currency,
)
from quotas.api import CatalogViewSet
from tenancy.filters import project_filter
from tenancy.models import Project
from tenancy.scoping import visible_to_everyone
from tracking.api import ProjectSettingViewSet

AS_OF_HEADER = "X-Tidal-As-Of"  # the CSV's moment, also in its file name


def report_params(request: Request, serializer: type[ReportParamsSerializer] = ReportParamsSerializer) -> dict:
    params = serializer(data=request.query_params, context={"request": request})
    params.is_valid(raise_exception=True)
    return params.validated_data


def report_query(request: Request) -> ReportQuery:
    return report_params(request)["query"]


def idle_row_json(row: IdleRow) -> dict:
    return {"project": row.labels.get("project", ""), "organization": row.labels.get("organization", ""),
            "guaranteed_device_hours": round(row.guaranteed_device_hours, 4),
            "idle_device_hours": round(row.idle_device_hours, 4), "idle_cost": round(row.idle_cost, 4)}


def idle_json(idle: IdleGuarantee | None) -> dict | None:
    if idle is None:
        return None
    return {"rows": [idle_row_json(row) for row in idle.rows], "total": idle_row_json(idle.total)}


def row_json(row: Row, group_by: Sequence[str]) -> dict:
    return {"period": period_text(row.period) or None, "group": {name: row.labels.get(name, "") for name in group_by},
            "device_hours": round(row.device_hours, 4), "cpu_hours": round(row.cpu_hours, 4),
            "memory_gib_hours": round(row.memory_gib_hours, 4), "cost": money(row.cost),
            "memory_cost": money(row.memory_cost)}


def as_of(query: ReportQuery, now: datetime) -> datetime:
    """The moment a report is as of: its query's, else `now` to the second."""
    return datetime.fromtimestamp(query.moment(now), UTC)


def report_json(report: Report, moment: datetime, idle: IdleGuarantee | None = None) -> dict:
    query = report.query
    return {"currency": currency(), "start": query.window.start, "end": query.window.end - timedelta(days=1),
            "as_of": moment, "group_by": list(query.group_by), "step": query.step,
            "rows": [row_json(row, query.group_by) for row in report.rows],
            "total": row_json(report.total, ()), "idle_guarantee": idle_json(idle)}


class CostReportView(APIView):
    """Device-hours, CPU core-hours and cost of the caller's projects (all projects for platform staff), grouped
    and per period. The range is `month` or `start` and `end` (UTC days, both included)."""

    @extend_schema(parameters=[ReportParamsSerializer], responses={200: ReportSerializer})
    def get(self, request: Request) -> Response:
        query = report_query(request)
        moment = as_of(query, timezone.now())
        projects = selectors.report_projects(request.user)
        report = usage_report(projects, query, moment)
        answer = report_json(report, moment, idle_guarantee(projects, query, moment))
        answer["figures"] = report_extras(request, *covered(projects, query))
        return Response(answer)


def period_text(period: date | None) -> str:
    """A day as YYYY-MM-DD, an hour (an hourly report's period) as 2026-01-01T05:00:00Z."""
    if isinstance(period, datetime):
        return period.astimezone(UTC).isoformat().replace("+00:00", "Z")
    return "" if period is None else period.isoformat()


def csv_lines(rows: Iterator[Row], query: ReportQuery) -> Iterator[str]:
    """The header, then the rows in blocks of CHUNK lines: the response writes once a block, not once a line (29%
    of the time of a large export went into writing lines one by one). A period column only with a step."""
    writer, stepped = line_writer(), bool(query.step)
    unit = currency().lower()
    yield writer.writerow([*(["period"] if stepped else []), *query.group_by, "device_hours", "cpu_hours",
                           "memory_gib_hours", f"cost_{unit}", f"memory_cost_{unit}"])
    while block := list(islice(rows, CHUNK)):
        yield "".join(writer.writerow([*([period_text(row.period)] if stepped else []),
                                       *(row.labels.get(name, "") for name in query.group_by),
                                       f"{row.device_hours:.4f}", f"{row.cpu_hours:.4f}",
                                       f"{row.memory_gib_hours:.4f}", money(row.cost), money(row.memory_cost)])
                      for row in block)


def idle_csv_lines(idle: IdleGuarantee | None) -> Iterator[str]:
    """The idle guarantee per project (none when the report is filtered by cluster: only the header)."""
    writer, money = line_writer(), currency().lower()
    yield writer.writerow(["project", "organization", "guaranteed_device_hours", "idle_device_hours",
                           f"idle_cost_{money}"])
    for row in idle.rows if idle is not None else ():
        yield writer.writerow([row.labels.get("project", ""), row.labels.get("organization", ""),
                               f"{row.guaranteed_device_hours:.4f}", f"{row.idle_device_hours:.4f}",
                               f"{row.idle_cost:.4f}"])


class CostReportCsvView(APIView):
    """The same report as CSV, streamed: a year of daily rows per job is written as it is read. With
    `section=idle`, its idle guarantee per project instead."""

    @extend_schema(parameters=[ReportCsvParamsSerializer], responses={(200, "text/csv"): str})
    def get(self, request: Request) -> StreamingHttpResponse:
        params = report_params(request, ReportCsvParamsSerializer)
        query = params["query"]
        moment = as_of(query, timezone.now())
        projects = selectors.report_projects(request.user)
        if params["section"] == "idle":
            lines = idle_csv_lines(idle_guarantee(projects, query, moment))
        else:
            lines = csv_lines(report_rows(projects, query, moment), query)
        response = StreamingHttpResponse(lines, content_type="text/csv")
        section = "-idle" if params["section"] == "idle" else ""
        name = (f"costs{section}-{query.window.start}-{query.window.end - timedelta(days=1)}"
                f"-as-of-{moment:%Y%m%dT%H%M%SZ}.csv")
        response["Content-Disposition"] = f'attachment; filename="{name}"'
        response[AS_OF_HEADER] = moment.isoformat()
        return response


class PriceViewSet(CatalogViewSet):
    """Effective-dated prices: a price in force or past is history (400 on change or delete)."""

    lookup_field = "pk"

    @staticmethod
    def save_with(*, actor, obj, values):
        return services.price_save(actor=actor, price=obj, values=values)

    @staticmethod
    def delete_with(*, actor, obj):
        services.price_delete(actor=actor, price=obj)


class DevicePriceViewSet(PriceViewSet):
    selector = visible_to_everyone(selectors.device_prices)
    serializer_class = DevicePriceSerializer


class CpuPriceViewSet(PriceViewSet):
    selector = visible_to_everyone(selectors.cpu_prices)
    serializer_class = CpuPriceSerializer


class MemoryPriceViewSet(PriceViewSet):
    selector = visible_to_everyone(selectors.memory_prices)
    serializer_class = MemoryPriceSerializer


class ClassDiscountViewSet(PriceViewSet):
    selector = visible_to_everyone(selectors.class_discounts)
    serializer_class = ClassDiscountSerializer


class TidalRateViewSet(PriceViewSet):
    """The factor devices on tidal capacity (lent by a pool) pay of the price, instead of their class's."""

    selector = visible_to_everyone(selectors.tidal_rates)
    serializer_class = TidalRateSerializer


class BudgetFilter(django_filters.FilterSet):
    project = project_filter()

    class Meta:
        model = Budget
        fields = ["project"]


class BudgetViewSet(ProjectSettingViewSet):
    """A project's monthly budget (one per project): every role of the project reads it with what was spent this
    month, the percent and the month-end forecast; its admins and owners (and staff) write it."""

    selector = staticmethod(selectors.budgets_for_user)
    serializer_class = BudgetSerializer
    filterset_class = BudgetFilter
    noun = "A budget"

    def new(self, project: Project) -> Budget:
        return Budget(project=project)

    def save(self, obj: Budget, values: dict) -> Budget:
        return services.budget_save(actor=self.request.user, budget=obj, values=values)

    def remove(self, obj: Budget) -> None:
        services.budget_delete(actor=self.request.user, budget=obj)


class ScopedBudgetViewSet(CatalogViewSet):
    """An organization's or a user's monthly budget: those who may see it read it with this month's figures (an
    organization's: the members of its projects; a user's: the user), platform staff write it."""

    lookup_field = "pk"

    @staticmethod
    def save_with(*, actor, obj, values):
        return services.scoped_budget_save(actor=actor, budget=obj, values=values)

    @staticmethod
    def delete_with(*, actor, obj):
        services.scoped_budget_delete(actor=actor, budget=obj)


class OrganizationBudgetViewSet(ScopedBudgetViewSet):
    selector = staticmethod(selectors.organization_budgets_for_user)
    serializer_class = OrganizationBudgetSerializer


class UserBudgetViewSet(ScopedBudgetViewSet):
    selector = staticmethod(selectors.user_budgets_for_user)
    serializer_class = UserBudgetSerializer


class SpendAnomalyRuleFilter(django_filters.FilterSet):
    project = project_filter()

    class Meta:
        model = SpendAnomalyRule
        fields = ["project"]


class SpendAnomalyRuleViewSet(ProjectSettingViewSet):
    """A project's own terms for spend anomaly alerts (the multiple of the trailing median, the trailing days, on or
    off): every role of the project reads them, its admins and owners (and staff) write them."""

    selector = staticmethod(selectors.anomaly_rules_for_user)
    serializer_class = SpendAnomalyRuleSerializer
    filterset_class = SpendAnomalyRuleFilter
    noun = "A spend anomaly rule"

    def new(self, project: Project) -> SpendAnomalyRule:
        return SpendAnomalyRule(project=project)

    def save(self, obj: SpendAnomalyRule, values: dict) -> SpendAnomalyRule:
        return services.anomaly_rule_save(actor=self.request.user, rule=obj, values=values)

    def remove(self, obj: SpendAnomalyRule) -> None:
        services.anomaly_rule_delete(actor=self.request.user, rule=obj)
