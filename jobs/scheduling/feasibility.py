"""Jobs that can never run: checked at submission (never_fits) and again each cycle (structural_reason).

"Never" means: not on this inventory with every node empty, back in service (not cordoned, Ready, its cluster
enabled) and rid of pods the platform did not create, or not under this project's quota even with all the
borrowing it could ever get. Transient conditions (avoid_nodes, busy, cordoned or not-ready nodes, devices foreign
pods hold now) do not count: a job that needs them waits, with a reason, instead of being refused.

A replica must find its devices, CPU and memory on one node (a node that does not model CPU or memory never lacks
them). Node sync leaves out of a node's allocatable CPU and memory what pods the platform did not create request, so
unlike their devices those count as never there.
"""

from __future__ import annotations

from collections.abc import Iterable

from .capacity import ZERO_DEVICE_ROOM, CapacityIndex, replicas_fitting
from .model import DEFAULT_POLICY, Node, PendingJob, Policy, Project, Quota, ReplicaGroup, Topology
from .shapes import JobInfo, fmt_cpu, fmt_memory

_LOOSEST_LEVEL = {
    Topology.REQUIRE_SAME_RACK: "rack",
    Topology.REQUIRE_SAME_BLOCK: "block",
}


def _whole_room(index: CapacityIndex, leaf_ids: list[int], devices: int, cpu: int = 0, mem: int = 0) -> int:
    """Replicas of (devices, cpu, mem) that fit on these leaves' nodes when they are empty."""
    if devices <= 0 and cpu <= 0 and mem <= 0:
        return ZERO_DEVICE_ROOM
    room = 0
    for lid in leaf_ids:
        if not index.accelerate:  # the plain mode: node by node, nothing remembered
            room += sum(replicas_fitting(index.nodes[i].devices, index.cpu_alloc[i], index.mem_alloc[i], devices,
                                         cpu, mem) for i in index.leaves[lid].nodes)
            continue
        key = (lid, devices, cpu, mem)
        leaf_room = index.whole_room.get(key)
        if leaf_room is None:
            if index.modelled:
                leaf_room = sum(n * replicas_fitting(d, c, m, devices, cpu, mem)
                                for d, c, m, n in index.leaf_kinds(lid))
            else:  # devices alone (trace replay builds an index every cycle: no kinds for it)
                nodes = index.nodes
                leaf_room = ZERO_DEVICE_ROOM if devices <= 0 else sum(
                    nodes[i].devices // devices for i in index.leaves[lid].nodes)
            index.whole_room[key] = leaf_room
        room += leaf_room
    return min(room, ZERO_DEVICE_ROOM)


def _allowed_domains(index: CapacityIndex, flavor: str, topology: Topology) -> tuple[str, list]:
    """The loosest level a gang of this topology may be packed at, and its domains that may hold it."""
    level = _LOOSEST_LEVEL.get(topology, "cluster")
    no_block = topology == Topology.REQUIRE_SAME_BLOCK
    domains = [d for d in index.domains.get((flavor, level), ())
               if (level == "cluster" or d.labelled) and not (no_block and d.key[1] == "")]
    return level, domains


def most_room(index: CapacityIndex, flavor: str, topology: Topology, devices: int, cpu: int, mem: int) -> int:
    """Most replicas of (devices, cpu, mem) one domain this topology allows holds when its nodes are empty (cached
    per shape: the inventory does not change in a cycle)."""
    key = (flavor, topology, devices, cpu, mem)
    room = index.most_room.get(key)
    if room is None:
        _, domains = _allowed_domains(index, flavor, topology)
        room = index.most_room[key] = max((_whole_room(index, d.leaves, devices, cpu, mem) for d in domains),
                                          default=0)
    return room


def surely_fits(index: CapacityIndex, job: PendingJob) -> bool:
    """True when structural_reason(index, job) is None, told from most_room for a job of one replica group (its
    replicas fit some allowed domain, hence its devices, its largest node and one node for one replica); False when
    that cannot tell (ask structural_reason)."""
    if len(job.groups) != 1:
        return False
    g = job.groups[0]
    if g.replicas <= 0 or g.devices < 0 or g.cpu_millis < 0 or g.memory_mib < 0:
        return False
    if g.replicas == 1:  # structural_reason checks one node for one replica and stops (trace replay's jobs)
        return g.devices <= index.max_devices.get(g.flavor, -1) and _node_reason(index, g) is None
    return g.replicas <= most_room(index, g.flavor, job.topology, g.devices, g.cpu_millis, g.memory_mib)


def requests_text(group: ReplicaGroup) -> str:
    """'32 cores and 256 GiB of memory': what a replica requests besides devices ('' when nothing)."""
    parts = []
    if group.cpu_millis > 0:
        parts.append(fmt_cpu(group.cpu_millis))
    if group.memory_mib > 0:
        parts.append(f"{fmt_memory(group.memory_mib)} of memory")
    return " and ".join(parts)


def _node_reason(index: CapacityIndex, group: ReplicaGroup) -> str | None:
    """Why no schedulable node of the group's flavor could hold one replica's devices, CPU and memory even when
    empty, else None."""
    cpu, mem = group.cpu_millis, group.memory_mib
    if (cpu <= 0 and mem <= 0) or not index.modelled:
        return None
    kinds = [kind for lid in index.flavor_leaves.get(group.flavor, ()) for kind in index.leaf_kinds(lid)]
    if any(replicas_fitting(d, c, m, group.devices, cpu, mem) > 0 for d, c, m, _ in kinds):
        return None
    most_cpu = max(c for _, c, _, _ in kinds)
    if cpu > most_cpu:
        return (f"needs {fmt_cpu(cpu)} per replica; the largest schedulable {group.flavor} node has "
                f"{fmt_cpu(most_cpu)} allocatable")
    most_mem = max(m for _, _, m, _ in kinds)
    if mem > most_mem:
        return (f"needs {fmt_memory(mem)} of memory per replica; the largest schedulable {group.flavor} node has "
                f"{fmt_memory(most_mem)} allocatable")
    return (f"needs {group.devices} {group.flavor} and {requests_text(group)} per replica on one node; no "
            f"schedulable node of that flavor has all of them")


def structural_reason(index: CapacityIndex, job: PendingJob, info: JobInfo) -> str | None:
    """Why the job cannot fit this inventory even when every schedulable node is empty, else None."""
    if not job.groups or info.replicas <= 0:
        return "the job has no replicas"
    for group in job.groups:
        if group.replicas <= 0 or group.devices < 0 or group.cpu_millis < 0 or group.memory_mib < 0:
            return (f"group {group.role} needs a positive replica count and non-negative devices, CPU and "
                    f"memory")
        biggest = index.max_devices.get(group.flavor)
        if biggest is None:
            return f"no schedulable nodes offer {group.flavor}"
        if group.devices > biggest:
            return (f"needs {group.devices} {group.flavor} per replica; the largest schedulable node of that "
                    f"flavor has {biggest}")
        reason = _node_reason(index, group)
        if reason is not None:
            return reason
    if info.replicas == 1:
        return None
    for flavor in info.flavors:
        reason = _gang_reason(index, job, info, flavor)
        if reason is not None:
            return reason
    return None


def _gang_reason(index: CapacityIndex, job: PendingJob, info: JobInfo, flavor: str) -> str | None:
    """Why no domain the job's topology allows holds its replicas of this flavor even when empty, else None. The
    reason names what falls short in every domain, never a number by which the job fits."""
    groups = [g for _, g in info.groups if g.flavor == flavor]
    # A replica at least as big as a group's, in devices, CPU and memory, takes one of that group's slots on
    # whichever node it runs: the slots of each group's size must hold them all, not only its own.
    needs = [sum(h.replicas for h in groups if h.devices >= g.devices and h.cpu_millis >= g.cpu_millis
                 and h.memory_mib >= g.memory_mib) for g in groups]
    level, domains = _allowed_domains(index, flavor, job.topology)
    best = [0] * len(groups)  # per group, the most slots of its size a domain has
    most = 0  # the most devices a domain has
    for domain in domains:
        rooms = [_whole_room(index, domain.leaves, g.devices, g.cpu_millis, g.memory_mib) for g in groups]
        total = sum(_whole_room(index, [lid], 1) for lid in domain.leaves)
        if all(r >= n for r, n in zip(rooms, needs, strict=True)) and total >= info.demand[flavor]:
            return None
        best = [max(b, r) for b, r in zip(best, rooms, strict=True)]
        most = max(most, total)
    where = {"cluster": "one cluster", "rack": "one labelled rack", "block": "one labelled block"}[level]
    for g, need, room in zip(groups, needs, best, strict=True):  # the biggest replicas first
        if room < need:
            # Name CPU and memory when they, not devices, are what the largest domain lacks.
            by_devices = max((_whole_room(index, d.leaves, g.devices) for d in domains), default=0)
            with_requests = f" with {requests_text(g)} each" if room < by_devices and requests_text(g) else ""
            return (f"needs {need} x {g.devices} {flavor}{with_requests} in {where}; the largest has room for "
                    f"{room} even when empty")
    if most < info.demand[flavor]:
        return f"needs {info.demand[flavor]} {flavor} in {where}; the largest has {most} even when empty"
    return (f"needs {info.demand[flavor]} {flavor} in {where}; each size of its replicas fits one, but none holds "
            "all of them even when empty")


def ideal_index(nodes: Iterable[Node]) -> CapacityIndex:
    """The inventory as it could be: every node empty, in service, and rid of pods the platform did not create
    (their CPU and memory stay out: the inventory keeps no account of them) and of services' replicas."""
    return CapacityIndex(tuple(Node(n.name, n.flavor, n.devices + n.foreign + n.serving,
                                    n.devices + n.foreign + n.serving, n.cluster,
                                    n.block, n.rack, cpu_millis=n.cpu_millis, memory_mib=n.memory_mib,
                                    free_cpu_millis=n.cpu_millis, free_memory_mib=n.memory_mib) for n in nodes))


def unavailability(nodes: Iterable[Node], flavors: Iterable[str]) -> str:
    """What keeps part of these flavors' nodes out of use now, e.g. "1 of the 4 nvidia-a100-40gb nodes is
    cordoned; pods Tidal did not create hold 8 nvidia-a100-40gb"; empty when nothing does."""
    parts = []
    for flavor in sorted(set(flavors)):
        of_flavor = [n for n in nodes if n.flavor == flavor]
        reasons: dict[str, int] = {}
        for n in of_flavor:
            if not n.schedulable:
                why = n.unavailable or "unschedulable"
                reasons[why] = reasons.get(why, 0) + 1
        for why, count in sorted(reasons.items()):
            verb = "is" if count == 1 else "are"
            parts.append(f"{count} of the {len(of_flavor)} {flavor} nodes {verb} {why}")
        foreign = sum(n.foreign for n in of_flavor if n.schedulable)
        if foreign:
            parts.append(f"pods Tidal did not create hold {foreign} {flavor}")
        serving = sum(n.serving for n in of_flavor if n.schedulable)
        if serving:
            parts.append(f"Tidal's inference services hold {serving} {flavor}")
    return "; ".join(parts)


class Feasibility:
    """never_fits over one inventory, prepared once: the index of the inventory as it could be (`ideal_index`) and
    the quotas by flavor. Submissions share one (see jobs/selectors.py), so each check costs only its own job."""

    def __init__(self, nodes: Iterable[Node], quotas: Iterable[Quota], projects: Iterable[Project],
                 policy: Policy = DEFAULT_POLICY) -> None:
        self.index = ideal_index(nodes)
        self.projects = {p.name: p for p in projects}
        self.quotas_of_flavor: dict[str, list[Quota]] = {}
        for quota in quotas:
            self.quotas_of_flavor.setdefault(quota.flavor, []).append(quota)
        self.policy = policy

    def reason(self, job: PendingJob) -> str | None:
        """A sentence saying why `job` can never run (reject it at submission), or None if it could some day."""
        info = JobInfo(job)
        reason = structural_reason(self.index, job, info)
        if reason is not None or not self.policy.quotas:
            return reason
        project = self.projects.get(job.project)
        if project is not None and project.max_running_jobs is not None and project.max_running_jobs <= 0:
            return f"project {job.project} may not run any jobs (max running jobs is {project.max_running_jobs})"
        for flavor, need in sorted(info.demand.items()):
            reason = self._quota_reason(job, flavor, need)
            if reason is not None:
                return reason
        return None

    def _cohort(self, project: str) -> str:
        found = self.projects.get(project)
        return found.cohort if found is not None else project

    def _quota_reason(self, job: PendingJob, flavor: str, need: int) -> str | None:
        quotas = self.quotas_of_flavor.get(flavor, [])
        mine = [q for q in quotas if q.project == job.project]
        g = sum(q.guaranteed for q in mine)
        b = sum(q.borrow_limit for q in mine) if self.policy.borrowing else 0
        # The most its organization could ever lend: other members' guarantees within their lend limits, plus the
        # devices nobody is guaranteed (never another organization's guarantee). A preemptible job counts like any
        # other: its own idle guarantee first, then borrowing.
        cohort = self._cohort(job.project)
        others = [q for q in quotas if q.project != job.project and self._cohort(q.project) == cohort]
        lendable = sum(q.guaranteed if q.lend_limit is None else min(q.guaranteed, q.lend_limit) for q in others)
        lendable += max(0, self.index.total_devices.get(flavor, 0) - sum(q.guaranteed for q in quotas))
        most = g + min(b, lendable)
        if most >= need:
            return None
        if not mine:
            return f"project {job.project} has no quota for {flavor}"
        return (f"needs {need} {flavor} but project {job.project} may use at most {most} "
                f"({g} guaranteed + {min(b, lendable)} borrowed)")


def never_fits(job: PendingJob, nodes: Iterable[Node], quotas: Iterable[Quota], projects: Iterable[Project],
               policy: Policy = DEFAULT_POLICY) -> str | None:
    """A sentence saying why `job` can never run (reject it at submission), or None if it could some day."""
    return Feasibility(nodes, quotas, projects, policy).reason(job)
