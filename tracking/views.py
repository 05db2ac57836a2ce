"""Pages of experiment tracking: experiments, an experiment's runs table, a run's charts, runs compared.

Reads go through `tracking.selectors` (scoped to the caller's projects: another tenant's run or experiment is a 404,
as a missing one). The runs table reads run rows only (params and the per-key summary ingestion keeps), never
points; the charts fetch their series from the API (`/api/v1/runs/<id>/series/`) in the browser.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.core.paginator import Paginator
from django.db.models import F, QuerySet
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils import timezone
from django.views.decorators.http import require_POST

from core.digits import is_digits
from core.errors import DomainError, Forbidden
from jobs import selectors as job_selectors
from jobs.models import Job, JobEvent
from jobs.states import State
from tenancy.models import Project, Role
from tenancy.permissions import has_role, role_in_project
from tenancy.views import project_or_404
from tracking import alerts as alert_services
from tracking import costing, selectors, services
from tracking.auth import check_run_writer
from tracking.models import ALL_RULES, AlertAction, AlertRule, Experiment, Run, RunStatus, Webhook
from tracking.series import anomaly
from tracking.series.validate import shown_last

PAGE_SIZE = 50
EXPERIMENTS_PAGE_SIZE = 50
DEFAULT_PARAM_COLUMNS = 4
DEFAULT_METRIC_COLUMNS = 4
MAX_COMPARED = 12  # beyond a dozen overlaid lines no chart stays readable
PANEL_ALERTS = 5
LIVE_POLL_SECONDS = 5
# Chart groups of the run and compare pages, by the key's first path segment; anything else is "other".
KEY_GROUPS = [("train", "Training"), ("eval", "Evaluation"), ("system", "System")]
# Job transitions drawn on the charts, by target state; a run that starts again is a resume (see _job_markers).
MARKED_STATES = {State.ADMITTED: "admitted", State.PREEMPTED: "preempted", State.RETRYING: "retried"}


# ---- experiments


@login_required
def experiment_list(request: HttpRequest) -> HttpResponse:
    """The current project's experiments (every project of the caller's when none is chosen)."""
    project = getattr(request, "project", None) or None
    experiments = selectors.experiments_for_user(request.user)
    if project is not None:
        experiments = experiments.filter(project=project)
    # Latest activity first; experiments without runs last (PostgreSQL would put NULL first when descending).
    experiments = selectors.experiments_with_counts(experiments).order_by(
        F("last_run_at").desc(nulls_last=True), "name", "id")
    page = Paginator(experiments, EXPERIMENTS_PAGE_SIZE).get_page(request.GET.get("page"))
    return render(request, "tracking/experiment_list.html", {"project": project, "page": page})


def _experiment_or_404(request: HttpRequest, pk: int) -> Experiment:
    experiment = selectors.experiments_for_user(request.user).filter(pk=pk).first()
    if experiment is None:
        raise Http404("No such experiment.")
    return experiment


# ---- the runs table


@dataclass(frozen=True)
class Column:
    """One sortable column of the runs table; `sort` is its ?sort= name (tracking.selectors.filter_runs)."""

    label: str
    sort: str
    numeric: bool = False


@dataclass
class RunTable:
    """What the runs table's query string asks for, parsed (bad filters are reported, not applied)."""

    params: list[tuple[str, str]] = field(default_factory=list)
    tags: list[tuple[str, str]] = field(default_factory=list)
    metrics: list[tuple[str, str, float]] = field(default_factory=list)
    status: str = ""
    sort: str = ""
    name: str = ""
    lifecycle: str = selectors.ACTIVE
    shown_params: list[str] = field(default_factory=list)
    shown_metrics: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)


def _pairs(raw: list[str], name: str, errors: list[str]) -> list[tuple[str, str]]:
    out = []
    for text in filter(None, (r.strip() for r in raw)):
        key, sep, value = text.partition(":")
        if sep and key.strip():
            out.append((key.strip(), value.strip()))
        else:
            errors.append(f"{name} filter {text[:100]!r}: use <key>:<value>.")
    return out


