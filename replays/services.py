"""Replays inside the platform: export of the job history, creating a run (inputs validated and frozen, the Celery
task queued; `replays.runs` runs it), and the what-if change with its "Apply this change".

The simulation itself is the pure package `replay/`; this module only turns database state into its inputs and
its results into a ReplayRun row and files.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import logging
import shutil
import tempfile
from collections import Counter
from collections.abc import Sequence
from dataclasses import asdict
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from core.errors import DomainError
from core.streams import TextSink
from jobs.snapshot import policy_from_settings
from quotas.models import Quota
from quotas.services import priority_class_save, quota_save
from replay import (
    ClusterShape,
    ConfigError,
    QuotaSet,
    TraceError,
    export_trace,
    load_cluster,
    load_quotas,
    load_trace,
)
from replay.engine import DEFAULT_PRIORITIES
from replay.trace import PRIORITY_CLASSES, Trace
from replays import selectors
from replays.history import history_records
from replays.models import ReplayRun, RunKind, RunStatus
from replays.runs import CURRENT, policy_for, replay_root, run_dir, trace_error
from replays.tasks import replay_task

logger = logging.getLogger(__name__)

# Policy settings the what-if page may change (the ones settings.TIDAL["POLICY"] exposes).
POLICY_SETTINGS: dict[str, tuple[Any, ...]] = {
    "blocking": ("backfill", "skip", "strict"),
    "ordering": ("priority-fairshare", "fifo"),
    "preemption": (True, False),
    "borrowing": (True, False),
}
QUOTA_CHANGE_FIELDS = ("guaranteed", "borrow_limit")


# History export -------------------------------------------------------------------------------------------------

def default_salt() -> str:
    """A salt derived from SECRET_KEY: pseudonyms are stable across exports of one installation and cannot be
    reversed by hashing guessed names without the key."""
    return hmac.new(settings.SECRET_KEY.encode(), b"tidal-replay-export", hashlib.sha256).hexdigest()


def export_history(since: datetime, until: datetime, dest: str | Path | TextSink, *, anonymize: bool = False,
                   salt: str | None = None, active: bool = False) -> Counter[str]:
    """Write the jobs submitted in [since, until) as a replay trace; returns counts (exported, skipped by why).

    With `active` (the what-if), the jobs waiting and running at `until` go in too, with an estimated runtime
    (replays.history.active_runtime), and the counts say how many were finished, running and waiting."""
    counts: Counter[str] = Counter()
    rows = selectors.history(since, until, active=active)
    records = history_records(rows, counts, now=until if active else None, since=since)
    counts.update(export_trace(records, dest, anonymize=anonymize, salt=default_salt() if salt is None else salt))
    if active:
        counts["finished"] = counts["exported"] - counts["running"] - counts["waiting"]
    return counts


# Inputs ---------------------------------------------------------------------------------------------------------

def write_cluster_json(shape: ClusterShape, path: Path) -> None:
    path.write_text(json.dumps({"nodes": [asdict(n) for n in shape.nodes]}), encoding="utf-8")


def write_quotas_json(qs: QuotaSet, path: Path) -> None:
    body = {"quotas": [asdict(q) for q in qs.quotas], "projects": [asdict(p) for p in qs.projects]}
    path.write_text(json.dumps(body), encoding="utf-8")


def current_cluster() -> ClusterShape:
    shape = selectors.current_cluster()
    if not shape.nodes:
        raise DomainError("The inventory has no nodes: upload a cluster file instead of `current`.", field="cluster")
    return shape


def priority_values() -> dict[str, int]:
    """Trace priority class -> value as configured (defaults for classes the platform does not define)."""
    return {**DEFAULT_PRIORITIES, **selectors.priority_values()}


def _suffix(name: str) -> str:
    return ".yaml" if Path(name).suffix.lower() in (".yaml", ".yml") else ".csv"


def _save_upload(upload: Any, path: Path) -> None:
    with open(path, "wb") as f:
        if hasattr(upload, "chunks"):
            for chunk in upload.chunks():
                f.write(chunk)
        else:
            f.write(upload.read())


def _prepare_inputs(tmp: Path, *, trace: Any, source: str, days: int | None, cluster: Any, quotas: Any,
                    quota_scale: float, skip_invalid: bool, with_active: bool) -> tuple[dict[str, Any], Trace]:
    """Write the run's inputs into `tmp` and validate them; DomainError naming the field on bad input."""
    meta: dict[str, Any] = {}
    if cluster is None or cluster == CURRENT:
        shape = current_cluster()
        write_cluster_json(shape, tmp / "cluster.json")
        meta["cluster_source"] = CURRENT
    else:
        path = tmp / f"cluster{_suffix(getattr(cluster, 'name', ''))}"
        _save_upload(cluster, path)
        try:
            shape = load_cluster(path)
        except (ConfigError, ValueError, KeyError, UnicodeDecodeError) as exc:
            raise DomainError(f"cluster: {str(exc).replace(str(path), getattr(cluster, 'name', 'cluster'))}",
                              field="cluster") from None
        meta["cluster_source"] = "upload"
    if quotas is None or quotas == CURRENT:
        write_quotas_json(selectors.current_quotas(), tmp / "quotas.json")
        meta["quotas_source"] = CURRENT
    else:
        path = tmp / f"quotas{_suffix(getattr(quotas, 'name', ''))}"
        _save_upload(quotas, path)
        try:
            load_quotas(path, quota_scale=quota_scale)
        except (ConfigError, ValueError, KeyError, UnicodeDecodeError) as exc:
            raise DomainError(f"quotas: {str(exc).replace(str(path), getattr(quotas, 'name', 'quotas'))}",
                              field="quotas") from None
        meta["quotas_source"] = "upload"
    trace_path = tmp / "trace.csv"
    if source == "history":
        until, days = timezone.now(), days or 7
        counts = export_history(until - timedelta(days=days), until, trace_path, active=with_active)
        meta.update(trace_source="history", days=days, trace_name=f"history-{days}d", history=dict(counts))
        field, name = "source", f"history of the last {days} days"
        if not counts["exported"]:
            now = " and no job is waiting or running now" if with_active else ""
            raise DomainError(f"No finished jobs in the last {days} days{now}: nothing to replay.", field="days")
    else:
        if trace is None:
            raise DomainError("Upload a trace CSV (multipart field `trace`) or set source: history.", field="trace")
        _save_upload(trace, trace_path)
        meta.update(trace_source="upload", trace_name=(getattr(trace, "name", "") or "trace.csv")[:200])
        field, name = "trace", meta["trace_name"]
    try:
        parsed = load_trace(trace_path, cluster=shape, skip_invalid=skip_invalid)
    except TraceError as err:
        raise DomainError(trace_error(err, name), field=field) from None
    except UnicodeDecodeError:
        raise DomainError(f"{name} is not UTF-8 text: upload a CSV file.", field=field) from None
    except (ValueError, KeyError) as exc:
        raise DomainError(f"{name}: {exc}", field=field) from None
    if not parsed.jobs:
        why = f" ({parsed.skipped.summary()})" if parsed.skipped.total else ""
        raise DomainError(f"{name} has no valid jobs to replay{why}.", field=field)
    return meta, parsed


