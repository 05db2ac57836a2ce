"""What the cluster says about a failing attempt beside its pods' statuses, for reliability's diagnosis: the events of
its pods and of its nodes (reason, message, count, time) and the conditions of its nodes that are not as they should
be. Pure: the backend lists the events and nodes and keeps what these functions return in the observation's details
(`events`, `node_conditions`), which `reliability.evidence` reads.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping
from datetime import datetime
from typing import Any

MAX_EVENTS = 20  # the most recent; a crash-looping pod repeats one event, counted, not listed again
MAX_MESSAGE = 300
# A node's conditions are healthy when Ready is True and every other one (MemoryPressure, DiskPressure, PIDPressure,
# NetworkUnavailable, node-problem-detector's KernelDeadlock, ReadonlyFilesystem, GPU problems...) is False.
HEALTHY_READY = "True"


def _time(event: Mapping[str, Any]) -> str:
    """When the event last happened (core/v1 events set lastTimestamp; events.k8s.io ones eventTime)."""
    series = event.get("series") or {}
    return str(event.get("lastTimestamp") or series.get("lastObservedTime") or event.get("eventTime")
               or event.get("firstTimestamp") or "")


def _parsed(text: str) -> datetime | None:
    try:
        return datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return None


def event_lines(events: Iterable[Mapping[str, Any]], *, pods: Collection[str], nodes: Collection[str],
                since: datetime) -> list[str]:
    """The events of these pods and nodes that happened at or after `since` (oldest first), one line each:
    "Node gpu-1: Warning NodeNotReady (x1, 2026-12-05T16:00:00Z): Node gpu-1 status is now: NodeNotReady". The
    server's field selector is not trusted: events of other objects are dropped here."""
    found: list[tuple[str, str]] = []
    seen: set[tuple[str, str]] = set()  # an event may come in both lists (a namespace's and the cluster's)
    for event in events:
        involved = event.get("involvedObject") or event.get("regarding") or {}
        kind, name = str(involved.get("kind") or ""), str(involved.get("name") or "")
        meta = event.get("metadata") or {}
        identity = (str(meta.get("namespace") or ""), str(meta.get("name") or ""))
        if not ((kind == "Pod" and name in pods) or (kind == "Node" and name in nodes)) or identity in seen:
            continue
        if identity[1]:
            seen.add(identity)
        at = _time(event)
        moment = _parsed(at)
        if moment is not None and moment < since:
            continue
        count = int(event.get("count") or (event.get("series") or {}).get("count") or 1)
        message = " ".join(str(event.get("message") or event.get("note") or "").split())[:MAX_MESSAGE]
        found.append((at, f"{kind} {name}: {event.get('type') or 'Normal'} {event.get('reason') or ''} "
                          f"(x{count}, {at or 'time unknown'}): {message}"))
    found.sort(key=lambda pair: pair[0])
    return [line for _, line in found[-MAX_EVENTS:]]


def unhealthy_conditions(nodes: Iterable[Mapping[str, Any]], names: Collection[str]) -> list[dict[str, str]]:
    """The conditions of these nodes that are not healthy, as `{"node", "condition"}` rows ("Ready=False
    (KubeletNotReady: PLEG is not healthy)", "KernelDeadlock=True (...)")."""
    rows: list[dict[str, str]] = []
    for node in nodes:
        name = str((node.get("metadata") or {}).get("name") or "")
        if name not in names:
            continue
        for condition in (node.get("status") or {}).get("conditions") or []:
            kind, status = str(condition.get("type") or ""), str(condition.get("status") or "")
            if not kind or (status == HEALTHY_READY if kind == "Ready" else status == "False"):
                continue
            why = ": ".join(str(condition[k])[:MAX_MESSAGE] for k in ("reason", "message") if condition.get(k))
            rows.append({"node": name, "condition": f"{kind}={status}" + (f" ({why})" if why else "")})
    return rows
