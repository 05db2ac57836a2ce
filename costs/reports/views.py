"""Cost report pages: `/costs/` (the caller's projects, platform staff all of them) and the staff-only
`/costs/admin/` (cluster-wide utilization, fragmentation, top projects, the monthly chargeback).

Parameters are the API's (`costs.serializers.ReportParamsSerializer`, the same 400s naming the parameter, shown on the
page), so the page's "Download CSV" link is `/api/v1/costs/csv/` with the very query the page ran. The chart data is
rendered into the page (`json_script`): the page makes no second request. Data gathering for the admin page lives in
`costs.reports.staff`.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence
from datetime import UTC, date, datetime, timedelta
from typing import Any
from urllib.parse import urlencode

from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponse, QueryDict
from django.shortcuts import render
from django.urls import reverse
from django.utils import timezone

from clusters.selectors import clusters
from costs import selectors
from costs.metering.pricing import DAY
from costs.metering.rollup import EPOCH_DAY
from costs.reports import staff
from costs.reports.idle import idle_guarantee
from costs.reports.panels import covered, report_panels
from costs.reports.usage import (
    GROUPS,
    LABEL_PREFIX,
    STEPS,
    Report,
    ReportQuery,
    from_micros,
    hour_of,
    label_key,
    money,
    period_of,
    usage_report,
)
from costs.serializers import ReportParamsSerializer, currency, month_window
from quotas.selectors import flavors
from tenancy.models import Project
from tenancy.selectors import projects_for_user

DEFAULT_GROUPS = ("project", "flavor")
DEFAULT_STEP = "day"
# The parameters the page passes on to the report as they are (group_by is joined from the multi-select).
PASSED_ON = ("month", "start", "end", "step", "project", "organization", "flavor", "cluster", "as_of")
RANGE_PARAMS = ("month", "start", "end")
TOP_GROUPS = 8  # stacked series beyond a handful are unreadable: the rest are summed as "other"
MAX_TABLE_ROWS = 2000  # a month of daily rows per job can be tens of thousands: the CSV has them all
OTHER = "other"


def this_month(now: datetime) -> str:
    return now.astimezone(UTC).strftime("%Y-%m")


def report_params(query: QueryDict, now: datetime) -> dict[str, str]:
    """The page's query as the report API's parameters: blanks dropped, the group-by multi-select joined with commas
    (an explicitly empty choice means totals only), and the defaults where the query says nothing: the current UTC
    month, grouped by project and flavor, per day."""
    params = {name: query[name].strip() for name in PASSED_ON if query.get(name, "").strip()}
    if "group_by" in query:
        chosen = (name.strip() for value in query.getlist("group_by") for name in value.split(","))
        params["group_by"] = ",".join(name for name in chosen if name)
    else:
        params["group_by"] = ",".join(DEFAULT_GROUPS)
    # The page's "labels" field: job label keys to group by too, typed comma-separated (team, cost-center).
    keys = [key.strip() for key in query.get("labels", "").split(",") if key.strip()]
    if keys:
        names = [*params["group_by"].split(","), *(LABEL_PREFIX + key for key in keys)]
        params["group_by"] = ",".join(dict.fromkeys(name for name in names if name))
    if not params.keys() & set(RANGE_PARAMS):
        params["month"] = this_month(now)
    params.setdefault("step", DEFAULT_STEP)
    return params


def moment_of(now: datetime) -> str:
    """`now` to the second, as the report's `as_of`: the page and its CSV link are as of the same moment."""
    return now.astimezone(UTC).replace(microsecond=0).isoformat().replace("+00:00", "Z")


def validated_query(request: HttpRequest, params: Mapping[str, str]) -> tuple[ReportQuery | None, list[str]]:
    """The report query, or the serializer's messages, each naming its parameter."""
    serializer = ReportParamsSerializer(data=dict(params), context={"request": request})
    if serializer.is_valid():
        return serializer.validated_data["query"], []
    errors = []
    for name, messages in serializer.errors.items():
        for message in messages:
            errors.append(str(message) if name == "non_field_errors" else f"{name}: {message}")
    return None, errors


def epoch_seconds(day: date) -> int:
    if isinstance(day, datetime):  # an hour
        return int(day.timestamp())
    return (day - EPOCH_DAY).days * DAY


def periods_of(query: ReportQuery) -> list[date | None]:
    """Every period of the window, with or without usage, so the chart spans the whole range (one, None, when the
    query is not stepped)."""
    if query.step == "hour":
        return [hour_of(at) for at in range(query.window.start_ts, query.window.end_ts, 3600)]
    found: list[date | None] = []
    day = query.window.start
    while day < query.window.end:
        period = period_of(day, query.step)
        if not found or found[-1] != period:
            found.append(period)
        day += timedelta(days=1)
    return found


def group_label(labels: Mapping[str, str], group_by: Sequence[str]) -> str:
    return " · ".join(labels.get(name) or "—" for name in group_by) if group_by else "total"


