"""Alerts from the anomaly rules: opened and resolved as batches arrive, the hung-run check, the optional action on
the run's job, and the notifications after commit.

`evaluate_points` is ingestion's hook: it runs inside `services.run_log_batch`'s transaction with the run row
locked, judges the batch with the pure rules (`tracking.series.anomaly`) from the run's rolling detector state, and
opens or resolves Alert rows. An alert is open at most once per (run, rule, key) (the model's unique constraint):
while a condition lasts, more bad points change nothing.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable, Iterable, Mapping
from datetime import datetime
from typing import Any

import numpy as np
from django.db import IntegrityError, transaction
from django.db.models import Exists, OuterRef, QuerySet
from django.utils import timezone

from core.actors import actor_name
from core.errors import DomainError, InvalidTransition
from core.snapshots import KeyedSnapshot
from jobs import lifecycle
from jobs.models import Job
from jobs.observations import failed_attempts
from jobs.states import FINAL, HOLDING, State
from tenancy.audit import audit_record
from tracking.models import ALL_RULES, Alert, AlertAction, AlertRule, Resolution, Run, RunStatus
from tracking.notifications import notify_alert_task
from tracking.points import finite_before, series_ids
from tracking.series import anomaly
from tracking.series.validate import Batch

logger = logging.getLogger(__name__)

ACTOR = "tidal-alerts"


class RuleSettings:
    """A project's rules: which run with which thresholds, and what each does to the job when it opens an alert."""

    def __init__(self, rows: Iterable[AlertRule]) -> None:
        rows = list(rows)
        self.active = anomaly.active_rules((row.rule, row.enabled, row.params) for row in rows)
        self.actions = {row.rule: row.action for row in rows if row.enabled}


# Per process, read again after a few seconds: the rules are read by every batch ingested (a query was a third of
# the anomaly checks' cost), and change rarely. A change is seen at once by the process that made it (forget_rules,
# connected to AlertRule's saves and deletes in TrackingConfig.ready()) and within the TTL by the others.
_rules: KeyedSnapshot[int, RuleSettings] = KeyedSnapshot(
    lambda project_id: RuleSettings(AlertRule.objects.filter(project_id=project_id)))


def rule_settings(project_id: int) -> RuleSettings:
    return _rules.get(project_id)


def forget_rules(sender: type, instance: AlertRule, **kwargs: object) -> None:
    _rules.forget(instance.project_id)


def evaluate_points(run: Run, batch: Batch, attempt: int, now: datetime | None = None,
                    arrays: Mapping[str, np.ndarray] | None = None) -> list[str]:
    """Judge a batch just written to `run` (locked by the caller) and open or resolve its alerts. Sets the run's
    detector state and progress and returns the fields to save. `arrays`: keys' values as float64 arrays, where
    the caller converted them already (points.value_arrays)."""
    if not batch:
        return []
    now = now or timezone.now()
    settings = rule_settings(run.project_id)
    series = {key: (group.steps, group.values) for key, group in batch.items()}
    events, state = anomaly.evaluate_series(run.detector_state, series, settings.active, attempt,
                                            _history(run.pk, attempt), arrays)
    highest = max(group.steps[-1] for group in batch.values())
    resumed = attempt > run.detector_state.get("attempt", attempt)
    if run.last_step is None or highest > run.last_step or resumed:
        run.last_step, run.last_step_at = highest, now
        if state.pop("hung", False):  # the run moves again
            _resolve(run, anomaly.HUNG_RUN, "", now)
    run.detector_state = state
    for opening, clears in _net_of_batch(events):
        if opening is not None:
            _open(run, opening, settings, now)
        if clears is not None:
            _resolve(run, clears.rule, clears.key, now)
    return ["detector_state", "last_step", "last_step_at"]


