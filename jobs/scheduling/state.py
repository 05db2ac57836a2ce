"""The mutable working copy of a snapshot that one cycle edits: capacity, quota usage, running jobs, holds.

Every edit has an inverse (take/give, add_run/remove_run, place_tentative/undo_tentative), which is how gang
placement ("every replica or none") and preemption ("simulate removal, keep only the victims needed") are
tried without copying the snapshot.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

from .capacity import CapacityIndex
from .fast.memo import DominanceMemo
from .lending import lend_holds, waiting_holds
from .model import PendingJob, Policy, RunningJob, Snapshot
from .placement import Taken, fits_by_count, place, undo
from .quota import QuotaFailure, QuotaState
from .shapes import JobInfo

INF = float("inf")


class RunRec:
    """A running job as the cycle sees it: where its devices, CPU and memory are and when it may end or be
    preempted."""

    __slots__ = ("id", "project", "priority", "started_at", "end", "evictable_at", "preemptible", "usage",
                 "demand", "at_start", "saved_at", "grown")

    def __init__(self, id: int, project: str, priority: float, started_at: float, end: float | None,
                 evictable_at: float, preemptible: bool, usage: list[tuple[int, int, int, int]], demand: dict[str, int],
                 at_start: bool, saved_at: float | None = None, grown: bool = False) -> None:
        self.id = id
        self.project = project
        self.priority = priority
        self.started_at = started_at
        self.end = end  # started_at + max_runtime, None when unknown
        self.evictable_at = evictable_at  # started_at + min_runtime
        self.preemptible = preemptible
        self.usage = usage  # (node index, devices, cpu millicores, memory MiB) per replica on nodes of the snapshot
        self.demand = demand  # devices per flavor
        self.at_start = at_start  # running when the cycle began (only these can be victims)
        # Its last checkpoint, or its start: a preemption throws away the work done since (preemption.lost_work).
        self.saved_at = started_at if saved_at is None else saved_at
        # A grown replica of an elastic job (elastic.py): preemptible use, and no running job of its own (taking it
        # frees no running-job slot).
        self.grown = grown


class Hold:
    """A backfill reservation: at `start` the head job needs need[i] = (devices, cpu, memory) on node i.

    released_by_start[i] is what jobs ending by `start` will have released on node i by then, [devices, cpu,
    memory]. Keeping max(0, need[i] - released_by_start[i]) of each out of placement's sight (hidden) guarantees
    free + released_by_start >= need at all times, so jobs that run past `start` can never delay the head; jobs
    that end by `start` may use hidden capacity (they add to released_by_start what they take).
    """

    __slots__ = ("job_id", "start", "flavors", "need", "released_by_start", "taken")

    def __init__(self, job_id: int, start: float, flavors: tuple[str, ...], need: dict[int, tuple[int, int, int]],
                 released_by_start: dict[int, list[int]], taken: Taken) -> None:
        self.job_id = job_id
        self.start = start
        self.flavors = flavors
        self.need = need
        self.released_by_start = released_by_start
        self.taken = taken


class QuotaHold:
    """A head job's reservation of its project's quota: it will start at `start` (None: when jobs without a
    max_runtime end), needing need[f] devices of each flavor f and one running-job slot. The project's running
    jobs that end by `start` release released[f] devices and `ended` slots by then.

    While it waits, a later job of its project that would still run at `start` is checked against quotas with
    the head counted in: the project's usage raised by what the head needs beyond those releases (`extra`). The
    project's usage only falls until `start` and its limits are monotone in it, so what passes now with the head
    counted in still leaves the head its quota then. A job whose release is counted that is preempted instead
    releases nothing later: its quota is free now, and the head's extra grows by it (as Hold.released_by_start
    shrinks).

    Only the first quota hold of a project holds a running-job slot (`slot`): a project's heads of other flavors
    hold their devices alone. Were each to count the slots its project's ending jobs release, one job's slot
    would count once per head, and preempting that job would raise the usage counted in by more than the slot it
    frees: removing a running job would tighten a quota (fact F6, docs/scheduling-invariants.md)."""

    __slots__ = ("job_id", "project", "start", "need", "released", "ended", "counted", "at", "slot")

    def __init__(self, job_id: int, project: str, start: float | None, need: dict[str, int],
                 released: dict[str, int], ended: int, at: int, slot: bool = True) -> None:
        self.job_id = job_id
        self.at = at  # the head's position in the cycle: only jobs after it are held to it
        self.project = project
        self.start = start
        self.need = need
        self.released = released
        self.ended = ended
        self.counted: tuple[dict[str, int], int] | None = None  # the extra counted into quota usage now
        self.slot = slot

    def extra(self) -> tuple[dict[str, int], int]:
        """(devices per flavor, running jobs) the head adds to its project's usage at its start."""
        return {f: max(0, d - self.released[f]) for f, d in self.need.items()}, \
            max(0, 1 - self.ended) if self.slot else 0

    def releases_by_start(self, rec: RunRec, now: float) -> bool:
        return self.start is not None and rec.end is not None and max(rec.end, now) <= self.start


