"""Elastic jobs: replica groups that run on replicas..max_replicas (`ReplicaGroup.max_replicas`).

The rules, in every cycle:
- Admission: a pending elastic job needs the minimum of every elastic group, which is its group's `replicas`:
  quotas, placement, preemption and explanations treat it as the gang of that size.
- A running elastic job is its base (each group's replicas below its minimum, by index) and its grown replicas
  (`split_running`). A grown replica is preemptible use of its project (quotas count it so), holds no running-job
  slot of its own, and ranks half a priority below its job. So preemption's preference takes grown replicas before
  any whole job of their priority (preemptible first, then lowest priority), and every waiting non-preemptible job
  of their flavor at their job's priority or above may take them, its own project's included: a job never waits
  for capacity an elastic job grew into. Taking grown replicas shrinks their job (`Shrink`, highest indexes first);
  only taking its base preempts it, and then its grown replicas go with it.
- Growth (`grow`, after every waiting job was evaluated): a job past its resize cooldown, neither shrunk nor
  preempted in this cycle, grows, highest priority first, one replica at a time up to its maximum (jobs of one
  priority take turns, a replica each, the least time left by its declared runtime first), into visible capacity
  of a flavor no waiting job of this cycle was short of (cycle.py's `short`: it found no room, or its
  organization has nothing to lend it now, which a lend hold lapsing would soon change), within its project's
  quota as preemptible use, leaving its organization room for the jobs its projects are expected to submit within
  the growing job's cooldown (`arriving`): a replica those arrivals would take back at once would cost a rescale
  pause each way and the work since the last checkpoint. Grown replicas are not demand: the lend hold does not
  count them (state.py).
  A grown replica has no known end, so it never uses capacity a reservation holds. It goes on any node of its
  flavor in its job's cluster: an elastic group has no topology rule of its own.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import replace

from .model import ArrivalRate, Assignment, Elastic, Grow, PendingJob, ReplicaGroup, RunningJob, Topology
from .shapes import JobInfo
from .state import CycleState, RunRec

# Ids of grown replicas, a function of their job's id and rank (highest index first), so that the order of the
# snapshot's running jobs changes nothing: -(GROWN_IDS + job id * RANKS + rank), never a real job's (positive) or a
# forecast's simulated arrival's (small negative).
GROWN_IDS = 1 << 50
RANKS = 1 << 20


def elastic_groups(job: PendingJob) -> tuple[Elastic, ...]:
    """The elastic groups a job runs with once admitted (RunningJob.elastic)."""
    return tuple(Elastic(g.role, g.replicas, g.max_replicas) for g in job.groups if g.max_replicas is not None)


def part_id(job_id: int, rank: int) -> int:
    return -(GROWN_IDS + job_id * RANKS + rank)


def split_running(running: tuple[RunningJob, ...]) -> tuple[tuple[RunningJob, ...], dict[int, tuple[int, Assignment]]]:
    """The running jobs with each elastic one as its base and its grown replicas, and per grown replica's id its
    job's id and assignment."""
    parts: list[RunningJob] = []
    grown: dict[int, tuple[int, Assignment]] = {}
    for job in running:
        if not job.elastic:
            parts.append(job)
            continue
        minimum = {e.role: e.min_replicas for e in job.elastic}
        base = tuple(a for a in job.placement if a.index < minimum.get(a.role, a.index + 1))
        extra = sorted((a for a in job.placement if a.index >= minimum.get(a.role, a.index + 1)),
                       key=lambda a: (-a.index, a.role))
        parts.append(replace(job, placement=base))
        for rank, a in enumerate(extra):
            pid = part_id(job.id, rank)
            grown[pid] = (job.id, a)
            parts.append(RunningJob(pid, job.project, job.priority - 0.5, job.started_at, (a,), job.flavor, True,
                                    0.0, job.max_runtime, job.checkpointed_at, grown_of=job.id))
    return tuple(parts), grown


Arriving = dict[tuple[str, str], float]  # (cohort, flavor) -> devices per second non-preemptible jobs ask for


def arriving_rates(rates: Iterable[ArrivalRate], cohort_of: dict[str, str]) -> Arriving:
    """Devices per second of each (cohort, flavor) that the recent submissions of non-preemptible jobs ask for
    (Snapshot.arrival_rates): what will claim the cohort's guarantees next. Preemptible arrivals take nothing
    back from a grown replica."""
    arriving: Arriving = {}
    for rate in rates:
        if rate.preemptible:
            continue
        cohort = cohort_of.get(rate.project, rate.project)
        for group in rate.groups:
            key = (cohort, group.flavor)
            arriving[key] = arriving.get(key, 0.0) + rate.per_hour / 3600.0 * group.replicas * group.devices
    return arriving


def expected(arriving: Arriving, cohort: str, flavor: str, seconds: float) -> int:
    """Devices of the flavor the cohort's projects are expected to ask for within `seconds`: the mean, rounded up
    (one job expected in ten cycles' time still keeps its devices free)."""
    rate = arriving.get((cohort, flavor), 0.0)
    return math.ceil(rate * seconds) if rate > 0 else 0


