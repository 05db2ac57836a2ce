"""Discrete-event replay in virtual time around the production scheduler core.

Events are job arrivals, job completions and (optionally) fixed cycle ticks. All events of one timestamp are
applied together, then `run_cycle()` sees one snapshot and its decisions are applied: preemptions first (the
victim requeues and loses the work since its last checkpoint), then shrinks of elastic jobs, then admissions
(checked against free capacity, so a scheduler bug fails loudly instead of overcommitting a node), then growth of
elastic jobs. An elastic job's end is computed again at every resize (its progress model: replay/elastic.py).

The snapshot is assembled from structures kept up to date incrementally (a list of Node objects of which only
the touched ones are replaced, dicts of running and pending jobs), so a cycle costs tuple() copies,
not a rebuild.
Everything is ordered by time, then by insertion sequence: the same inputs give the same run.
"""

from __future__ import annotations

import heapq
import math
import time
from collections import Counter, deque
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field, replace
from functools import partial

from jobs.scheduling.elastic import elastic_groups
from jobs.scheduling.forecast import ARRIVAL_WINDOW, arrival_rates
from jobs.scheduling.model import (
    Arrival,
    ArrivalRate,
    Assignment,
    CycleResult,
    Elastic,
    EndedUse,
    Node,
    PendingJob,
    Policy,
    Project,
    ReplicaGroup,
    RunningJob,
    Snapshot,
)
from jobs.scheduling.ordering import decayed_usage
from replay.cluster import ClusterShape, QuotaSet
from replay.elastic import chosen, elastic_range, is_elastic, speed
from replay.pools import PoolClock, PoolMeter, PoolSpec, pool_nodes
from replay.split import components, restrict
from replay.trace import Trace, TraceJob

# Priority class -> PendingJob.priority (larger runs first). Mirrors the platform's default priority classes.
DEFAULT_PRIORITIES: dict[str, int] = {"high": 1000, "normal": 500, "low": 100, "preemptible": 0}

# (finished jobs, total jobs, virtual time); the last call of a run always reports (total, total, end time).
ProgressFn = Callable[[int, int, float], None]
CycleFn = Callable[[Snapshot, Policy], CycleResult]


class EngineError(RuntimeError):
    """The scheduler returned a decision the simulated cluster cannot apply (a core bug, not bad input)."""


@dataclass(frozen=True)
class EngineOptions:
    cycle_interval: float | None = None  # None: a cycle at every event time; else only at multiples of it
    checkpoint_interval: float | None = None  # seconds of work between checkpoints; None: restart from zero
    restart_overhead: float = 0.0  # seconds a resumed attempt spends before doing new work
    priorities: Mapping[str, int] = field(default_factory=lambda: dict(DEFAULT_PRIORITIES))
    oracle_durations: bool | None = None  # fill PendingJob.duration_hint; None: only for ordering="sjf"
    batch_events: bool = True  # one cycle per timestamp; False: one cycle after every single event
    max_cycles_per_instant: int = 4  # re-run the cycle at the same time after preemptions, at most this often
    split_independent: bool = True  # replay parts that share no flavor separately (same result, faster)
    # Elastic jobs (issue 29, replay/elastic.py): this share of the trace's jobs, chosen by a hash of the job id,
    # runs as one-device workers on ceil(size / 2)..size x elastic_max_factor of them; 0: every job rigid.
    elastic_fraction: float = 0.0
    elastic_max_factor: float = 1.0
    scaling_efficiency: float = 0.9  # the throughput each added worker keeps
    rescale_pause: float = 30.0  # seconds without progress after each resize
    resize_cooldown: float = 300.0  # seconds between an elastic job's resizes (RunningJob.resize_cooldown)
    # False: a shrink loses the work since the last checkpoint, as a preemption does. True: the job checkpoints
    # when told to shrink (SIGTERM first, as the Kubernetes backend of issue 29 shrinks) and loses nothing.
    checkpoint_on_shrink: bool = False
    # Tidal pools (issue 30, replay/pools.py): a serving pool beside the cluster, lending to this share of the
    # trace's jobs replayed preemptible (chosen by a hash of the job id, apart from the elastic ones' choice).
    pool: PoolSpec | None = None
    preemptible_fraction: float = 0.0

    def __post_init__(self) -> None:
        checks = (
            ("preemptible_fraction", 0.0 <= self.preemptible_fraction <= 1.0, "a share from 0 to 1"),
            ("elastic_fraction", 0.0 <= self.elastic_fraction <= 1.0, "a share from 0 to 1"),
            ("elastic_max_factor", self.elastic_max_factor >= 1.0, "at least 1"),
            ("scaling_efficiency", 0.0 < self.scaling_efficiency <= 1.0, "above 0 and at most 1"),
            ("rescale_pause", self.rescale_pause >= 0.0, "seconds, at least 0"),
            ("resize_cooldown", self.resize_cooldown >= 0.0, "seconds, at least 0"),
        )
        for name, ok, what in checks:
            value = getattr(self, name)
            # `not ok` alone would let NaN through every comparison above.
            if not ok or value != value:
                raise ValueError(f"{name} must be {what}, got {value!r}")


@dataclass
class JobOutcome:
    id: int
    job_id: str
    project: str
    flavor: str
    devices: int  # total over replicas
    priority: str
    submit: float
    duration: float
    first_start: float | None = None
    end: float | None = None
    preemptions: int = 0
    # Device-seconds of work discarded by preemptions and shrinks (since the last checkpoint), counted at the
    # job's trace size: what the job as recorded would spend doing it again.
    lost_work: float = 0.0
    overhead: float = 0.0  # device-seconds spent restarting after preemptions
    state: str = "pending"  # "done" | "timed_out" | "never_started" | "unfinished"
    # Elastic jobs (EngineOptions.elastic_fraction): replayed as min_workers..max_workers one-device workers.
    elastic: bool = False
    grows: int = 0
    shrinks: int = 0
    shrink_lost_work: float = 0.0  # the part of lost_work that shrinks discarded
    rescale_pause: float = 0.0  # seconds spent in rescale pauses (EngineOptions.rescale_pause)
    rescale_pause_device_s: float = 0.0  # ... times the devices held meanwhile

    @property
    def wait(self) -> float | None:
        """Queueing delay until the first start."""
        return None if self.first_start is None else self.first_start - self.submit

    @property
    def jct(self) -> float | None:
        return None if self.end is None else self.end - self.submit


