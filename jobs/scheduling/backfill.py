"""Phase 5, backfill: the first job of a flavor that waits reserves its earliest start, whatever keeps it out.

Earliest start: running jobs (and jobs admitted earlier in this cycle) release their devices, CPU and memory at
max(started_at + max_runtime, now), in that order; the reservation starts at the first release time at which the
job can be placed (found by bisection over release times), on the placement found then, but no earlier than the
start the job was promised (`not_before`: Policy.reserve_after after it was queued, see Cycle.promised_start), so
that until then the jobs behind it that end by then use its room. Jobs without a
max_runtime are never counted as releasing, so when the job needs their devices there is no reservation (its
start is unknown) and later jobs are not held back for it.

Later jobs of that flavor are then placed against the hold (see state.Hold): a job that ends before the
reservation (now + max_runtime <= start) may use the held devices, CPU and memory, any other job (including jobs
without a max_runtime) only what the head will not need.

A head also reserves its project's quota (state.QuotaHold) from its start: later jobs of its project that would
still run then are checked with the head counted in, so none of them can push the head back. A head that its own
project's quota keeps out (over its borrow limit, or over its guarantee with borrowing off) starts no earlier than
the first time the project's running jobs will have released enough of that quota, and reserves capacity from then
on: a big job among a flood of small ones of its own project starts once the jobs running when it became the head
end. What a borrower's organization can lend is not reserved: lenders take their guarantee back whenever they need
it, and borrowers share what is idle by fair share.

A job that would take its guarantee back only because the free devices are scattered (drains_instead) reserves its
earliest start at once instead, when waiting for it costs less than the victims' lost work.
"""

from __future__ import annotations

from .capacity import replicas_fitting
from .model import PendingJob, Topology
from .placement import place, undo
from .preemption import lost_work
from .shapes import JobInfo
from .state import CycleState, Hold, QuotaHold, RunRec


def reserve(state: CycleState, job: PendingJob, info: JobInfo, not_before: float | None = None) -> Hold | None:
    """Create and install the hold of `job` if none of its flavors has one yet; None when its start is unknown.
    `not_before`: the hold starts no earlier (a head its own quota keeps out until then)."""
    if state.holds_for(info.flavors):
        return None
    index = state.index
    releases = _releases(state, info)
    if not releases and not_before is None:
        return None
    applied = 0  # releases[:applied] are given back to the index right now

    def release_until(t: float) -> None:
        nonlocal applied
        while applied < len(releases) and releases[applied][0] <= t:
            _, i, devices, cpu, mem = releases[applied]
            index.give(i, devices, cpu, mem)
            applied += 1
        while applied > 0 and releases[applied - 1][0] > t:
            applied -= 1
            _, i, devices, cpu, mem = releases[applied]
            index.take(i, devices, cpu, mem)

    def fits_at(t: float) -> bool:
        release_until(t)
        taken = place(index, job, info)
        if taken is None:
            return False
        undo(index, taken)
        return True

    if not_before is not None and fits_at(not_before):
        start: float | None = not_before
    else:
        # Releases only add capacity: the first time it fits is after not_before.
        release_until(float("-inf"))
        start = earliest_by_count(state, job, info, releases)
    taken = None
    if start is not None:
        release_until(start)
        taken = place(index, job, info)
    if taken is None:  # not a job of identical replicas (or counting disagreed): search by placing
        times = sorted({r[0] for r in releases if not_before is None or r[0] > not_before})
        if not times or not fits_at(times[-1]):
            release_until(float("-inf"))
            return None
        lo, hi = -1, len(times) - 1  # fits at times[hi]; times[lo] unknown or does not fit
        while hi - lo > 1:
            mid = (lo + hi) // 2
            if fits_at(times[mid]):
                hi = mid
            else:
                lo = mid
        start = times[hi]
        release_until(start)
        taken = place(index, job, info)
        assert taken is not None  # fits_at(start) was True on this very state
    assert start is not None  # found by counting, or by the search
    undo(index, taken)
    release_until(float("-inf"))
    need: dict[int, list[int]] = {}
    for _, _, i, devices, cpu, mem in taken:
        amounts = need.setdefault(i, [0, 0, 0])
        amounts[0] += devices
        amounts[1] += cpu
        amounts[2] += mem
    released_by_start: dict[int, list[int]] = {i: [0, 0, 0] for i in need}
    for t, i, devices, cpu, mem in releases:
        if t <= start and i in released_by_start:
            amounts = released_by_start[i]
            amounts[0] += devices
            amounts[1] += cpu
            amounts[2] += mem
    hold = Hold(job.id, start, info.flavors, {i: (d, c, m) for i, (d, c, m) in need.items()}, released_by_start,
                taken)
    install(state, hold)
    return hold