def _net_of_batch(events: list[anomaly.Event]) -> list[tuple[anomaly.Finding | None, anomaly.Cleared | None]]:
    """A batch's events (in step order) as what each rule and key does over the whole batch: its first firing
    point opens (when none is open), and it resolves when its last event clears. A condition that comes and goes
    within a batch (a noisy throughput below half its median at every other point) would otherwise open and
    resolve an alert at each of its points: statements under the run's row lock and notifications by the
    thousand for one batch."""
    net: dict[tuple[str, str], tuple[anomaly.Finding | None, anomaly.Cleared | None]] = {}
    for event in events:
        opening, _ = net.get((event.rule, event.key), (None, None))
        if isinstance(event, anomaly.Finding):
            net[event.rule, event.key] = (opening or event, None)
        else:
            net[event.rule, event.key] = (opening, event)
    return list(net.values())


def _history(run_id: int, attempt: int) -> anomaly.History:
    """The values a late point is judged against: those its attempt logged before it, read from the stored points
    (only for points that arrived after later ones of their key; a batch continuing its keys reads nothing)."""
    def finite_values_before(key: str, step: int, count: int) -> list[float]:
        series_id = series_ids(run_id, {key})[key]
        return finite_before(series_id, attempt, step, count)
    return finite_values_before


def _finite(value: float | None) -> float | None:
    """The value an alert keeps: NaN and infinities are named by its message, and JSON (the API, webhooks) has no
    spelling for them."""
    return value if value is not None and math.isfinite(value) else None


def is_muted(run: Run, rule: str) -> bool:
    return rule in run.muted_rules or ALL_RULES in run.muted_rules


def _open(run: Run, finding: anomaly.Finding, settings: RuleSettings, now: datetime) -> Alert | None:
    """Open an alert unless one is open for the same rule and key, or the rule is muted on the run (then nothing:
    no alert, no notification, no action); then the rule's action, if any."""
    if is_muted(run, finding.rule):
        return None
    if Alert.objects.filter(run=run, rule=finding.rule, key=finding.key, resolved_at=None).exists():
        return None
    try:
        with transaction.atomic():
            alert = Alert.objects.create(run=run, rule=finding.rule, key=finding.key, step=finding.step,
                                         value=_finite(finding.value), message=finding.message[:500],
                                         opened_at=now)
    except IntegrityError:  # opened concurrently (the hung-run check does not hold ingestion's lock first)
        return None
    _notify(alert, "alert.opened")
    action = settings.actions.get(finding.rule, AlertAction.NONE)
    if action != AlertAction.NONE and run.job_id is not None:
        act_on_job(run.job_id, action, alert, now)
    return alert


def open_finding(run_id: int, finding: anomaly.Finding, now: datetime | None = None) -> Alert | None:
    """Open an alert of a rule judged outside ingestion (GPU telemetry's idle GPUs), under the run's row lock, with
    the project's action, notified as every alert is; None when muted or already open."""
    now = now or timezone.now()
    with transaction.atomic():
        run = Run.objects.select_for_update().filter(pk=run_id).first()
        if run is None:
            return None
        return _open(run, finding, rule_settings(run.project_id), now)


def clear_finding(run_id: int, rule: str, key: str = "", now: datetime | None = None) -> None:
    """Its condition cleared (judged outside ingestion): the open alert resolves, notified."""
    with transaction.atomic():
        run = Run.objects.filter(pk=run_id).first()
        if run is not None:
            _resolve(run, rule, key, now or timezone.now())


def _resolve(run: Run, rule: str, key: str, now: datetime) -> None:
    """Its condition cleared."""
    _close(Alert.objects.filter(run=run, rule=rule, key=key), now, Resolution.CLEARED)


def _close(alerts: QuerySet[Alert], now: datetime, resolution: str, by: str = "") -> int:
    """Resolve those of `alerts` still open, each only once (a conditional UPDATE: a condition clearing and a hand
    resolving at the same moment close it once), and notify. Returns how many closed."""
    closed = 0
    for alert in alerts.filter(resolved_at=None):
        if Alert.objects.filter(pk=alert.pk, resolved_at=None).update(resolved_at=now, resolution=resolution,
                                                                       resolved_by=by):
            _notify(alert, "alert.resolved")
            closed += 1
    return closed


