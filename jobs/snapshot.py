"""Build the scheduler core's Snapshot from the database: the read half of the scheduler adapter.

A handful of queries for the whole cycle (no per-job queries): nodes, quotas, projects with usage, and the jobs that
hold or wait for capacity with their replica groups prefetched.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable

from django.conf import settings
from django.db.models import Prefetch

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


def _groups(job: Job) -> tuple[core.ReplicaGroup, ...]:
    return tuple(core.ReplicaGroup(g.role, g.replicas, g.devices, g.flavor.name) for g in job.groups.all())


def _jobs(states: Iterable[str]):
    groups = Prefetch("groups", queryset=ReplicaGroup.objects.select_related("flavor"))
    return (Job.objects.filter(state__in=list(states))
            .select_related("project", "priority_class", "flavor", "cluster").prefetch_related(groups))


def load_nodes(*, used: dict[str, int] | None = None) -> tuple[core.Node, ...]:
    used = used or {}
    rows = NodeRow.objects.select_related("cluster", "flavor").order_by("cluster__name", "position", "name")
    nodes = []
    for row in rows:
        key = node_key(row.cluster.name, row.name)
        free = max(0, row.devices - row.foreign_used - used.get(key, 0))
        nodes.append(core.Node(name=key, flavor=row.flavor.name, devices=row.devices - row.foreign_used, free=free,
                               cluster=row.cluster.name, block=row.block, rack=row.rack,
                               schedulable=row.schedulable))
    return tuple(nodes)


def load_quotas() -> tuple[core.Quota, ...]:
    return tuple(core.Quota(q.project.slug, q.flavor.name, q.guaranteed, q.borrow_limit, q.lend_limit)
                 for q in QuotaRow.objects.select_related("project", "flavor"))


def load_projects() -> tuple[core.Project, ...]:
    rows = ProjectRow.objects.select_related("organization", "usage")
    return tuple(core.Project(p.slug, p.organization.slug, p.max_running_jobs,
                              getattr(getattr(p, "usage", None), "decayed_device_seconds", 0.0)) for p in rows)


def running_job(job: Job) -> core.RunningJob:
    started = job.started_at or job.admitted_at or job.queued_at
    placement = tuple(core.Assignment(a["role"], a["index"], node_key(job.cluster.name, a["node"]), a["devices"])
                      for a in job.placement)
    return core.RunningJob(
        id=job.pk, project=job.project.slug, priority=job.priority_class.value, started_at=started.timestamp(),
        placement=placement, flavor=job.flavor.name, preemptible=job.priority_class.preemptible,
        min_runtime=float(job.min_runtime), max_runtime=float(job.max_runtime) if job.max_runtime else None,
    )


def pending_job(job: Job) -> core.PendingJob:
    cluster_nodes = frozenset(job.avoid_nodes)
    return core.PendingJob(
        id=job.pk, project=job.project.slug, priority=job.priority_class.value,
        submitted_at=job.submitted_at.timestamp(), groups=_groups(job),
        preemptible=job.priority_class.preemptible, topology=core.Topology(job.topology),
        max_runtime=float(job.max_runtime) if job.max_runtime else None, avoid_nodes=cluster_nodes,
    )


def build_snapshot(now: float) -> tuple[core.Snapshot, dict[int, Job]]:
    """The snapshot for one cycle, and the queued jobs by id (the adapter applies decisions to them)."""
    holding = [job for job in _jobs(HOLDING) if job.cluster_id is not None]
    queued = list(_jobs([State.QUEUED]))
    used: dict[str, int] = defaultdict(int)
    for job in holding:
        for a in job.placement:
            used[node_key(job.cluster.name, a["node"])] += a["devices"]
    snapshot = core.Snapshot(
        now=now,
        nodes=load_nodes(used=used),
        quotas=load_quotas(),
        projects=load_projects(),
        running=tuple(running_job(job) for job in holding),
        pending=tuple(pending_job(job) for job in queued),
    )
    return snapshot, {job.pk: job for job in queued}