def _releases(state: CycleState, info: JobInfo) -> list[tuple[float, int, int, int, int]]:
    """(time, node index, devices, cpu, memory) that running jobs (and jobs admitted earlier in this cycle) give
    back on the job's flavors at their max runtimes, in time order; jobs without a max runtime never do."""
    index, now = state.index, state.now
    flavors = set(info.flavors)
    releases = []
    for rec in state.live_runs():
        if rec.end is None:
            continue
        at = max(rec.end, now)
        for i, devices, cpu, mem in rec.usage:
            if index.nodes[i].flavor in flavors:
                releases.append((at, i, devices, cpu, mem))
    releases.sort()
    return releases


def drains_instead(state: CycleState, job: PendingJob, info: JobInfo, victims: list[RunRec]) -> bool:
    """A reclaim that only defragments waits for a node to drain when that costs less than evicting.

    The victims (removed from `state`) are other projects' jobs that ran before this cycle, and with them back the
    job's flavors still have the free devices it asks for, on no nodes it fits on: evicting throws their work away
    (lost_work) while they start again at once on what is free. If running jobs' ends make room for the job at a
    known start S, and waiting until then costs fewer device-seconds ((S - now) x the job's devices) than the
    victims would lose, the victims stay (True): the caller has the job reserve its start at once, and calls this
    only when no job before it holds its flavors, so the drained room is the job's. Otherwise False, `state` as it
    was."""
    if not all(rec.at_start and rec.project != job.project for rec in victims):
        return False  # its own project's lower priorities go as before; jobs of this cycle lose nothing
    for rec in reversed(victims):
        state.add_run(rec)
    index = state.index
    avoided = index.node_indexes(info.avoid)
    start = None
    if all(index.visible_free(f) - sum(index.free[i] for i in avoided if index.nodes[i].flavor == f) >= d
           for f, d in info.demand.items()):
        start = earliest_by_count(state, job, info, _releases(state, info))
    lost = sum(lost_work(rec, state.now) for rec in victims)
    if start is not None and (start - state.now) * sum(info.demand.values()) < lost:
        return True
    for rec in victims:
        state.remove_run(rec)
    return False


def quota_start(state: CycleState, job: PendingJob, info: JobInfo) -> tuple[bool, float | None]:
    """(possible, start): when its own project's quota (guarantee plus borrow limit, and its running-job cap) will
    let `job` in if nothing else is admitted: now, or the first time the project's running jobs (those admitted
    this cycle too) have released enough devices and slots at their max runtimes. start is None when that depends
    on jobs without a max runtime; possible is False when the job asks for more than that quota."""
    project, quota = job.project, state.quota
    demand = info.demand
    limit = {f: quota.limit(project, f) for f in demand}
    if any(d > limit[f] for f, d in demand.items()):
        return False, None
    usage = {f: quota.used[(project, f)] + quota.pre[(project, f)] for f in demand}
    cap = quota.max_running.get(project)
    running = quota.running[project]

    def fits() -> bool:
        return (cap is None or running < cap) and all(usage[f] + d <= limit[f] for f, d in demand.items())

    if fits():
        return True, state.now
    for t, released, slots in _project_releases(state, project):
        running -= slots
        for f, d in released.items():
            if f in usage:
                usage[f] -= d
        if fits():
            return True, t
    return True, None


def held_demand(info: JobInfo) -> dict[str, int]:
    """The flavors a head's quota hold is of: those it asks devices of (a replica of none, a launcher on a GPU
    node, keeps no quota of its flavor from another head), or all of them for a job asking no devices at all
    (it holds a running-job slot)."""
    return {f: d for f, d in info.demand.items() if d} or dict(info.demand)


