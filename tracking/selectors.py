"""Reads of experiments, runs and series, scoped to what the caller may see."""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime

import numpy as np
from django.db.models import (
    Count,
    DurationField,
    Exists,
    F,
    FloatField,
    Max,
    OuterRef,
    Q,
    QuerySet,
    Sum,
    TextField,
    Value,
)
from django.db.models.expressions import Combinable, ExpressionWrapper
from django.db.models.fields.json import KeyTextTransform, KeyTransform
from django.db.models.functions import Cast, Coalesce
from django.utils import timezone

from core.errors import DomainError
from jobs.models import Attempt, Job, Outcome
from jobs.states import FINAL, State
from notifications.sources import Target
from tenancy.models import Role
from tenancy.selectors import User, membership_of, project_ids_for_user
from tracking.models import Alert, AlertRule, ChartPanel, Experiment, Rollup, Run, RunStatus, Series, Webhook
from tracking.points import latest, read_blocks
from tracking.series.downsample import Downsampled, downsample
from tracking.series.rollup import LEVEL_STEPS, Aggregate, downsample_rollups, extremes_of
from tracking.series.validate import BatchError, check_key
from tracking.tokens import RunTokenClaim

RAW_LIMIT = 20_000  # points of a range read raw at most; longer ranges are read from rollups
# A running run's job that is not running now, by the job's state: what the run is shown as.
WAITING_LABELS: dict[str, str] = {State.ADMITTED: "Starting", State.DISPATCHING: "Starting",
                                  State.PREEMPTED: "Preempted", State.RETRYING: "Retrying"}
# Why a job waits in the queue again, by how its latest attempt ended.
QUEUED_AGAIN: dict[str, str] = {Outcome.PREEMPTED: "Queued (preempted)", Outcome.FAILED: "Queued (retry)",
                                Outcome.LOST: "Queued (retry)"}


@dataclass(frozen=True)
class ShownState:
    """What the pages show as a run's state: its status, or, while its job is not running (queued again after a
    preemption, retrying, starting), the job's. The run stays RUNNING meanwhile, as MLflow has it: it continues."""

    label: str
    css: str  # the badge's class


def shown_state(status: str, job_state: str | None, last_outcome: str = "") -> ShownState:
    if status != RunStatus.RUNNING or job_state is None or job_state == State.RUNNING or job_state in FINAL:
        return ShownState(RunStatus(status).label, f"run-{status.lower()}")
    if job_state == State.QUEUED:
        return ShownState(QUEUED_AGAIN.get(last_outcome, "Queued"), "run-waiting")
    return ShownState(WAITING_LABELS.get(job_state, "Starting"), "run-waiting")


def shown_states(runs: Iterable[Run]) -> dict[int, ShownState]:
    """Each run's shown state: one query for the states of the running runs' jobs, one more for the latest attempt
    of those queued again."""
    runs = list(runs)
    job_ids = [run.job_id for run in runs if run.job_id is not None and run.status == RunStatus.RUNNING]
    states = dict(Job.objects.filter(pk__in=job_ids).values_list("pk", "state")) if job_ids else {}
    queued = [job_id for job_id, state in states.items() if state == State.QUEUED]
    outcomes: dict[int, str] = {}
    for job_id, outcome in Attempt.objects.filter(job_id__in=queued).order_by("number").values_list("job_id",
                                                                                                   "outcome"):
        outcomes[job_id] = outcome  # in number order: the latest attempt's is kept
    return {run.pk: shown_state(run.status, states.get(run.job_id), outcomes.get(run.job_id, "")) for run in runs}


def experiments_for_user(user: User) -> QuerySet[Experiment]:
    return (Experiment.objects.filter(project_id__in=project_ids_for_user(user)).select_related("project")
            .order_by("name", "id"))


def experiments_with_counts(experiments: QuerySet[Experiment]) -> QuerySet[Experiment]:
    """Each experiment's number of runs and its latest run start (deleted runs left out), in one grouped query."""
    active = Q(runs__deleted_at__isnull=True)
    return experiments.annotate(run_count=Count("runs", filter=active), last_run_at=Max("runs__started_at",
                                                                                         filter=active))


def runs_for_user(user: User) -> QuerySet[Run]:
    return Run.objects.filter(project_id__in=project_ids_for_user(user)).select_related("project", "experiment")


def role_for_run(user: User, run: Run) -> str | None:
    """The user's role in the run's project (staff act as owners; None: an outsider), found with the project from
    the membership (per process, tenancy.selectors.membership_of), so a run read without its project (ingestion's
    locked read) needs no second query, and a warm writer none at all."""
    if user.is_staff:
        return Role.OWNER
    found = membership_of(user, run.project_id)
    if found is None:
        return None
    run.project, role = found
    return role