@dataclass(frozen=True, slots=True)
class Segment:
    """One attempt of a replayed job holding its devices, as the platform meters a real one (a usage segment):
    plain data that a caller can price. An attempt still holding when the replay ended closes at that moment as
    `unfinished`; a preempted attempt is `preempted`, one stopped at its max runtime `failed`. An elastic job's
    attempt is one segment per device count: each resize closes one as `resized` and opens the next."""

    job_id: str
    attempt: int  # 1 for the first
    project: str
    flavor: str
    cluster: str  # the cluster of its nodes
    devices: int
    priority: str  # the priority class's name
    preemptible: bool
    start: float
    end: float
    outcome: str  # "succeeded", "failed", "preempted" or "unfinished"


def _segment_order(segment: Segment) -> tuple[float, str, int]:
    return segment.start, segment.job_id, segment.attempt


@dataclass
class ProjectAccount:
    """Per (project, flavor) integrals over virtual time, the basis of share-vs-guarantee results."""

    guarantee: int = 0
    device_seconds: float = 0.0  # used devices integrated over time
    demand_seconds: float = 0.0  # time with at least one job waiting
    under_guarantee_seconds: float = 0.0  # time waiting while using less than the guarantee
    # ... and a waiting job would fit within the unused guarantee, for any reason (its own reserved head, topology,
    # others' use)
    waited_within_seconds: float = 0.0
    # ... and it would, but others hold the flavor's devices (fewer free than it asks): what guarantees promise
    starved_seconds: float = 0.0
    starved_device_seconds: float = 0.0  # unused-but-wanted guarantee integrated over starved time
    longest_starved: float = 0.0


@dataclass
class ReplayResult:
    policy_name: str
    policy: Policy
    options: EngineOptions
    jobs: list[JobOutcome]
    capacity: dict[str, int]  # devices per flavor
    accounts: dict[tuple[str, str], ProjectAccount]
    util_times: list[float]  # step function: used devices from util_times[i] until util_times[i+1]
    util_used: list[int]
    cycles: int = 0
    wall_seconds: float = 0.0
    skipped: dict[str, int] = field(default_factory=dict)
    label: str = ""
    segments: list[Segment] = field(default_factory=list)  # every attempt, by start
    pool: PoolMeter | None = None  # what the pool lent, and what serving did without (EngineOptions.pool)

    @property
    def name(self) -> str:
        return self.label or self.policy_name


@dataclass
class _Run:
    attempt_start: float
    end: float
    progress0: float  # work checkpointed before this attempt
    overhead: float  # restart overhead of this attempt
    attempt: int
    cluster: str
    devices: int = 0  # held now
    segment_start: float = 0.0  # since when it holds `devices` (the open Segment)
    end_seq: int = 0  # the completion event that is this run's end (others are stale)
    # Elastic runs: work of this attempt (seconds of the recorded duration) done by `work_at`, advancing at `speed`
    # from `idle_until` on (restart overhead, rescale pause); the last checkpoint's work and moment, the next
    # checkpoint's moment, and the end of a rescale pause still running.
    elastic: bool = False
    workers: int = 0
    work: float = 0.0
    work_at: float = 0.0
    speed: float = 1.0
    idle_until: float = 0.0
    checkpoint_work: float = 0.0
    checkpointed_at: float | None = None
    next_checkpoint: float = math.inf
    pause_until: float = 0.0


def _groups(j: TraceJob) -> tuple[ReplicaGroup, ...]:
    """The job's replica groups: node-sized replicas, plus one smaller replica when the total is not whole nodes
    (the core places the bigger group first, on whole free nodes, then the rest best fit)."""
    main = ReplicaGroup("worker", j.replicas, j.devices, j.flavor)
    if not j.remainder:
        return (main,)
    return main, ReplicaGroup("remainder", 1, j.remainder, j.flavor)


def _default_cycle() -> CycleFn:
    from jobs.scheduling import RunningUsage, run_cycle  # imported late: the core may not exist while replay is built

    usage = RunningUsage()  # consecutive cycles share most running jobs: each sums only what changed
    return lambda snapshot, policy: run_cycle(snapshot, policy=policy, usage=usage)


def run_replay(
    trace: Trace,
    cluster: ClusterShape,
    quotas: QuotaSet,
    policy: Policy,
    *,
    policy_name: str = "",
    options: EngineOptions | None = None,
    progress: ProgressFn | None = None,
    cycle: CycleFn | None = None,
) -> ReplayResult:
    """Replay `trace` on `cluster` under `quotas` and `policy`; returns per-job outcomes and time integrals.

    `cycle` replaces the scheduler call (tests only); by default it is `jobs.scheduling.run_cycle`.
    """
    opts = options or EngineOptions()
    cycle = cycle or _default_cycle()
    # A pool lends to one flavor's jobs: its part is not independent of the others' (kept whole).
    parts = components(trace, cluster, quotas, policy) if opts.split_independent and opts.pool is None else []
    if len(parts) <= 1:
        return _Engine(trace, cluster, quotas, policy, policy_name, opts, progress, cycle).run()
    return _run_split(parts, trace, cluster, quotas, policy, policy_name, opts, progress, cycle)


