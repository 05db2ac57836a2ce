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

from dataclasses import replace

from .model import PendingJob, Topology, Wait
from .placement import max_room, place, undo
from .quota import QuotaFailure
from .quota_reasons import FREED, quota_reason, short_quota_reason
from .shapes import JobInfo
from .state import CycleState, Hold


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


class WaitEntry:
    """A waiting job as evaluated in the cycle, plus what explain computed for it."""

    __slots__ = ("job", "info", "code", "reason", "placement_failed", "quota_kind", "quota_flavor", "constrained",
                 "proj_pos", "flav_pos")

    def __init__(self, job: PendingJob, info: JobInfo, code: str, reason: str = "", quota_kind: str = "",
                 quota_flavor: str = "", constrained: bool = False) -> None:
        self.job = job
        self.info = info
        self.code = code  # "place" until explain turns it into "capacity" / "topology" / "reserved"
        # Reasons for placement failures quote the end-of-cycle state: explain writes them.
        self.placement_failed = code == "place"
        self.reason = reason
        self.quota_kind = quota_kind
        self.quota_flavor = quota_flavor
        self.constrained = constrained
        self.proj_pos = 0
        self.flav_pos = 0


class Explainer:
    def __init__(self, state: CycleState) -> None:
        self.state = state
        self.now = state.now
        self.free = {f: state.index.actual_free(f) for f in state.index.flavor_leaves}
        self.reasons: dict[tuple, tuple[str, str]] = {}
        self.quota_failures: dict[tuple, QuotaFailure | None] = {}  # (project, preemptible, demand) -> at the end
        self.quota_reasons: dict[tuple, str] = {}  # (project, kind, flavor, need) -> its reason

    # -- reasons ----------------------------------------------------------------------------------------------

    def placement_reason(self, entry: WaitEntry) -> tuple[str, str]:
        info = entry.info
        # The reason of a held job quotes its max runtime; others depend on the shape only.
        runtime = entry.job.max_runtime if entry.constrained else None
        key = (info.shape_key, entry.constrained, runtime) if info.shape_key else None
        if key is not None and key in self.reasons:
            return self.reasons[key]
        found = self._diagnose(entry.job, info, entry.constrained)
        if key is not None:
            self.reasons[key] = found
        return found

    def _fits(self, job: PendingJob, info: JobInfo, holds: list[Hold]) -> bool:
        state = self.state
        state.lift(holds)
        taken = place(state.index, job, info)
        if taken is not None:
            undo(state.index, taken)
        state.settle(holds)
        return taken is not None

    def _diagnose(self, job: PendingJob, info: JobInfo, constrained: bool) -> tuple[str, str]:
        state = self.state
        for flavor, need in info.demand.items():
            free = self.free.get(flavor, 0)
            if free < need:  # checked first: the common case needs no placement attempt
                return "capacity", f"waiting for capacity: {free} {flavor} free, needs {need}"
        holds = state.holds_for(info.flavors)
        if constrained and self._fits(job, info, holds):
            hold = holds[0]
            when = fmt_duration(hold.start - self.now)
            if job.max_runtime is None:
                why = "jobs without a max runtime cannot use reserved capacity"
            else:
                why = f"its max runtime of {fmt_duration(job.max_runtime)} would end after that"
            return "reserved", f"held for job {hold.job_id}, which is reserved to start in {when}: {why}"
        if self._fits(job, info, holds):
            return "capacity", "capacity was freed by preemption in this cycle; considered again next cycle"
        _, group = info.groups[0]
        # Text depends on the shape key only (jobs of one replica size are described as one group).
        count = info.replicas if info.single else group.replicas
        shape = f"{count} x {group.devices} {group.flavor}"
        if job.topology in (Topology.REQUIRE_SAME_RACK, Topology.REQUIRE_SAME_BLOCK):
            loose = replace(job, topology=Topology.NONE)
            if self._fits(loose, JobInfo(loose), holds):
                level = "rack" if job.topology == Topology.REQUIRE_SAME_RACK else "block"
                room = max_room(state.index, info, level)
                return "topology", (f"needs {shape} in one {level}; largest free {level} has room for {room} "
                                    f"replica{'s' if room != 1 else ''}")
        free = self.free.get(group.flavor, 0)
        room = max_room(state.index, info, "cluster")
        avoid = f" (avoiding {len(job.avoid_nodes)} nodes)" if job.avoid_nodes else ""
        return "capacity", (f"waiting for capacity: {free} {group.flavor} free but fragmented{avoid}: needs "
                            f"{shape} on whole nodes of one cluster, room for {room}")

    # -- the pass ---------------------------------------------------------------------------------------------

    def quota_reason(self, entry: WaitEntry) -> str:
        """The reason of a quota or running-jobs wait, from the end-of-cycle state."""
        job, info = entry.job, entry.info
        key = (job.project, job.preemptible, tuple(sorted(info.demand.items())))
        failure = self.quota_failures.get(key, False)
        if failure is False:
            failure = self.quota_failures[key] = self.state.quota.check(job.project, info.demand, job.preemptible)
        if failure is None:
            return FREED
        text_key = (job.project, failure.kind, failure.flavor, info.demand.get(failure.flavor, 0))
        text = self.quota_reasons.get(text_key)
        if text is None:
            text = self.quota_reasons[text_key] = quota_reason(self.state.quota, job.project, info.demand, failure)
        return text

    def finish(self, entry: WaitEntry) -> Wait:
        if entry.placement_failed:
            entry.code, entry.reason = self.placement_reason(entry)
        elif not entry.reason:
            entry.reason = self.quota_reason(entry)
        return Wait(entry.job.id, entry.reason, entry.code, entry.proj_pos, entry.flav_pos)

    def explain(self, entries: list[WaitEntry]) -> list[Wait]:
        proj_count: dict[str, int] = {}
        flav_count: dict[str, int] = {}
        waits = []
        for entry in entries:
            job, info = entry.job, entry.info
            entry.proj_pos = proj_count[job.project] = proj_count.get(job.project, 0) + 1
            entry.flav_pos = flav_count[info.primary] = flav_count.get(info.primary, 0) + 1
            waits.append(self.finish(entry))
        return waits

    def brief(self, entries: list[WaitEntry]) -> list[Wait]:
        """Waits with code and reason only (Policy.explain=False): positions 0."""
        waits = []
        for entry in entries:
            if entry.placement_failed:
                entry.code, entry.reason = self.placement_reason(entry)
            elif not entry.reason:
                entry.reason = short_quota_reason(QuotaFailure(entry.quota_kind, entry.quota_flavor))
            waits.append(Wait(entry.job.id, entry.reason, entry.code, 0, 0))
        return waits