def parse_table_query(request: HttpRequest, param_keys: list[str], metric_keys: list[str]) -> RunTable:
    query = request.GET
    table = RunTable(status=query.get("status", ""), sort=query.get("sort", ""))
    table.params = _pairs(query.getlist("param"), "Param", table.errors)
    table.tags = _pairs(query.getlist("tag"), "Tag", table.errors)
    for text in filter(None, (m.strip() for m in query.getlist("metric"))):
        try:
            table.metrics.append(selectors.parse_metric_filter(text))
        except DomainError as error:
            table.errors.append(f"Metric filter {error.message}")
    table.name = query.get("name", "").strip()[:250]
    table.lifecycle = query.get("lifecycle") or selectors.ACTIVE
    if table.lifecycle not in selectors.LIFECYCLES:
        table.errors.append(f"Unknown lifecycle {table.lifecycle[:20]!r}.")
        table.lifecycle = selectors.ACTIVE
    if table.status and table.status not in RunStatus.values:
        table.errors.append(f"Unknown status {table.status[:20]!r}.")
        table.status = ""
    shown = query.getlist("show")
    if "show" in query:  # an explicit choice, possibly of nothing; else the first few keys
        table.shown_params = [s.removeprefix("param.") for s in shown if s.startswith("param.")]
        table.shown_metrics = [s.removeprefix("metric.") for s in shown if s.startswith("metric.")]
    else:
        table.shown_params = param_keys[:DEFAULT_PARAM_COLUMNS]
        # Training and evaluation curves say more about a run than its GPU temperature.
        ranked = sorted(metric_keys, key=lambda k: (k.startswith("system/"), k))
        table.shown_metrics = sorted(ranked[:DEFAULT_METRIC_COLUMNS])
    return table


def _sorted_runs(runs: QuerySet[Run], table: RunTable, now: datetime) -> QuerySet[Run]:
    try:
        return selectors.filter_runs(runs, params=table.params, tags=table.tags, metrics=table.metrics,
                                     status=table.status, sort=table.sort, now=now, name=table.name,
                                     lifecycle=table.lifecycle)
    except DomainError as error:
        table.errors.append(error.message)
        table.sort = ""
        return selectors.filter_runs(runs, params=table.params, tags=table.tags, metrics=table.metrics,
                                     status=table.status, now=now, name=table.name, lifecycle=table.lifecycle)


def _header(table: RunTable, column: Column) -> dict:
    """A column's header link: ascending first, then descending, keeping every other part of the query."""
    current = "asc" if table.sort == column.sort else "desc" if table.sort == f"-{column.sort}" else ""
    return {"label": column.label, "next_sort": f"-{column.sort}" if current == "asc" else column.sort,
            "current": current, "numeric": column.numeric}


def _metric_text(value: float | None) -> str:
    return "—" if value is None else f"{value:.4g}"


def _metric_cells(entry: dict) -> list[tuple[str, bool]]:
    """A metric's last, min and max cells: (text, marked). A non-finite last value is named and marked, not shown
    as "—", which means nothing was logged (min and max are of finite values: "—" when there were none)."""
    last, _ = shown_last(entry)
    first = (last, True) if isinstance(last, str) else (_metric_text(last), False)  # a str: a non-finite spelling
    return [first, (_metric_text(entry.get("min")), False), (_metric_text(entry.get("max")), False)]


def humanize_duration(delta: timedelta) -> str:
    seconds = int(delta.total_seconds())
    if seconds < 60:
        return f"{seconds} s"
    minutes, seconds = divmod(seconds, 60)
    if minutes < 60:
        return f"{minutes} min {seconds} s" if seconds else f"{minutes} min"
    hours, minutes = divmod(minutes, 60)
    if hours < 48:
        return f"{hours} h {minutes} min" if minutes else f"{hours} h"
    return f"{hours // 24} d {hours % 24} h"