def _run_split(
    parts: list[set[str]],
    trace: Trace,
    cluster: ClusterShape,
    quotas: QuotaSet,
    policy: Policy,
    policy_name: str,
    opts: EngineOptions,
    progress: ProgressFn | None,
    cycle: CycleFn,
) -> ReplayResult:
    """Replay independent parts one by one (see replay.split) and merge them into one result."""
    total = len(trace.jobs)
    jobs: list[JobOutcome | None] = [None] * total
    accounts: dict[tuple[str, str], ProjectAccount] = {}
    deltas: list[tuple[float, int]] = []
    segments: list[Segment] = []
    cycles, wall, offset = 0, 0.0, 0
    for flavors in parts:
        idx, sub_trace, sub_cluster, sub_quotas = restrict(trace, cluster, quotas, flavors)
        if not idx and not sub_quotas.quotas:
            continue
        sub_progress = None
        if progress is not None:
            base = offset
            sub_progress = lambda done, _t, now, base=base: progress(base + done, total, now)  # noqa: E731
        r = _Engine(sub_trace, sub_cluster, sub_quotas, policy, policy_name, opts, sub_progress, cycle).run()
        offset += len(idx)
        for i, out in zip(idx, r.jobs, strict=True):
            out.id = i + 1
            jobs[i] = out
        accounts.update(r.accounts)
        segments.extend(r.segments)
        prev = 0
        for t, used in zip(r.util_times, r.util_used, strict=True):
            deltas.append((t, used - prev))
            prev = used
        cycles += r.cycles
        wall += r.wall_seconds
    if progress is not None:
        progress(total, total, max((j.end or j.submit for j in jobs if j is not None), default=0.0))
    deltas.sort(key=lambda d: d[0])
    util_times: list[float] = []
    util_used: list[int] = []
    level = 0
    for t, d in deltas:
        level += d
        if util_times and util_times[-1] == t:
            util_used[-1] = level
        else:
            util_times.append(t)
            util_used.append(level)
        if len(util_used) > 1 and util_used[-1] == util_used[-2]:  # parts cancelled out: no change
            util_times.pop()
            util_used.pop()
    return ReplayResult(
        policy_name=policy_name or "custom",
        policy=policy,
        options=opts,
        jobs=[j for j in jobs if j is not None],
        capacity=cluster.devices_by_flavor(),
        accounts=accounts,
        util_times=util_times,
        util_used=util_used,
        cycles=cycles,
        wall_seconds=wall,
        skipped=dict(trace.skipped.counts),
        segments=sorted(segments, key=_segment_order),
    )