@transaction.atomic
def replay_create(*, actor: Any, trace: Any = None, source: str = "upload", days: int | None = None,
                  cluster: Any = CURRENT, quotas: Any = CURRENT, quota_scale: float = 1.0,
                  policy: str = "production", compare_with: Sequence[str] = (), skip_invalid: bool = False,
                  kind: str = RunKind.REPLAY, change: dict[str, Any] | None = None,
                  with_active: bool = False, elastic: float = 0.0, elastic_max_factor: float = 1.0) -> ReplayRun:
    """Validate and freeze the inputs, create the run and queue the task after commit (eager in embedded mode).
    `with_active` adds the jobs waiting and running now to a history source (the what-if does). `elastic`: the
    share of the trace's jobs replayed elastic, growing to `elastic_max_factor` x their size (EngineOptions).

    Raises DomainError (400, naming the field) for bad input: a malformed row with its line number, an unknown
    policy, a bad cluster or quota file, an empty history.
    """
    policy_for(policy)
    for name in compare_with:
        policy_for(name, field="compare")
    root = replay_root()
    root.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix="new-", dir=root))
    try:
        meta, parsed = _prepare_inputs(tmp, trace=trace, source=source, days=days, cluster=cluster,
                                       quotas=quotas, quota_scale=quota_scale, skip_invalid=skip_invalid,
                                       with_active=with_active)
        authenticated = actor is not None and getattr(actor, "is_authenticated", False)
        run_row = ReplayRun.objects.create(
            kind=kind, created_by=actor if authenticated else None,
            created_by_name=actor.get_username() if authenticated else "system", policy=policy,
            compare=list(compare_with), skip_invalid=skip_invalid, change=change or {}, jobs=len(parsed.jobs),
            skipped={"counts": dict(parsed.skipped.counts), "examples": parsed.skipped.examples[:10]}
            if parsed.skipped.total else {},
            options={"priorities": priority_values(), "quota_scale": quota_scale,
                     **({"elastic": elastic, "elastic_max_factor": elastic_max_factor} if elastic else {})},
            **meta)
        target = run_dir(run_row.pk)
        if target.exists():  # a row id reused after a rolled-back create: its old files are not this run's
            shutil.rmtree(target)
        target.mkdir(parents=True)
        tmp.rename(target / "input")
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    transaction.on_commit(lambda: replay_task.delay(run_row.pk))
    return run_row