def run_of_token(claim: RunTokenClaim) -> Run | None:
    """The one run a run token may see, with `token_attempt_open`: whether the token's attempt is still its job's
    current, open attempt (one query)."""
    current = Job.objects.filter(pk=OuterRef("job_id"), current_attempt__number=claim.attempt,
                                 current_attempt__ended_at__isnull=True)
    return (Run.objects.filter(pk=claim.run_id).select_related("project", "experiment")
            .annotate(token_attempt_open=Exists(current)).first())


def panels_for_user(user: User) -> QuerySet[ChartPanel]:
    return ChartPanel.objects.filter(experiment__project_id__in=project_ids_for_user(user)).select_related(
        "experiment__project")


def alerts_for_user(user: User) -> QuerySet[Alert]:
    return Alert.objects.filter(run__project_id__in=project_ids_for_user(user)).select_related("run")


def alert_rules_for_user(user: User) -> QuerySet[AlertRule]:
    return AlertRule.objects.filter(project_id__in=project_ids_for_user(user)).select_related("project")


def webhooks_for_user(user: User) -> QuerySet[Webhook]:
    """Admins and owners only: a webhook URL often carries a credential of its own (a chat service's hook path)."""
    return Webhook.objects.filter(project_id__in=project_ids_for_user(user, min_role=Role.ADMIN)).select_related(
        "project")


def enabled_webhook_ids(project_id: int) -> list[int]:
    """The notifications app's webhook source (unscoped: it delivers what a project's admins configured)."""
    return list(Webhook.objects.filter(project_id=project_id, enabled=True).values_list("pk", flat=True))


def enabled_webhook_target(webhook_id: int) -> Target | None:
    found = Webhook.objects.filter(pk=webhook_id, enabled=True).values_list("url", "secret").first()
    return None if found is None else Target(*found)


def run_keys(run: Run) -> list[str]:
    """The run's metric keys; the summary holds every key ingestion saw."""
    return sorted(run.summary)


def series(run: Run, key: str, *, max_points: int, min_step: int | None = None,
           max_step: int | None = None) -> Downsampled:
    """One key of a run, at most `max_points` points keeping every extreme (see tracking.series.downsample).

    Up to RAW_LIMIT points (or max_points) are read raw and downsampled exactly; a longer range is read from the
    finest rollup level with at most 4 x max_points chunks in it (tracking.series.rollup), so a month-long run
    costs a few thousand rows. From rollups, buckets are whole chunks: with a step range, the chunks at its two
    edges may add extremes from up to one chunk outside it (zooming in further reads raw points)."""
    found = Series.objects.filter(run=run, key=key).values_list("id", "raw_pruned").first()
    if found is None:
        return Downsampled([], [], 0)
    series_id, pruned = found
    written = _rollups(series_id, 0, min_step, max_step).aggregate(n=Sum("count"))["n"] or 0
    if not pruned and written <= max(RAW_LIMIT, max_points):
        return downsample(full_series(run, key, min_step=min_step, max_step=max_step), max_points)
    for level in range(len(LEVEL_STEPS)):
        rows = _rollups(series_id, level, min_step, max_step)
        if level == len(LEVEL_STEPS) - 1 or rows.count() <= 4 * max_points:
            chunks = rows.order_by("chunk").values_list("chunk", *Rollup.AGGREGATE_FIELDS)
            return downsample_rollups([Aggregate(*row) for row in chunks], max_points)
    raise AssertionError("unreachable: the last level always returns")