Released = tuple[Hold, int, int, int, int]  # (hold, node index, devices, cpu, memory) added to hold.released_by_start


class Tentative:
    __slots__ = ("taken", "released_added")

    def __init__(self, taken: Taken, released_added: list[Released]) -> None:
        self.taken = taken
        self.released_added = released_added


def saved_at(job: RunningJob) -> float:
    """Since when a preemption of this job throws its work away: its last checkpoint, or its start (a checkpoint
    before its start is an earlier attempt's)."""
    checkpoint = job.checkpointed_at
    return job.started_at if checkpoint is None or checkpoint < job.started_at else checkpoint


def _job_id(job: RunningJob) -> int:
    return job.id



class RunningUsage:
    """The devices running jobs hold per (project, flavor) for quotas (preemptible ones apart) and how many jobs
    each project runs, kept from one cycle to the next by a caller that runs cycle after cycle on nearly the same
    running jobs (trace replay, forecasts: `run_cycle(..., usage=...)`): a cycle then adds only the jobs that
    started since and takes out those that ended. Jobs are told apart by identity; they are kept here, so an id
    cannot be reused while it counts. A replica counts on its node's flavor (the job's own on a node not in the
    inventory), so a new inventory of flavors starts the sums afresh. Each sum keeps how many replicas it adds
    up: one that no replica adds to any more is gone, as from a fresh sum."""

    __slots__ = ("jobs", "flavor_of", "sums", "count")

    def __init__(self) -> None:
        self.jobs: dict[int, RunningJob] = {}  # id -> job, the running jobs summed
        self.flavor_of: dict[str, str] | None = None  # node name -> flavor, as the sums were made
        self.sums: dict[tuple[bool, str, str], list[int]] = {}  # (preemptible, project, flavor) -> [devices, replicas]
        self.count: dict[str, int] = {}  # project -> running jobs

    def update(self, running: tuple[RunningJob, ...], flavor_of: dict[str, str]) -> tuple[
            dict[tuple[str, str], int], dict[tuple[str, str], int], dict[str, int]]:
        """(non-preemptible devices, preemptible devices per (project, flavor), jobs per project) of `running`."""
        now = dict(zip(map(id, running), running, strict=True))
        if flavor_of == self.flavor_of and len(now) == len(running):
            before = self.jobs
            for i in before.keys() - now.keys():
                self._add(before[i], -1)
            for i in now.keys() - before.keys():
                self._add(now[i], 1)
            self.jobs = now
        else:
            self.sums, self.count, self.flavor_of = {}, {}, flavor_of
            for job in running:
                self._add(job, 1)
            if len(now) == len(running):
                self.jobs = now
            else:  # a job given twice counts twice, but could not be told apart next time: start afresh then
                self.jobs, self.flavor_of = {}, None
        used: dict[tuple[str, str], int] = {}
        pre: dict[tuple[str, str], int] = {}
        for (preemptible, project, flavor), (devices, _) in self.sums.items():
            (pre if preemptible else used)[(project, flavor)] = devices
        return used, pre, self.count

    def _add(self, job: RunningJob, sign: int) -> None:
        sums, flavor_of = self.sums, self.flavor_of
        assert flavor_of is not None
        for a in job.placement:
            key = (job.preemptible, job.project, flavor_of.get(a.node, job.flavor))
            total = sums.get(key)
            if total is None:
                total = sums[key] = [0, 0]
            total[0] += sign * a.devices
            total[1] += sign
            if not total[1]:
                del sums[key]
        if job.grown_of is not None:
            return  # a grown replica of an elastic job: not a running job of its own
        n = self.count.get(job.project, 0) + sign
        if n:
            self.count[job.project] = n
        else:
            del self.count[job.project]