# What-if --------------------------------------------------------------------------------------------------------

def whatif_change(*, kind: str, project: str = "", flavor: str = "", field: str = "", value: Any = None,
                  name: str = "") -> dict[str, Any]:
    """Validate a proposed change against the current configuration; the dict the run stores: the value before
    the change, a sentence describing it and `warnings` (sentences; the change may still be replayed).

    Raises DomainError naming the field for bad input, and for a change that changes nothing (`value`): replaying
    the same configuration twice can only show "nobody gains, nobody loses"."""
    if kind == "quota":
        return _quota_change(project, flavor, field, value)
    if kind == "priority":
        return _priority_change(name, value)
    if kind == "policy":
        return _policy_change(field, value)
    raise DomainError("Change a quota, a priority class or a policy setting.", field="kind")


def _refuse_no_op(before: Any, value: Any, what: str) -> None:
    if before == value:
        raise DomainError(f"{what} is already {value}: the proposed change changes nothing. Propose another "
                          "value.", field="value")


def _quota_change(project: str, flavor: str, field: str, value: Any) -> dict[str, Any]:
    proj, flav = selectors.project_by_slug(project), selectors.flavor_by_name(flavor)
    if proj is None:
        raise DomainError(f"Unknown project {project!r}.", field="project")
    if flav is None:
        raise DomainError(f"Unknown flavor {flavor!r}.", field="flavor")
    if field not in QUOTA_CHANGE_FIELDS:
        raise DomainError(f"Choose one of {', '.join(QUOTA_CHANGE_FIELDS)}.", field="field")
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise DomainError("A quota is a whole number of devices, 0 or more.", field="value")
    quota = selectors.quota_for(proj, flav)
    before = getattr(quota, field) if quota else None
    label = "guarantee" if field == "guaranteed" else "borrow limit"
    # No quota at all lets the project neither hold nor borrow the flavor: the same as a quota of 0 and 0.
    _refuse_no_op(0 if before is None else before, value, f"{project}'s {label} of {flavor}"
                  + (" (no quota, i.e. 0)" if before is None else ""))
    warnings = guarantee_warnings(proj, flavor, value) if field == "guaranteed" else []
    return {"kind": "quota", "project": project, "flavor": flavor, "field": field, "value": value,
            "before": before, "warnings": warnings,
            "text": f"{project} {label} of {flavor}: {before if before is not None else 'none'} -> {value}"}


def guarantee_warnings(project: Any, flavor: str, value: int) -> list[str]:
    """Why a proposed guarantee cannot be honoured: above the devices of the flavor in the cluster, or making the
    guarantees of the flavor in the project's organization (its cohort, where guarantees are promised against the
    whole flavor) add up to more than that."""
    devices = selectors.current_cluster().devices_by_flavor().get(flavor, 0)
    warnings = []
    if value > devices:
        warnings.append(f"A guarantee of {value} is above the {devices} {flavor} devices the cluster has: it can "
                        "never be honoured in full.")
    guarantees = {**selectors.guarantees_in_organization(project.organization_id, flavor), project.slug: value}
    total = sum(guarantees.values())
    if total > devices and len([g for g in guarantees.values() if g]) > 1:
        parts = ", ".join(f"{slug} {g}" for slug, g in sorted(guarantees.items()) if g)
        warnings.append(f"The guarantees of {flavor} in {project.organization.slug} would add up to {total} "
                        f"devices ({parts}), above the {devices} the cluster has: they cannot all be honoured at "
                        "once.")
    return warnings


