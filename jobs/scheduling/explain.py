"""Phase 6, explain: a reason and positions for every pending job that was not admitted.

Reasons for capacity and quota waits are written here from the state at the end of the cycle, once per job shape,
so they quote what is free now ("24 nvidia-a100-40gb free, needs 32") and what the quota table shows once the
cycle's decisions are applied (quota_reasons.py), and do not depend on which job of a shape was tried first.
Positions count waiting jobs in cycle order: among the project's, and among those asking for the same flavor.
Estimated starts come from running the scheduler forward (forecast.py), not from here.

Policy.explain=False (trace replay, which reads only decisions): `Explainer.brief` gives every waiting job its
code and reason (placement reasons as above, quota reasons shortened to the kind of limit) and positions 0.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from functools import partial
from typing import Protocol

from .fast.memo import DominanceMemo
from .model import PendingJob, ReplicaGroup, Topology, Wait
from .placement import fits_by_count, group_room, max_room, place, undo
from .quota import QuotaFailure
from .quota_reasons import FREED, QuotaReasons, short_quota_reason
from .shapes import JobInfo, fmt_cpu, fmt_memory
from .state import CycleState, Hold

# new_wait((job_id, reason, code, project_position, flavor_position)) is Wait(...) built in C: a named tuple's own
# constructor is a Python function, and phase 6 builds one Wait per waiting job (10,000 in a big queue).
new_wait: Callable[[tuple[int, str, str, int, int]], Wait] = partial(tuple.__new__, Wait)


def fmt_duration(seconds: float) -> str:
    s = max(0, int(round(seconds)))
    if s < 60:
        return f"{s}s"
    m = s // 60
    if m < 60:
        return f"{m}m"
    h, m = divmod(m, 60)
    if h < 48:
        return f"{h}h{m:02d}m" if m else f"{h}h"
    d, h = divmod(h, 24)
    return f"{d}d{h}h" if h else f"{d}d"


class WaitEntry(Protocol):
    """A job the cycle left waiting (cycle.Outcome): its code ("place" until explain finds which capacity
    reason), its reason when evaluation wrote one, and what explain needs to write the others (quota reasons and
    placement reasons quote the end-of-cycle state)."""

    job: PendingJob
    info: JobInfo
    code: str
    reason: str
    quota_kind: str
    quota_flavor: str
    constrained: bool


class Explainer:
    def __init__(self, state: CycleState) -> None:
        self.state = state
        self.now = state.now
        self.free = {f: state.index.actual_free(f) for f in state.index.flavor_leaves}
        self.reasons: dict[tuple, tuple[str, str]] = {}
        self.quota_reasons: dict[tuple, str] = {}  # (project, JobInfo.demand_key) -> its reason
        self.quota_texts = QuotaReasons(state.quota)
        # ((flavor, devices, topology, avoid), holds) -> sizes that fit and that did not: the state no longer
        # changes, so it follows no event
        self.fitted = DominanceMemo(state.accelerate)
        self.rooms: dict[tuple[str, int, int, int], int] = {}  # (flavor, devices, cpu, mem) -> group_room
        # (avoided nodes, flavor) -> free devices of the flavor on them, and how they are named in a reason
        self.avoided: dict[tuple[frozenset[str], str], tuple[int, str]] = {}

    # -- reasons ----------------------------------------------------------------------------------------------

    def placement_reason(self, entry: WaitEntry) -> tuple[str, str]:
        info = entry.info
        # The reason of a held job quotes its max runtime; others depend on the shape only.
        runtime = entry.job.max_runtime if entry.constrained else None
        key = (info.shape, entry.constrained, runtime) if info.shape else None
        if key is not None and key in self.reasons:
            return self.reasons[key]
        found = self._diagnose(entry.job, info, entry.constrained)
        if key is not None:
            self.reasons[key] = found
        return found

    def _fits(self, job: PendingJob, info: JobInfo, holds: list[Hold], loose: bool = False) -> bool:
        """Would the job fit now, the capacity these holds reserve included (with `loose`, as if its topology
        were none)? Told once per shape up to replicas, CPU and memory: no more replicas asking for no more CPU
        and memory than a gang that fits fit too, and at least as many asking for at least as much as one that
        does not fit do not."""
        shape = info.shape
        if shape is not None:
            context = ((shape.flavor, shape.devices, Topology.NONE if loose else shape.topology, shape.avoid),
                       tuple(h.job_id for h in holds))
            known = self.fitted.known(context, shape.size)
            if known is not None:
                return known
        if loose:
            job = replace(job, topology=Topology.NONE)
            info = JobInfo(job, info.avoid)
        fits = self._fits_now(job, info, holds)
        if shape is not None:
            self.fitted.record(context, shape.size, fits)
        return fits

    def _fits_now(self, job: PendingJob, info: JobInfo, holds: list[Hold]) -> bool:
        state = self.state
        # Most jobs: counted, without placing and undoing nor lifting and settling the holds.
        fits = fits_by_count(state.index, job, info, {i for h in holds for i in h.need})
        if fits is None:
            state.lift(holds)
            taken = place(state.index, job, info)
            if taken is not None:
                undo(state.index, taken)
            state.settle(holds)
            fits = taken is not None
        return fits

    def _diagnose(self, job: PendingJob, info: JobInfo, constrained: bool) -> tuple[str, str]:
        state = self.state
        for flavor, need in info.demand.items():
            free = self.free.get(flavor, 0)
            if free < need:  # checked first: the common case needs no placement attempt
                return "capacity", f"waiting for capacity: {free} {flavor} free, needs {need}"
        holds = state.holds_for(info.flavors)
        fits = self._fits(job, info, holds)  # with the reserved capacity it may not use
        if constrained and fits:
            hold = holds[0]
            when = fmt_duration(hold.start - self.now)
            if job.max_runtime is None:
                why = "jobs without a max runtime cannot use reserved capacity"
            else:
                why = f"its max runtime of {fmt_duration(job.max_runtime)} would end after that"
            return "reserved", f"held for job {hold.job_id}, which is reserved to start in {when}: {why}"
        if fits:
            return "capacity", "capacity was freed by preemption in this cycle; considered again next cycle"
        _, group = info.groups[0]
        # Text depends on the shape key only (jobs of one replica size are described as one group).
        count = info.replicas if info.single else group.replicas
        shape = f"{count} x {group.devices} {group.flavor}"
        if job.topology in (Topology.REQUIRE_SAME_RACK, Topology.REQUIRE_SAME_BLOCK) and \
                self._fits(job, info, holds, loose=True):
            level = "rack" if job.topology == Topology.REQUIRE_SAME_RACK else "block"
            room = max_room(state.index, info, level)
            return "topology", (f"needs {shape} in one {level}; largest free {level} has room for {room} "
                                f"replica{'s' if room != 1 else ''}")
        resources = self._resource_reason(info)
        if resources is not None:
            return "capacity", resources
        free = self.free.get(group.flavor, 0)
        if info.avoid:
            return "capacity", self._avoiding_reason(info.avoid, group, free, shape)
        room = self._room(group, group.cpu_millis, group.memory_mib)  # max_room(index, info, "cluster"), remembered
        return "capacity", (f"waiting for capacity: {free} {group.flavor} free but fragmented: needs "
                            f"{shape} on whole nodes of one cluster, room for {room}")

    def _avoiding_reason(self, avoid: frozenset[str], group: ReplicaGroup, free: int, shape: str) -> str:
        """A job kept off some nodes (where an earlier attempt was lost, or a pool's, which lend only to preemptible
        work): what is free on the nodes it may use."""
        key = (avoid, group.flavor)
        if key not in self.avoided:  # every job a pool keeps off its nodes holds the same set (pools.Fence)
            index = self.state.index
            avoided = [index.nodes[i] for i in index.node_indexes(avoid)]
            held = sum(index.free[index.index_of[n.name]] for n in avoided if n.flavor == group.flavor)
            pools = sorted({n.pool for n in avoided if n.pool})
            why = f"; the nodes of pool {', '.join(pools)} lend only to preemptible work" if pools else ""
            self.avoided[key] = held, f"{len(avoided)} avoided{why}"
        held, avoided_text = self.avoided[key]
        return (f"waiting for capacity: {free - held} {group.flavor} free on the nodes it may use ({avoided_text}): "
                f"needs {shape} on whole nodes of one cluster")

    def _resource_reason(self, info: JobInfo) -> str | None:
        """'waiting for CPU: ...' for the first group (biggest replicas first) whose devices would fit in one
        cluster but whose CPU or memory would not; None when no group is short of only those."""
        for _, group in info.groups:
            if group.cpu_millis <= 0 and group.memory_mib <= 0:
                continue
            count = info.replicas if info.single else group.replicas  # one replica size: described as one group
            if self._room(group, 0, 0) < count:
                continue  # short of devices: the capacity reason says so
            room = self._room(group, group.cpu_millis, group.memory_mib)
            if room >= count:
                continue
            # Which of them: the one requested, or each alone, when both are.
            short_cpu = group.memory_mib <= 0 or self._room(group, group.cpu_millis, 0) < count
            short_mem = group.cpu_millis <= 0 or self._room(group, 0, group.memory_mib) < count
            if not short_cpu and not short_mem:  # each alone would do, not both together
                short_cpu = short_mem = True
            free_cpu, free_mem = self._modelled_free(group.flavor)
            needs, free, what = [], [], []
            if short_cpu:
                needs.append(fmt_cpu(group.cpu_millis))
                free.append(fmt_cpu(free_cpu or 0))
                what.append("CPU")
            if short_mem:
                needs.append(f"{fmt_memory(group.memory_mib)} of memory")
                free.append(f"{fmt_memory(free_mem or 0)} of memory")
                what.append("memory")
            beside = f" with {group.devices} {group.flavor} each" if group.devices else f" on {group.flavor} nodes"
            return (f"waiting for {' and '.join(what)}: needs {count} x {' and '.join(needs)}{beside}; "
                    f"{' and '.join(free)} free on {group.flavor} nodes, room for {room} "
                    f"replica{'s' if room != 1 else ''} in one cluster")
        return None

    def _room(self, group: ReplicaGroup, cpu: int, mem: int) -> int:
        """Replicas of the group's devices with this CPU and memory that fit in the roomiest cluster (whatever
        the group's replica count: shapes that differ only in it share the count)."""
        key = (group.flavor, group.devices, cpu, mem)
        room = self.rooms.get(key)
        if room is None:
            room = self.rooms[key] = group_room(self.state.index, replace(group, cpu_millis=cpu, memory_mib=mem),
                                                "cluster")
        return room

    # Free CPU and memory per flavor at the end of the cycle, built on first use (most cycles never need it).
    modelled: dict[str, tuple[int | None, int | None]] | None = None

    def _modelled_free(self, flavor: str) -> tuple[int | None, int | None]:
        """Free CPU and memory of the flavor's nodes that model them, at the end of the cycle (once per flavor)."""
        if self.modelled is None:
            self.modelled = {}
        if flavor not in self.modelled:
            self.modelled[flavor] = self.state.index.modelled_free(flavor)
        return self.modelled[flavor]

    # -- the pass ---------------------------------------------------------------------------------------------

    def quota_reason(self, entry: WaitEntry) -> str:
        """The reason of a quota or running-jobs wait, from the end-of-cycle state."""
        job, info = entry.job, entry.info
        key = (job.project, info.demand_key)  # the end-of-cycle state does not change: one text per demand
        text = self.quota_reasons.get(key)
        if text is None:
            # Answered from the cycle's own check when nothing changed quotas after it (the jobs of a full cluster).
            failure = self.state.quota.check_demand(job.project, info.demand_key, info.demand)
            text = FREED if failure is None else self.quota_texts.reason(job.project, info.demand, failure)
            self.quota_reasons[key] = text
        return text

    def explain(self, entries: list[WaitEntry]) -> list[Wait]:
        proj_count: dict[str, int] = {}
        flav_count: dict[str, int] = {}
        waits = []
        for entry in entries:
            job, info = entry.job, entry.info
            proj_pos = proj_count[job.project] = proj_count.get(job.project, 0) + 1
            flav_pos = flav_count[info.primary] = flav_count.get(info.primary, 0) + 1
            code, reason = entry.code, entry.reason
            if code == "place":
                code, reason = self.placement_reason(entry)
            elif not reason:
                reason = self.quota_reason(entry)
            waits.append(new_wait((job.id, reason, code, proj_pos, flav_pos)))
        return waits

    def brief(self, entries: list[WaitEntry]) -> list[Wait]:
        """Waits with code and reason only (Policy.explain=False): positions 0."""
        waits = []
        short: dict[tuple[str, str], str] = {}  # (kind, flavor) -> its reason: replay waits millions of times
        for entry in entries:
            code, reason = entry.code, entry.reason
            if code == "place":
                code, reason = self.placement_reason(entry)
            elif not reason:
                key = (entry.quota_kind, entry.quota_flavor)
                known = short.get(key)
                if known is None:
                    known = short[key] = short_quota_reason(QuotaFailure(*key))
                reason = known
            waits.append(new_wait((entry.job.id, reason, code, 0, 0)))
        return waits
