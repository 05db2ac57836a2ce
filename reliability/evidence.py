"""What is known of an ended (or ending) attempt, gathered for `reliability.rules.diagnose`: the log tails it kept,
its pods' termination reasons and exit code, the Xid events, Kubernetes events and node conditions its backend
reported, the Xid errors DCGM reported for its GPUs (GPU telemetry's `xid` series), the conditions of its nodes in
the inventory, its run's alerts and the hang its progress showed.
"""

from __future__ import annotations

import math
from datetime import datetime
from typing import Any

from django.utils import timezone

from clusters.models import Node
from jobs.models import Attempt
from reliability import rules
from reliability.models import Progress
from telemetry.fields import key as gpu_series_key
from tracking.models import Alert, Series
from tracking.points import read_blocks

XID_SUFFIX = "xid"  # telemetry's field of DCGM_FI_DEV_XID_ERRORS: the last Xid's code, 0 while there is none
MAX_TELEMETRY_XIDS = 20


def of_attempt(attempt: Attempt, *, cause: str = "", exit_code: int | None = None,
               details: dict[str, Any] | None = None, logs: dict[str, list[str]] | None = None,
               outcome: str = "", ended_at: datetime | None = None) -> rules.Evidence:
    """The evidence of `attempt` (loaded with its job and cluster). The keyword arguments override the row's
    fields: a failure being recorded is diagnosed before the state machine writes them."""
    details = details if details is not None else (attempt.details or {})
    logs = logs if logs is not None else (attempt.logs or {})
    exit_code = exit_code if exit_code is not None else attempt.exit_code
    ended_at = ended_at or attempt.ended_at or timezone.now()
    reasons = _reasons(details)
    xids = [_xid(row, ended_at) for row in details.get("xid_events", []) if isinstance(row, dict)]
    k8s_events = [str(e) for e in details.get("events", []) if e]
    conditions = [f"{row['node']}: {row['condition']}" for row in details.get("node_conditions", [])
                  if isinstance(row, dict) and row.get("node") and row.get("condition")]
    xids.extend(telemetry_xids(attempt, ended_at))
    conditions.extend(_inventory_conditions(attempt))
    return rules.Evidence(
        logs={str(k): [str(line) for line in v] for k, v in logs.items() if isinstance(v, list)},
        reasons=reasons, exit_code=exit_code, xids=tuple(x for x in xids if x is not None),
        node_conditions=tuple(dict.fromkeys(conditions)), k8s_events=tuple(k8s_events),
        alerts=tuple(_alerts(attempt, ended_at)), progress=tuple(_progress(attempt)),
        outcome=outcome or attempt.outcome, cause=cause or attempt.cause)


def _reasons(details: dict[str, Any]) -> tuple[str, ...]:
    """The pods' own reasons (OOMKilled, ImagePullBackOff...), not the attempt's sentence about them."""
    found = [str(details.get("k8s_reason") or "")]
    found.extend(str(row.get("reason") or "") for row in details.get("replicas", []) if isinstance(row, dict))
    found.extend(str(r) for r in details.get("reasons", []) if r)
    return tuple(dict.fromkeys(r for r in found if r))


def _xid(row: dict[str, Any], ended_at: datetime) -> rules.XidEvent | None:
    try:
        number = int(row["xid"])
    except (KeyError, TypeError, ValueError):
        return None
    before = None
    at = row.get("at")
    if isinstance(at, str):
        try:
            before = (ended_at - datetime.fromisoformat(at)).total_seconds()
        except ValueError:
            before = None
    return rules.XidEvent(number, str(row.get("node") or ""), str(row.get("gpu") if row.get("gpu") is not None
                                                                     else ""), str(row.get("message") or ""), before)


def telemetry_xids(attempt: Attempt, ended_at: datetime) -> list[rules.XidEvent]:
    """The Xid errors DCGM reported on the attempt's GPUs while it ran, from GPU telemetry's stored readings: each
    time a GPU's last-Xid reading turns to a new code, with its node, GPU index and how long before the end."""
    gpus = {gpu_series_key(gpu.ordinal, XID_SUFFIX): gpu for gpu in attempt.gpus.all()}
    if not gpus:
        return []
    series = dict(Series.objects.filter(run__job_id=attempt.job_id, key__in=gpus).values_list("pk", "key"))
    end_ms = ended_at.timestamp() * 1000
    found: list[rules.XidEvent] = []
    last: dict[int, float] = {}  # per series: blocks come by series and step, a reading may span two blocks
    for block in read_blocks(series):
        if block.attempt != attempt.number:
            continue
        gpu = gpus[series[block.series_id]]
        for timestamp, value in zip(block.timestamps.tolist(), block.values.tolist(), strict=True):
            if not math.isfinite(value) or timestamp > end_ms:
                continue
            if value and value != last.get(block.series_id, 0.0):
                found.append(rules.XidEvent(int(value), gpu.node, str(gpu.gpu), "DCGM_FI_DEV_XID_ERRORS",
                                            (end_ms - timestamp) / 1000))
            last[block.series_id] = value
    return found[-MAX_TELEMETRY_XIDS:]


def _inventory_conditions(attempt: Attempt) -> list[str]:
    """Nodes under the attempt that the inventory knows not ready (node sync, or an admin marking it)."""
    names = {str(row.get("node")) for row in attempt.placement or [] if row.get("node")}
    if not names or attempt.cluster_id is None:
        return []
    return [f"{name}: Ready=False" for name in Node.objects.filter(cluster_id=attempt.cluster_id, name__in=names,
                                                                   ready=False).values_list("name", flat=True)]


def _alerts(attempt: Attempt, ended_at: datetime) -> list[str]:
    """The alerts the job's run opened during the attempt."""
    rows = Alert.objects.filter(run__job_id=attempt.job_id, opened_at__gte=attempt.admitted_at,
                                opened_at__lte=ended_at).values_list("rule", "message")[:20]
    return [f"{rule}: {message}" for rule, message in rows]


def _progress(attempt: Attempt) -> list[str]:
    progress = Progress.objects.filter(attempt=attempt, hang_detected_at__isnull=False).first()
    return [progress.hang_message] if progress and progress.hang_message else []
