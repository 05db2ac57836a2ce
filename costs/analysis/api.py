"""REST API of the three analyses (`costs.analysis`): quota efficiency, waste and queueing, as JSON and CSV.

The range and filters are the report's (`ReportParamsSerializer`, the same checks and 400s naming the parameter),
without grouping, step or cluster; the caller sees their projects, platform staff all, as in the report."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from django.http import HttpResponse
from django.utils import timezone
from drf_spectacular.utils import extend_schema
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from core import csvstream
from costs import selectors
from costs.analysis import Scope
from costs.analysis.efficiency import Efficiency, QuotaRow, quota_efficiency
from costs.analysis.queueing import Queueing, QueueRow, queueing
from costs.analysis.waste import DEFAULT_GPU_UTIL_BELOW, Waste, WasteRow, waste
from costs.metering.pricing import HOUR
from costs.serializers import ReportParamsSerializer, currency
from tenancy.selectors import User


class AnalysisParamsSerializer(ReportParamsSerializer):
    """The report's range (month, or start and end) and project, organization and flavor filters."""

    group_by = None
    step = None
    cluster = None  # guarantees and queues are not per cluster
    as_of = None  # always now

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        query = super().validate(attrs)["query"]
        return {"window": query.window, "filters": dict(query.filters)}


class WasteParamsSerializer(AnalysisParamsSerializer):
    gpu_util_below = serializers.FloatField(required=False, default=DEFAULT_GPU_UTIL_BELOW, min_value=0,
                                            max_value=100, help_text="GPU utilization, in percent, counted as low.")

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        return {**super().validate(attrs), "gpu_util_below": attrs["gpu_util_below"]}


def scope_of(user: User, params: dict[str, Any]) -> Scope:
    return Scope(selectors.report_projects(user), params["window"], params["filters"], timezone.now())


def checked(serializer: type[serializers.Serializer], request: Request) -> dict[str, Any]:
    params = serializer(data=request.query_params, context={"request": request})
    params.is_valid(raise_exception=True)
    return params.validated_data


def _hours(seconds: float) -> float:
    return round(seconds / HOUR, 4)


def _money(amount: float) -> float:
    return round(amount, 4)


def _minutes(seconds: float | None) -> float | None:
    return None if seconds is None else round(seconds / 60, 2)


def efficiency_row(row: QuotaRow) -> dict[str, Any]:
    return {"project": row.labels.get("project", ""), "organization": row.labels.get("organization", ""),
            "flavor": row.labels.get("flavor", ""), "guaranteed": row.guaranteed,
            "guaranteed_device_hours": _hours(row.guaranteed_seconds), "used_device_hours": _hours(row.used_seconds),
            "used_cost": _money(row.used_cost), "within_guarantee_device_hours": _hours(row.within_seconds),
            "borrowed_device_hours": _hours(row.borrowed_seconds), "idle_device_hours": _hours(row.idle_seconds),
            "idle_cost": _money(row.idle_cost), "lent_device_hours": _hours(row.lent_seconds)}


def waste_row(row: WasteRow) -> dict[str, Any]:
    return {"job": row.job_id, "job_name": row.labels.get("job", ""), "project": row.labels.get("project", ""),
            "flavor": row.labels.get("flavor", ""),
            "failed_device_hours": _hours(row.failed_seconds), "failed_cost": _money(row.failed_cost),
            "lost_work_device_hours": _hours(row.lost_seconds), "lost_work_cost": _money(row.lost_cost),
            "low_util_device_hours": _hours(row.low_seconds), "low_util_cost": _money(row.low_cost),
            "low_gpu_util_device_hours": _hours(row.low_gpu_util_seconds)}


def queueing_row(row: QueueRow) -> dict[str, Any]:
    return {"project": row.labels.get("project", ""), "flavor": row.labels.get("flavor", ""),
            "admissions": len(row.waits), "wait_device_hours": _hours(row.wait_device_seconds),
            "median_wait_minutes": _minutes(row.median), "p90_wait_minutes": _minutes(row.p90),
            "waiting_jobs": row.waiting_jobs, "waiting_device_hours": _hours(row.waiting_device_seconds)}


def _range(params: dict[str, Any]) -> dict[str, Any]:
    window = params["window"]
    return {"start": window.start, "end": window.end - timedelta(days=1)}


def efficiency_json(found: Efficiency, params: dict[str, Any]) -> dict[str, Any]:
    return {"currency": currency(), **_range(params), "hours": round(found.hours, 4),
            "rows": [efficiency_row(row) for row in found.rows], "total": efficiency_row(found.total)}


def waste_json(found: Waste, params: dict[str, Any]) -> dict[str, Any]:
    return {"currency": currency(), **_range(params), "gpu_util_below": found.gpu_util_below,
            "rows": [waste_row(row) for row in found.rows], "total": waste_row(found.total)}


def queueing_json(found: Queueing, params: dict[str, Any]) -> dict[str, Any]:
    return {**_range(params), "rows": [queueing_row(row) for row in found.rows], "total": queueing_row(found.total)}


# ------------------------------------------------------------------------------------------------ responses

class _Range(serializers.Serializer):
    start = serializers.DateField()
    end = serializers.DateField(help_text="Last day included.")