@dataclass(frozen=True)
class Reach:
    """The page's "cost to reach" question (`?reach_key=eval/loss&reach_dir=below&reach_value=2`), or its error."""

    target: costing.Target | None = None
    error: str = ""
    key: str = ""
    direction: str = "below"
    value: str = ""


def reach_of(request: HttpRequest) -> Reach:
    key, value = request.GET.get("reach_key", ""), request.GET.get("reach_value", "")
    direction = "above" if request.GET.get("reach_dir") == "above" else "below"
    try:
        target = costing.parse_target(key, value if direction == "below" else None,
                                      value if direction == "above" else None)
    except costing.TargetError as e:
        return Reach(error=f"{e.field}: {e}", key=key, direction=direction, value=value)
    return Reach(target, key=key, direction=direction, value=value)


def _row(run: Run, table: RunTable, now: datetime) -> dict:
    summary = run.summary or {}
    metrics = []
    for key in table.shown_metrics:
        metrics += _metric_cells(summary.get(key) or {})
    return {"run": run, "duration": humanize_duration((run.ended_at or now) - run.started_at),
            "params": [(run.params or {}).get(key, "—") for key in table.shown_params], "metrics": metrics,
            # The user's tags (not Tidal's own tidal.* ones), a few: what the table is filtered by.
            "tags": sorted((k, v) for k, v in (run.tags or {}).items() if not k.startswith("tidal."))[:4]}


@login_required
def experiment_detail(request: HttpRequest, pk: int) -> HttpResponse:
    """The experiment's runs: filtered, sorted and paginated in the database over run rows only, so 5,000 runs
    cost what 50 do plus a count."""
    experiment = _experiment_or_404(request, pk)
    runs = selectors.runs_for_user(request.user).filter(experiment=experiment)
    param_keys, metric_keys, tag_keys = selectors.run_columns(runs)
    can_write = _holds(request, experiment.project, Role.MEMBER)
    table = parse_table_query(request, param_keys, metric_keys)
    now = timezone.now()
    page = Paginator(_sorted_runs(runs, table, now), PAGE_SIZE).get_page(request.GET.get("page"))
    fixed = [Column("Name", "name"), Column("Status", "status"), Column("User", "user"),
             Column("Started", "started"), Column("Duration", "duration", numeric=True), Column("Job", "job")]
    metric_headers = [{"key": key, "stats": [_header(table, Column(label, f"{kind}.{key}", numeric=True))
                                             for label, kind in (("last", "metric"), ("min", "metric_min"),
                                                                 ("max", "metric_max"))]}
                      for key in table.shown_metrics]
    reach = reach_of(request)
    costs = costing.run_costs(page.object_list, reach.target)
    states = selectors.shown_states(page.object_list)
    rows = [_row(run, table, now) | {"cost": costs.get(run.pk), "state": states[run.pk]} for run in page.object_list]
    return render(request, "tracking/experiment_detail.html", {
        "experiment": experiment, "table": table, "page": page, "rows": rows, "reach": reach,
        "costed": bool(costs),
        "fixed_headers": [_header(table, c) for c in fixed],
        "param_headers": [_header(table, Column(key, f"param.{key}")) for key in table.shown_params],
        "metric_headers": metric_headers,
        # Keys offered as columns: the sample's, and whatever the URL chose even if the sample lacks it.
        "param_keys": sorted(set(param_keys) | set(table.shown_params)),
        "metric_keys": sorted(set(metric_keys) | set(table.shown_metrics)),
        "statuses": RunStatus.choices, "max_compared": MAX_COMPARED,
        "panel_config": _panel_config(request, experiment, page.object_list, can_write),
        "can_write": can_write, "metric_keys_all": metric_keys,
        "group_options": [f"param.{k}" for k in param_keys] + [f"tag.{k}" for k in tag_keys],
    })


