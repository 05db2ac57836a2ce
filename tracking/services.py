"""Writes of experiments, runs and points (`<entity>_<verb>`)."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from datetime import datetime, timedelta
from typing import Any

import orjson
from django.conf import settings
from django.db import IntegrityError, connection, transaction
from django.db.models import Field, JSONField
from django.utils import timezone

from core.actors import actor_name
from core.errors import DomainError
from core.serializers import has_control_character
from jobs.models import Job
from jobs.states import State
from notifications.webhooks import Refused, check_url
from tenancy.audit import audit_record, delete_audited, save_audited
from tenancy.models import Project
from tracking import alerts
from tracking.models import AlertRule, ChartPanel, Experiment, PointBlock, Run, RunStatus, Series, Webhook
from tracking.points import locked_run, value_arrays, write_points
from tracking.series import anomaly
from tracking.series.validate import (
    MAX_PARAM_VALUE,
    MAX_PARAMS,
    MAX_TAG_VALUE,
    MAX_TAGS,
    SURROGATE,
    Batch,
    BatchError,
    batch_size,
    check_key,
    clean_pairs,
    clean_points,
    has_surrogate,
    summarize,
)

MIN_SECRET = 16  # characters of a webhook secret: an HMAC key short enough to guess signs nothing
DEFAULT_EXPERIMENT = "Default"  # MLflow's name for the experiment of runs that name none
# How a finished job leaves its run.
RUN_STATUS_OF_JOB = {State.SUCCEEDED: RunStatus.FINISHED, State.FAILED: RunStatus.FAILED,
                     State.CANCELLED: RunStatus.KILLED}


class RunFinished(DomainError):
    code = "run_finished"
    status_code = 409


def experiment_get_or_create(*, project: Project, name: str) -> Experiment:
    name = (name or DEFAULT_EXPERIMENT).strip()[:200] or DEFAULT_EXPERIMENT
    try:
        with transaction.atomic():
            return Experiment.objects.get_or_create(project=project, name=name)[0]
    except IntegrityError:  # created by a concurrent request between the get and the create
        return Experiment.objects.get(project=project, name=name)


def experiment_create(*, project: Project, name: str, description: str = "") -> Experiment:
    name = name.strip()
    if not name:
        raise DomainError("An experiment needs a name.", field="name")
    if has_control_character(name):
        raise DomainError("An experiment's name must not contain control characters.", field="name")
    try:
        with transaction.atomic():
            return Experiment.objects.create(project=project, name=name[:200], description=description)
    except IntegrityError:
        raise DomainError(f"Project {project.slug} already has an experiment named {name!r}.", field="name",
                          code="already_exists") from None


def run_create(*, project: Project, experiment: Experiment | None = None, name: str = "", user=None,
               params: object = None, tags: object = None, started_at: datetime | None = None) -> Run:
    """A run logged from outside a job (a notebook, another cluster)."""
    try:
        clean_params = clean_pairs(params, "params", MAX_PARAMS, MAX_PARAM_VALUE)
        clean_tags = clean_pairs(tags, "tags", MAX_TAGS, MAX_TAG_VALUE)
    except BatchError as e:
        raise DomainError(e.message, field=e.field) from None
    experiment = experiment or experiment_get_or_create(project=project, name=DEFAULT_EXPERIMENT)
    return Run.objects.create(project=project, experiment=experiment, name=name[:250] or _run_name(), user=user,
                              user_name=actor_name(user) if user else "", params=clean_params, tags=clean_tags,
                              started_at=started_at or timezone.now())


def _run_name() -> str:
    return timezone.now().strftime("run-%Y%m%d-%H%M%S")


def runs_for_admitted_jobs(job_ids: Iterable[int], attempts: dict[int, int], at: datetime) -> None:
    """Every admitted job has a run: created at its first admission, moved to the new attempt at later ones."""
    job_ids = list(job_ids)
    existing = dict(Run.objects.filter(job_id__in=job_ids).values_list("job_id", "id"))
    for job_id, run_id in existing.items():
        Run.objects.filter(pk=run_id).update(attempt=attempts[job_id], status=RunStatus.RUNNING, ended_at=None)
    new = [job for job in Job.objects.filter(pk__in=set(job_ids) - set(existing)).select_related("project")]
    if not new:
        return
    experiments: dict[tuple[int, str], Experiment] = {}
    for job in new:
        key = (job.project_id, job.experiment or DEFAULT_EXPERIMENT)
        if key not in experiments:
            experiments[key] = experiment_get_or_create(project=job.project, name=key[1])
    Run.objects.bulk_create(
        Run(project_id=job.project_id, experiment=experiments[(job.project_id, job.experiment or DEFAULT_EXPERIMENT)],
            job=job, name=job.name[:250], user_id=job.submitter_id, user_name=job.submitter_name, started_at=at,
            attempt=attempts[job.pk], tags={"tidal.job": str(job.pk), "tidal.stage": job.stage})
        for job in new)


def runs_for_finished_jobs(finished: dict[int, str], at: datetime) -> None:
    """A job that ended for good ends its run (succeeded: FINISHED, failed: FAILED, cancelled: KILLED) and closes
    its open alerts."""
    for state, status in RUN_STATUS_OF_JOB.items():
        ids = [job_id for job_id, target in finished.items() if target == state]
        if ids:
            Run.objects.filter(job_id__in=ids, status=RunStatus.RUNNING).update(status=status, ended_at=at)
    alerts.close_alerts_of_ended_runs(Run.objects.filter(job_id__in=finished), at)


MAX_RUN_NAME = 250
MAX_NOTE = 20_000


class RunDeleted(DomainError):
    code = "run_deleted"
    status_code = 409


def check_run_name(name: object) -> str:
    """A run's new name: text without control characters, 1 to MAX_RUN_NAME characters (a DomainError naming
    `name` otherwise: a rename is asked for, so it is refused rather than cut)."""
    if not isinstance(name, str) or not name.strip():
        raise DomainError("A run needs a name.", field="name")
    if has_control_character(name):
        raise DomainError("A run's name must not contain control characters.", field="name")
    if has_surrogate(name):
        raise DomainError(f"A run's name {SURROGATE}.", field="name")
    name = name.strip()
    if len(name) > MAX_RUN_NAME:
        raise DomainError(f"A run's name is at most {MAX_RUN_NAME} characters; this one has {len(name)}.",
                          field="name")
    return name


def _check_note(note: object) -> str:
    if not isinstance(note, str):
        raise DomainError("A note is text.", field="note")
    if len(note) > MAX_NOTE:
        raise DomainError(f"A note is at most {MAX_NOTE} characters; this one has {len(note)}.", field="note")
    if has_surrogate(note) or "\x00" in note:
        raise DomainError("A note must not contain NUL characters or half of a surrogate pair.", field="note")
    return note


def _require_active(run: Run) -> None:
    if run.is_deleted:
        raise RunDeleted(f"Run {run.pk} is deleted: restore it first.", field="run")


def run_update(*, run: Run, name: str | None = None, note: str | None = None, status: str | None = None,
               ended_at: datetime | None = None, by_job: bool = False) -> Run:
    """Rename, annotate or end a run. A job's run follows its job: only the job itself (`by_job`: its run token, as
    `mlflow.end_run()` in its script) moves its status; a user stops the job instead. A deleted run is changed by
    nothing but its restoration."""
    _require_active(run)
    if status is not None and status != run.status and run.job_id is not None and not by_job:
        raise DomainError(f"Run {run.pk} follows its job (job {run.job_id}): its status changes with the job's; "
                          "cancel the job to stop it.", field="status")
    fields: list[str] = []
    if name is not None:
        run.name, fields = check_run_name(name), [*fields, "name"]
    if note is not None:
        run.note, fields = _check_note(note), [*fields, "note"]
    if status is not None:
        if status not in RunStatus.values:
            raise DomainError(f"Unknown status {status!r}; one of {', '.join(RunStatus.values)}.", field="status")
        run.status = status
        run.ended_at = None if status == RunStatus.RUNNING else (ended_at or run.ended_at or timezone.now())
        fields += ["status", "ended_at"]
    if fields:
        run.save(update_fields=fields)
    if status is not None and run.is_finished:
        alerts.close_alerts_of_ended_runs(Run.objects.filter(pk=run.pk), run.ended_at)
    return run


def run_tags_change(*, run: Run, set_tags: object = None, remove: object = None) -> Run:
    """Add or change tags (`set_tags`: {key: value} or MLflow's [{key, value}]) and remove others (`remove`: keys),
    all or nothing. Unlike logging, a finished run takes them (as MLflow's `set_tag`): a tag describes the run, it
    is no data of its training. Removing a tag the run lacks is no error (the outcome is the one asked for)."""
    _require_active(run)
    try:
        clean = clean_pairs(set_tags, "tags", MAX_TAGS, MAX_TAG_VALUE)
        if remove is None:
            keys: list[str] = []
        elif isinstance(remove, list):
            keys = [check_key(key, f"remove[{i}]") for i, key in enumerate(remove)]
        else:
            raise BatchError("remove", "must be a list of tag keys")
    except BatchError as e:
        raise DomainError(e.message, field=e.field) from None
    if set(clean) & set(keys):
        raise DomainError(f"Tag {sorted(set(clean) & set(keys))[0]!r} is both set and removed.", field="remove")
    with transaction.atomic():
        locked = Run.objects.select_for_update().get(pk=run.pk)  # merges with concurrent batches' tags
        tags = {key: value for key, value in {**locked.tags, **clean}.items() if key not in keys}
        if len(tags) > MAX_TAGS:
            raise DomainError(f"A run holds at most {MAX_TAGS} tags.", field="tags")
        Run.objects.filter(pk=run.pk).update(tags=tags)
    run.tags = tags
    return run


def run_delete(*, actor: Any, run: Run) -> Run:
    """Soft delete (MLflow's `deleted` lifecycle stage): hidden from lists and searches unless asked for, writes
    refused, everything kept until restored or purged. Deleting a deleted run changes nothing."""
    if not run.is_deleted:
        run.deleted_at = timezone.now()
        run.save(update_fields=["deleted_at"])
        audit_record(actor=actor, action="run.delete", target=run, project=run.project)
    return run


def run_restore(*, actor: Any, run: Run) -> Run:
    if run.is_deleted:
        run.deleted_at = None
        run.save(update_fields=["deleted_at"])
        audit_record(actor=actor, action="run.restore", target=run, project=run.project)
    return run


def run_purge(*, actor: Any, run: Run) -> None:
    """Delete a deleted run for good: its points, alerts and artifact rows with it, its files from the store once
    the deletion commits (tracking.listeners). Only a run already deleted: a purge is never one click away."""
    if not run.is_deleted:
        raise DomainError(f"Run {run.pk} is not deleted: delete it first, then purge it.", field="run")
    audit_record(actor=actor, action="run.purge", target=run, project=run.project)
    run.delete()


def runs_purge_expired(now: datetime | None = None) -> int:
    """Purge runs deleted more than TIDAL_TRACKING_DELETED_RETENTION_DAYS ago (0: never); how many."""
    days = settings.TIDAL["TRACKING_DELETED_RETENTION_DAYS"]
    if not days:
        return 0
    cutoff = (now or timezone.now()) - timedelta(days=days)
    count = 0
    for run in Run.objects.filter(deleted_at__lt=cutoff)[:200]:
        with transaction.atomic():
            run.delete()
        count += 1
    return count


def run_log_batch(*, run_id: int, metrics: object = None, params: object = None, tags: object = None,
                  attempt: int | None = None, token_attempt: int | None = None,
                  ignored_fields: frozenset[str] = frozenset(),
                  check: Callable[[Run | None], None] | None = None) -> int:
    """Write a batch all or nothing; a retried batch changes nothing (points are unique on run, key, step and
    attempt). Returns the number of points. Raises BatchError (naming the bad field and point) before writing.

    The points are of `attempt` when the client names one, else of the writer's attempt: a run token's
    (`token_attempt`), or the run's current one for a user. An attempt later than the writer's is refused: a token
    writes its own attempt's points, or an earlier attempt's delivered late (the SDK's spool), never a later one's.

    `check`: the caller's access rules, given the run's row (None: no such run) as this reads it under its lock,
    before a bad batch is refused; a caller checking beforehand reads the run once more (a round trip and the
    ORM's query of it: a tenth of a 1,000-point batch's CPU)."""
    # Validated before the lock, which then reads the batch's series with the run (points.locked_run); a bad
    # batch is refused only once the run has answered `check`, so it tells nothing about another tenant's run.
    try:
        batch = clean_points(metrics, int(time.time() * 1000), ignored=ignored_fields)
        clean_params = clean_pairs(params, "params", MAX_PARAMS, MAX_PARAM_VALUE)
        clean_tags = clean_pairs(tags, "tags", MAX_TAGS, MAX_TAG_VALUE)
        refused = None
    except BatchError as e:
        batch, refused = {}, e
    with transaction.atomic():
        # The row lock serializes batches of one run, so the summary and params merge without lost updates.
        run, known = locked_run(run_id, batch)
        if check is not None:
            check(run)
        if refused is not None:
            raise refused
        if run is None:
            raise DomainError("No such run.", code="not_found")
        if run.is_deleted:
            raise RunDeleted(f"Run {run.pk} is deleted: restore it before logging to it.", field="run")
        if run.is_finished:
            raise RunFinished(f"Run {run.pk} is {run.status.lower()}: it takes no more data.")
        for key, value in clean_params.items():
            if run.params.get(key, value) != value:  # MLflow's rule: a param is logged once
                raise BatchError(f"params.{key}", f"was already logged as {run.params[key][:100]!r}; params "
                                 "cannot change (log a metric or a tag instead)")
        number = _attempt_of_points(attempt, token_attempt or run.attempt, token=token_attempt is not None)
        # The summary's step of a key is the highest step stored of it (any attempt): a batch beyond it overlaps
        # nothing stored.
        highest = {key: entry["step"] for key, entry in run.summary.items() if isinstance(entry.get("step"), int)}
        arrays = value_arrays(batch)
        unjudged = write_points(run.pk, number, batch, highest, known, arrays)
        fields = []
        if batch:
            run.summary, fields = summarize(batch, run.summary), ["summary"]
            first = min((group.steps[0], group.timestamps[0]) for group in batch.values())
            known = run.attempt_starts.get(str(number))
            if known is None or first[0] < known[0]:
                run.attempt_starts = {**run.attempt_starts, str(number): list(first)}
                fields.append("attempt_starts")
            # A key some of whose points were stored already is judged on the others: its array is not theirs.
            fields += alerts.evaluate_points(run, unjudged, number, arrays={
                key: arrays[key] for key, group in unjudged.items() if group is batch[key]})
        if clean_params:
            run.params, fields = {**run.params, **clean_params}, [*fields, "params"]
        if clean_tags:
            run.tags, fields = {**run.tags, **clean_tags}, [*fields, "tags"]
        if fields:
            _save_fields(run, fields)
    return batch_size(batch)


def _save_fields(run: Run, fields: list[str]) -> None:
    """run.save(update_fields=fields) with the UPDATE written out: the same values, each prepared by its field as
    save() prepares it (a JSON column's as its JSON text, by orjson: _json_text), where the ORM's building of the
    statement was a tenth of a small batch's CPU. A Run has no save signals to send."""
    columns = [Run._meta.get_field(name) for name in fields]
    sets = ", ".join(f"{connection.ops.quote_name(field.column)} = %s" for field in columns)
    with connection.cursor() as cursor:
        cursor.execute(f"UPDATE {connection.ops.quote_name(Run._meta.db_table)} SET {sets} WHERE id = %s",  # noqa: S608
                       [*(_prepared(field, getattr(run, field.attname)) for field in columns), run.pk])


def _prepared(field: Field, value: object) -> object:
    """A JSON column's value as its JSON text, which either database takes for the column, spelled by orjson: a
    batch rewrites the run's detector state (some 4 KB of window values) and summary, which json.dumps took ten
    times as long to spell (a third of what the anomaly checks add to a batch). The values kept there are finite:
    the summary names a non-finite last value instead of keeping it (validate.summarize), the checks' windows keep
    finite values. Any other column's as its field prepares it."""
    if isinstance(field, JSONField):
        return orjson.dumps(value, option=orjson.OPT_NON_STR_KEYS).decode()
    return field.get_db_prep_save(value, connection)


def run_log_measured(*, run_id: int, attempt: int, batch: Batch) -> int:
    """Points the platform measured for a run's attempt rather than the job logged (GPU telemetry, `telemetry`):
    stored in blocks with their rollups and summarized for the runs table as logged points are, under the run's row
    lock. They are not the run's progress (their steps are seconds into the attempt, not training steps: the
    hung-run check and the anomaly rules never see them), and a run that ended still takes them (a scrape arrives
    after the attempt it measured). A batch read again stores nothing new. Returns the points."""
    if not batch:
        return 0
    with transaction.atomic():
        run = Run.objects.select_for_update().filter(pk=run_id).first()
        if run is None:
            return 0
        write_points(run.pk, attempt, batch)
        run.summary = summarize(batch, run.summary)
        run.save(update_fields=["summary"])
    return batch_size(batch)


def _attempt_of_points(claimed: int | None, writer: int, *, token: bool) -> int:
    if claimed is None or claimed <= writer:
        return claimed or writer
    if token:
        raise BatchError("attempt", f"A run token of attempt {writer} logs attempt {writer}'s points, not attempt "
                         f"{claimed}'s.")
    raise BatchError("attempt", f"The run's latest attempt is {writer}; points cannot be of attempt {claimed}.")


MAX_PANEL_KEYS = 10
MAX_PANELS = 50  # per experiment
PANEL_FIELDS = ["title", "keys", "scale", "smoothing", "x_axis", "group_by", "position"]


def _check_panel(panel: ChartPanel) -> None:
    keys = panel.keys
    if not isinstance(keys, list) or not 1 <= len(keys) <= MAX_PANEL_KEYS:
        raise DomainError(f"A panel draws 1 to {MAX_PANEL_KEYS} metric keys, as a list.", field="keys")
    try:
        for i, key in enumerate(keys):
            check_key(key, f"keys[{i}]")
    except BatchError as e:
        raise DomainError(e.message, field=e.field) from None
    if len(set(keys)) != len(keys):
        raise DomainError("A key is listed twice.", field="keys")
    if has_control_character(panel.title):
        raise DomainError("A title must not contain control characters.", field="title")
    if not 0 <= panel.smoothing <= 0.99:
        raise DomainError("Smoothing is between 0 and 0.99.", field="smoothing")
    if panel.group_by:
        kind, _, key = panel.group_by.partition(".")
        if kind not in ("param", "tag") or not key:
            raise DomainError("Group by param.<key> or tag.<key>.", field="group_by")
        try:
            check_key(key, "group_by")
        except BatchError as e:
            raise DomainError(e.message, field=e.field) from None


def panel_save(*, actor: Any, panel: ChartPanel, values: dict[str, Any]) -> ChartPanel:
    """Create or change an experiment's chart panel, checked (a 400 naming the field) and audited."""
    for name in PANEL_FIELDS:
        if name in values:
            setattr(panel, name, values[name])
    _check_panel(panel)
    if panel.pk is None:
        if ChartPanel.objects.filter(experiment=panel.experiment).count() >= MAX_PANELS:
            raise DomainError(f"An experiment holds at most {MAX_PANELS} panels.", field="experiment")
        panel.created_by = actor_name(actor)
    save_audited(actor=actor, obj=panel, fields=PANEL_FIELDS, project=panel.experiment.project)
    return panel


def panel_delete(*, actor: Any, panel: ChartPanel) -> None:
    delete_audited(actor=actor, obj=panel, fields=["title", "keys"], project=panel.experiment.project)


ALERT_RULE_FIELDS = ["rule", "enabled", "params", "action"]
WEBHOOK_FIELDS = ["url", "secret", "enabled"]


def alert_rule_save(*, actor: Any, rule: AlertRule, values: dict[str, Any]) -> AlertRule:
    """Create or change a project's setting of a rule: thresholds checked against the rule's limits (a 400 naming
    the parameter, e.g. `params.z`), audited."""
    for name in ALERT_RULE_FIELDS:
        if name in values:
            setattr(rule, name, values[name])
    try:
        merged = anomaly.check_params(rule.rule, rule.params)
    except anomaly.ParamError as e:
        raise DomainError(e.message, field=e.field) from None
    rule.params = {name: merged[name] for name in rule.params or {}}  # only what was set: defaults may improve
    save_audited(actor=actor, obj=rule, fields=ALERT_RULE_FIELDS, project=rule.project)
    return rule


def alert_rule_delete(*, actor: Any, rule: AlertRule) -> None:
    delete_audited(actor=actor, obj=rule, fields=ALERT_RULE_FIELDS, project=rule.project)


def webhook_save(*, actor: Any, webhook: Webhook, values: dict[str, Any]) -> Webhook:
    """Create or change a project's webhook; the URL must be http(s) and not name a private address (checked again,
    resolved, at every delivery). The secret is audited as replaced, never shown."""
    for name in WEBHOOK_FIELDS:
        if name in values:
            setattr(webhook, name, values[name])
    try:
        check_url(webhook.url)
    except Refused as e:
        raise DomainError(f"The URL {e}.", field="url") from None
    if len(webhook.secret) < MIN_SECRET:
        raise DomainError(f"A webhook secret needs at least {MIN_SECRET} characters.", field="secret")
    save_audited(actor=actor, obj=webhook, fields=WEBHOOK_FIELDS, project=webhook.project,
                 hidden={"secret": "secret"})
    return webhook


def webhook_delete(*, actor: Any, webhook: Webhook) -> None:
    delete_audited(actor=actor, obj=webhook, fields=["url", "enabled"], project=webhook.project)


def points_prune_raw(now: datetime | None = None, *, batch: int = 200) -> int:
    """Delete the raw points of series whose run ended TIDAL_TRACKING_RAW_RETENTION_DAYS ago (at most `batch`
    series a call); their reads then come from rollups. Returns the series pruned."""
    days = settings.TIDAL["TRACKING_RAW_RETENTION_DAYS"]
    if not days:
        return 0
    cutoff = (now or timezone.now()) - timedelta(days=days)
    ids = list(Series.objects.filter(raw_pruned=False, run__ended_at__lt=cutoff)
               .exclude(run__status=RunStatus.RUNNING).values_list("pk", flat=True)[:batch])
    with transaction.atomic():
        PointBlock.objects.filter(series_id__in=ids).delete()
        Series.objects.filter(pk__in=ids).update(raw_pruned=True)
    return len(ids)
