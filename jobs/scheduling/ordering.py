"""Phase 1, order: which pending job the cycle evaluates next. Every order ends with the job id, so every cycle is
deterministic.

Every policy orders in two passes (`Passes`), each in the policy's order: every job that is not preemptible
first, then the preemptible ones. A preemptible job only ever runs on capacity nobody else claims: admitted ahead
of a job that is not preemptible, it would take room that job then preempts it for in the next cycle, so a quiet
cluster would churn. Under strict blocking a queue blocked in the first pass stays blocked in the second.

"fifo" and "sjf" are one sort of the whole queue, priority first (as Kueue's StrictFIFO). "priority-fairshare"
(production) moves as the cycle decides, as Kueue's admission order and Volcano's drf plugin do: each project has a
queue (priority desc, submitted_at, id), and the next job is the best of the projects' head jobs by

    (would borrow, -priority, share, submitted_at, id)

- would borrow: a job that fits in its project's guarantee goes before any job that must borrow, so no project
  borrows a guarantee whose owner waits in the same cycle (only to lose it to reclaim in the next).
- share: the project's dominant resource share, read from the cycle's quota state each time its head is queued, so
  it moves as the cycle admits (two projects with equal guarantees split a burst) and as preemption frees:
      current(p) = max over the flavors f p uses or is guaranteed of
                       use(p, f) / g(p, f)          where p has a guarantee (above 1 once it borrows)
                       1 + use(p, f) / total(f)     where it has none: all of it is borrowed
      share(p)   = current(p) + decayed_usage(p) / (usage_window * E(p))
  use counts every job of p (preemptible ones too), total(f) the devices of schedulable nodes of f. Use of a flavor
  without a guarantee counts (a project running 56 borrowed H100s goes behind an idle one). E(p) is the sum of
  p's guarantees (the cluster's devices for a project without any): past device-seconds put a project that just
  had a burst behind one that used less.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Iterator
from heapq import heappop, heappush
from operator import attrgetter
from typing import NamedTuple

from .model import PendingJob, Policy, Project
from .pools import Fence
from .quota import QuotaState
from .shapes import JobInfo, JobInfos


def decayed_usage(previous: float, devices: float, seconds: float, half_life: float) -> float:
    """A project's decayed device-seconds `seconds` later, having held `devices` all along: the old value decays by
    2^(-t/half-life) and the use in between is integrated with the same decay. The one formula of the live
    scheduler and of replay; steady use of D devices converges to D x the mean life (half-life / ln 2)."""
    if seconds <= 0:
        return previous
    rate = math.log(2) / half_life
    kept = math.exp(-rate * seconds)
    return previous * kept + devices * (1.0 - kept) / rate


def key_fifo(job: PendingJob) -> tuple:
    """Priority desc, then submitted_at, then id (as Kueue's StrictFIFO): a job never waits behind one of lower
    priority, which it would preempt in the next cycle."""
    return -job.priority, job.submitted_at, job.id


def key_sjf(job: PendingJob) -> tuple:
    """Priority desc, then oracle duration asc (unknown last), then submitted_at, then id. Only trace replay fills
    duration_hint."""
    return -job.priority, job.duration_hint is None, job.duration_hint or 0.0, job.submitted_at, job.id


_submitted_id = attrgetter("submitted_at", "id")
_priority = attrgetter("priority")


class GuaranteeRoom(NamedTuple):
    """What a project's guarantee of a flavor still holds for its next job."""

    regular: int  # for a job that is not preemptible (its project's preemptible jobs it would take back)
    preemptible: int  # for a preemptible job (its project's preemptible jobs count against it)


class Standing(NamedTuple):
    """A project's place in the fair order, as of its usage `changes` (QuotaState.changes)."""

    changes: int
    share: float  # dominant share now, plus its past use
    room: dict[str, GuaranteeRoom]  # flavor -> what its guarantee still holds


class StaticOrder:
    """The whole queue sorted once: decisions do not move it."""

    def __init__(self, pending: Iterable[PendingJob], key: Callable[[PendingJob], tuple], infos: JobInfos) -> None:
        self.jobs = sorted(pending, key=key)
        self.infos = infos
        self.closed: set[str] = set()  # projects whose remaining jobs are not yielded (see `close`)
        self.done = False

    def __iter__(self) -> Iterator[tuple[PendingJob, JobInfo]]:
        closed, info_of = self.closed, self.infos.of
        for job in self.jobs:
            # Tested before the JobInfo is found: skipping a closed project's job costs one set lookup.
            if job.project not in closed:
                yield job, info_of(job)
                if self.done:
                    return

    def changed(self, projects: Iterable[str]) -> None:
        """Nothing to do: a static order ignores usage."""

    def close(self, project: str | None) -> None:
        """Yield no further job of `project` (None: no further job at all)."""
        if project is None:
            self.done = True
        else:
            self.closed.add(project)


class FairOrder:
    """priority-fairshare: a heap of the projects' head jobs, each head's key computed when it is queued. A
    project's next job is queued after its job was decided and whenever `changed` says its usage moved
    (preemption); entries queued before are skipped by their version. When the next job of the same project
    still comes first, it is taken without going through the heap."""

    def __init__(self, pending: Iterable[PendingJob], quota: QuotaState, projects: Iterable[Project],
                 policy: Policy, infos: JobInfos) -> None:
        self.quota = quota
        cluster = sum(quota.totals.values()) or 1
        self.past: dict[str, float] = {}  # project -> decayed_usage / (usage_window * E(p))
        for p in projects:
            if p.decayed_usage:
                self.past[p.name] = p.decayed_usage / (policy.usage_window
                                                       * (quota.guaranteed_total.get(p.name) or cluster))
        self.queues: dict[str, list[PendingJob]] = {}
        for job in pending:
            self.queues.setdefault(job.project, []).append(job)
        for queue in self.queues.values():
            # A project's own queue: priority desc, then submitted_at, then id, kept best last (pop() takes it):
            # latest first, then by priority ascending (stable), two sorts on keys built in C.
            queue.sort(key=_submitted_id, reverse=True)
            queue.sort(key=_priority)
        self.version = dict.fromkeys(self.queues, 0)
        self.standings: dict[str, Standing] = {}  # see standing
        self.head_info: dict[str, JobInfo] = {}  # project -> the JobInfo of its head job (head_key finds it)
        self.info_of = infos.of
        self.heap: list[tuple[tuple, str, int]] = []
        for project in self.queues:
            heappush(self.heap, (self.head_key(project), project, 0))

    def __iter__(self) -> Iterator[tuple[PendingJob, JobInfo]]:
        heap, version, queues, head_info = self.heap, self.version, self.queues, self.head_info
        while heap:
            _, project, pushed = heappop(heap)
            if pushed != version[project]:
                continue
            queue = queues[project]
            while queue:
                job = queue.pop()
                yield job, head_info[project]
                # Resumed once the cycle decided that job: its project's share may have moved.
                version[project] += 1
                if not queue:
                    break
                key = self.head_key(project)
                if heap and heap[0][0] < key:
                    heappush(heap, (key, project, version[project]))
                    break

    def close(self, project: str | None) -> None:
        """Yield no further job of `project` (None: no further job at all)."""
        for name in self.queues if project is None else (project,):
            # Emptied in place: the loop of __iter__ holds the list of the project it is taking jobs from.
            self.queues[name].clear()

    def changed(self, projects: Iterable[str]) -> None:
        for project in projects:
            if self.queues.get(project):
                self.version[project] += 1
                heappush(self.heap, (self.head_key(project), project, self.version[project]))

    def head_key(self, project: str) -> tuple:
        head = self.queues[project][-1]
        info = self.head_info[project] = self.info_of(head)
        standing = self.standings.get(project)  # standing()'s cache, looked up here: this runs once per job
        if standing is None or standing.changes != self.quota.changes[project]:
            standing = self.standing(project)
        demand_key = info.demand_key
        if len(demand_key) == 2:  # one flavor: would it take the project above its guarantee (QuotaState.would_borrow)
            room = standing.room.get(demand_key[0])
            left = 0 if room is None else room.preemptible if head.preemptible else room.regular
            borrows = self.quota.enabled and demand_key[1] > left
        else:
            borrows = self.quota.would_borrow(project, info.demand, head.preemptible)
        return borrows, -head.priority, standing.share, head.submitted_at, head.id

    def standing(self, project: str) -> Standing:
        """The project's share, and what its guarantee still holds of each flavor it is guaranteed or uses. Both
        move only when its usage does."""
        quota = self.quota
        guar, used, pre, totals = quota.guar, quota.used, quota.pre, quota.totals
        current = 0.0
        room: dict[str, GuaranteeRoom] = {}
        for f in quota.flavors_of.get(project, ()):
            key = (project, f)
            g = guar.get(key, 0)
            use = used[key] + pre[key]
            if g:
                current = max(current, use / g)
            elif use:
                current = max(current, 1.0 + use / (totals.get(f) or 1))
            room[f] = GuaranteeRoom(g - used[key], g - use)
        standing = self.standings[project] = Standing(quota.changes[project], current + self.past.get(project, 0.0),
                                                      room)
        return standing


class Passes:
    """Groups of jobs, each in the policy's order, one after the other. A group's order is built when the one
    before is exhausted, so its keys see the state the earlier groups left."""

    def __init__(self, groups: list[list[PendingJob]], make: Callable[[list[PendingJob]], StaticOrder | FairOrder]
                 ) -> None:
        self.groups = [group for group in groups if group]
        self.make = make
        self.current: StaticOrder | FairOrder | None = None
        self.closed: set[str] = set()  # projects closed in a group stay closed in the next ones
        self.done = False

    def __iter__(self) -> Iterator[tuple[PendingJob, JobInfo]]:
        for group in self.groups:
            if self.done:
                return
            self.current = self.make(group)
            for project in self.closed:
                self.current.close(project)
            yield from self.current

    def changed(self, projects: Iterable[str]) -> None:
        if self.current is not None:
            self.current.changed(projects)

    def close(self, project: str | None) -> None:
        """Yield no further job of `project` (None: no further job at all), in this group and the next."""
        if project is None:
            self.done = True
        else:
            self.closed.add(project)
        if self.current is not None:
            self.current.close(project)


def job_order(pending: Iterable[PendingJob], policy: Policy, quota: QuotaState, projects: Iterable[Project],
              fence: Fence) -> Passes:
    """The cycle's order of `pending`; each job comes with its JobInfo (`fence`: what pools keep jobs off)."""
    projects = tuple(projects)
    infos = JobInfos(fence)
    make: Callable[[list[PendingJob]], StaticOrder | FairOrder]
    if policy.ordering == "priority-fairshare":
        make = lambda jobs: FairOrder(jobs, quota, projects, policy, infos)  # noqa: E731
    elif policy.ordering == "fifo":
        make = lambda jobs: StaticOrder(jobs, key_fifo, infos)  # noqa: E731
    elif policy.ordering == "sjf":
        make = lambda jobs: StaticOrder(jobs, key_sjf, infos)  # noqa: E731
    else:
        raise ValueError(f"unknown ordering {policy.ordering!r}; known: fifo, priority-fairshare, sjf")
    firm: list[PendingJob] = []
    preemptible: list[PendingJob] = []
    for job in pending:
        (preemptible if job.preemptible else firm).append(job)
    return Passes([firm, preemptible], make)