def _panel_config(request: HttpRequest, experiment: Experiment, runs: list[Run], can_write: bool) -> dict:
    """What panels.js needs: the table page's runs (what the panels draw), the experiment's saved panels, where to
    save them and whether the caller may."""
    panels = selectors.panels_for_user(request.user).filter(experiment=experiment)
    return {
        "experiment": experiment.pk, "api": reverse("chartpanel-list"),
        "canWrite": can_write,
        "runs": [{"id": run.pk, "name": run.name, "started": _ms(run.started_at), "params": run.params,
                  "tags": run.tags, "series": reverse("run-series", args=[run.pk])} for run in runs],
        "panels": [{"id": p.pk, "title": p.title, "keys": p.keys, "scale": p.scale, "smoothing": p.smoothing,
                    "x_axis": p.x_axis, "group_by": p.group_by} for p in panels],
    }


# ---- a run


def _run_or_404(request: HttpRequest, pk: int) -> Run:
    run = selectors.runs_for_user(request.user).filter(pk=pk).first()
    if run is None:
        raise Http404("No such run.")
    return run


CHARTED_GPUS = 8  # per-GPU series (`system/gpu.<i>.<field>`, GPU telemetry) charted on a run page, of GPUs 0-7
PER_GPU = re.compile(r"^system/gpu\.(\d+)\.")


def key_groups(keys: list[str]) -> list[dict]:
    """Metric keys by chart group (train/, eval/, system/, other), in that order, empty groups left out. Per-GPU
    series of GPUs past the first CHARTED_GPUS are left out of the charts (a 64-GPU job measured by DCGM has some
    800 of them; the job page shows every GPU), and the System group says how many."""
    ordinals = {k: int(m.group(1)) for k in keys if (m := PER_GPU.match(k)) is not None}
    hidden = {k for k, ordinal in ordinals.items() if ordinal >= CHARTED_GPUS}
    gpus = {ordinals[k] for k in hidden}
    keys = [k for k in keys if k not in hidden]
    named = {prefix for prefix, _ in KEY_GROUPS}
    groups = [{"id": prefix, "label": label, "keys": [k for k in keys if k.split("/", 1)[0] == prefix]}
              for prefix, label in KEY_GROUPS]
    groups.append({"id": "other", "label": "Other", "keys": [k for k in keys if k.split("/", 1)[0] not in named]})
    if gpus:
        groups[2]["note"] = (f"The series of {len(gpus)} more GPUs (from GPU {CHARTED_GPUS} on) are not charted here: "
                             "the job page shows every GPU.")
    return [g for g in groups if g["keys"]]


def _ms(moment: datetime | None) -> int | None:
    return int(moment.timestamp() * 1000) if moment else None


def _job_markers(job: Job) -> list[dict]:
    """The job's admissions, preemptions and retries, each later attempt starting to run (a resume from its
    checkpoint) and each resize of an elastic job's attempt ("shrank 6→4": its old and new world size; the run page's
    Resizes table says why): vertical markers on the charts, placed by wall time."""
    markers = []
    for event in job.events.all():
        if event.kind == "resize":
            markers.append(_resize_marker(event))
            continue
        kind = MARKED_STATES.get(event.to_state)
        if kind is None and event.to_state == State.RUNNING and (event.attempt or 1) > 1:
            kind = "resumed"
        if kind:
            markers.append({"kind": kind, "time": _ms(event.created_at), "attempt": event.attempt,
                            "reason": event.reason[:200]})
    return markers


def _resize_marker(event: JobEvent) -> dict:
    """A resize event (jobs.lifecycle.resize writes its old and new replicas in its details) as a chart marker."""
    old, new = event.details.get("old_replicas"), event.details.get("new_replicas")
    kind = "grew" if (new or 0) > (old or 0) else "shrank"
    return {"kind": kind, "time": _ms(event.created_at), "attempt": event.attempt, "reason": event.reason[:200],
            "label": f"{kind} {old}→{new}"}


def _job_of(request: HttpRequest, run: Run) -> Job | None:
    if run.job_id is None:
        return None
    return job_selectors.job_detail_for_user(request.user).filter(pk=run.job_id).first()


