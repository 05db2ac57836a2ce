"""Writes of reliability: a diagnosis per ended attempt (followed from the state machine), node quarantine and its
release, the staff's failure patterns."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from datetime import datetime, timedelta
from functools import partial
from typing import Any

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from clusters.models import Node
from core import wakeup
from core.errors import DomainError, InvalidTransition
from jobs import failures, ports
from jobs.lifecycle import Change
from jobs.models import Attempt, Outcome
from jobs.observations import Verdict
from jobs.ports import Observation
from jobs.services import record_event
from reliability import evidence, rules
from reliability.models import Diagnosis, FailurePattern, NodeFault, ProjectPolicy
from tenancy.audit import audit_record, delete_audited, save_audited

logger = logging.getLogger(__name__)

ACTOR = "tidal-reliability"


def current_rules() -> rules.Compiled:
    """The built-in rules with the enabled patterns staff added (before them)."""
    return rules.ruleset(p.as_rule() for p in FailurePattern.objects.filter(enabled=True))


# ------------------------------------------------------------------------------------- before the attempt ends

def verdict(attempt: Attempt, cause: str, reason: str, seen: Observation) -> Verdict | None:
    """Connected to `jobs.observations.failure_diagnosis`: the cause all the evidence points to (which decides the
    retry), and the nodes a retry must avoid (those a hardware or network fault names). None, leaving the backend's
    cause, should the diagnosis itself fail: a failure must still end its attempt."""
    try:
        with transaction.atomic():  # a savepoint: a failed query here must not abort the transition's transaction
            return _verdict(attempt, cause, reason, seen)
    except Exception:
        logger.exception("diagnosis of attempt %s failed; the backend's cause %s stands", attempt.pk, cause)
        return None


def _verdict(attempt: Attempt, cause: str, reason: str, seen: Observation) -> Verdict:
    found = rules.diagnose(evidence.of_attempt(
        attempt, cause=cause, exit_code=seen.exit_code, details=dict(seen.details),
        logs={k: list(v) for k, v in seen.logs.items()}, outcome=Outcome.LOST if seen.lost_nodes else Outcome.FAILED),
        current_rules())
    placed = {str(row.get("node")) for row in attempt.placement or []}
    avoid: tuple[str, ...] = ()
    if failures.kind_of(found.cause) in (failures.HARDWARE, failures.INFRA):
        # On other nodes: those the evidence names, else the failed replica's.
        failed_on = str(seen.details.get("node") or "")
        avoid = tuple(n for n in found.nodes if n in placed) or ((failed_on,) if failed_on in placed else ())
    changed = f"{found.summary} (the backend saw: {reason})" if reason else found.summary
    return Verdict(found.cause, changed if found.cause != cause else reason, avoid)


# --------------------------------------------------------------------------------------- when the attempt ends

def follow_attempts(changes: Sequence[Change]) -> None:
    """Connected to `jobs.lifecycle.on_change`: every attempt that ends other than succeeded gets its diagnosis,
    in the transaction that ended it (with its job event, and the quarantine of a node it shows faulty)."""
    ended = {c.attempt_id: c for c in changes if c.outcome and c.outcome != Outcome.SUCCEEDED
             and c.attempt_id is not None}
    if not ended:
        return
    compiled = current_rules()
    attempts = Attempt.objects.filter(pk__in=ended).select_related("job", "cluster").exclude(
        diagnosis__isnull=False)
    for attempt in attempts:
        try:
            with transaction.atomic():  # a savepoint: a diagnosis that fails must not undo the transition
                diagnose_attempt(attempt, compiled=compiled)
        except Exception:
            logger.exception("diagnosis of attempt %s failed; the attempt ended all the same", attempt.pk)


def diagnose_attempt(attempt: Attempt, *, compiled: rules.Compiled | None = None,
                     now: datetime | None = None) -> Diagnosis:
    """Write the diagnosis of an ended attempt (loaded with its job and cluster)."""
    now = now or timezone.now()
    found = rules.diagnose(evidence.of_attempt(attempt), compiled or current_rules())
    ended_at = attempt.ended_at or now
    began = attempt.started_at or attempt.admitted_at
    ran = max(0.0, (ended_at - began).total_seconds())
    since = attempt.checkpoint_at if attempt.checkpoint_at and attempt.checkpoint_at > began else began
    lost = max(0.0, (ended_at - since).total_seconds()) if attempt.started_at else 0.0
    diagnosis = Diagnosis.objects.create(
        attempt=attempt, job=attempt.job, project_id=attempt.job.project_id,
        cluster=attempt.cluster.name if attempt.cluster else "", outcome=attempt.outcome, cause=found.cause,
        kind=failures.kind_of(found.cause), confidence=found.confidence, summary=found.summary[:500],
        action=found.action, evidence=[item.as_dict() for item in found.evidence], nodes=list(found.nodes),
        devices=attempt.devices, ran_seconds=ran, lost_seconds=lost, ended_at=ended_at)
    quarantined = _record_faults(attempt, diagnosis, found, now)
    if quarantined:
        diagnosis.quarantined = quarantined
        Diagnosis.objects.filter(pk=diagnosis.pk).update(quarantined=quarantined)
    if attempt.outcome not in (Outcome.FAILED, Outcome.LOST):
        return diagnosis  # a preemption or a cancellation: its transition says why; the diagnosis is kept all the same
    what = f" Node {', '.join(quarantined)} quarantined." if quarantined else ""
    record_event(attempt.job, kind="diagnosis", actor=ACTOR, attempt=attempt.number, now=now,
                 reason=f"Diagnosis of attempt {attempt.number}: {found.summary} (confidence {found.confidence:.2f})."
                        f" {found.action_text}{what}",
                 details={"cause": found.cause, "confidence": found.confidence, "action": found.action,
                          "diagnosis": diagnosis.pk, "quarantined": quarantined})
    return diagnosis


def _record_faults(attempt: Attempt, diagnosis: Diagnosis, found: rules.Diagnosis, now: datetime) -> list[str]:
    """A hardware-class failure counts against the nodes it names (or the attempt's failed replica's node); the
    nodes that reach the quarantine rule are quarantined. Returns their names."""
    if failures.kind_of(found.cause) != failures.HARDWARE or attempt.cluster_id is None:
        return []
    placed = {str(row.get("node")) for row in attempt.placement or []}
    names = [n for n in found.nodes if n in placed] or [str(attempt.details.get("node") or "")]
    nodes = list(Node.objects.filter(cluster_id=attempt.cluster_id, name__in=[n for n in names if n]))
    severe = found.quarantine == rules.QUARANTINE_NOW
    quarantined = []
    for node in nodes:
        NodeFault.objects.get_or_create(node=node, diagnosis=diagnosis,
                                        defaults={"cause": found.cause, "severe": severe, "at": diagnosis.ended_at})
        reason = _quarantine_reason(node, found, now)
        if reason and node_quarantine(node, reason=reason, actor=ACTOR, now=now):
            quarantined.append(node.name)
    return quarantined


def _quarantine_reason(node: Node, found: rules.Diagnosis, now: datetime) -> str:
    if not settings.TIDAL["QUARANTINE_ENABLED"] or node.quarantined_at is not None:
        return ""
    label = failures.label_of(found.cause)
    if found.quarantine == rules.QUARANTINE_NOW:
        # Every signed-in user sees why a node is out of service: the reason names the GPU fault, never a line of
        # the tenant's log.
        xids = [item.text for item in found.evidence if item.source == rules.XID and item.node == node.name]
        return f"{label}{': ' + '; '.join(xids[:2]) if xids else ''}"[:500]
    window = settings.TIDAL["QUARANTINE_WINDOW"]
    limit = settings.TIDAL["QUARANTINE_FAILURES"]
    recent = NodeFault.objects.filter(node=node, released=False, at__gte=now - timedelta(seconds=window)).count()
    if recent >= limit:
        hours = window / 3600
        return f"{recent} hardware-class failures in {hours:g} h (last: {label})"[:500]
    return ""


# ------------------------------------------------------------------------------------------------- quarantine

def node_quarantine(node: Node, *, reason: str, actor: Any, now: datetime | None = None) -> bool:
    """Take `node` out of service: nothing new is placed there (the scheduler's inventory names it quarantined) until
    staff release it, and with TIDAL_QUARANTINE_CORDON its cluster's own scheduler places nothing there either (the
    backend cordons it). What runs there is left alone. Returns whether it was quarantined now."""
    now = now or timezone.now()
    if not reason.strip():
        raise DomainError("Say why the node is quarantined.", field="reason")
    with transaction.atomic():
        if Node.objects.filter(pk=node.pk, quarantined_at__isnull=True).update(
                quarantined_at=now, quarantine_reason=reason[:500]) != 1:
            return False
        node.quarantined_at, node.quarantine_reason = now, reason[:500]
        audit_record(actor=actor, action="node.quarantine", target=node, changes={"reason": reason[:500]})
        if settings.TIDAL["QUARANTINE_CORDON"]:
            transaction.on_commit(partial(ports.cordon, node.pk, True))
    logger.warning("node %s quarantined: %s", node, reason)
    return True


def node_release(node: Node, *, actor: Any, note: str = "") -> bool:
    """Put a quarantined node back in service; its faults so far no longer count towards a quarantine. Returns
    whether it was quarantined."""
    with transaction.atomic():
        reason = node.quarantine_reason
        if Node.objects.filter(pk=node.pk, quarantined_at__isnull=False).update(
                quarantined_at=None, quarantine_reason="") != 1:
            raise InvalidTransition(f"Node {node.name} is not quarantined.", field="node")
        NodeFault.objects.filter(node=node, released=False).update(released=True)
        node.quarantined_at, node.quarantine_reason = None, ""
        audit_record(actor=actor, action="node.release", target=node,
                     changes={"reason": reason, **({"note": note[:300]} if note else {})})
        transaction.on_commit(wakeup.wake_scheduler)  # capacity came back
        # Whatever the setting says now: the backend undoes only a cordon it made.
        transaction.on_commit(partial(ports.cordon, node.pk, False))
    return True


# ---------------------------------------------------------------------------------------------- the patterns

def pattern_values(data: dict[str, Any]) -> dict[str, Any]:
    """The fields of a failure pattern, validated as a rule (DomainError naming the field)."""
    try:
        confidence = float(data.get("confidence", 0.8))
    except (TypeError, ValueError):
        raise DomainError("A confidence is a number.", field="confidence") from None
    rule = rules.Rule(str(data.get("pattern", "")), str(data.get("source", rules.LOG)), str(data.get("cause", "")),
                      confidence, str(data.get("action", "") or ""), "", str(data.get("quarantine", "") or ""),
                      str(data.get("context", "") or ""))
    try:
        rules.validate(rule)
    except rules.InvalidRule as error:
        raise DomainError(str(error), field=error.field) from None
    return {"pattern": rule.pattern, "source": rule.source, "cause": rule.cause, "confidence": rule.confidence,
            "action": rule.action, "quarantine": rule.quarantine, "context": rule.context}


def pattern_create(*, actor: Any, data: dict[str, Any]) -> FailurePattern:
    values = pattern_values(data)
    with transaction.atomic():
        pattern = FailurePattern.objects.create(**values, description=str(data.get("description", ""))[:300],
                                                enabled=bool(data.get("enabled", True)),
                                                created_by=getattr(actor, "username", str(actor))[:150])
        audit_record(actor=actor, action="failure_pattern.create", target=pattern, changes=values)
    return pattern


def pattern_update(pattern: FailurePattern, *, actor: Any, data: dict[str, Any]) -> FailurePattern:
    merged = {"pattern": pattern.pattern, "source": pattern.source, "cause": pattern.cause,
              "confidence": pattern.confidence, "action": pattern.action, "quarantine": pattern.quarantine,
              "context": pattern.context, **data}
    values = pattern_values(merged)
    with transaction.atomic():
        for name, value in values.items():
            setattr(pattern, name, value)
        if "description" in data:
            pattern.description = str(data["description"])[:300]
        if "enabled" in data:
            pattern.enabled = bool(data["enabled"])
        pattern.save()
        audit_record(actor=actor, action="failure_pattern.update", target=pattern, changes=values)
    return pattern


def pattern_delete(pattern: FailurePattern, *, actor: Any) -> None:
    with transaction.atomic():
        audit_record(actor=actor, action="failure_pattern.delete", target=pattern, changes={"pattern": pattern.pattern})
        pattern.delete()


# ------------------------------------------------------------------------------------------ project policies

POLICY_FIELDS = ("restart_on_hang",)


def policy_save(*, actor: Any, policy: ProjectPolicy, values: dict[str, Any]) -> ProjectPolicy:
    """Create or change a project's reliability policy (one per project: a second is a 400 naming `project`)."""
    for name in POLICY_FIELDS:
        if name in values:
            setattr(policy, name, values[name])
    save_audited(actor=actor, obj=policy, fields=POLICY_FIELDS, project=policy.project)
    return policy


def policy_delete(*, actor: Any, policy: ProjectPolicy) -> None:
    delete_audited(actor=actor, obj=policy, fields=POLICY_FIELDS, project=policy.project)
