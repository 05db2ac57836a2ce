"""Pages of the three analyses: the API's figures (`costs.analysis.api`) in a table sorted by any column, with the
report's range form (month, or start and end; project). Without a range, the current month. A bad parameter is
shown on the page (400) with the message the API gives."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlencode

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.urls import reverse
from django.utils import timezone

from costs.analysis import api as analysis_api
from costs.serializers import currency
from tenancy.selectors import projects_for_user

RANGE_FIELDS = ("month", "start", "end", "project")


@dataclass(frozen=True)
class Column:
    key: str
    label: str
    kind: str = "text"  # text, count, hours, money or minutes

    @property
    def numeric(self) -> bool:
        return self.kind != "text"


@dataclass(frozen=True)
class Page:
    name: str  # the URL name of the page; the API's is "cost-<name>"
    title: str
    intro: str
    params: type
    compute: Callable[[Any, dict[str, Any]], dict[str, Any]]
    columns: tuple[Column, ...]
    sort: str
    extra_fields: tuple[str, ...] = ()


EFFICIENCY = Page(
    "efficiency", "Quota efficiency",
    "Each project's current guarantee over the range up to now (from the quota's creation when it came later), "
    "against what it used within the guarantee and "
    "borrowed above it; the idle guarantee at the flavor's list price, and the part of it other projects of the "
    "organization borrowed.",
    analysis_api.AnalysisParamsSerializer, analysis_api.efficiency_of,
    (Column("project", "Project"), Column("flavor", "Flavor"), Column("guaranteed", "Guaranteed", "count"),
     Column("guaranteed_device_hours", "Guaranteed device-h", "hours"),
     Column("used_device_hours", "Used", "hours"), Column("within_guarantee_device_hours", "Within guarantee", "hours"),
     Column("borrowed_device_hours", "Borrowed", "hours"), Column("idle_device_hours", "Idle", "hours"),
     Column("idle_cost", "Idle cost", "money"), Column("lent_device_hours", "Lent", "hours")),
    "-idle_cost")
WASTE = Page(
    "waste", "Waste",
    "Per job: attempts that failed or were lost, whole; work lost to preemption or failure since the last "
    "checkpoint; device-hours with GPU use under the threshold (SM activity where the job has GPU telemetry, else "
    "GPU utilization; utilization alone beside it). The three overlap: they are not added.",
    analysis_api.WasteParamsSerializer, analysis_api.waste_of,
    (Column("job_name", "Job"), Column("project", "Project"), Column("flavor", "Flavor"),
     Column("failed_device_hours", "Failed device-h", "hours"), Column("failed_cost", "Failed cost", "money"),
     Column("lost_work_device_hours", "Lost work device-h", "hours"),
     Column("lost_work_cost", "Lost work cost", "money"),
     Column("low_util_device_hours", "Low GPU use device-h", "hours"),
     Column("low_util_cost", "Low GPU use cost", "money"),
     Column("low_gpu_util_device_hours", "Low GPU_UTIL device-h", "hours")),
    "-failed_cost", ("gpu_util_below",))
QUEUEING = Page(
    "queueing", "Queueing",
    "Per project and flavor: the waits of the jobs admitted in the range (from entering the queue to admission, "
    "times the devices asked), their median and p90, and the jobs waiting now with their wait so far.",
    analysis_api.AnalysisParamsSerializer, analysis_api.queueing_of,
    (Column("project", "Project"), Column("flavor", "Flavor"), Column("admissions", "Admissions", "count"),
     Column("wait_device_hours", "Waited device-h", "hours"),
     Column("median_wait_minutes", "Median wait (min)", "minutes"),
     Column("p90_wait_minutes", "p90 wait (min)", "minutes"), Column("waiting_jobs", "Waiting now", "count"),
     Column("waiting_device_hours", "Waiting device-h", "hours")),
    "-wait_device_hours")


def _text(value: Any, kind: str) -> str:
    if value is None:
        return "—"
    if kind == "money":
        return f"{value:,.2f}"
    if kind in ("hours", "minutes"):
        return f"{value:,.1f}"
    return str(value)


def _sorted(rows: list[dict[str, Any]], columns: tuple[Column, ...], sort: str) -> list[dict[str, Any]]:
    key = sort.lstrip("-")
    column = next(c for c in columns if c.key == key)
    present = [r for r in rows if r[key] is not None]
    present.sort(key=lambda r: r[key] if column.numeric else str(r[key]).lower(), reverse=sort.startswith("-"))
    return present + [r for r in rows if r[key] is None]  # no figure: last either way


def _header(column: Column, sort: str) -> dict[str, Any]:
    """Numbers sort largest first on the first click, text A to Z; a second click reverses."""
    current = "asc" if sort == column.key else "desc" if sort == f"-{column.key}" else ""
    first = f"-{column.key}" if column.numeric else column.key
    following = {"asc": f"-{column.key}", "desc": column.key}.get(current, first)
    return {"label": column.label, "next_sort": following, "current": current, "numeric": column.numeric}


def _cells(row: dict[str, Any], columns: tuple[Column, ...]) -> list[dict[str, Any]]:
    cells = []
    for column in columns:
        url = reverse("job_detail", args=[row["job"]]) if column.key == "job_name" and row.get("job") else ""
        cells.append({"text": _text(row[column.key], column.kind), "url": url, "numeric": column.numeric})
    return cells


def _render(request: HttpRequest, page: Page) -> HttpResponse:
    data = {name: value for name in (*RANGE_FIELDS, *page.extra_fields) if (value := request.GET.get(name, ""))}
    if not {"month", "start", "end"} & data.keys():
        data["month"] = timezone.now().strftime("%Y-%m")
    params = page.params(data=data, context={"request": request})
    sort = request.GET.get("sort", page.sort)
    if sort.lstrip("-") not in {c.key for c in page.columns}:
        sort = page.sort
    context: dict[str, Any] = {"page": page, "form": data, "query": urlencode(data),
                               "currency": currency(),
                               "projects": projects_for_user(request.user).order_by("slug"),
                               "headers": [_header(c, sort) for c in page.columns], "errors": []}
    if not params.is_valid():
        context["errors"] = [f"{name}: {' '.join(map(str, messages))}" for name, messages in params.errors.items()]
        return render(request, "costs/analysis_page.html", context, status=400)
    body = page.compute(request.user, params.validated_data)
    context.update(body=body, rows=[_cells(row, page.columns) for row in _sorted(body["rows"], page.columns, sort)],
                   total=_cells(body["total"], page.columns))
    return render(request, "costs/analysis_page.html", context)


@login_required
def efficiency(request: HttpRequest) -> HttpResponse:
    return _render(request, EFFICIENCY)


@login_required
def waste(request: HttpRequest) -> HttpResponse:
    return _render(request, WASTE)


@login_required
def queueing(request: HttpRequest) -> HttpResponse:
    return _render(request, QUEUEING)