def alert_acknowledge(*, actor: Any, alert: Alert, now: datetime | None = None) -> Alert:
    """Mark an open alert seen (someone is on it); it stays open until its condition clears or someone resolves it.
    Acknowledging again changes nothing."""
    if alert.acknowledged_at is None and alert.resolved_at is None:
        alert.acknowledged_at, alert.acknowledged_by = now or timezone.now(), actor_name(actor)
        Alert.objects.filter(pk=alert.pk, acknowledged_at=None).update(acknowledged_at=alert.acknowledged_at,
                                                                      acknowledged_by=alert.acknowledged_by)
    return alert


def alert_resolve(*, actor: Any, alert: Alert, now: datetime | None = None) -> Alert:
    """Close an open alert by hand ("resolved", by whom), notified as a resolution. While its condition lasts the
    rule does not open it again; a new occurrence, once the condition cleared, opens a new alert."""
    _close(Alert.objects.filter(pk=alert.pk), now or timezone.now(), Resolution.RESOLVED, actor_name(actor))
    alert.refresh_from_db()
    return alert


def run_mute(*, actor: Any, run: Run, rule: str | None = None, now: datetime | None = None) -> Run:
    """Mute one rule on a run, or every rule (`rule` None): it opens no more alerts there (nor notifies, nor acts on
    the job), and its open alerts on the run close as muted. Audited."""
    muted = ALL_RULES if rule is None else rule
    with transaction.atomic():
        _set_mutes(actor, run, rule, lambda rules: sorted({*rules, muted}))
        covered = Alert.objects.filter(run=run) if rule is None else Alert.objects.filter(run=run, rule=rule)
        _close(covered, now or timezone.now(), Resolution.MUTED, actor_name(actor))
    return run


def run_unmute(*, actor: Any, run: Run, rule: str | None = None) -> Run:
    """Lift the mute of one rule on a run, or every mute (`rule` None). A rule unmuted while its condition lasts
    opens an alert at its next occurrence."""
    with transaction.atomic():
        _set_mutes(actor, run, rule, lambda rules: [] if rule is None else [r for r in rules if r != rule])
    return run


def _set_mutes(actor: Any, run: Run, rule: str | None, change: Callable[[list[str]], list[str]]) -> None:
    if rule is not None and rule not in anomaly.RULES:
        raise DomainError(f"{rule[:60]!r} is not a rule; one of {', '.join(anomaly.RULES)}.", field="rule")
    locked = Run.objects.select_for_update().get(pk=run.pk)  # ingestion's lock: a batch sees the mutes or not
    before = list(locked.muted_rules)
    run.muted_rules = change(before)
    if run.muted_rules != before:
        Run.objects.filter(pk=run.pk).update(muted_rules=run.muted_rules)
        audit_record(actor=actor, action="run.mute" if set(run.muted_rules) > set(before) else "run.unmute",
                     target=locked, project=run.project, changes={"muted_rules": [before, run.muted_rules]})


def close_alerts_of_ended_runs(runs: QuerySet[Run], now: datetime) -> int:
    """A run that ended takes no more points, so no condition of its can clear: its open alerts close ("closed when
    the run ended"), notified as resolutions. Called in the transaction that ends the runs."""
    return _close(Alert.objects.filter(run__in=runs), now, Resolution.RUN_ENDED)


def _notify(alert: Alert, event: str) -> None:
    # robust: a broken notifier must not fail the request whose transaction already committed.
    transaction.on_commit(lambda: notify_alert_task.delay(alert.pk, event), robust=True)


