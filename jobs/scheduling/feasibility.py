"""Jobs that can never run: checked at submission (never_fits) and again each cycle (structural_reason).

"Never" means: not on this inventory with every node empty, back in service (not cordoned, Ready, its cluster
enabled) and rid of pods the platform did not create, or not under this project's quota even with all the
borrowing it could ever get. Transient conditions (avoid_nodes, busy, cordoned or not-ready nodes, devices foreign
pods hold now) do not count: a job that needs them waits, with a reason, instead of being refused.
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


def ideal_index(nodes: Iterable[Node]) -> CapacityIndex:
    """The inventory as it could be: every node empty, in service, and rid of pods the platform did not create."""
    return CapacityIndex(tuple(Node(n.name, n.flavor, n.devices + n.foreign, n.devices + n.foreign, n.cluster,
                                    n.block, n.rack) for n in nodes))


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