def grow(state: CycleState, jobs: Iterable[RunningJob], resized: set[int], short: set[str],
         arriving: Arriving) -> list[Grow]:
    """Phase "grow": the replicas elastic running jobs add in this cycle (see the module's rules). `resized`: jobs
    shrunk or preempted in this cycle; `short`: flavors a waiting job of this cycle was short of; `arriving`: what
    the cohorts' projects ask for per second (arriving_rates). Jobs of a higher priority grow first; jobs of one
    priority share what is left: in rounds, each of their groups that may still grow adds one replica (the job with
    the least time left by its declared runtime first, then the oldest), until none can. A job's first replicas
    speed it up most (a job's speed-up falls with each worker it adds), and a job that took it all would leave the
    others at their minimum until it ends. When the room runs out within a round, the jobs closest to their end get
    it: with a speed-up that falls per worker, giving the larger share to the jobs with the least work left lowers
    the mean completion time most (heSRPT, Berg et al., 2020)."""
    elsewhere = _Elsewhere(state)
    tiers: dict[float, list[_Growth]] = {}  # priority -> its groups that may grow, the least time left first
    for job in sorted(jobs, key=lambda j: (-j.priority, time_left(j, state.now), j.started_at, j.id)):
        if job.id in resized or state.now < (job.resized_at or job.started_at) + job.resize_cooldown:
            continue
        for group in job.elastic:
            growth = _Growth.of(state, job, group.role, group.max_replicas, short, arriving, elsewhere)
            if growth is not None:
                tiers.setdefault(job.priority, []).append(growth)
    added: dict[int, list[Assignment]] = {}  # job id -> its new replicas, in the order they were added
    for growing in tiers.values():
        while growing:
            growing = [growth for growth in growing if growth.add_one(state, added.setdefault(growth.job.id, []))]
    return [Grow(job_id, tuple(replicas)) for job_id, replicas in added.items() if replicas]


def time_left(job: RunningJob, now: float) -> float:
    """Seconds a running job has left by its declared runtime (`max_runtime`); infinite when it declared none."""
    return job.started_at + job.max_runtime - now if job.max_runtime else math.inf


class _Elsewhere:
    """The nodes of a flavor outside a cluster, which a grown replica avoids (it joins its job's rendezvous: a gang
    never spans clusters), found once per (flavor, cluster) in a cycle."""

    def __init__(self, state: CycleState) -> None:
        self.nodes = state.index.nodes
        self.found: dict[tuple[str, str], frozenset[str]] = {}

    def __call__(self, flavor: str, cluster: str) -> frozenset[str]:
        key = (flavor, cluster)
        if key not in self.found:
            self.found[key] = frozenset(n.name for n in self.nodes if n.flavor == flavor and n.cluster != cluster)
        return self.found[key]


class _Growth:
    """One elastic group growing in this cycle: a replica at a time, as its group's replicas ask, on nodes of its
    flavor in its job's cluster."""

    def __init__(self, job: RunningJob, role: str, room: int, like: Assignment, flavor: str, one: PendingJob,
                 coming: int) -> None:
        self.job = job
        self.role = role
        self.room = room  # replicas it may still add
        self.like = like
        self.flavor = flavor
        self.one = one
        self.info = JobInfo(one)
        self.coming = coming
        self.index = like.index

    @staticmethod
    def of(state: CycleState, job: RunningJob, role: str, most: int, short: set[str], arriving: Arriving,
           elsewhere: _Elsewhere) -> _Growth | None:
        """The group's growth, or None when it may not grow: at its maximum, its node gone from the inventory (which
        cluster its job runs in is not known), or a flavor a waiting job was short of."""
        replicas = [a for a in job.placement if a.role == role]
        if not replicas or len(replicas) >= most:
            return None
        like = max(replicas, key=lambda a: a.index)  # a new replica asks for what its group's replicas ask
        i = state.index.index_of.get(like.node)
        if i is None:
            return None
        flavor = state.index.node_flavor[i]
        if flavor in short:
            return None
        one = PendingJob(job.id, job.project, int(job.priority), state.now,
                         (ReplicaGroup(role, 1, like.devices, flavor, like.cpu_millis, like.memory_mib),), True,
                         Topology.NONE, avoid_nodes=elsewhere(flavor, state.index.nodes[i].cluster))
        coming = expected(arriving, state.quota.cohort_of(job.project), flavor, job.resize_cooldown)
        return _Growth(job, role, most - len(replicas), like, flavor, one, coming)

    def add_one(self, state: CycleState, added: list[Assignment]) -> bool:
        """Add one replica (appended to `added`, its job's replicas of this cycle); False when it may add no more."""
        if self.room <= 0:
            return False
        job, info, devices = self.job, self.info, self.like.devices
        # Growth adds no running job: checked as if its job's slot were free.
        if state.quota.check(job.project, info.demand, True, ({}, -1)) is not None:
            return False
        if self.coming and not state.quota.keeps_room(job.project, self.flavor, devices, self.coming):
            return False
        tentative = state.place_tentative(self.one, info)
        if tentative is None:
            return False
        (_, _, node, devices, cpu, mem), = tentative.taken
        self.index += 1
        self.room -= 1
        state.quota.change(job.project, info.demand, True, 1, job=False)
        state.admitted(RunRec(part_id(job.id, RANKS // 2 + len(added)), job.project, job.priority - 0.5, state.now,
                              None, state.now, True, [(node, devices, cpu, mem)], dict(info.demand), False,
                              grown=True), revocable=False)
        added.append(Assignment(self.role, self.index, state.index.nodes[node].name, devices, cpu, mem))
        return self.room > 0