def stacked_series(report: Report, top: int = TOP_GROUPS) -> dict[str, Any]:
    """Cost per period of the `top` costliest groups over the range, the rest summed as "other": the stacked
    chart's data, largest group first (x: each period's first UTC day, epoch seconds)."""
    periods = periods_of(report.query)
    index = {period: i for i, period in enumerate(periods)}
    costs: dict[str, list[int]] = defaultdict(lambda: [0] * len(periods))  # micro-units, added exactly
    for row in report.rows:
        costs[group_label(row.labels, report.query.group_by)][index[row.period]] += row.cost_micros
    ranked = sorted(costs, key=lambda label: (-sum(costs[label]), label))
    series: list[dict[str, Any]] = [{"label": label, "values": costs[label]} for label in ranked[:top]]
    if len(ranked) > top:
        rest = [sum(costs[label][i] for label in ranked[top:]) for i in range(len(periods))]
        series.append({"label": OTHER, "values": rest})
    for entry in series:  # to the cent, as the table shows it (a number: the chart's data)
        entry["values"] = [float(money(from_micros(value))) for value in entry["values"]]
    # An unstepped report's one period (None) starts with its window (the page always steps its report).
    x = [epoch_seconds(period or report.query.window.start) for period in periods]
    return {"x": x, "series": series, "currency": currency()}


def table_rows(report: Report) -> tuple[list[dict[str, Any]], int]:
    """The table's rows (the costliest `MAX_TABLE_ROWS` when there are more) and how many rows the report has."""
    rows = report.rows
    if len(rows) > MAX_TABLE_ROWS:
        rows = sorted(rows, key=lambda row: -row.cost_micros)[:MAX_TABLE_ROWS]
    return [{"period": row.period, "groups": [row.labels.get(name, "") for name in report.query.group_by],
             "device_hours": row.device_hours, "cpu_hours": row.cpu_hours, "memory_gib_hours": row.memory_gib_hours,
             "cost": money(row.cost), "memory_cost": money(row.memory_cost)}
            for row in rows], len(report.rows)


def _form_context(request: HttpRequest, params: Mapping[str, str]) -> dict[str, Any]:
    return {
        "params": params,
        "chosen_groups": [name for name in params.get("group_by", "").split(",") if name],
        "label_keys": ", ".join(key for name in params.get("group_by", "").split(",")
                                if (key := label_key(name)) is not None),
        "group_choices": list(GROUPS), "step_choices": STEPS,
        "project_choices": projects_for_user(request.user).order_by("slug").values_list("slug", flat=True),
        "flavor_choices": flavors().order_by("name").values_list("name", flat=True),
        "cluster_choices": clusters().order_by("name").values_list("name", flat=True),
        "currency": currency(),
    }


@login_required
def cost_report(request: HttpRequest) -> HttpResponse:
    """Totals, the stacked chart of cost per period and group, and the sortable table of the report's rows."""
    now = timezone.now()
    params = report_params(request.GET, now)
    params.setdefault("as_of", moment_of(now))
    context = {**_form_context(request, params), "tab": "report"}
    query, errors = validated_query(request, params)
    if query is None:
        return render(request, "costs/report.html", {**context, "errors": errors}, status=400)
    projects = selectors.report_projects(request.user)
    report = usage_report(projects, query, now)
    moment = datetime.fromtimestamp(query.moment(now), UTC)
    rows, row_count = table_rows(report)
    scoped, start, end = covered(projects, query)  # for the panels other apps add (reliability: failures)
    return render(request, "costs/report.html", {
        **context, "report": report, "total": report.total, "rows": rows, "row_count": row_count,
        "last_day": query.window.end - timedelta(days=1), "chart": stacked_series(report),
        "as_of": moment,
        "never_metered": not report.rows and not selectors.usage_metered(projects),
        "csv_url": f"{reverse('cost-report-csv')}?{urlencode(params)}",
        "panels": report_panels(request, scoped, start, end),
        "idle": idle_guarantee(projects, query, moment),
        "idle_csv_url": f"{reverse('cost-report-csv')}?{urlencode({**params, 'section': 'idle'})}",
    })


@login_required
def cost_admin(request: HttpRequest) -> HttpResponse:
    """Cluster-wide: utilization against the current inventory, fragmentation now, top projects and the
    chargeback of the range (by default the current UTC month)."""
    if not request.user.is_staff:
        raise PermissionDenied("Cluster-wide costs are for platform staff.")
    now = timezone.now()
    params = {name: request.GET[name].strip() for name in RANGE_PARAMS if request.GET.get(name, "").strip()}
    if not params:
        params["month"] = this_month(now)
    context = {"params": params, "currency": currency(), "tab": "admin"}
    query, errors = validated_query(request, {**params, "group_by": ""})
    if query is None:
        return render(request, "costs/admin.html", {**context, "errors": errors}, status=400)
    data = staff.gather(selectors.report_projects(request.user), query.window, now)
    chargeback_params = {**params, "group_by": ",".join(staff.CHARGEBACK_GROUPS)}
    return render(request, "costs/admin.html", {
        **context, "data": data, "first_day": query.window.start, "last_day": query.window.end - timedelta(days=1),
        "chart": {"utilization": [flavor.chart() for flavor in data.utilization]},
        "chargeback_csv_url": f"{reverse('cost-report-csv')}?{urlencode(chargeback_params)}",
    })


# ---- the project page's panel


def project_cost_panel(request: HttpRequest, project: Project) -> dict[str, Any]:
    """This UTC month's cost so far of the project (registered with tenancy's project page at start-up)."""
    now = timezone.now()
    month = this_month(now)
    query = ReportQuery(month_window(month), ())
    report = usage_report(selectors.report_projects(request.user).filter(id=project.pk), query, now)
    return {"cost": money(report.total.cost), "device_hours": report.total.device_hours, "month": month,
            "currency": currency(), "link": f"{reverse('costs')}?{urlencode({'project': project.slug})}"}