class _Engine:
    def __init__(
        self,
        trace: Trace,
        cluster: ClusterShape,
        quotas: QuotaSet,
        policy: Policy,
        policy_name: str,
        opts: EngineOptions,
        progress: ProgressFn | None,
        cycle: CycleFn,
    ) -> None:
        self.trace, self.policy, self.opts = trace, policy, opts
        self.cycle_policy = replace(policy, explain=False, waits=False)  # replay never reads waits
        self.policy_name = policy_name or "custom"
        self.progress, self.cycle = progress, cycle
        self.oracle = opts.oracle_durations if opts.oracle_durations is not None else policy.ordering == "sjf"
        self.jobs: list[TraceJob] = [replace(j, priority="preemptible")
                                     if chosen(f"preemptible/{j.job_id}", opts.preemptible_fraction) else j
                                     for j in trace.jobs]  # id = index + 1
        self.outcomes = [
            JobOutcome(i + 1, j.job_id, j.project, j.flavor, j.total_devices, j.priority, j.submit, j.duration)
            for i, j in enumerate(self.jobs)
        ]
        # Elastic jobs: id -> (min, max) workers. A chosen job whose range is one size (1 device, no growth) stays
        # rigid: it has nothing to resize.
        self.elastic: dict[int, tuple[int, int]] = {}
        for i, j in enumerate(self.jobs):
            if is_elastic(j.job_id, opts.elastic_fraction):
                least, most = elastic_range(j.total_devices, opts.elastic_max_factor, opts.scaling_efficiency)
                if least < most:
                    self.elastic[i + 1] = (least, most)
                    self.outcomes[i].elastic = True
        self.below_max: set[int] = set()  # running elastic jobs that may still grow: a cycle runs for them
        self.nodes: list[Node] = list(cluster.nodes)
        self.capacity = cluster.devices_by_flavor()
        # The pool (replay/pools.py): its nodes after the cluster's, of the cluster's (first) flavor.
        self.pool_clock = PoolClock(opts.pool) if opts.pool else None
        self.pool_meter: PoolMeter | None = None
        self.pool_at: list[int] = []  # indexes of its nodes in self.nodes
        self.pool_changes: Iterator[float] = iter(())  # instants its lending may change (PoolClock.changes)
        self.next_pool_change = math.inf
        # Devices given back to the pool still held by their jobs in their grace: (until, seq, node index) and
        # seq -> devices (fewer once an admission of the same cycle took some over, see _claim_draining)
        self.draining: list[tuple[float, int, int]] = []
        self.drain_left: dict[int, int] = {}
        self.draining_devices = 0
        if opts.pool is not None and self.pool_clock is not None and self.nodes:
            flavor = self.nodes[0].flavor
            self.pool_at = list(range(len(self.nodes), len(self.nodes) + opts.pool.nodes))
            self.nodes.extend(pool_nodes(opts.pool, flavor))
            self.capacity[flavor] += opts.pool.devices
            self.pool_meter = PoolMeter(opts.pool.devices, sum(self.capacity.values()),
                                        until=max((j.submit for j in self.jobs), default=0.0))
            self.pool_changes = self.pool_clock.changes()
            self.next_pool_change = next(self.pool_changes)
        self.node_index = {n.name: i for i, n in enumerate(self.nodes)}
        self.quotas = quotas
        # Projects: those with quotas keep their cohort; others join "default" (they can only borrow).
        cohorts = {p.name: p for p in quotas.projects}
        names = list(cohorts) + sorted({j.project for j in self.jobs} - set(cohorts))
        self.project_base = [cohorts.get(n) or Project(n, "default") for n in names]
        self.usage = dict.fromkeys(names, 0.0)  # decayed device-seconds
        self.used_by_project = dict.fromkeys(names, 0)
        # Accounting per (project, flavor).
        self.accounts: dict[tuple[str, str], ProjectAccount] = {}
        for q in quotas.quotas:
            self.accounts.setdefault((q.project, q.flavor), ProjectAccount()).guarantee += q.guaranteed
        for j in self.jobs:
            self.accounts.setdefault((j.project, j.flavor), ProjectAccount())
        self.used: dict[tuple[str, str], int] = dict.fromkeys(self.accounts, 0)
        self.pending_devices: dict[tuple[str, str], int] = dict.fromkeys(self.accounts, 0)
        self.pending_sizes: dict[tuple[str, str], Counter[int]] = {k: Counter() for k in self.accounts}
        self.starved_since: dict[tuple[str, str], float | None] = dict.fromkeys(self.accounts)
        # Live scheduler state.
        self.pending: dict[int, PendingJob] = {}
        self.pending_preemptible = 0  # of them, how many may borrow a pool's capacity (the pool meter's split)
        self.running: dict[int, RunningJob] = {}
        self.runs: dict[int, _Run] = {}
        self.segments: list[Segment] = []
        self.progress_work: dict[int, float] = {}  # checkpointed work per job
        self.completions: list[tuple[float, int, int, int]] = []  # (time, seq, job id, attempt)
        # (time, job id, attempt) of each running attempt's next checkpoint (EngineOptions.checkpoint_interval)
        self.checkpoints: list[tuple[float, int, int]] = []
        self.wakes: set[float] = set()  # moments a cycle asked to run again (CycleResult.wake_at)
        # Attempts ended and jobs submitted within the last Policy.lend_hold seconds, oldest first (the lend hold).
        self.ended: deque[EndedUse] = deque()
        self.arrivals: deque[Arrival] = deque()
        # Jobs submitted within the last forecast.ARRIVAL_WINDOW seconds, oldest first, and the arrival rates they
        # make (Snapshot.arrival_rates, as the loop reads them while elastic jobs run), kept until the window changes.
        self.submitted: deque[PendingJob] = deque()
        self.rates: tuple[ArrivalRate, ...] | None = ()
        self.seq = 0
        self.total_used = 0
        self.util_times: list[float] = []
        self.util_used: list[int] = []
        self.now = 0.0
        self.last_account_t: float | None = None
        self.finished = 0
        self.cycles = 0

    # -- state changes -----------------------------------------------------------------------------------

    def _limit(self, j: TraceJob) -> float:
        """Work the job may do: its duration, cut by a declared max runtime (then it times out)."""
        return j.duration if j.max_runtime is None else min(j.duration, j.max_runtime)

    def _need(self, jid: int) -> int:
        """Devices the job needs to start: its size, or an elastic job's minimum (one device per worker)."""
        shape = self.elastic.get(jid)
        return self.jobs[jid - 1].total_devices if shape is None else shape[0]

    def _speed(self, jid: int, workers: int) -> float:
        return speed(workers, self.jobs[jid - 1].total_devices, self.opts.scaling_efficiency)

    def _enqueue(self, jid: int) -> None:
        j = self.jobs[jid - 1]
        done = self.progress_work.get(jid, 0.0)
        resumed = jid in self.progress_work
        overhead = self.opts.restart_overhead if resumed else 0.0
        declared = j.max_runtime if j.max_runtime is not None else j.duration
        prio = self.opts.priorities.get(j.priority, 0)
        groups = _groups(j)
        rate = 1.0
        shape = self.elastic.get(jid)
        if shape is not None:
            # One-device workers; it starts at its minimum, where it is slowest: its runtime at most.
            groups = (ReplicaGroup("worker", shape[0], 1, j.flavor, max_replicas=shape[1]),)
            rate = self._speed(jid, shape[0])
        self.pending[jid] = PendingJob(
            id=jid,
            project=j.project,
            priority=prio,
            submitted_at=j.submit,  # a requeued job keeps its place in FIFO order
            queued_at=self.now,  # but its reclaim grace (Policy.reclaim_grace) counts from now
            groups=groups,
            preemptible=j.priority == "preemptible",
            max_runtime=overhead + max(0.0, declared - done) / rate,
            duration_hint=(overhead + max(0.0, self._limit(j) - done) / rate) if self.oracle else None,
        )
        key = (j.project, j.flavor)
        need = self._need(jid)
        self.pending_devices[key] += need
        self.pending_sizes[key][need] += 1
        if self.pending[jid].preemptible:
            self.pending_preemptible += 1

    def _dequeue(self, jid: int) -> PendingJob:
        pj = self.pending.pop(jid)
        if pj.preemptible:
            self.pending_preemptible -= 1
        j = self.jobs[jid - 1]
        key = (j.project, j.flavor)
        need = self._need(jid)
        self.pending_devices[key] -= need
        sizes = self.pending_sizes[key]
        sizes[need] -= 1
        if not sizes[need]:
            del sizes[need]
        return pj

    def _take(self, placement: tuple[Assignment, ...], jid: int, sign: int) -> None:
        """Subtract (sign=-1) or return (sign=+1) the devices of a placement on its nodes, and its CPU and memory
        (traces have none: their replicas request nothing and their nodes do not model them)."""
        j = self.jobs[jid - 1]
        for a in placement:
            i = self.node_index.get(a.node)
            if i is None:
                raise EngineError(f"job {jid}: placement on unknown node {a.node!r}")
            n = self.nodes[i]
            free = n.free + sign * a.devices
            if sign < 0 and (n.flavor != j.flavor or free < 0 or not n.schedulable):
                raise EngineError(
                    f"job {jid} ({a.devices}x{j.flavor}) does not fit node {n.name} "
                    f"({n.free} free of {n.devices}x{n.flavor}) at t={self.now:g}"
                )
            self.nodes[i] = Node(n.name, n.flavor, n.devices, free, n.cluster, n.block, n.rack, n.schedulable,
                                 cpu_millis=n.cpu_millis, memory_mib=n.memory_mib,
                                 free_cpu_millis=n.free_cpu_millis + sign * a.cpu_millis,
                                 free_memory_mib=n.free_memory_mib + sign * a.memory_mib, pool=n.pool)

    def _set_used(self, j: TraceJob, delta: int) -> None:
        self.used[(j.project, j.flavor)] += delta
        self.used_by_project[j.project] += delta
        self.total_used += delta

    def _admit(self, jid: int, placement: tuple[Assignment, ...]) -> None:
        if jid not in self.pending:
            raise EngineError(f"admit of job {jid}, which is not pending at t={self.now:g}")
        j = self.jobs[jid - 1]
        need = self._need(jid)
        if sum(a.devices for a in placement) != need:
            raise EngineError(f"job {jid}: placement has {sum(a.devices for a in placement)} devices, "
                              f"the job asks for {need}")  # fmt: skip
        self._take(placement, jid, -1)
        pj = self._dequeue(jid)
        done = self.progress_work.get(jid, 0.0)
        overhead = self.opts.restart_overhead if jid in self.progress_work else 0.0
        end = self.now + overhead + max(0.0, self._limit(j) - done)
        out = self.outcomes[jid - 1]
        if out.first_start is None:
            out.first_start = self.now
        attempt = out.preemptions
        cluster = self.nodes[self.node_index[placement[0].node]].cluster if placement else ""
        run = _Run(self.now, end, done, overhead, attempt, cluster, devices=need, segment_start=self.now)
        self.runs[jid] = run
        elastic: tuple[Elastic, ...] = ()
        if jid in self.elastic:
            elastic = elastic_groups(pj)
            run.elastic, run.workers, run.work_at = True, len(placement), self.now
            run.speed, run.idle_until = self._speed(jid, len(placement)), self.now + overhead
            run.end = end = self._end_of(run, self._limit(j))
            self._track_growth(jid, run)
        self.running[jid] = RunningJob(
            id=jid,
            project=j.project,
            priority=pj.priority,
            started_at=self.now,
            placement=placement,
            flavor=j.flavor,
            preemptible=pj.preemptible,
            max_runtime=pj.max_runtime,
            elastic=elastic,
            resize_cooldown=self.opts.resize_cooldown,
        )
        self._set_used(j, need)
        self.seq += 1
        run.end_seq = self.seq
        heapq.heappush(self.completions, (end, self.seq, jid, attempt))
        interval = self.opts.checkpoint_interval
        if run.elastic:
            self._schedule_checkpoint(jid, run)
        elif interval and interval > 0:
            heapq.heappush(self.checkpoints, (self.now + overhead + interval, jid, attempt))

    # -- elastic runs (replay/elastic.py) -------------------------------------------------------------------

    def _work(self, run: _Run, t: float) -> float:
        """An elastic run's work of this attempt by `t` (t not before its last change)."""
        return run.work + run.speed * max(0.0, t - max(run.work_at, run.idle_until))

    def _end_of(self, run: _Run, amount: float) -> float:
        """When an elastic run's work reaches `amount` of the job's (what earlier attempts checkpointed included),
        at its current speed."""
        start = max(run.work_at, run.idle_until)
        return start + max(0.0, amount - run.progress0 - run.work) / run.speed

    def _schedule_checkpoint(self, jid: int, run: _Run) -> None:
        """The next checkpoint of an elastic run: when its work reaches the next multiple of the interval."""
        interval = self.opts.checkpoint_interval
        if not interval or interval <= 0:
            return
        start = max(run.work_at, run.idle_until)
        run.next_checkpoint = start + (run.checkpoint_work + interval - run.work) / run.speed
        heapq.heappush(self.checkpoints, (run.next_checkpoint, jid, run.attempt))

    def _track_growth(self, jid: int, run: _Run) -> None:
        """Keep cycles running while an elastic job may grow, and one at the end of its resize cooldown."""
        if run.workers < self.elastic[jid][1]:
            self.below_max.add(jid)
            self.wakes.add(self.now + self.opts.resize_cooldown)
        else:
            self.below_max.discard(jid)

    def _end_pause(self, jid: int, run: _Run) -> None:
        """A rescale pause still running ends now (a resize, a preemption): count only the part spent."""
        if run.pause_until > self.now:
            out = self.outcomes[jid - 1]
            out.rescale_pause -= run.pause_until - self.now
            out.rescale_pause_device_s -= (run.pause_until - self.now) * run.devices
            run.pause_until = self.now

    def _resize(self, jid: int, placement: tuple[Assignment, ...], checkpointed_at: float | None = None) -> None:
        """An elastic job runs on `placement` from now on: the open segment closes, the rescale pause starts, its
        end and next checkpoint are computed again (the end event of before is stale)."""
        j, run, out = self.jobs[jid - 1], self.runs[jid], self.outcomes[jid - 1]
        self._end_pause(jid, run)
        self._segment(jid, run, "resized")
        devices = sum(a.devices for a in placement)
        self._set_used(j, devices - run.devices)
        pause = self.opts.rescale_pause
        run.devices, run.segment_start, run.workers = devices, self.now, len(placement)
        run.speed = self._speed(jid, len(placement))
        run.idle_until = max(run.idle_until, self.now + pause)
        run.pause_until = self.now + pause
        out.rescale_pause += pause
        out.rescale_pause_device_s += pause * devices
        run.end = self._end_of(run, self._limit(j))
        self.seq += 1
        run.end_seq = self.seq
        heapq.heappush(self.completions, (run.end, self.seq, jid, run.attempt))
        self._schedule_checkpoint(jid, run)
        self._track_growth(jid, run)
        rj = self.running[jid]
        declared = j.max_runtime if j.max_runtime is not None else j.duration
        self.running[jid] = replace(rj, placement=placement, resized_at=self.now,
                                    max_runtime=self._end_of(run, declared) - rj.started_at,
                                    checkpointed_at=rj.checkpointed_at if checkpointed_at is None else checkpointed_at)

    def _grow(self, jid: int, added: tuple[Assignment, ...]) -> None:
        run = self.runs.get(jid)
        if run is None or not run.elastic:
            raise EngineError(f"growth of job {jid}, which is not a running elastic job at t={self.now:g}")
        if run.workers + len(added) > self.elastic[jid][1]:
            raise EngineError(f"job {jid} grows to {run.workers + len(added)} workers, above its maximum "
                              f"{self.elastic[jid][1]}")  # fmt: skip
        self._take(added, jid, -1)
        run.work, run.work_at = self._work(run, self.now), self.now
        self.outcomes[jid - 1].grows += 1
        self._resize(jid, self.running[jid].placement + added)

    def _shrink(self, jid: int, removed: tuple[Assignment, ...]) -> None:
        """An elastic job gives back `removed` and restarts on the rest from its last checkpoint."""
        run = self.runs.get(jid)
        if run is None or not run.elastic:
            raise EngineError(f"shrink of job {jid}, which is not a running elastic job at t={self.now:g}")
        placement = self.running[jid].placement
        kept = tuple(a for a in placement if a not in removed)
        if len(placement) - len(kept) != len(removed):
            raise EngineError(f"job {jid}: shrink removes replicas it does not run at t={self.now:g}")
        if len(kept) < self.elastic[jid][0]:
            raise EngineError(f"job {jid} shrinks to {len(kept)} workers, below its minimum {self.elastic[jid][0]}")
        self._take(removed, jid, +1)
        work = self._work(run, self.now)
        if self.opts.checkpoint_on_shrink:
            run.checkpoint_work = work
        lost = (work - run.checkpoint_work) * self.jobs[jid - 1].total_devices
        out = self.outcomes[jid - 1]
        out.shrinks += 1
        out.lost_work += lost
        out.shrink_lost_work += lost
        run.work, run.work_at = run.checkpoint_work, self.now
        # Back at its checkpoint: a preemption now would lose nothing more.
        self._resize(jid, kept, checkpointed_at=self.now)

    def _checkpointed(self) -> None:
        """Running attempts whose work reached a checkpoint by now carry its time (RunningJob.checkpointed_at): the
        last multiple of the checkpoint interval of work done, the restart overhead first, as _preempt keeps it."""
        interval = self.opts.checkpoint_interval
        while self.checkpoints and self.checkpoints[0][0] <= self.now:
            at, jid, attempt = heapq.heappop(self.checkpoints)
            run = self.runs.get(jid)
            if run is None or run.attempt != attempt:
                continue  # the attempt ended
            assert interval is not None
            if run.elastic:  # its work reached the next multiple of the interval at `at`, unless it resized since
                if at == run.next_checkpoint:
                    run.checkpoint_work += interval
                    run.checkpointed_at = at
                    self.running[jid] = replace(self.running[jid], checkpointed_at=at)
                    self._schedule_checkpoint(jid, run)
                continue
            work_from = run.attempt_start + run.overhead
            last = work_from + math.floor((self.now - work_from) / interval) * interval
            self.running[jid] = replace(self.running[jid], checkpointed_at=last)
            heapq.heappush(self.checkpoints, (last + interval, jid, attempt))

    def _release(self, rj: RunningJob, j: TraceJob) -> None:
        """A running job gives its devices back now (it ended or was preempted)."""
        self._take(rj.placement, rj.id, +1)
        devices = sum(a.devices for a in rj.placement)
        self._set_used(j, -devices)
        self.ended.append(EndedUse(j.project, j.flavor, devices, rj.started_at, self.now))
        self.below_max.discard(rj.id)

    def _segment(self, jid: int, run: _Run, outcome: str) -> None:
        j = self.jobs[jid - 1]
        self.segments.append(Segment(j.job_id, run.attempt + 1, j.project, j.flavor, run.cluster, run.devices,
                                     j.priority, j.priority == "preemptible", run.segment_start, self.now, outcome))

    def _preempt(self, jid: int) -> None:
        if jid not in self.running:
            raise EngineError(f"preemption of job {jid}, which is not running at t={self.now:g}")
        j = self.jobs[jid - 1]
        rj = self.running.pop(jid)
        run = self.runs.pop(jid)
        if run.elastic:
            self._end_pause(jid, run)
        self._release(rj, j)
        self._segment(jid, run, "preempted")
        if run.elastic:  # its work since its last checkpoint is lost
            worked, kept = self._work(run, self.now), run.checkpoint_work
        else:
            # Work done in this attempt; the restart overhead comes first and produces nothing.
            worked = max(0.0, self.now - run.attempt_start - run.overhead)
            ci = self.opts.checkpoint_interval
            kept = math.floor(worked / ci) * ci if ci and ci > 0 else 0.0
        out = self.outcomes[jid - 1]
        out.preemptions += 1
        out.lost_work += (worked - kept) * j.total_devices
        out.overhead += min(self.now - run.attempt_start, run.overhead) * run.devices
        self.progress_work[jid] = run.progress0 + kept
        self._enqueue(jid)

    def _complete(self, jid: int) -> None:
        j = self.jobs[jid - 1]
        rj = self.running.pop(jid)
        run = self.runs.pop(jid)
        self._release(rj, j)
        out = self.outcomes[jid - 1]
        out.end = self.now
        out.overhead += run.overhead * run.devices
        out.state = "timed_out" if j.max_runtime is not None and j.max_runtime < j.duration else "done"
        self._segment(jid, run, "failed" if out.state == "timed_out" else "succeeded")
        self.finished += 1

    # -- the pool (replay/pools.py) --------------------------------------------------------------------------

    def _pool_held(self) -> int:
        """Devices of the pool's nodes training holds, running or in the grace of a give-back."""
        return sum(self.nodes[i].devices - self.nodes[i].free for i in self.pool_at)

    def _growable(self, at: float) -> bool:
        """Some running elastic job is below its max and past its cooldown: growth could use idle capacity."""
        return any(job.elastic and len(job.placement) < sum(e.max_replicas for e in job.elastic)
                   and at >= (job.resized_at or job.started_at) + job.resize_cooldown for job in self.running.values())

    def _pool_over(self) -> bool:
        """Training holds more of the pool than it lends now: a cycle must give some back."""
        return self.pool_clock is not None and (
            self._pool_held() - self.draining_devices > self.pool_clock.lendable(self.now))

    def _given_back(self, jid: int, placement: tuple[Assignment, ...], end: Callable[[int], None]) -> None:
        """The job (or its replicas `placement`) gives its pool capacity back: `end` preempts or shrinks it now, and
        the devices stay busy for its termination grace (it checkpoints) before serving has them."""
        assert self.pool_meter is not None and self.opts.pool is not None
        out = self.outcomes[jid - 1]
        lost = out.lost_work
        end(jid)
        self.pool_meter.given_back_jobs += 1
        self.pool_meter.lost_work += out.lost_work - lost
        for a in placement:
            i = self.node_index[a.node]
            self._shift_free(i, -a.devices)
            self.seq += 1
            heapq.heappush(self.draining, (self.now + self.opts.pool.grace, self.seq, i))
            self.drain_left[self.seq] = a.devices
            self.draining_devices += a.devices

    def _shift_free(self, i: int, delta: int) -> None:
        self.nodes[i] = replace(self.nodes[i], free=self.nodes[i].free + delta)

    def _drained(self) -> None:
        """Give-backs whose grace is over free their devices for serving."""
        while self.draining and self.draining[0][0] <= self.now:
            _, seq, i = heapq.heappop(self.draining)
            devices = self.drain_left.pop(seq)
            self._shift_free(i, devices)
            self.draining_devices -= devices

    def _claim_draining(self, placement: tuple[Assignment, ...]) -> None:
        """A cycle that gave devices back to a pool may lend some of them again at once (it freed more than the
        pool needed): the job admitted there takes them over from the jobs in their grace (its pods start once
        those end, as on Kubernetes)."""
        for a in placement:
            i = self.node_index.get(a.node, -1)
            short = a.devices - self.nodes[i].free if i >= 0 else 0
            for _, seq, node in self.draining:
                if short <= 0:
                    break
                if node == i and self.drain_left[seq]:
                    moved = min(short, self.drain_left[seq])
                    self.drain_left[seq] -= moved
                    self.draining_devices -= moved
                    self._shift_free(i, moved)
                    short -= moved

    def _next_pool_event(self, work_left: bool) -> float:
        """The next instant the pool changes (while the trace has work left) or a give-back's grace ends."""
        t = self.draining[0][0] if self.draining else math.inf
        if work_left:
            while self.next_pool_change <= self.now:
                self.next_pool_change = next(self.pool_changes)
            t = min(t, self.next_pool_change)
        return t

    # -- accounting ---------------------------------------------------------------------------------------

    def _advance(self, t: float) -> None:
        """Integrate usage and guarantee starvation over [last, t) with the state as it stood."""
        last = self.last_account_t
        self.last_account_t = t
        if last is None or t <= last:
            return
        dt = t - last
        free = dict(self.capacity)
        for (_, flavor), used in self.used.items():
            free[flavor] = free.get(flavor, 0) - used
        for key, acc in self.accounts.items():
            used = self.used[key]
            acc.device_seconds += used * dt
            if self.pending_devices[key] > 0:
                acc.demand_seconds += dt
                room = acc.guarantee - used
                if room > 0:
                    acc.under_guarantee_seconds += dt
                    smallest = min(self.pending_sizes[key])
                    if smallest <= room:
                        acc.waited_within_seconds += dt
                    if smallest <= room and free.get(key[1], 0) < smallest:
                        acc.starved_seconds += dt
                        acc.starved_device_seconds += min(room, self.pending_devices[key]) * dt
                        since = self.starved_since[key]
                        if since is None:
                            self.starved_since[key] = since = last
                        acc.longest_starved = max(acc.longest_starved, t - since)
                        continue
            self.starved_since[key] = None
        if self.pool_clock is not None and self.pool_meter is not None:
            training = self._pool_held() - self.draining_devices
            self.pool_meter.advance(last, t, self.pool_clock.demand(last), self.pool_clock.lendable(last),
                                    self.total_used, training, self.draining_devices,
                                    waiting=(self.pending_preemptible, len(self.pending) - self.pending_preemptible),
                                    growable=not self.pending and self._growable(last))
        half_life = self.policy.usage_half_life
        for p in self.usage:
            self.usage[p] = decayed_usage(self.usage[p], self.used_by_project[p], dt, half_life)

    def _record_util(self) -> None:
        if self.util_used and self.util_used[-1] == self.total_used:
            return
        if self.util_times and self.util_times[-1] == self.now:
            self.util_used[-1] = self.total_used
        else:
            self.util_times.append(self.now)
            self.util_used.append(self.total_used)

    # -- the loop -----------------------------------------------------------------------------------------

    def _snapshot(self) -> Snapshot:
        self._checkpointed()
        projects = tuple(Project(p.name, p.cohort, p.max_running_jobs, self.usage[p.name]) for p in self.project_base)
        since = self.now - self.policy.lend_hold
        while self.ended and self.ended[0].ended_at <= since:
            self.ended.popleft()
        while self.arrivals and self.arrivals[0].at <= since:
            self.arrivals.popleft()
        return Snapshot(
            arrival_rates=self._arrival_rates() if self.below_max else (),
            now=self.now,
            nodes=tuple(self.nodes),
            quotas=self.quotas.quotas,
            projects=projects,
            running=tuple(self.running.values()),
            pending=tuple(self.pending.values()),
            ended=tuple(self.ended),
            arrivals=tuple(self.arrivals),
            pools=(self.pool_clock.pool(self.now),) if self.pool_clock else (),
        )

    def _arrival_rates(self) -> tuple[ArrivalRate, ...]:
        """The rates of the last hour's submissions (what the loop reads for growth: jobs.snapshot)."""
        since = self.now - ARRIVAL_WINDOW
        while self.submitted and self.submitted[0].submitted_at <= since:
            self.submitted.popleft()
            self.rates = None
        if self.rates is None:
            self.rates = arrival_rates(self.submitted, ARRIVAL_WINDOW)
        return self.rates

    def _cycle(self) -> bool:
        """Run the scheduler until the instant settles; True when any decision changed the state."""
        changed = False
        if not self.nodes:
            # No node at all (the part of a project without a partition): the core could only answer "can never
            # run here" for every job, so asking it at every arrival would cost O(jobs^2) for nothing.
            return changed
        for _ in range(max(1, self.opts.max_cycles_per_instant)):
            if not self.pending and not self.below_max and not self._pool_over():
                break
            result = self.cycle(self._snapshot(), self.cycle_policy)
            self.cycles += 1
            for p in result.preemptions:
                if p.for_job_id is None:  # its pool takes the capacity back, after the job's grace
                    self._given_back(p.victim_id, self.running[p.victim_id].placement, self._preempt)
                else:
                    self._preempt(p.victim_id)
            for s in result.shrinks:
                if s.for_job_id is None:
                    self._given_back(s.job_id, s.removed, partial(self._shrink, removed=s.removed))
                else:
                    self._shrink(s.job_id, s.removed)
            for a in result.admits:
                if self.draining:
                    self._claim_draining(a.placement)
                self._admit(a.job_id, a.placement)
            for g in result.grows:
                if self.draining:
                    self._claim_draining(g.placement)
                self._grow(g.job_id, g.placement)
            changed = changed or bool(result.preemptions or result.admits or result.shrinks or result.grows)
            if result.wake_at is not None:
                self.wakes.add(result.wake_at)
            # Only preemptions and shrinks free capacity the same instant could use; otherwise the cycle is settled.
            if not result.preemptions and not result.shrinks:
                break
        return changed

    def run(self) -> ReplayResult:
        wall0 = time.perf_counter()
        total = len(self.jobs)
        interval = self.opts.cycle_interval
        next_tick = 0.0
        nxt = 0  # next arrival index
        last_reported = -1
        step = max(1, total // 200)
        while True:
            t = math.inf
            if nxt < total:
                t = self.jobs[nxt].submit
            if self.completions:
                t = min(t, self.completions[0][0])
            if interval and (self.pending or self.below_max):
                t = min(t, next_tick)
            elif self.wakes:  # without ticks, a cycle runs at each event and at each moment one asked for
                t = min(t, min(self.wakes))
            if self.pool_clock is not None:
                t = min(t, self._next_pool_event(nxt < total or bool(self.running) or bool(self.pending)))
            if t == math.inf:
                break  # nothing can happen any more (jobs left pending never fit)
            self._advance(t)
            self.now = t
            self.wakes = {w for w in self.wakes if w > t}
            self._drained()
            # Completions before arrivals: capacity freed at t is visible to jobs arriving at t. Unbatched,
            # one event is applied per cycle (completions first), which only changes who gets which node.
            batch = self.opts.batch_events
            applied = 0
            while self.completions and self.completions[0][0] <= t and (batch or not applied):
                _, seq, jid, attempt = heapq.heappop(self.completions)
                run = self.runs.get(jid)
                # Stale entries belong to preempted attempts, or to an elastic run's end before it resized.
                if run is not None and run.attempt == attempt and run.end_seq == seq:
                    self._complete(jid)
                    applied += 1
            while nxt < total and self.jobs[nxt].submit <= t and (batch or not applied):
                j = self.jobs[nxt]
                self.arrivals.append(Arrival(j.project, j.flavor, j.total_devices, t, j.priority == "preemptible"))
                self._enqueue(nxt + 1)
                self.submitted.append(self.pending[nxt + 1])
                self.rates = None
                nxt += 1
                applied += 1
            if interval is None:
                self._cycle()
            else:
                if next_tick < t:  # the queue was empty for a while: the next tick is the first one >= t
                    next_tick = math.ceil(t / interval) * interval
                if t == next_tick:
                    changed = self._cycle()
                    next_tick += interval
                    if not changed and not self.completions and nxt >= total:
                        self._record_util()
                        break  # no event left and the last cycle did nothing: it never will
            self._record_util()
            if self.pool_clock is not None and self.pool_meter is not None:
                self.pool_meter.observe(t, self._pool_held(), self.pool_clock.lendable(t))
            if self.progress and self.finished - last_reported >= step:
                last_reported = self.finished
                self.progress(self.finished, total, self.now)
        self._advance(self.now)
        for jid, run in self.runs.items():  # still holding when nothing more could happen
            self._segment(jid, run, "unfinished")
        for out in self.outcomes:
            if out.end is None:
                out.state = "never_started" if out.first_start is None else "unfinished"
        if self.progress:
            self.progress(total, total, self.now)  # the run is over, even if some jobs never fit
        return ReplayResult(
            policy_name=self.policy_name,
            policy=self.policy,
            options=self.opts,
            jobs=self.outcomes,
            capacity=self.capacity,
            accounts=self.accounts,
            util_times=self.util_times,
            util_used=self.util_used,
            cycles=self.cycles,
            wall_seconds=time.perf_counter() - wall0,
            skipped=dict(self.trace.skipped.counts),
            segments=sorted(self.segments, key=_segment_order),
            pool=self.pool_meter,
        )
