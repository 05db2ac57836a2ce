"""Rules open attempts keep with the inventory (see `core.consistency`): an open attempt runs on a cluster and nodes
that exist. A cluster or node deleted under one leaves it unobserved forever (no backend reports on it), so it is
lost as a vanished node is: retried away from those nodes within the job's retry limit."""

from __future__ import annotations

from collections.abc import Iterator
from functools import partial

from clusters.models import Node
from core.consistency import Check, Problem
from jobs.models import Attempt
from jobs.observations import record_gone_placement
from jobs.states import HOLDING


def attempt_on_missing_nodes() -> Iterator[Problem]:
    """Open attempts whose cluster, or some of whose nodes, no longer exist. Only the current attempt of a holding
    job is repaired here; any other open attempt is closed by the jobs checks."""
    attempts = list(Attempt.objects.filter(ended_at__isnull=True).select_related("job__project", "cluster"))
    existing = set(Node.objects.filter(cluster__in={a.cluster_id for a in attempts if a.cluster_id})
                   .values_list("cluster_id", "name"))
    for attempt in attempts:
        nodes = sorted({row["node"] for row in attempt.placement})
        gone = nodes if attempt.cluster_id is None else [n for n in nodes if (attempt.cluster_id, n) not in existing]
        if not gone:
            continue
        where = ("its cluster no longer exists" if attempt.cluster_id is None
                 else f"nodes {', '.join(gone)} of cluster {attempt.cluster.name} no longer exist")
        job = attempt.job
        held = job.state in HOLDING and job.current_attempt_id == attempt.pk
        yield Problem("clusters.attempt_on_missing_nodes", f"attempt {attempt.number} of job {job.pk} is open but "
                      f"{where}", attempt, job.project,
                      fix=partial(_lose, attempt, gone, where) if held
                      else None)


def _lose(attempt: Attempt, gone: list[str], where: str) -> str:
    state = record_gone_placement(attempt, gone, reason=where)
    return f"lost; the job is now {state}" if state else "moved meanwhile; left alone"


CHECKS: list[Check] = [attempt_on_missing_nodes]