def _chart_config(run: Run, job: Job | None) -> dict:
    """What the page's scripts need, handed over as JSON (json_script)."""
    return {
        "runs": [{"id": run.pk, "name": run.name, "status": run.status, "started": _ms(run.started_at),
                  "series": reverse("run-series", args=[run.pk]), "api": reverse("run-detail", args=[run.pk])}],
        "groups": key_groups(selectors.run_keys(run)),
        "markers": _job_markers(job) if job else [],
        "live": run.status == RunStatus.RUNNING, "pollSeconds": LIVE_POLL_SECONDS,
    }


def _live_context(request: HttpRequest, run: Run) -> dict:
    """What changes on a run's page while it runs: its shown state, duration and alerts; and whether the caller
    may handle the alerts (members and above)."""
    alerts = list(selectors.alerts_for_user(request.user).filter(run=run))
    return {
        "run": run, "state": selectors.shown_states([run])[run.pk], "live": run.status == RunStatus.RUNNING,
        "poll_seconds": LIVE_POLL_SECONDS, "alerts": alerts,
        "open_alerts": sum(1 for a in alerts if a.resolved_at is None),
        "can_handle": _holds(request, run.project, Role.MEMBER),
        "muted_all": ALL_RULES in run.muted_rules,
        "duration": humanize_duration((run.ended_at or timezone.now()) - run.started_at),
    }


@login_required
def run_detail(request: HttpRequest, pk: int) -> HttpResponse:
    run = _run_or_404(request, pk)
    job = _job_of(request, run)
    reach = reach_of(request)
    attempts = list(job.attempts.all()) if job else []
    return render(request, "tracking/run_detail.html", {
        **_live_context(request, run),
        "cost": costing.run_costs([run], reach.target).get(run.pk), "reach": reach,
        "metric_keys": selectors.run_keys(run),
        "job": job, "attempts": attempts,
        "resizes": [(a.number, r) for a in attempts for r in a.resizes.all()],  # what the charts' resize marks mean
        "params": sorted((run.params or {}).items()), "tags": sorted((run.tags or {}).items()),
        "chart_config": _chart_config(run, job), "can_write": _can_write(request, run),
    })


def _can_write(request: HttpRequest, run: Run) -> bool:
    try:
        check_run_writer(run, request.user, role_in_project(request.user, run.project))
    except Forbidden:
        return False
    return True


@login_required
def run_live(request: HttpRequest, pk: int) -> HttpResponse:
    """The run page's alerts, state and duration, which htmx polls while the run is RUNNING."""
    run = _run_or_404(request, pk)
    return render(request, "tracking/_run_live.html", {**_live_context(request, run), "oob": True})


@login_required
@require_POST
def run_alert_action(request: HttpRequest, pk: int) -> HttpResponse:
    """The run page's alert buttons: acknowledge or resolve an alert, mute or unmute a rule (or every rule) on the
    run; the same services as the API. Members and above."""
    run = _run_or_404(request, pk)
    if not _holds(request, run.project, Role.MEMBER):
        raise PermissionDenied(f"Handling alerts needs the member role in project {run.project.slug}.")
    action = request.POST.get("action")
    try:
        if action in ("acknowledge", "resolve"):
            alert = selectors.alerts_for_user(request.user).filter(run=run, pk=_int(request.POST.get("alert"))).first()
            if alert is None:
                raise Http404("No such alert.")
            handle = alert_services.alert_acknowledge if action == "acknowledge" else alert_services.alert_resolve
            handle(actor=request.user, alert=alert)
        elif action in ("mute", "unmute"):
            change = alert_services.run_mute if action == "mute" else alert_services.run_unmute
            change(actor=request.user, run=run, rule=request.POST.get("rule") or None)
        else:
            raise DomainError("Unknown action.", field="action")
    except DomainError as error:
        messages.error(request, f"{error.field}: {error.message}" if error.field else error.message)
    if request.headers.get("HX-Request"):
        run.refresh_from_db()
        return render(request, "tracking/_run_live.html", {**_live_context(request, run), "oob": True})
    return redirect("run_detail", pk=run.pk)