class CycleState:
    def __init__(self, snapshot: Snapshot, policy: Policy, usage: RunningUsage | None = None,
                 accelerate: bool = True) -> None:
        self.snapshot = snapshot
        self.policy = policy
        self.now = snapshot.now
        self.accelerate = accelerate  # False: the plain mode (Cycle)
        self.index = CapacityIndex(snapshot.nodes, accelerate)
        self.quota = QuotaState(snapshot.projects, snapshot.quotas, policy, self.index.total_devices)
        self.quota.cache = accelerate
        # Jobs running at start and not (yet) preempted, and per flavor (never edited): built on first use.
        self._runs: dict[int, RunRec] | None = None
        self._runs_by_flavor: dict[str, list[RunRec]] = {}
        # Admitted this cycle (add with `admitted`), by id and per project; and per flavor and project those a later
        # job of this cycle may take back before they start (`revocable`: preemption.revocable_candidates).
        self.new_runs: dict[int, RunRec] = {}
        self._new_by_project: dict[str, dict[int, RunRec]] = {}
        self.revocable: dict[str, dict[str, dict[int, RunRec]]] = {}
        # Of those, the ones that preempted others to get in: only a job of their own project takes them back.
        self.preempted_to_enter: set[int] = set()
        self._lowest: dict[tuple[str, str], float] = {}  # revocable_lowest, per (flavor, project) until it changes
        self._load_running(snapshot.running, usage)
        self.holds: dict[str, Hold] = {}  # flavor -> backfill reservation
        self.hold_list: list[Hold] = []
        self.quota_holds: dict[tuple[str, str], QuotaHold] = {}  # (project, flavor) -> its quota reservation
        self.project_quota_holds: dict[str, list[QuotaHold]] = {}
        self._beside: dict[tuple, tuple[int, QuotaFailure | None]] = {}  # see failure_beside
        self._counted: list[tuple[tuple[int, int], int]] = []  # count_heads: quota mark before, version after
        self.heads_in: tuple[int, ...] = ()  # the reserved heads counted into quota usage right now (count_heads)
        self._project_runs: dict[str, list[RunRec]] | None = None  # jobs running at start, per project
        self.blocked: dict[str, int] = {}  # strict blocking: queue -> job id at its head
        # Failures remembered until an invalidation event they follow (fast/memo.py): placements (Cycle.try_place)
        # until capacity grows, preemptions (Cycle.try_preempt) until capacity grows, usage falls or a project's
        # borrowing grows, quota bounds (fast.preemption.passes_quota_bound) until usage falls.
        self.failed_placements = DominanceMemo(accelerate)
        self.failed_preemptions = DominanceMemo(accelerate)
        self.failed_quota_bounds = DominanceMemo(accelerate)
        self.head_flavors: set[str] = set()  # flavors whose head job already tried to reserve (backfill)
        # Victim pools, built on first use and again once a project in them starts or stops borrowing (their order
        # says who borrows: borrowing_moved):
        self.reclaim_pool: dict[str, list[tuple[tuple, RunRec]]] = {}  # flavor -> preemptible or borrowing
        self.own_pool: dict[tuple[str, str], list[tuple[tuple, RunRec]]] = {}  # (project, flavor) -> its jobs
        self.own_lowest: dict[tuple[str, str], float] = {}  # (project, flavor) -> lowest priority in own_pool
        # flavor -> reclaim pool as of the last commit (fast.preemption._live_pool)
        self.live_pool: dict[str, tuple[list, set[str], dict[str, int]]] = {}
        self.mixed_pools: set[str] = set()  # flavors whose reclaim pool holds a job of several flavors
        self.pool_borrowing: dict[tuple[str, str], bool] = {}  # (project, flavor) -> borrowing, as the pools order it
        self._outline: dict[str, dict[str, list]] | None = None  # see victim_outline
        self.simulations = 0  # simulated removals so far this cycle (preemption.MAX_SIMULATIONS)
        # Running jobs a job in its reclaim grace would take, kept running for it (Cycle.decide): job id -> the
        # position in the cycle of the first job that spared it; and project -> the position of its first job in
        # its grace. No later job takes them, and no later job of that project preempts another project's job
        # (`may_take`): the grace is for capacity that frees by itself to go to that job, not to a job after it
        # (which that job, of higher order, would preempt in the next cycle).
        self.spared: dict[int, int] = {}
        self.in_grace: dict[str, int] = {}
        self.at = 0  # the position in the cycle of the job being evaluated

    def _load_running(self, running: tuple[RunningJob, ...], usage: RunningUsage | None) -> None:
        """Quota usage of the jobs running at the start of the cycle, summed per (project, flavor) and loaded in
        one step (one QuotaState.change per job was most of a replay cycle); with `usage` kept from the caller's
        previous cycle, only the jobs that started or ended since are summed. Their RunRecs are built only when
        first needed (`runs`): preemption, backfill and ETAs use them, most cycles of a replay never do."""
        flavor_of = {n.name: n.flavor for n in self.snapshot.nodes}
        used, pre, count = (usage or RunningUsage()).update(running, flavor_of)
        self._hold_back(running, used, pre, flavor_of)
        self.quota.load_running(used, pre, count)
        # Flavors any running job uses (runs_by_flavor's keys), from the sums' keys rather than per replica.
        self.running_flavors = {f for _, f in used} | {f for _, f in pre}

    def _hold_back(self, running: tuple[RunningJob, ...], used: dict[tuple[str, str], int],
                   pre: dict[tuple[str, str], int], flavor_of: dict[str, str]) -> None:
        """The lend hold (lending.py): each project's recent demand, and what its waiting jobs that fit its
        guarantee ask for, are kept from lending."""
        snapshot, hold = self.snapshot, self.policy.lend_hold
        if not self.policy.quotas:
            return
        # A grown replica of an elastic job is not demand: it takes only what nobody asks for and goes first when
        # anyone does. Held, its project's guarantee stayed kept from lending after a shrink gave it back, so
        # shrinking never cured a job's "lent" failure and a whole borrower was preempted instead
        # (bench_elastic.py's "preemptions a shrink sufficed for").
        grown: dict[tuple[str, str], int] = {}
        for job in running:
            if job.grown_of is not None:
                for a in job.placement:
                    key = (job.project, flavor_of.get(a.node, job.flavor))
                    grown[key] = grown.get(key, 0) + a.devices
        if grown:
            pre = {key: devices - grown.get(key, 0) for key, devices in pre.items()}
        waiting = waiting_holds(snapshot, self.quota, used, pre)
        held = dict(waiting)
        if hold > 0 and (snapshot.ended or snapshot.arrivals):
            since = snapshot.now - hold
            starts = [((job.project, flavor_of.get(a.node, job.flavor)), job.started_at, a.devices)
                      for job in running if job.started_at > since and job.grown_of is None for a in job.placement]
            for key, devices in lend_holds(snapshot, hold, used, pre, starts, self.quota.guar).items():
                held[key] = max(held.get(key, 0), devices)
        if held:
            self.quota.hold_back(held, waiting)

    def may_take(self, rec: RunRec, project: str) -> bool:
        """May the job being evaluated, of this project, preempt this one (see `spared`)?"""
        spared = self.spared.get(rec.id)
        if spared is not None and self.at > spared:
            return False
        graced = self.in_grace.get(project) if rec.project != project else None
        return graced is None or self.at <= graced

    @property
    def runs(self) -> dict[int, RunRec]:
        if self._runs is None:
            self._build_runs()
        return self._runs  # type: ignore[return-value]

    @property
    def runs_by_flavor(self) -> dict[str, list[RunRec]]:
        if self._runs is None:
            self._build_runs()
        return self._runs_by_flavor

    def _build_runs(self) -> None:
        index_of = self.index.index_of
        node_flavor = self.index.node_flavor
        runs: dict[int, RunRec] = {}
        by_flavor: dict[str, list[RunRec]] = {}
        for job in sorted(self.snapshot.running, key=_job_id):
            usage: list[tuple[int, int, int, int]] = []
            demand: dict[str, int] = {}
            for a in job.placement:
                i = index_of.get(a.node)
                if i is None:
                    flavor = job.flavor
                else:
                    usage.append((i, a.devices, a.cpu_millis, a.memory_mib))
                    flavor = node_flavor[i]
                demand[flavor] = demand.get(flavor, 0) + a.devices
            started = job.started_at
            end = None if job.max_runtime is None else started + job.max_runtime
            rec = RunRec(job.id, job.project, job.priority, started, end, started + job.min_runtime,
                         job.preemptible, usage, demand, True, saved_at(job), job.grown_of is not None)
            runs[job.id] = rec
            for flavor in demand:
                lst = by_flavor.get(flavor)
                if lst is None:
                    by_flavor[flavor] = [rec]
                else:
                    lst.append(rec)
        self._runs_by_flavor = by_flavor
        self._runs = runs

    def victim_outline(self) -> dict[str, dict[str, list]]:
        """flavor -> project -> [lowest priority, any preemptible] of the jobs running at the start of the cycle
        that may be preempted now (min_runtime passed), built on first use from the snapshot in one pass without
        RunRecs. It tells that a job has no victim candidate at all, the answer to most preemption attempts,
        without building running jobs' records and victim pools (preemption.find_victims)."""
        if self._outline is None:
            index_of, node_flavor, now = self.index.index_of, self.index.node_flavor, self.now
            flat: dict[tuple[str, str], list] = {}  # (flavor, project) -> [lowest priority, any preemptible]
            for job in self.snapshot.running:
                if now < job.started_at + job.min_runtime:
                    continue
                project, priority, preemptible = job.project, job.priority, job.preemptible
                for a in job.placement:  # replicas of one job on one flavor just see the same values again
                    i = index_of.get(a.node)
                    key = (job.flavor if i is None else node_flavor[i], project)
                    seen = flat.get(key)
                    if seen is None:
                        flat[key] = [priority, preemptible]
                    else:
                        if priority < seen[0]:
                            seen[0] = priority
                        if preemptible:
                            seen[1] = True
            outline: dict[str, dict[str, list]] = {}
            for (flavor, project), seen in flat.items():
                outline.setdefault(flavor, {})[project] = seen
            self._outline = outline
        return self._outline

    # -- reservations -----------------------------------------------------------------------------------------

    def reserved(self, job: PendingJob) -> bool:
        """Does the job hold a backfill reservation or a quota hold?"""
        return (any(h.job_id == job.id for h in self.hold_list)
                or any(h.job_id == job.id for h in self.project_quota_holds.get(job.project, ())))

    def release(self, job: PendingJob) -> None:
        """Drop the job's backfill reservation and quota hold (it is admitted after all): what they kept from
        later jobs is theirs again, so failures remembered since are forgotten."""
        for hold in [h for h in self.hold_list if h.job_id == job.id]:
            self.lift([hold])
            self.hold_list.remove(hold)
            for f in hold.flavors:
                if self.holds.get(f) is hold:
                    del self.holds[f]
        held = self.project_quota_holds.get(job.project, [])
        for quota_hold in [h for h in held if h.job_id == job.id]:
            held.remove(quota_hold)
            for key in [k for k, h in self.quota_holds.items() if h is quota_hold]:
                del self.quota_holds[key]
        self.capacity_grew()
        self.usage_fell(())

    def holds_for(self, flavors: Iterable[str]) -> list[Hold]:
        if not self.holds:
            return []
        found: list[Hold] = []
        for f in flavors:
            h = self.holds.get(f)
            if h is not None and h not in found:
                found.append(h)
        return found

    def is_long(self, max_runtime: float | None, hold: Hold) -> bool:
        """Would a job starting now still run at the hold's start (so it must not use the held devices)?"""
        return self.is_long_for(max_runtime, hold.start)

    def quota_holds_against(self, job: PendingJob, info: JobInfo) -> list[QuotaHold]:
        """The quota holds of the job's project whose start it would still be running at, of heads before it in
        the cycle (a job evaluated again after a commit is not kept out by what it or a later head reserved)."""
        at = self.at
        return [h for h in self.project_quota_holds.get(job.project, ())
                if h.at < at and self.is_long_for(job.max_runtime, h.start)]

    def count_heads(self, holds: list[QuotaHold], sign: int) -> None:
        """Count these heads into quota usage (sign=1) or out again (sign=-1). Counted out with nothing changed
        in between, the quota state takes back the version it had before, so its cached answers hold again."""
        quota = self.quota
        if sign > 0:
            before = quota.mark()
            for h in holds:
                h.counted = h.extra()
                quota.shift(h.project, *h.counted, 1)
            self._counted.append((before, quota.version))
            self.heads_in = tuple(h.job_id for h in holds)
        else:
            before, after = self._counted.pop()
            self.heads_in = ()
            unchanged = quota.version == after
            for h in holds:
                assert h.counted is not None
                quota.shift(h.project, *h.counted, -1)
                h.counted = None
            if unchanged:
                quota.restore(before)

    def failure_beside(self, job: PendingJob, info: JobInfo, holds: list[QuotaHold]) -> QuotaFailure | None:
        """Why the job fails its quota with these heads counted in (None: it passes). Remembered per (project,
        demand, heads) while the quota usage is the same (what the heads add moves only with it: see
        _rebase_quota_holds)."""
        quota = self.quota
        key = (job.project, info.demand_key, tuple(h.job_id for h in holds))
        cached = self._beside.get(key)
        if cached is not None and cached[0] == quota.version and self.accelerate:
            return cached[1]
        devices: dict[str, int] = {}
        jobs = 0
        for h in holds:  # what count_heads would add, added up without editing the quota state
            more, n = h.extra()
            for f, d in more.items():
                devices[f] = devices.get(f, 0) + d
            jobs += n
        failure = quota.check(job.project, info.demand, job.preemptible, (devices, jobs))
        self._beside[key] = (quota.version, failure)
        return failure

    def _rebase_quota_holds(self, rec: RunRec, sign: int) -> None:
        """A running job whose release a quota hold counts is removed (sign=-1) or added back (sign=1)."""
        for h in self.project_quota_holds.get(rec.project, ()):
            if not h.releases_by_start(rec, self.now):
                continue
            for f, d in rec.demand.items():
                if f in h.released:
                    h.released[f] += sign * d
            if not rec.grown:  # a grown replica of an elastic job holds no running-job slot
                h.ended += sign
            if h.counted is not None:  # counted in right now: keep the usage in step
                self.quota.shift(h.project, *h.counted, -1)
                h.counted = h.extra()
                self.quota.shift(h.project, *h.counted, 1)

    def is_long_for(self, max_runtime: float | None, start: float | None) -> bool:
        """Would a job starting now still run at `start` (None: an unknown time, so yes)?"""
        return start is None or max_runtime is None or self.now + max_runtime > start

    def lift(self, holds: list[Hold], nodes: Iterable[int] | None = None) -> None:
        """Make what these holds keep hidden visible: on all their nodes, or only on `nodes` (see settle)."""
        for h in holds:
            for i in h.need if nodes is None else [i for i in nodes if i in h.need]:
                self.index.set_hidden(i, 0, 0, 0)

    def settle(self, holds: list[Hold], nodes: Iterable[int] | None = None) -> None:
        """Hide again what these holds keep: max(0, need - released_by_start) of each node, at most what is free
        there. Every node of a hold is settled at all times outside a lift, so an edit of some nodes (a running job
        removed or put back, a tentative placement undone) needs to lift and settle only those (`nodes`)."""
        index = self.index
        free, cpu, mem = index.free, index.cpu, index.mem
        hidden, hidden_cpu, hidden_mem = index.hidden, index.hidden_cpu, index.hidden_mem
        for h in holds:
            needs, released = h.need, h.released_by_start
            for i in needs if nodes is None else [i for i in nodes if i in needs]:
                need, need_cpu, need_mem = needs[i]
                rel, rel_cpu, rel_mem = released[i]
                index.set_hidden(i, min(free[i] + hidden[i], max(0, need - rel)),
                                 min(cpu[i] + hidden_cpu[i], max(0, need_cpu - rel_cpu)),
                                 min(mem[i] + hidden_mem[i], max(0, need_mem - rel_mem)))

    # -- running jobs -----------------------------------------------------------------------------------------

    def _holds_touching(self, rec: RunRec) -> list[Hold]:
        if not self.hold_list:
            return []
        return [h for h in self.holds_for(rec.demand) if any(u[0] in h.need for u in rec.usage)]

    def remove_run(self, rec: RunRec) -> None:
        """Simulate (or commit) preempting a running job: its devices, CPU, memory and quota come back."""
        self.shift_run(rec, -1)

    def add_run(self, rec: RunRec) -> None:
        """Inverse of remove_run (fill-back)."""
        self.shift_run(rec, 1)

    def shift_run(self, rec: RunRec, sign: int) -> None:
        """Take a running job's devices, CPU, memory and quota (sign=1) or give them back (sign=-1). While it is
        off, what a reservation counted it to release by the reservation's start is free now instead."""
        holds = self._holds_touching(rec)
        nodes = {u[0] for u in rec.usage} if holds else None
        self.lift(holds, nodes)
        move = self.index.take if sign > 0 else self.index.give
        for i, devices, cpu, mem in rec.usage:
            move(i, devices, cpu, mem)
            for h in holds:
                if i in h.need and rec.end is not None and max(rec.end, self.now) <= h.start:
                    rel = h.released_by_start[i]
                    rel[0] += sign * devices
                    rel[1] += sign * cpu
                    rel[2] += sign * mem
        self.settle(holds, nodes)
        self.quota.change(rec.project, rec.demand, rec.preemptible, sign, job=not rec.grown)
        if self.quota_holds:
            self._rebase_quota_holds(rec, sign)
        if rec.at_start:
            if sign > 0:
                self.runs[rec.id] = rec
            else:
                del self.runs[rec.id]
        elif sign > 0:
            self._keep_new(rec, revocable=True)
        else:  # admitted this cycle: only a revocable one is ever removed
            self._forget_new(rec)

    # -- placement --------------------------------------------------------------------------------------------

    def short_holds(self, max_runtime: float | None, info: JobInfo) -> list[Hold]:
        return [h for h in self.holds_for(info.flavors) if not self.is_long(max_runtime, h)]

    def constrained(self, max_runtime: float | None, info: JobInfo) -> bool:
        holds = self.holds
        if not holds:
            return False
        if len(info.flavors) == 1:
            h = holds.get(info.primary)
            return h is not None and (max_runtime is None or self.now + max_runtime > h.start)
        return any(self.is_long(max_runtime, h) for h in self.holds_for(info.flavors))

    def place_tentative(self, job: PendingJob, info: JobInfo) -> Tentative | None:
        short = self.short_holds(job.max_runtime, info)
        if not short:
            taken = place(self.index, job, info)
            return None if taken is None else Tentative(taken, [])
        if self.accelerate and fits_by_count(self.index, job, info, {i for h in short for i in h.need}) is False:
            return None  # told by counting, without lifting and settling the holds
        self.lift(short)
        taken = place(self.index, job, info)
        released_added: list[Released] = []
        if taken is not None:
            released_added = self._add_released(short, taken)
        self.settle(short)
        return None if taken is None else Tentative(taken, released_added)

    def _add_released(self, short: list[Hold], taken: Taken) -> list[Released]:
        added = []
        for h in short:
            for _, _, i, devices, cpu, mem in taken:
                if i in h.need:
                    rel = h.released_by_start[i]  # ends before the hold's start: gives them back in time
                    rel[0] += devices
                    rel[1] += cpu
                    rel[2] += mem
                    added.append((h, i, devices, cpu, mem))
        return added

    def undo_tentative(self, tentative: Tentative) -> None:
        holds = [added[0] for added in tentative.released_added]
        nodes = {t[2] for t in tentative.taken} if holds else None
        self.lift(holds, nodes)
        undo(self.index, tentative.taken)
        for h, i, devices, cpu, mem in tentative.released_added:
            rel = h.released_by_start[i]
            rel[0] -= devices
            rel[1] -= cpu
            rel[2] -= mem
        self.settle(holds, nodes)

    def fits(self, job: PendingJob, info: JobInfo) -> bool:
        """Could the job be admitted right now (quota and a placement)? Leaves the state unchanged. Told by
        counting where that is exact (identical replicas of one flavor: placement.fits_by_count), with what the
        holds it would end before keep hidden counted in, as place_tentative lifts them."""
        if self.quota.check(job.project, info.demand, job.preemptible) is not None:
            return False
        counted = self.counted_fit(job, info) if self.accelerate else None
        if counted is not None:
            return counted
        tentative = self.place_tentative(job, info)
        if tentative is None:
            return False
        self.undo_tentative(tentative)
        return True

    def counted_fit(self, job: PendingJob, info: JobInfo) -> bool | None:
        """Would the job's replicas be placed now, quotas aside, told by counting where that is exact
        (placement.fits_by_count, with what the holds it would end before keep hidden counted in); None for jobs
        counting does not tell."""
        short = self.short_holds(job.max_runtime, info)
        return fits_by_count(self.index, job, info, {i for h in short for i in h.need} if short else ())

    # -- the invalidation events (docs/scheduling-invariants.md) ---------------------------------------------------

    def capacity_grew(self) -> None:
        """Capacity came back (victims committed, a reservation released): remembered placement and preemption
        failures may fit now."""
        self.failed_placements.forget()
        self.failed_preemptions.forget()

    def usage_fell(self, victims: Iterable[RunRec]) -> None:
        """Quota usage fell (victims committed, a quota hold released): remembered preemption and quota bound
        failures may pass now. A live pool changes only on the victims' flavors (they leave it, and their projects
        may stop borrowing there), or where a job of several flavors may stop counting as a borrower; the pools
        under it, only where a victim's project stopped borrowing (their order says who borrows)."""
        self.failed_preemptions.forget()
        self.failed_quota_bounds.forget()
        touched = {f for rec in victims for f in rec.demand} | self.mixed_pools
        for flavor in [f for f in self.live_pool if f in touched]:
            del self.live_pool[flavor]
        self._pools_follow({rec.project for rec in victims})

    def borrowing_grew(self, project: str) -> None:
        """A job admitted this cycle raised its project's borrowing: more of the project's running jobs stay reclaim
        victims while it is taken back (preemption.still_eligible), so remembered preemption failures may pass now,
        and where it started borrowing, the victim pools order its jobs anew."""
        self.failed_preemptions.forget()
        self._pools_follow((project,))

    def _pools_follow(self, projects: Iterable[str]) -> None:
        """Victim pools order a project's jobs by whether it borrows (preemption.preference): where one of these
        projects started or stopped borrowing since they were built, drop them, to be built again when next asked."""
        quota, recorded = self.quota, self.pool_borrowing
        for project in projects:
            flavors = quota.flavors_of.get(project, ())
            moved = False
            for f in flavors:
                was = recorded.get((project, f))
                if was is not None and was != quota.run_borrowing(project, f):
                    moved = True
                    del recorded[(project, f)]
            if moved:
                for flavor in flavors:
                    self._drop_pools(flavor)

    def _drop_pools(self, flavor: str) -> None:
        if self.reclaim_pool.pop(flavor, None) is None:
            return
        self.live_pool.pop(flavor, None)
        self.mixed_pools.discard(flavor)
        for key in [key for key in self.own_pool if key[1] == flavor]:
            del self.own_pool[key]
            self.own_lowest.pop(key, None)

    def admitted(self, rec: RunRec, revocable: bool, preempted: bool = False) -> None:
        """A job admitted this cycle now runs. `revocable`: a later job of this cycle may take it back before it
        starts (it is not preemptible: see preemption.plain_candidates); `preempted`: it preempted others to get in,
        so only a job of its own project may."""
        self._keep_new(rec, revocable)
        if preempted:
            self.preempted_to_enter.add(rec.id)
        else:  # given back earlier in the cycle, admitted again without victims
            self.preempted_to_enter.discard(rec.id)

    def revocable_lowest(self, flavor: str, project: str) -> float:
        """The lowest priority among the project's revocable jobs of this flavor (infinity if none)."""
        recs = self.revocable.get(flavor, {}).get(project)
        if not recs:
            return INF
        lowest = self._lowest.get((flavor, project))
        if lowest is None:
            lowest = self._lowest[(flavor, project)] = min(rec.priority for rec in recs.values())
        return lowest

    def _keep_new(self, rec: RunRec, revocable: bool) -> None:
        self.new_runs[rec.id] = rec
        self._new_by_project.setdefault(rec.project, {})[rec.id] = rec
        if revocable:
            for flavor in rec.demand:
                self.revocable.setdefault(flavor, {}).setdefault(rec.project, {})[rec.id] = rec
                self._lowest.pop((flavor, rec.project), None)

    def _forget_new(self, rec: RunRec) -> None:
        del self.new_runs[rec.id]
        del self._new_by_project[rec.project][rec.id]
        for flavor in rec.demand:
            self._lowest.pop((flavor, rec.project), None)
            per_project = self.revocable[flavor]
            del per_project[rec.project][rec.id]
            if not per_project[rec.project]:
                del per_project[rec.project]

    def live_runs(self) -> Iterator[RunRec]:
        yield from self.runs.values()
        yield from self.new_runs.values()

    def project_runs(self, project: str) -> list[RunRec]:
        """The project's running jobs: those running at start and not preempted, and those admitted since."""
        if self._project_runs is None:
            self._project_runs = {}
            for rec in self.runs.values():
                self._project_runs.setdefault(rec.project, []).append(rec)
        runs = self.runs
        found = [rec for rec in self._project_runs.get(project, ()) if rec.id in runs]
        found.extend(self._new_by_project.get(project, {}).values())
        return found