def hold_quota(state: CycleState, job: PendingJob, info: JobInfo, start: float | None) -> QuotaHold | None:
    """Install the quota hold of a head starting at `start` (None: unknown), unless a job of its project already
    holds quota of one of its flavors."""
    project = job.project
    demand = held_demand(info)
    if any((project, f) in state.quota_holds for f in demand):
        return None
    hold = QuotaHold(job.id, project, start, dict(demand), dict.fromkeys(demand, 0), 0, state.at,
                     slot=not state.project_quota_holds.get(project))
    for rec in state.project_runs(project):
        if hold.releases_by_start(rec, state.now):
            if not rec.grown:  # a grown replica of an elastic job holds no running-job slot
                hold.ended += 1
            for f, d in rec.demand.items():
                if f in hold.released:
                    hold.released[f] += d
    for f in demand:
        state.quota_holds[(project, f)] = hold
    state.project_quota_holds.setdefault(project, []).append(hold)
    return hold


def _project_releases(state: CycleState, project: str) -> list[tuple[float, dict[str, int], int]]:
    """(time, devices per flavor, running-job slots) the project's running jobs release, in time order (a grown
    replica of an elastic job releases devices alone); jobs without a max runtime never release."""
    now = state.now
    return sorted(((max(rec.end, now), rec.demand, 0 if rec.grown else 1) for rec in state.project_runs(project)
                   if rec.end is not None), key=lambda r: r[0])


_LEVEL = {Topology.REQUIRE_SAME_RACK: "rack", Topology.REQUIRE_SAME_BLOCK: "block"}


def earliest_by_count(state: CycleState, job: PendingJob, info: JobInfo,
                      releases: list[tuple[float, int, int, int, int]]) -> float | None:
    """For R identical replicas of D devices (C millicores, M MiB), the first release time at which some domain
    the job's topology allows has room for R (whole replicas per node, summed, each node counting its scarcest
    resource): placement is exact for such jobs, so this is the time bisection over placements would find, in
    one pass over the sorted releases. None when it never fits or the job is not of that kind."""
    shape = info.shape
    if shape is None or len(info.flavors) != 1:  # a shape: identical replicas
        return None
    flavor, devices, replicas, cpu, mem = shape.flavor, shape.devices, shape.replicas, shape.cpu, shape.memory
    if devices <= 0:
        return None
    index = state.index
    level = _LEVEL.get(job.topology, "cluster")
    domain_of: dict[int, int] = {}  # leaf -> position in room
    room: list[int] = []
    for domain in index.domains.get((flavor, level), ()):
        if level != "cluster" and not domain.labelled:
            continue
        for lid in domain.leaves:
            domain_of[lid] = len(room)
        room.append(index.replica_room(domain.leaves, devices, cpu, mem))
    if not room:
        return None
    avoid = index.node_indexes(info.avoid)
    for i in avoid:
        k = domain_of.get(index.leaf_of[i])
        if k is not None:
            room[k] -= index.node_room(i, devices, cpu, mem)
    if max(room) >= replicas:
        return None  # fits now: not a job waiting for capacity (let placement decide)
    current: dict[int, tuple[int, int, int]] = {}  # node -> (devices, cpu, memory) free once released so far
    n = len(releases)
    j = 0
    while j < n:
        t = releases[j][0]
        while j < n and releases[j][0] == t:
            _, i, d, c, m = releases[j]
            j += 1
            k = domain_of.get(index.leaf_of[i])
            if k is None or i in avoid:
                continue
            before = current.get(i)
            if before is None:
                before = (index.free[i], index.cpu[i], index.mem[i])
            after = (before[0] + d, before[1] + c, before[2] + m)
            current[i] = after
            room[k] += (replicas_fitting(*after, devices, cpu, mem)
                        - replicas_fitting(*before, devices, cpu, mem))
        if max(room) >= replicas:
            return t
    return None


def install(state: CycleState, hold: Hold) -> None:
    for f in hold.flavors:
        state.holds[f] = hold
    state.hold_list.append(hold)
    state.settle([hold])