@login_required
@require_POST
def run_manage(request: HttpRequest, pk: int) -> HttpResponse:
    """The run page's management forms: rename, note, set or remove a tag, delete, restore; the same services as
    the API and the same writers (tracking.auth.check_run_writer: a viewer is refused)."""
    run = _run_or_404(request, pk)
    if not _can_write(request, run):
        raise PermissionDenied(f"Changing run {run.pk} needs the member role (a job's run: its submitter or an admin).")
    action, post = request.POST.get("action"), request.POST
    try:
        if action == "rename":
            services.run_update(run=run, name=post.get("name", ""))
        elif action == "note":
            services.run_update(run=run, note=post.get("note", "").replace("\r\n", "\n"))
        elif action == "tag":
            services.run_tags_change(run=run, set_tags={post.get("key", ""): post.get("value", "")})
        elif action == "untag":
            services.run_tags_change(run=run, remove=[post.get("key", "")])
        elif action == "delete":
            services.run_delete(actor=request.user, run=run)
            messages.success(request, f"Run {run.name} is deleted; restore it from its page or the runs table's "
                                      "deleted runs.")
        elif action == "restore":
            services.run_restore(actor=request.user, run=run)
        else:
            raise DomainError("Unknown action.", field="action")
    except DomainError as error:
        messages.error(request, f"{error.field}: {error.message}" if error.field else error.message)
    return redirect("run_detail", pk=run.pk)


def _holds(request: HttpRequest, project: Project, role: str) -> bool:
    """Whether the caller holds at least `role` in the project."""
    return has_role(request.user, project, role)


def _int(text: str | None) -> int:
    return int(text) if text and is_digits(text) else 0


# ---- compare


def _compared_runs(request: HttpRequest) -> list[Run]:
    """The runs named by ?run=<id> (repeatable), in that order; any one the caller cannot see is a 404."""
    ids = list(dict.fromkeys(request.GET.getlist("run")))
    if not all(is_digits(i) for i in ids) or len(ids) > MAX_COMPARED:
        raise Http404(f"Compare up to {MAX_COMPARED} runs, named by their numbers.")
    found = {run.pk: run for run in selectors.runs_for_user(request.user).filter(pk__in=ids)}
    if len(found) != len(ids):
        raise Http404("No such run.")
    return [found[int(i)] for i in ids]


def params_diff(runs: list[Run]) -> list[dict]:
    """Every param of the compared runs, a row each: its values per run and whether they differ (a param some
    runs lack differs)."""
    keys = sorted({key for run in runs for key in (run.params or {})})
    rows = []
    for key in keys:
        values = [(run.params or {}).get(key) for run in runs]
        rows.append({"key": key, "values": ["—" if v is None else v for v in values],
                     "differs": len(set(values)) > 1})
    return sorted(rows, key=lambda r: not r["differs"])  # what differs first: that is why runs are compared


@login_required
def run_compare(request: HttpRequest) -> HttpResponse:
    if not request.GET.getlist("run"):  # nothing ticked (the button waits for a choice; a link may not)
        return render(request, "tracking/run_compare_choose.html")
    runs = _compared_runs(request)
    keys = sorted({key for run in runs for key in (run.summary or {})})
    diff = params_diff(runs)
    config = {
        "runs": [{"id": r.pk, "name": r.name, "status": r.status, "started": _ms(r.started_at),
                  "series": reverse("run-series", args=[r.pk]), "params": r.params or {},
                  "summary": {k: v.get("last") for k, v in (r.summary or {}).items()}} for r in runs],
        "groups": key_groups(keys), "markers": [], "live": False,
        "differing": [row["key"] for row in diff if row["differs"]],
    }
    return render(request, "tracking/run_compare.html", {
        "runs": runs, "diff": diff, "keys": keys, "chart_config": config,
    })


# ---- panels of other apps' pages