def _priority_change(name: str, value: Any) -> dict[str, Any]:
    pc = selectors.priority_class(name)
    if pc is None or name not in PRIORITY_CLASSES:
        raise DomainError(f"Choose a priority class of {', '.join(PRIORITY_CLASSES)}.", field="name")
    if not isinstance(value, int) or isinstance(value, bool):
        raise DomainError("A priority value is a whole number.", field="value")
    _refuse_no_op(pc.value, value, f"The value of priority class {name}")
    return {"kind": "priority", "name": name, "value": value, "before": pc.value, "warnings": [],
            "text": f"priority class {name}: value {pc.value} -> {value}"}


def _policy_change(field: str, value: Any) -> dict[str, Any]:
    if field not in POLICY_SETTINGS:
        raise DomainError(f"Choose one of {', '.join(POLICY_SETTINGS)}.", field="field")
    if value not in POLICY_SETTINGS[field]:
        raise DomainError(f"{field} is one of {', '.join(map(str, POLICY_SETTINGS[field]))}.", field="value")
    before = getattr(policy_from_settings(), field)
    _refuse_no_op(before, value, f"The scheduling policy's {field}")
    return {"kind": "policy", "field": field, "value": value, "before": before, "warnings": [],
            "text": f"scheduling policy {field}: {before} -> {value}"}


def whatif_create(*, actor: Any, days: int, change: dict[str, Any]) -> ReplayRun:
    """Replay the last `days` of real jobs, with the jobs waiting and running now, on the current cluster twice: as
    configured and with `change`."""
    return replay_create(actor=actor, source="history", days=days, policy=CURRENT, kind=RunKind.WHATIF,
                         change=change, skip_invalid=True, with_active=True)


def env_setting(field: str, value: Any) -> str:
    name = f"TIDAL_POLICY_{field.upper()}"
    return f"{name}={str(value).lower() if isinstance(value, bool) else value}"


@transaction.atomic
def whatif_apply(*, actor: Any, run_row: ReplayRun) -> str:
    """Save the what-if's change through the quotas services (validated, audited, waking the scheduler). Returns
    what was done. Policy settings live in the environment and are not saved (the message names the variable)."""
    row = ReplayRun.objects.select_for_update().get(pk=run_row.pk)
    if row.kind != RunKind.WHATIF or row.status != RunStatus.SUCCEEDED:
        raise DomainError("Only a finished what-if can be applied.", code="conflict")
    if row.applied_at is not None:
        raise DomainError(f"This change was already applied by {row.applied_by_name}.", code="conflict")
    change = row.change
    if change["kind"] == "quota":
        proj, flav = selectors.project_by_slug(change["project"]), selectors.flavor_by_name(change["flavor"])
        if proj is None or flav is None:
            raise DomainError("The project or flavor no longer exists.", code="conflict")
        quota = selectors.quota_for(proj, flav)
        now = getattr(quota, change["field"]) if quota else None
        if now != change["before"]:
            raise DomainError(f"The quota changed since this what-if ran ({change['before']} -> {now}): run it "
                              "again.", code="conflict")
        quota_save(actor=actor, quota=quota or Quota(project=proj, flavor=flav),
                   values={change["field"]: change["value"]})
        done = f"Saved {change['text']}."
    elif change["kind"] == "priority":
        pc = selectors.priority_class(change["name"])
        if pc is None or pc.value != change["before"]:
            raise DomainError("The priority class changed since this what-if ran: run it again.", code="conflict")
        priority_class_save(actor=actor, priority_class=pc, values={"value": change["value"]})
        done = f"Saved {change['text']}."
    else:
        return (f"Policy settings come from the environment: set {env_setting(change['field'], change['value'])} "
                "and restart the scheduler. Nothing was saved.")
    authenticated = actor is not None and getattr(actor, "is_authenticated", False)
    ReplayRun.objects.filter(pk=row.pk).update(applied_at=timezone.now(),
                                               applied_by_name=actor.get_username() if authenticated else "system")
    return done