def act_on_job(job_id: int, action: str, alert: Alert, now: datetime) -> str:
    """Stop the alert's job (cancel, as the API does) or restart it from its last checkpoint through the retry path
    (its attempt fails and the job is requeued at once, within its retry limit; beyond it the job fails). The
    alert is the reason in the job's events. Returns the job's new state, or "" when it was in no state to act on."""
    job = Job.objects.select_for_update().filter(pk=job_id).first()
    if job is None:
        return ""
    what = f"alert {alert.rule}{f' on {alert.key}' if alert.key else ''}: {alert.message}"
    details = {"alert": alert.pk, "rule": alert.rule, "key": alert.key}
    try:
        if action == AlertAction.STOP and job.state not in FINAL:
            lifecycle.transition(job, State.CANCELLED, reason=f"stopped by {what}", actor=ACTOR, now=now,
                                 details=details)
            return State.CANCELLED
        if action == AlertAction.RESTART and job.state in HOLDING:
            used = failed_attempts(job)
            end = lifecycle.AttemptEnd(reason=f"restarted by {what}", cause="unknown")
            if used < job.retry_limit:
                lifecycle.transition(job, State.RETRYING, reason=f"restart {used + 1}/{job.retry_limit} from the "
                                     f"latest checkpoint, by {what}", actor=ACTOR, now=now, details=details,
                                     end=end, retry_at=now)
                return State.RETRYING
            lifecycle.transition(job, State.FAILED, reason=f"{what} (retry limit {job.retry_limit} reached, not "
                                 "restarted)", actor=ACTOR, now=now, details=details, end=end)
            return State.FAILED
    except InvalidTransition:  # moved by another writer meanwhile
        logger.info("alert %s: job %s changed state, no %s", alert.pk, job_id, action)
    return ""


def check_hung_runs(now: datetime | None = None) -> int:
    """Open a hung_run alert for each running job whose run logged no new step for the project's threshold
    (default 15 minutes, counted from the later of its last new step and its attempt's start), and resolve those of
    runs whose job no longer runs. Runs that never logged a step are left alone: a job that does not use tracking
    is not hung. Returns the alerts opened."""
    now = now or timezone.now()
    open_hung = Alert.objects.filter(run=OuterRef("pk"), rule=anomaly.HUNG_RUN, resolved_at=None)
    for alert in Alert.objects.filter(rule=anomaly.HUNG_RUN, resolved_at=None).exclude(
            run__job__state=State.RUNNING).select_related("run"):
        with transaction.atomic():
            _resolve(alert.run, anomaly.HUNG_RUN, "", now)
    candidates = (Run.objects.filter(job__state=State.RUNNING, status=RunStatus.RUNNING, last_step_at__isnull=False)
                  .exclude(Exists(open_hung))
                  .values_list("pk", "project_id", "last_step", "last_step_at", "job__current_attempt__started_at"))
    settings: dict[int, RuleSettings] = {}
    opened = 0
    for run_id, project_id, last_step, last_step_at, started_at in candidates:
        if project_id not in settings:
            settings[project_id] = rule_settings(project_id)
        params = settings[project_id].active.get(anomaly.HUNG_RUN)
        if params is None:
            continue
        since = max(last_step_at, started_at) if started_at else last_step_at
        finding = anomaly.hung_run((now - since).total_seconds(), last_step, params)
        if finding is not None and _open_hung(run_id, since, finding, settings[project_id], now):
            opened += 1
    return opened


def _open_hung(run_id: int, since: datetime, finding: anomaly.Finding, settings: RuleSettings,
               now: datetime) -> bool:
    with transaction.atomic():
        # Ingestion's lock: a batch landing meanwhile either committed first (the run moved: no alert) or waits.
        run = Run.objects.select_for_update().filter(pk=run_id, last_step_at__lte=since).first()
        if run is None:
            return False
        run.detector_state = {**run.detector_state, "hung": True}
        run.save(update_fields=["detector_state"])
        return _open(run, finding, settings, now) is not None
