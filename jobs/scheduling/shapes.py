"""What a pending job asks for, computed once per job per cycle."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import NamedTuple

from .model import PendingJob, ReplicaGroup, RunningJob
from .pools import Fence


class Shape(NamedTuple):
    """What makes two jobs of identical replicas place alike (a tuple: it is a dictionary key)."""

    flavor: str
    devices: int  # per replica
    replicas: int
    topology: str
    avoid: frozenset[str]  # nodes to avoid
    cpu: int  # millicores per replica
    memory: int  # MiB per replica

    @property
    def size(self) -> tuple[int, int, int]:
        """What dominance compares (fast/memo.py): more replicas, or more CPU or memory each, is harder to fit."""
        return self.replicas, self.cpu, self.memory


class JobInfo:
    """Demand per flavor, replica groups in placement order, the nodes it avoids this cycle (`avoid`: its own, and
    a pool's it may not use, pools.Fence; None: its own), and its Shape when its replicas are identical."""

    __slots__ = ("avoid", "demand", "demand_key", "flavors", "primary", "groups", "replicas", "shape", "single")

    def __init__(self, job: PendingJob, avoid: frozenset[str] | None = None) -> None:
        self.avoid: frozenset[str] = job.avoid_nodes if avoid is None else avoid
        groups = job.groups
        if len(groups) == 1:  # the common case, kept cheap: trace replay builds one of these per job per cycle
            group = groups[0]
            self.demand = {group.flavor: group.replicas * group.devices}
            self.demand_key: tuple = (group.flavor, group.replicas * group.devices)
            self.flavors: tuple[str, ...] = (group.flavor,)
            self.primary = group.flavor
            self.groups: tuple[tuple[int, ReplicaGroup], ...] = ((0, group),)
            self.replicas = group.replicas
            self.single = group.replicas > 0
            self.shape: Shape | None = (
                Shape(group.flavor, group.devices, group.replicas, job.topology, self.avoid, group.cpu_millis,
                      group.memory_mib)
                if self.single else None
            )
            return
        demand: dict[str, int] = {}
        for group in groups:
            demand[group.flavor] = demand.get(group.flavor, 0) + group.replicas * group.devices
        # The flavor a job queues under (positions, ETA): the one it asks most devices of, first group on ties.
        self.primary = max(demand, key=lambda f: demand[f]) if demand else ""
        self.flavors = tuple(sorted(demand))
        # In flavor order, as its key: a quota check reports the first flavor that fails, and remembered answers
        # and reasons are shared by every job of the same key (two jobs whose groups named their flavors in
        # another order were told of different flavors, by the plain mode and the accelerated one).
        self.demand = {f: demand[f] for f in self.flavors}
        # What quotas see of the job: its devices per flavor (flattened, in flavor order).
        self.demand_key = tuple(x for f in self.flavors for x in (f, demand[f]))
        # Biggest replicas first: they are the hardest to place, small ones fill the gaps they leave.
        self.groups = tuple(sorted(enumerate(groups), key=lambda item: (-item[1].devices, item[0])))
        self.replicas = sum(g.replicas for g in groups)
        classes = {(g.flavor, g.devices, g.cpu_millis, g.memory_mib) for g in groups if g.replicas > 0}
        # Identical replicas of one flavor: placement is exact (a fit exists iff the sum over nodes of
        # min(free // d, cpu // c, memory // m) >= replicas: a replica placed on a node lowers its count by one),
        # so a failure of this shape stays a failure for the rest of the cycle while capacity only shrinks. Jobs
        # mixing replica sizes are placed heuristically and never cached.
        self.single = len(classes) == 1
        if self.single:
            flavor, devices, cpu, mem = next(iter(classes))
            self.shape = Shape(flavor, devices, self.replicas, job.topology, self.avoid, cpu, mem)
        else:
            self.shape = None


class JobInfos:
    """The JobInfo of each job of a cycle, one per set of identical replicas (flavor, devices, replicas, topology,
    nodes to avoid, CPU and memory: all a JobInfo is made of): a queue of 10,000 jobs holds a few thousand, and
    phase 1 asks for one per job. `fence`: what the cycle's pools keep jobs off."""

    def __init__(self, fence: Fence) -> None:
        self.by_shape: dict[tuple, JobInfo] = {}
        self.fence = fence

    def of(self, job: PendingJob) -> JobInfo:
        avoid = self.fence.avoided_by(job)
        groups = job.groups
        if len(groups) != 1:
            return JobInfo(job, avoid)
        group = groups[0]
        key = (group.flavor, group.devices, group.replicas, job.topology, avoid, group.cpu_millis, group.memory_mib)
        info = self.by_shape.get(key)
        if info is None:
            info = self.by_shape[key] = JobInfo(job, avoid)
        return info


def requeued(victim: RunningJob, flavor_of: Mapping[str, str], now: float) -> PendingJob:
    """A preempted job as the queue sees it again, queued `now`: one replica group per role, as it was placed
    (`flavor_of`: node name -> flavor)."""
    groups: dict[str, ReplicaGroup] = {}
    for a in victim.placement:
        group = groups.get(a.role)
        if group is None:
            group = ReplicaGroup(a.role, 0, a.devices, flavor_of.get(a.node, victim.flavor), a.cpu_millis,
                                 a.memory_mib)
        groups[a.role] = replace(group, replicas=group.replicas + 1, devices=max(group.devices, a.devices))
    for e in victim.elastic:  # it asks again for its minimum and may grow to its maximum
        if e.role in groups:
            groups[e.role] = replace(groups[e.role], replicas=e.min_replicas, max_replicas=e.max_replicas)
    return PendingJob(victim.id, victim.project, int(victim.priority), victim.started_at, tuple(groups.values()),
                      victim.preemptible, max_runtime=victim.max_runtime, queued_at=now)


def describe_shape(job: PendingJob) -> str:
    """'4 x 8 nvidia-h100-80gb' (groups joined by ' + ')."""
    return " + ".join(f"{g.replicas} x {g.devices} {g.flavor}" for g in job.groups)


def fmt_cpu(millis: int) -> str:
    """Millicores as people read them: '32 cores', '0.5 cores', '1 core'."""
    cores = millis / 1000
    return f"{cores:g} core{'' if cores == 1 else 's'}"


def fmt_memory(mib: int) -> str:
    """MiB as people read them: '512 MiB', '16 GiB', '1.5 TiB'."""
    for unit, size in (("TiB", 1 << 20), ("GiB", 1 << 10)):
        if mib >= size:
            return f"{round(mib / size, 1):g} {unit}"
    return f"{mib} MiB"
