"""Jobs that can never run: checked at submission (never_fits) and again each cycle (structural_reason).

"Never" means: not on this inventory with every node empty, or not under this project's quota even with all
the borrowing it could ever get. Transient conditions (avoid_nodes, busy nodes) do not count.
"""

from __future__ import annotations

from collections.abc import Iterable

from .capacity import CapacityIndex
from .model import DEFAULT_POLICY, Node, PendingJob, Policy, Project, Quota, Topology
from .shapes import JobInfo

_LOOSEST_LEVEL = {
    Topology.REQUIRE_SAME_RACK: "rack",
    Topology.REQUIRE_SAME_BLOCK: "block",
}


def _whole_room(index: CapacityIndex, leaf_ids: list[int], devices: int) -> int:
    """Replicas of `devices` that fit on these leaves' nodes when they are empty."""
    if devices <= 0:
        return 1 << 30
    room = 0
    for lid in leaf_ids:
        key = (lid, devices)
        leaf_room = index.whole_room.get(key)
        if leaf_room is None:
            nodes = index.nodes
            leaf_room = index.whole_room[key] = sum(nodes[i].devices // devices for i in index.leaves[lid].nodes)
        room += leaf_room
    return room


def structural_reason(index: CapacityIndex, job: PendingJob, info: JobInfo) -> str | None:
    """Why the job cannot fit this inventory even when every schedulable node is empty, else None."""
    if not job.groups or info.replicas <= 0:
        return "the job has no replicas"
    for group in job.groups:
        if group.replicas <= 0 or group.devices < 0:
            return f"group {group.role} needs a positive replica count and a non-negative device count"
        biggest = index.max_devices.get(group.flavor)
        if biggest is None:
            return f"no schedulable nodes offer {group.flavor}"
        if group.devices > biggest:
            return (f"needs {group.devices} {group.flavor} per replica; the largest schedulable node of that "
                    f"flavor has {biggest}")
    if info.replicas == 1:
        return None
    level = _LOOSEST_LEVEL.get(job.topology, "cluster")
    for flavor in info.flavors:
        groups = [g for _, g in info.groups if g.flavor == flavor]
        best = 0
        ok = False
        for domain in index.domains.get((flavor, level), ()):
            if level != "cluster" and not domain.labelled:
                continue
            if job.topology == Topology.REQUIRE_SAME_BLOCK and domain.key[1] == "":
                continue
            rooms = [_whole_room(index, domain.leaves, g.devices) for g in groups]
            best = max(best, rooms[0])
            total = sum(_whole_room(index, [lid], 1) for lid in domain.leaves)
            if all(r >= g.replicas for r, g in zip(rooms, groups, strict=True)) and total >= info.demand[flavor]:
                ok = True
                break
        if not ok:
            g = groups[0]  # the biggest replicas; jobs of one replica size are described as one group
            count = sum(x.replicas for x in groups if x.devices == g.devices)
            where = {"cluster": "one cluster", "rack": "one labelled rack", "block": "one labelled block"}[level]
            return (f"needs {count} x {g.devices} {flavor} in {where}; the largest has room for {best} "
                    f"even when empty")
    return None


def never_fits(job: PendingJob, nodes: Iterable[Node], quotas: Iterable[Quota], projects: Iterable[Project],
               policy: Policy = DEFAULT_POLICY) -> str | None:
    """A sentence saying why `job` can never run (reject it at submission), or None if it could some day."""
    node_list = tuple(nodes)
    index = CapacityIndex(tuple(Node(n.name, n.flavor, n.devices, n.devices, n.cluster, n.block, n.rack,
                                     n.schedulable) for n in node_list))
    info = JobInfo(job)
    reason = structural_reason(index, job, info)
    if reason is not None:
        return reason
    if not policy.quotas:
        return None
    projects = tuple(projects)
    project = next((p for p in projects if p.name == job.project), None)
    if project is not None and project.max_running_jobs is not None and project.max_running_jobs <= 0:
        return f"project {job.project} may not run any jobs (max running jobs is {project.max_running_jobs})"
    cohort_of = {p.name: p.cohort for p in projects}
    cohort = cohort_of.get(job.project, job.project)
    quotas = tuple(quotas)
    for flavor, need in sorted(info.demand.items()):
        mine = [q for q in quotas if q.project == job.project and q.flavor == flavor]
        g = sum(q.guaranteed for q in mine)
        b = sum(q.borrow_limit for q in mine) if policy.borrowing else 0
        # The most the cohort could ever lend: other members' guarantees within their lend limits, plus devices
        # no member of the cohort is guaranteed.
        others = [q for q in quotas if q.flavor == flavor and q.project != job.project
                  and cohort_of.get(q.project, q.project) == cohort]
        owned = g + sum(q.guaranteed for q in others)
        lendable = sum(q.guaranteed if q.lend_limit is None else min(q.guaranteed, q.lend_limit) for q in others)
        lendable += max(0, index.total_devices.get(flavor, 0) - owned)
        if job.preemptible:
            lendable += g  # its own idle guarantee is idle capacity too
            most = min(b, lendable)
            if most < need:
                return (f"needs {need} {flavor} but preemptible jobs of project {job.project} may borrow at most "
                        f"{most} (borrow limit {b})")
            continue
        most = g + min(b, lendable)
        if most < need:
            if not mine:
                return f"project {job.project} has no quota for {flavor}"
            return (f"needs {need} {flavor} but project {job.project} may use at most {most} "
                    f"({g} guaranteed + {min(b, lendable)} borrowed)")
    return None