def _rollups(series_id: int, level: int, min_step: int | None, max_step: int | None) -> QuerySet[Rollup]:
    rows = Rollup.objects.filter(series_id=series_id, level=level)
    if min_step is not None:
        rows = rows.filter(chunk__gte=min_step // LEVEL_STEPS[level])
    if max_step is not None:
        rows = rows.filter(chunk__lte=max_step // LEVEL_STEPS[level])
    return rows


def full_series(run: Run, key: str, *, min_step: int | None = None,
                max_step: int | None = None) -> list[tuple[int, float]]:
    """Every point of a key (the newest attempt's for a step logged twice). After retention deleted the raw
    points, what is left: each 1,024-step chunk's minimum and maximum, and its first NaN, +Inf and -Inf."""
    found = Series.objects.filter(run=run, key=key).values_list("id", "raw_pruned").first()
    if found is None:
        return []
    if found[1]:
        chunks = _rollups(found[0], 0, min_step, max_step).order_by("chunk").values_list(
            "chunk", *Rollup.AGGREGATE_FIELDS)
        return sorted({p for row in chunks for p in extremes_of(Aggregate(*row))}, key=lambda p: p[0])
    steps, _, values = latest(read_blocks([found[0]], min_step=min_step, max_step=max_step), min_step, max_step)
    return list(zip(steps.tolist(), values.tolist(), strict=True))


def attempt_starts(run: Run) -> list[dict]:
    """The first step each attempt logged: where the chart marks a restart (retry, requeue after preemption)."""
    return [{"attempt": int(number), "step": step, "timestamp": ts}
            for number, (step, ts) in sorted(run.attempt_starts.items(), key=lambda item: int(item[0]))]


# Plain columns of the runs table and the API's ?sort=, by the name they are sorted by.
RUN_SORT_FIELDS = {"name": "name", "status": "status", "user": "user_name", "started": "started_at", "job": "job_id"}
# A metric column's figures, as kept in Run.summary; sort=metric.<key> is the last value.
METRIC_STATS = {"metric": "last", "metric_min": "min", "metric_max": "max"}
ACTIVE, DELETED, ALL = "active", "deleted", "all"  # which runs a list shows, by their lifecycle stage
LIFECYCLES = (ACTIVE, DELETED, ALL)
METRIC_OPERATORS = {"<": "lt", "<=": "lte", ">": "gt", ">=": "gte", "=": "exact"}
# Non-greedy key: the first operator splits, so "loss<=2" is (loss, <=, 2), not (loss<, =, 2).
METRIC_FILTER = re.compile(r"^\s*(.+?)\s*(<=|>=|<|>|=)\s*([-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?)\s*$")


def param_value(key: str, field: str = "params") -> Cast:
    """A param's (or tag's) text. Built from a transform rather than "params__<key>" so a key holding "__" stays one
    key, not a lookup path; cast to text so equality compares text (SQLite's JSON lookup would read "0.1" as a
    number on one side only)."""
    return Cast(KeyTextTransform(key, field), TextField())


def metric_value(key: str, stat: str = "last") -> Cast:
    return Cast(KeyTextTransform(stat, KeyTransform(key, "summary")), FloatField())


def parse_metric_filter(text: str) -> tuple[str, str, float]:
    """"loss < 2" -> ("loss", "<", 2.0): a bound on the metric's last value."""
    match = METRIC_FILTER.match(text)
    if not match:
        raise DomainError(f"{text[:100]!r}: use <key><op><number>, op one of {' '.join(METRIC_OPERATORS)}.",
                          field="metric")
    return match[1], match[2], float(match[3])


def filter_runs(runs: QuerySet[Run], *, params: Iterable[tuple[str, str]] = (),
                tags: Iterable[tuple[str, str]] = (), metrics: Iterable[tuple[str, str, float]] = (),
                status: str = "", sort: str = "", now: datetime | None = None, name: str = "",
                lifecycle: str = ACTIVE) -> QuerySet[Run]:
    """The runs table's and the API's filters, all of which must match, and its order.

    name: a part of the run's name (any case); lifecycle: active (the default: deleted runs hidden), deleted or all.
    params/tags: (key, value) equal; metrics: (key, op, number) on the last value (a run without it never matches);
    sort: [-]name|status|user|started|duration|job|param.<key>|metric.<key>|metric_min.<key>|metric_max.<key>,
    runs without the value last either way. Reads only run rows (the summary), never points.
    """
    filters: dict[str, object] = {}
    for i, (key, value) in enumerate(params):
        runs, filters[f"_param{i}"] = runs.alias(**{f"_param{i}": param_value(key)}), value
    for i, (key, value) in enumerate(tags):
        runs, filters[f"_tag{i}"] = runs.alias(**{f"_tag{i}": param_value(key, "tags")}), value
    for i, (key, op, number) in enumerate(metrics):
        if op not in METRIC_OPERATORS:
            raise DomainError(f"Unknown operator {op!r}.", field="metric")
        runs = runs.alias(**{f"_metric{i}": metric_value(key)})
        filters[f"_metric{i}__{METRIC_OPERATORS[op]}"] = number
    if status:
        if status not in RunStatus.values:
            raise DomainError(f"Unknown status {status!r}; one of {', '.join(RunStatus.values)}.", field="status")
        filters["status"] = status
    if lifecycle not in LIFECYCLES:
        raise DomainError(f"Unknown lifecycle {lifecycle[:20]!r}; one of {', '.join(LIFECYCLES)}.", field="lifecycle")
    if lifecycle != ALL:
        filters["deleted_at__isnull"] = lifecycle == ACTIVE
    if name:
        filters["name__icontains"] = name
    runs = runs.filter(**filters)
    if sort:
        expr = sort_expression(sort.removeprefix("-"), now or timezone.now())
        ordered = expr.desc(nulls_last=True) if sort.startswith("-") else expr.asc(nulls_last=True)
        runs = runs.order_by(ordered, F("id").desc())
    return runs


def sort_expression(name: str, now: datetime) -> Combinable:
    if name in RUN_SORT_FIELDS:
        return F(RUN_SORT_FIELDS[name])
    if name == "duration":  # a running run has lasted until now
        return ExpressionWrapper(Coalesce("ended_at", Value(now)) - F("started_at"), output_field=DurationField())
    kind, _, key = name.partition(".")
    if kind == "param" and key:
        return param_value(key)
    if kind in METRIC_STATS and key:
        return metric_value(key, METRIC_STATS[kind])
    raise DomainError(f"Cannot sort by {name[:100]!r}: use {', '.join(RUN_SORT_FIELDS)}, duration, param.<key>, "
                      "metric.<key>, metric_min.<key> or metric_max.<key>, with - for descending.", field="sort")


MAX_GROUP_METRICS = 20


def run_groups(runs: QuerySet[Run], group_by: str, metric_keys: list[str]) -> list[dict]:
    """Runs grouped by `group_by` (param.<key> or tag.<key>): per value, the count, the run ids (newest first) and,
    per metric key, the mean, min and max of the runs' last finite values. One query reading the group's text and
    the metrics' last values out of the run rows (never points); groups in the value's order, `null` (runs without
    the key) last. Raises BatchError naming `group_by` or `metric_key`."""
    kind, _, key = group_by.partition(".")
    if kind not in ("param", "tag") or not key:
        raise BatchError("group_by", "use param.<key> or tag.<key>")
    check_key(key, "group_by")
    if len(metric_keys) > MAX_GROUP_METRICS:
        raise BatchError("metric_key", f"at most {MAX_GROUP_METRICS} metrics")
    for i, metric in enumerate(metric_keys):
        check_key(metric, f"metric_key[{i}]")
    columns = {"_group": param_value(key, "params" if kind == "param" else "tags"),
               **{f"_m{i}": metric_value(metric) for i, metric in enumerate(metric_keys)}}
    rows = runs.order_by().annotate(**columns).values_list("id", "started_at", *columns)
    groups: dict[str | None, dict] = {}
    for run_id, _started, group, *values in sorted(rows, key=lambda row: (row[1], row[0]), reverse=True):
        found = groups.setdefault(group, {"value": group, "count": 0, "run_ids": [],
                                          "_values": [[] for _ in metric_keys]})
        found["count"] += 1
        found["run_ids"].append(run_id)
        for bucket, value in zip(found["_values"], values, strict=True):
            if value is not None and np.isfinite(value):
                bucket.append(value)
    out = []
    for value in sorted(groups, key=lambda v: (v is None, v or "")):
        found = groups[value]
        buckets = found.pop("_values")
        found["metrics"] = {metric: ({"mean": sum(b) / len(b), "min": min(b), "max": max(b), "count": len(b)}
                                     if b else {"mean": None, "min": None, "max": None, "count": 0})
                            for metric, b in zip(metric_keys, buckets, strict=True)}
        out.append(found)
    return out


def run_columns(runs: QuerySet[Run], *, sample: int = 200) -> tuple[list[str], list[str], list[str]]:
    """The param, metric and tag keys of the latest `sample` runs: what the runs table offers as columns, and the
    chart panels as groupings (Tidal's own `tidal.*` tags left out).

    A sample, not every run: reading 5,000 runs' JSON to list keys would cost more than the page itself, and the
    runs of one experiment log the same keys; a key chosen in the URL is shown whatever the sample holds.
    """
    params: set[str] = set()
    metrics: set[str] = set()
    tags: set[str] = set()
    rows = runs.order_by("-started_at", "-id").values_list("params", "summary", "tags")[:sample]
    for run_params, summary, run_tags in rows:
        params.update(run_params or {})
        metrics.update(summary or {})
        tags.update(key for key in run_tags or {} if not key.startswith("tidal."))
    return sorted(params), sorted(metrics), sorted(tags)


def step_times(run: Run, key: str, steps: Iterable[int]) -> dict[int, int]:
    """Wall time (ms) of the given steps of a key (the newest attempt's when several logged one): from the blocks
    of the range the steps span."""
    wanted = sorted(set(steps))
    found = Series.objects.filter(run=run, key=key).values_list("id", flat=True).first()
    if not wanted or found is None:
        return {}
    stored, timestamps, _ = latest(read_blocks([found], min_step=wanted[0], max_step=wanted[-1]))
    where = np.searchsorted(stored, wanted)
    return {step: int(timestamps[i]) for step, i in zip(wanted, where.tolist(), strict=True)
            if i < len(stored) and stored[i] == step}