class EfficiencyRowSerializer(serializers.Serializer):
    project = serializers.CharField()
    organization = serializers.CharField()
    flavor = serializers.CharField()
    guaranteed = serializers.IntegerField(help_text="Devices guaranteed now (the current quota).")
    guaranteed_device_hours = serializers.FloatField()
    used_device_hours = serializers.FloatField()
    used_cost = serializers.FloatField()
    within_guarantee_device_hours = serializers.FloatField()
    borrowed_device_hours = serializers.FloatField()
    idle_device_hours = serializers.FloatField()
    idle_cost = serializers.FloatField()
    lent_device_hours = serializers.FloatField(help_text="Part of the idle guarantee other projects borrowed.")


class EfficiencySerializer(_Range):
    currency = serializers.CharField()
    hours = serializers.FloatField(help_text="Hours of the range up to now.")
    rows = EfficiencyRowSerializer(many=True)
    total = EfficiencyRowSerializer()


class WasteRowSerializer(serializers.Serializer):
    job = serializers.IntegerField(allow_null=True)
    job_name = serializers.CharField()
    project = serializers.CharField()
    flavor = serializers.CharField()
    failed_device_hours = serializers.FloatField()
    failed_cost = serializers.FloatField()
    lost_work_device_hours = serializers.FloatField()
    lost_work_cost = serializers.FloatField()
    low_util_device_hours = serializers.FloatField(
        help_text="Device-hours under the threshold: by SM activity where the job has GPU telemetry, else by GPU "
                  "utilization.")
    low_util_cost = serializers.FloatField()
    low_gpu_util_device_hours = serializers.FloatField(
        help_text="The same by GPU utilization alone (which reads high while SMs wait), shown beside it.")


class WasteSerializer(_Range):
    currency = serializers.CharField()
    gpu_util_below = serializers.FloatField()
    rows = WasteRowSerializer(many=True)
    total = WasteRowSerializer()


class QueueingRowSerializer(serializers.Serializer):
    project = serializers.CharField()
    flavor = serializers.CharField()
    admissions = serializers.IntegerField()
    wait_device_hours = serializers.FloatField()
    median_wait_minutes = serializers.FloatField(allow_null=True)
    p90_wait_minutes = serializers.FloatField(allow_null=True)
    waiting_jobs = serializers.IntegerField(help_text="Jobs in the queue now.")
    waiting_device_hours = serializers.FloatField(help_text="Their waits so far, up to now.")


class QueueingSerializer(_Range):
    rows = QueueingRowSerializer(many=True)
    total = QueueingRowSerializer()


# ------------------------------------------------------------------------------------------------ views

def efficiency_of(user: User, params: dict[str, Any]) -> dict[str, Any]:
    return efficiency_json(quota_efficiency(scope_of(user, params)), params)


def waste_of(user: User, params: dict[str, Any]) -> dict[str, Any]:
    return waste_json(waste(scope_of(user, params), params["gpu_util_below"]), params)


def queueing_of(user: User, params: dict[str, Any]) -> dict[str, Any]:
    return queueing_json(queueing(scope_of(user, params)), params)


def csv_response(name: str, body: dict[str, Any]) -> HttpResponse:
    response = HttpResponse(content_type="text/csv")
    response["Content-Disposition"] = f'attachment; filename="{name}-{body["start"]}-{body["end"]}.csv"'
    writer = csvstream.writer(response)
    rows = body["rows"]
    columns = list(rows[0]) if rows else list(body["total"])
    writer.writerow(columns)
    for row in rows:
        writer.writerow(["" if row[column] is None else row[column] for column in columns])
    return response


class EfficiencyView(APIView):
    """Quota efficiency per project and flavor: the current guarantee over the range against what was used within
    it and borrowed, the idle guarantee in device-hours and money, and what of it other projects borrowed."""

    @extend_schema(parameters=[AnalysisParamsSerializer], responses={200: EfficiencySerializer})
    def get(self, request: Request) -> Response:
        return Response(efficiency_of(request.user, checked(AnalysisParamsSerializer, request)))


class EfficiencyCsvView(APIView):
    """Quota efficiency as CSV."""

    @extend_schema(parameters=[AnalysisParamsSerializer], responses={(200, "text/csv"): str})
    def get(self, request: Request) -> HttpResponse:
        return csv_response("efficiency", efficiency_of(request.user, checked(AnalysisParamsSerializer, request)))


class WasteView(APIView):
    """Waste per job: failed and lost attempts, work lost since the last checkpoint, and device-hours at low GPU
    utilization (`gpu_util_below`, percent)."""

    @extend_schema(parameters=[WasteParamsSerializer], responses={200: WasteSerializer})
    def get(self, request: Request) -> Response:
        return Response(waste_of(request.user, checked(WasteParamsSerializer, request)))


class WasteCsvView(APIView):
    """Waste per job as CSV."""

    @extend_schema(parameters=[WasteParamsSerializer], responses={(200, "text/csv"): str})
    def get(self, request: Request) -> HttpResponse:
        return csv_response("waste", waste_of(request.user, checked(WasteParamsSerializer, request)))


class QueueingView(APIView):
    """Queueing per project and flavor: device-hours waited by the admissions of the range, median and p90 wait,
    and the jobs still waiting now."""

    @extend_schema(parameters=[AnalysisParamsSerializer], responses={200: QueueingSerializer})
    def get(self, request: Request) -> Response:
        return Response(queueing_of(request.user, checked(AnalysisParamsSerializer, request)))


class QueueingCsvView(APIView):
    """Queueing as CSV."""

    @extend_schema(parameters=[AnalysisParamsSerializer], responses={(200, "text/csv"): str})
    def get(self, request: Request) -> HttpResponse:
        return csv_response("queueing", queueing_of(request.user, checked(AnalysisParamsSerializer, request)))