def project_alerts_panel(request: HttpRequest, project: Project) -> dict:
    """The project page's open alerts (registered with tenancy's project page at start-up)."""
    alerts = (selectors.alerts_for_user(request.user).filter(run__project=project, resolved_at=None)
              .order_by("-opened_at", "-id"))
    shown = list(alerts[:PANEL_ALERTS + 1])  # one more than shown tells whether there are more, without a count
    return {"alerts": shown[:PANEL_ALERTS], "more": len(shown) > PANEL_ALERTS}


@login_required
def mlflow_links(request: HttpRequest, project: str) -> HttpResponse:
    """Where the links MLflow's client prints (its UI at the tracking URI) land: the page sends them on to the run
    or experiment they name."""
    return render(request, "tracking/mlflow_links.html")


# ------------------------------------------------------------------------------------- alert rules and webhooks

@dataclass(frozen=True)
class RuleRow:
    rule: str
    enabled: bool
    action: str
    params: list[tuple[str, float, float | None]]  # (name, default, this project's value or None)


@login_required
def alert_settings(request: HttpRequest, slug: str) -> HttpResponse:
    """A project's anomaly rules (on/off, thresholds, action) and webhooks: everyone in the project reads them,
    admins change them (the same services and checks as the API)."""
    project = project_or_404(request, slug)
    can_admin = _holds(request, project, Role.ADMIN)
    if request.method == "POST":
        if not can_admin:
            raise PermissionDenied("Changing alert rules and webhooks needs the admin role.")
        try:
            _apply_alert_setting(request, project)
        except DomainError as error:
            messages.error(request, f"{error.field}: {error.message}" if error.field else error.message)
        return redirect("alert_settings", slug=project.slug)
    saved = {rule.rule: rule for rule in selectors.alert_rules_for_user(request.user).filter(project=project)}
    rows = []
    for name in anomaly.RULES:
        rule = saved.get(name)
        overrides = rule.params if rule else {}
        thresholds = [(param, default, overrides.get(param)) for param, default in anomaly.DEFAULTS[name].items()]
        rows.append(RuleRow(name, rule.enabled if rule else name in anomaly.ENABLED_BY_DEFAULT,
                            rule.action if rule else AlertAction.NONE, thresholds))
    webhooks = selectors.webhooks_for_user(request.user).filter(project=project) if can_admin else []
    return render(request, "tracking/alert_settings.html", {
        "project": project, "rows": rows, "can_admin": can_admin, "webhooks": webhooks,
        "actions": AlertAction.choices})


def _apply_alert_setting(request: HttpRequest, project: Project) -> None:
    form = request.POST.get("form")
    if form == "rule":
        name = request.POST.get("rule", "")
        if name not in anomaly.RULES:
            raise DomainError(f"Unknown rule {name[:60]!r}.", field="rule")
        rule = (selectors.alert_rules_for_user(request.user).filter(project=project, rule=name).first()
                or AlertRule(project=project, rule=name))
        params = {param: _number(request.POST[f"param.{param}"], f"params.{param}")
                  for param in anomaly.DEFAULTS[name] if request.POST.get(f"param.{param}", "").strip()}
        services.alert_rule_save(actor=request.user, rule=rule, values={
            "enabled": request.POST.get("enabled") == "on", "action": request.POST.get("action", AlertAction.NONE),
            "params": params})
        messages.success(request, f"Saved {name}.")
    elif form == "webhook":
        services.webhook_save(actor=request.user, webhook=Webhook(project=project), values={
            "url": request.POST.get("url", "").strip(), "secret": request.POST.get("secret", "")})
        messages.success(request, "Added the webhook.")
    elif form == "webhook-delete":
        webhook = selectors.webhooks_for_user(request.user).filter(project=project,
                                                                   pk=request.POST.get("id") or 0).first()
        if webhook is None:
            raise Http404("No such webhook.")
        services.webhook_delete(actor=request.user, webhook=webhook)
        messages.success(request, "Deleted the webhook.")
    else:
        raise DomainError("Unknown form.")


def _number(text: str, field: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise DomainError(f"{text[:40]!r} is not a number.", field=field) from None
    return int(value) if value.is_integer() else value
