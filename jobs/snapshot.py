"""Build the scheduler core's Snapshot from the database: the read half of the scheduler adapter.

A handful of `values()` queries for the whole cycle (no per-job queries, no model instances: a cycle may read tens
of thousands of queued jobs): nodes, quotas, projects with usage, the jobs holding or waiting for capacity, and
their replica groups.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime

from django.conf import settings

from clusters.models import Node as NodeRow
from jobs import scheduling as core
from jobs.models import Job, ReplicaGroup
from jobs.states import HOLDING, State
from quotas.models import Quota as QuotaRow
from tenancy.models import Project as ProjectRow


def node_key(cluster_name: str, node_name: str) -> str:
    """Node names are unique per cluster only; the snapshot needs one namespace."""
    return f"{cluster_name}/{node_name}"


def policy_from_settings() -> core.Policy:
    return core.Policy(**settings.TIDAL["POLICY"])


@dataclass(frozen=True, slots=True)
class QueuedRow:
    """What the adapter needs of a queued job to apply a decision and to skip unchanged wait explanations."""

    project: str
    flavor: str
    submitted_at: datetime
    wait: tuple  # (code, reason, project position, flavor position, eta) as stored


def load_nodes(*, used: dict[str, int] | None = None) -> tuple[core.Node, ...]:
    used = used or {}
    rows = NodeRow.objects.order_by("cluster__name", "position", "name").values_list(
        "cluster__name", "name", "flavor__name", "devices", "foreign_used", "block", "rack", "ready", "cordoned",
        "cluster__enabled")
    nodes = []
    for cluster, name, flavor, devices, foreign, block, rack, ready, cordoned, enabled in rows:
        key = node_key(cluster, name)
        capacity = max(0, devices - foreign)
        nodes.append(core.Node(name=key, flavor=flavor, devices=capacity, free=max(0, capacity - used.get(key, 0)),
                               cluster=cluster, block=block, rack=rack,
                               schedulable=ready and not cordoned and enabled))
    return tuple(nodes)


def load_quotas() -> tuple[core.Quota, ...]:
    rows = QuotaRow.objects.values_list("project__slug", "flavor__name", "guaranteed", "borrow_limit", "lend_limit")
    return tuple(core.Quota(*row) for row in rows)


def load_projects() -> tuple[core.Project, ...]:
    rows = ProjectRow.objects.values_list("slug", "organization__slug", "max_running_jobs",
                                          "usage__decayed_device_seconds")
    return tuple(core.Project(slug, org, cap, usage or 0.0) for slug, org, cap, usage in rows)


def _groups_by_job(job_ids: Iterable[int]) -> dict[int, tuple[core.ReplicaGroup, ...]]:
    groups: dict[int, list[core.ReplicaGroup]] = defaultdict(list)
    rows = ReplicaGroup.objects.filter(job_id__in=job_ids).order_by("id").values_list(
        "job_id", "role", "replicas", "devices", "flavor__name")
    for job_id, role, replicas, devices, flavor in rows:
        groups[job_id].append(core.ReplicaGroup(role, replicas, devices, flavor))
    return {job_id: tuple(items) for job_id, items in groups.items()}


_JOB_FIELDS = ("id", "project__slug", "priority_class__value", "priority_class__preemptible", "flavor__name",
               "max_runtime")


def _running(used: dict[str, int]) -> tuple[core.RunningJob, ...]:
    rows = Job.objects.filter(state__in=list(HOLDING), cluster__isnull=False).values_list(
        *_JOB_FIELDS, "cluster__name", "placement", "started_at", "admitted_at", "min_runtime")
    running = []
    for job_id, project, priority, preemptible, flavor, max_runtime, cluster, placement, started, admitted, \
            min_runtime in rows:
        assignments = tuple(core.Assignment(a["role"], a["index"], node_key(cluster, a["node"]), a["devices"])
                            for a in placement)
        for a in assignments:
            used[a.node] += a.devices
        running.append(core.RunningJob(
            id=job_id, project=project, priority=priority, started_at=(started or admitted).timestamp(),
            placement=assignments, flavor=flavor, preemptible=preemptible, min_runtime=float(min_runtime),
            max_runtime=float(max_runtime) if max_runtime else None))
    return tuple(running)


def _pending() -> tuple[tuple[core.PendingJob, ...], dict[int, QueuedRow]]:
    rows = list(Job.objects.filter(state=State.QUEUED).values_list(
        *_JOB_FIELDS, "submitted_at", "topology", "avoid_nodes", "wait_code", "wait_reason", "project_position",
        "flavor_position", "eta"))
    groups = _groups_by_job(row[0] for row in rows)
    pending, queued = [], {}
    for job_id, project, priority, preemptible, flavor, max_runtime, submitted, topology, avoid, *wait in rows:
        pending.append(core.PendingJob(
            id=job_id, project=project, priority=priority, submitted_at=submitted.timestamp(),
            groups=groups.get(job_id, ()), preemptible=preemptible, topology=core.Topology(topology),
            max_runtime=float(max_runtime) if max_runtime else None, avoid_nodes=frozenset(avoid)))
        queued[job_id] = QueuedRow(project, flavor, submitted, tuple(wait))
    return tuple(pending), queued


def build_snapshot(now: float) -> tuple[core.Snapshot, dict[int, QueuedRow]]:
    """The snapshot for one cycle, and what the adapter needs of each queued job (by id)."""
    used: dict[str, int] = defaultdict(int)
    running = _running(used)
    pending, queued = _pending()
    snapshot = core.Snapshot(now=now, nodes=load_nodes(used=used), quotas=load_quotas(), projects=load_projects(),
                             running=running, pending=pending)
    return snapshot, queued
