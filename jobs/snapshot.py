"""Build the scheduler core's Snapshot from the database: the read half of the scheduler adapter.

A handful of `values()` queries for the whole cycle (no per-job queries, no model instances: a cycle may read tens
of thousands of queued jobs): nodes, quotas, projects with usage, the jobs holding or waiting for capacity, and
their replica groups; and, through `ports.spent_budgets`, the projects whose hard budget is spent (the costs app
answers with one report for all of them).

Every replica's CPU and memory requests (its group's, what its pod requests) count against its node: a node's free
CPU and memory are its allocatable (node sync leaves out what other pods request) minus the requests of the
replicas of jobs holding capacity there. A node whose allocatable CPU or memory is 0 does not model it.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import Any

from django.conf import settings

from jobs import ports
from jobs import scheduling as core
from jobs.lifecycle import WAIT_FIELDS
from jobs.models import Attempt, Job, ReplicaGroup
from jobs.scheduling.forecast import ARRIVAL_WINDOW
from jobs.scheduling.model import node_key
from jobs.states import HOLDING, State
from quotas.models import Quota as QuotaRow
from tenancy.models import Project as ProjectRow


def policy_from_settings() -> core.Policy:
    return core.Policy(**settings.TIDAL["POLICY"])


@dataclass(frozen=True, slots=True)
class QueuedRow:
    """What the adapter needs of a queued job to apply a decision and to skip unchanged wait explanations."""

    project: str
    flavor: str
    submitted_at: datetime
    wait: tuple  # its WAIT_FIELDS as stored: the reason it waits, positions, estimated start


def load_nodes() -> tuple[core.Node, ...]:
    """The clusters' nodes, each with its whole capacity free (nothing of the platform's jobs subtracted): devices,
    CPU and memory."""
    return ports.inventory().nodes


def load_quotas() -> tuple[core.Quota, ...]:
    rows = QuotaRow.objects.values_list("project__slug", "flavor__name", "guaranteed", "borrow_limit", "lend_limit")
    return tuple(core.Quota(*row) for row in rows)


def load_projects(budget_stops: Mapping[int, str] | None = None) -> tuple[core.Project, ...]:
    """Every project; `budget_stops` (project id -> reason) marks those whose hard budget is spent."""
    stops = budget_stops or {}
    rows = ProjectRow.objects.values_list("id", "slug", "organization__slug", "max_running_jobs",
                                          "usage__decayed_device_seconds")
    return tuple(core.Project(slug, org, cap, usage or 0.0, stops.get(pk, "")) for pk, slug, org, cap, usage in rows)


def _groups_by_job(**where: Any) -> dict[int, tuple[core.ReplicaGroup, ...]]:
    """The replica groups of the jobs `where` selects (ReplicaGroup.objects.filter's arguments), by job id."""
    groups: dict[int, list[core.ReplicaGroup]] = defaultdict(list)
    rows = ReplicaGroup.objects.filter(**where).order_by("id").values_list(
        "job_id", "role", "replicas", "devices", "flavor__name", "cpu_millis", "memory_mib", "min_replicas")
    for job_id, role, replicas, devices, flavor, cpu, memory, least in rows:
        # An elastic group (a minimum stored) asks for its minimum and may grow to its replicas.
        groups[job_id].append(core.ReplicaGroup(role, replicas, devices, flavor, cpu, memory) if least is None else
                              core.ReplicaGroup(role, least, devices, flavor, cpu, memory, max_replicas=replicas))
    return {job_id: tuple(items) for job_id, items in groups.items()}


_JOB_FIELDS = ("id", "project__slug", "priority_class__value", "priority_class__preemptible", "flavor__name",
               "max_runtime")


def _running_rows() -> list[tuple]:
    return list(Job.objects.filter(state__in=list(HOLDING), current_attempt__isnull=False).values_list(
        *_JOB_FIELDS, "current_attempt__cluster__name", "current_attempt__placement", "current_attempt__started_at",
        "current_attempt__admitted_at", "current_attempt__checkpoint_at", "min_runtime", "launcher",
        "current_attempt_id",
        "current_attempt__resize_count", "current_attempt__resized_at", "resize_cooldown", "submitted_at"))


def _running(rows: list[tuple], groups: Mapping[int, tuple[core.ReplicaGroup, ...]], now: float,
             resizable: Mapping[str, frozenset[str]] | None = None) -> tuple[core.RunningJob, ...]:
    """Jobs holding capacity; each replica carries its group's CPU and memory requests (the placement stored with
    the attempt names only node and devices), and each job the time its attempt last reported a checkpoint (what
    a preemption would throw away is the work since). A start after `now` (the clock was turned back since) counts
    as now: the forecast would otherwise add the jump to every estimate.

    An elastic job (a group with max_replicas) carries its elastic groups, its attempt's last resize and its
    cooldown, from its attempt's current replicas; on a cluster whose backend cannot resize its launcher's jobs
    (`resizable`: per cluster, the launchers it resizes) it carries none and is a rigid gang of what it runs."""
    running = []
    resizable = resizable or {}
    for job_id, project, priority, preemptible, flavor, max_runtime, cluster, placement, started, admitted, \
            checkpointed, min_runtime, launcher, _, _, resized, cooldown, _ in rows:
        requests = {g.role: (g.cpu_millis, g.memory_mib) for g in groups.get(job_id, ())}
        assignments = tuple(core.Assignment(a["role"], a["index"], node_key(cluster, a["node"]), a["devices"],
                                            *requests.get(a["role"], (0, 0)))
                            for a in placement)
        running.append(core.RunningJob(
            id=job_id, project=project, priority=priority, started_at=min((started or admitted).timestamp(), now),
            placement=assignments, flavor=flavor, preemptible=preemptible, min_runtime=float(min_runtime),
            max_runtime=float(max_runtime) if max_runtime else None,
            checkpointed_at=min(checkpointed.timestamp(), now) if checkpointed else None,
            elastic=tuple(core.Elastic(g.role, g.replicas, g.max_replicas) for g in groups.get(job_id, ())
                          if g.max_replicas is not None) if launcher in resizable.get(cluster, ()) else (),
            resized_at=min(resized.timestamp(), now) if resized else None, resize_cooldown=float(cooldown)))
    return tuple(running)


def resize_versions(rows: Iterable[tuple]) -> dict[int, tuple[int, int]]:
    """Per running job: its attempt's id and resize count as read, what applying a Grow or Shrink is conditional
    on (`jobs.lifecycle.resize`)."""
    return {row[0]: (row[-5], row[-4]) for row in rows}


def _pending_rows() -> list[tuple]:
    return list(Job.objects.filter(state=State.QUEUED).values_list(
        *_JOB_FIELDS, "submitted_at", "queued_at", "topology", "avoid_nodes", "submitter_id", *WAIT_FIELDS))


def hold_spent_users(rows: list[tuple], stops: Mapping[int, str]) -> tuple[list[tuple], dict[int, str]]:
    """The pending rows the cycle sees, and the jobs kept out of it (id -> reason): the non-preemptible jobs of
    users whose hard budget is spent (`ports.spent_user_budgets`). The core knows projects, not users, so such a job
    is not offered to it at all (it could not be admitted, and it holds no place others wait behind); the loop
    writes its wait as the core writes a project's budget stop."""
    if not stops:
        return rows, {}
    kept, held = [], {}
    for row in rows:
        job_id, preemptible, submitter = row[0], row[3], row[10]
        if not preemptible and submitter in stops:
            held[job_id] = stops[submitter]
        else:
            kept.append(row)
    return kept, held


def _pending(rows: list[tuple], groups: Mapping[int, tuple[core.ReplicaGroup, ...]]
             ) -> tuple[tuple[core.PendingJob, ...], dict[int, QueuedRow]]:
    pending, queued = [], {}
    for job_id, project, priority, preemptible, flavor, max_runtime, submitted, queued_at, topology, avoid, _, \
            *wait in rows:
        pending.append(core.PendingJob(
            id=job_id, project=project, priority=priority, submitted_at=submitted.timestamp(),
            groups=groups.get(job_id, ()), preemptible=preemptible, topology=core.Topology(topology),
            max_runtime=float(max_runtime) if max_runtime else None, avoid_nodes=frozenset(avoid),
            queued_at=queued_at.timestamp()))
        queued[job_id] = QueuedRow(project, flavor, submitted, tuple(wait))
    return tuple(pending), queued


def occupied(nodes: Iterable[core.Node], running: Iterable[core.RunningJob]) -> tuple[core.Node, ...]:
    """The nodes with what running jobs' replicas hold taken: devices, and CPU and memory where modelled."""
    used: dict[str, list[int]] = defaultdict(lambda: [0, 0, 0])
    for job in running:
        for a in job.placement:
            amounts = used[a.node]
            amounts[0] += a.devices
            amounts[1] += a.cpu_millis
            amounts[2] += a.memory_mib
    return tuple(
        replace(n, free=max(0, n.free - used[n.name][0]),
                free_cpu_millis=max(0, n.free_cpu_millis - used[n.name][1]),
                free_memory_mib=max(0, n.free_memory_mib - used[n.name][2])) if n.name in used else n
        for n in nodes)


def _ended(since: float, cluster_ids: Iterable[int], nodes: Iterable[core.Node]) -> tuple[core.EndedUse, ...]:
    """Attempts that ended after `since`, as devices per (project, flavor) of the nodes they held (the lend hold's
    window: Policy.lend_hold). Served by the (cluster, ended_at) index."""
    flavor_of = {n.name: n.flavor for n in nodes}
    rows = Attempt.objects.filter(cluster_id__in=list(cluster_ids), ended_at__gt=datetime.fromtimestamp(since, UTC)) \
        .values_list("job__project__slug", "job__flavor__name", "cluster__name", "placement", "started_at",
                     "admitted_at", "ended_at")
    ended = []
    for project, flavor, cluster, placement, started, admitted, end in rows:
        devices: dict[str, int] = defaultdict(int)
        for a in placement:
            devices[flavor_of.get(node_key(cluster, a["node"]), flavor)] += a["devices"]
        begin = (started or admitted).timestamp()
        ended += [core.EndedUse(project, f, d, begin, end.timestamp()) for f, d in devices.items() if d]
    return tuple(ended)


def _arrivals(since: float, rows: Iterable[tuple[int, str, float, bool]],
              groups: Mapping[int, tuple[core.ReplicaGroup, ...]]) -> tuple[core.Arrival, ...]:
    """Jobs submitted after `since` that wait or hold capacity, (job id, project, submitted at, preemptible) each,
    as devices per (project, flavor). One submitted and gone within the window (cancelled, or ended: its attempt
    counts as ended) is left out."""
    arrivals = []
    for job_id, project, at, preemptible in rows:
        if at > since:
            devices: dict[str, int] = defaultdict(int)
            for g in groups.get(job_id, ()):
                devices[g.flavor] += g.replicas * g.devices  # an elastic job's minimum: what it needs to start
            arrivals += [core.Arrival(project, f, d, at, preemptible) for f, d in devices.items() if d]
    return tuple(arrivals)


def recent_arrival_rates(now: float, window: float = ARRIVAL_WINDOW) -> tuple[core.ArrivalRate, ...]:
    """What projects submitted over the last `window` seconds (whatever became of the jobs since), as rates per
    project, priority and shape: the late end of the estimated starts' range (`core.estimate_starts`)."""
    since = datetime.fromtimestamp(now - window, UTC)
    rows = Job.objects.filter(submitted_at__gt=since).values_list(
        "id", "project__slug", "priority_class__value", "priority_class__preemptible", "max_runtime", "topology",
        "submitted_at")
    groups = _groups_by_job(job__submitted_at__gt=since)
    submitted = [core.PendingJob(job_id, project, priority, at.timestamp(), groups.get(job_id, ()), preemptible,
                                 core.Topology(topology), float(max_runtime) if max_runtime else None)
                 for job_id, project, priority, preemptible, max_runtime, topology, at in rows]
    return core.arrival_rates(submitted, window)


@dataclass(frozen=True)
class CycleInput:
    """A cycle's snapshot, what the adapter needs of each queued job (by id), each cluster's id by name, and the
    queued jobs kept out of the cycle because their user's hard budget is spent (id -> (reason, wait as stored))."""

    snapshot: core.Snapshot
    queued: dict[int, QueuedRow]
    cluster_ids: Mapping[str, int]
    # Per running job: its attempt's id and resize count as read (`resize_versions`).
    versions: Mapping[int, tuple[int, int]] = field(default_factory=dict)
    held: Mapping[int, tuple[str, tuple]] = field(default_factory=dict)
    # What the pools lend this cycle (ports.read_pools), recorded after it (ports.record_pools).
    pools: ports.PoolReading = field(default_factory=ports.PoolReading)


def build_snapshot(now: float) -> CycleInput:
    running_rows, pending_rows = _running_rows(), _pending_rows()
    waits = {row[0]: tuple(row[11:]) for row in pending_rows}
    pending_rows, held = hold_spent_users(pending_rows, ports.spent_user_budgets(datetime.fromtimestamp(now, tz=UTC)))
    groups = _groups_by_job(job_id__in=[row[0] for row in running_rows] + [row[0] for row in pending_rows])
    inventory = ports.inventory()
    running = _running(running_rows, groups, now, inventory.resizable)
    pending, queued = _pending(pending_rows, groups)
    projects = load_projects(ports.spent_budgets(datetime.fromtimestamp(now, tz=UTC)))
    since = now - policy_from_settings().lend_hold
    submitted = [(row[0], row[1], row[-1].timestamp(), row[3]) for row in running_rows] + \
        [(job.id, job.project, job.submitted_at, job.preemptible) for job in pending]
    pools = ports.read_pools(now, inventory.nodes, running)
    nodes = with_pools(occupied(inventory.nodes, running), pools.node_pool)
    snapshot = core.Snapshot(now=now, nodes=nodes, quotas=load_quotas(),
                             projects=projects, running=running, pending=pending,
                             ended=_ended(since, inventory.cluster_ids.values(), inventory.nodes),
                             arrivals=_arrivals(since, submitted, groups), pools=pools.pools)
    return CycleInput(snapshot, queued, inventory.cluster_ids, resize_versions(running_rows),
                      {job_id: (reason, waits[job_id]) for job_id, reason in held.items()}, pools)


def with_pools(nodes: tuple[core.Node, ...], node_pool: Mapping[str, str]) -> tuple[core.Node, ...]:
    """The nodes with the pool each lends for (Node.pool)."""
    if not node_pool:
        return nodes
    return tuple(replace(n, pool=node_pool[n.name]) if n.name in node_pool else n for n in nodes)
