"""Plain data the scheduler core reads and returns.

Nothing here imports Django, the ORM or Kubernetes: production (the scheduler loop), the embedded demo and trace
replay all build a `Snapshot`, call `run_cycle()` and apply the decisions it returns.

Times are seconds as floats on one clock chosen by the caller (epoch seconds in production, virtual seconds in
replay). Device counts are whole devices of one flavor. CPU is in millicores and memory in MiB (what a replica's
pods request); a node whose allocatable CPU (or memory) is 0 does not model it, and it never limits placement
there: old node rows and trace replay, which know only devices.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, fields
from enum import StrEnum
from typing import Any, NamedTuple


def node_key(cluster: str, node: str) -> str:
    """Node names are unique per cluster only: the snapshot names a node "<cluster>/<node>"."""
    return f"{cluster}/{node}"


def split_node_key(key: str) -> tuple[str, str]:
    """(cluster, node) of a snapshot node name."""
    cluster, _, node = key.partition("/")
    return cluster, node


class Record:
    """What every record below is (each a frozen dataclass): rebuilt from its fields when pickled or copied.
    Compiled (scripts/compile_core.py), a frozen dataclass's own way of restoring a copy assigns to its fields,
    which frozen refuses."""

    __slots__ = ()

    def __reduce__(self) -> tuple[Any, tuple[Any, ...]]:
        return type(self), tuple(getattr(self, f.name) for f in fields(self))  # type: ignore[arg-type]  # each a dataclass


class Topology(StrEnum):
    NONE = "none"
    PREFER_SAME_RACK = "prefer-same-rack"
    REQUIRE_SAME_RACK = "require-same-rack"
    REQUIRE_SAME_BLOCK = "require-same-block"


@dataclass(frozen=True, slots=True)
class Node(Record):
    name: str
    flavor: str
    devices: int  # allocatable devices of `flavor`, less those pods the platform did not create and services hold
    free: int  # devices not taken by running jobs or by pods the platform did not create
    cluster: str = "default"  # a gang never spans clusters
    block: str = ""
    rack: str = ""
    schedulable: bool = True  # False when cordoned, not Ready or in a disabled cluster
    foreign: int = 0  # devices pods the platform did not create hold now (they may go)
    serving: int = 0  # devices the replicas of Tidal's inference services hold now (their pool's own; they may go)
    unavailable: str = ""  # why it is not schedulable now: "cordoned", "not ready", "in a disabled cluster"
    # Allocatable to the platform's pods (pods it did not create already subtracted); 0: not modelled, never limits.
    cpu_millis: int = 0
    memory_mib: int = 0
    # What running jobs' replicas do not request of it (ignored while the allocatable above is 0).
    free_cpu_millis: int = 0
    free_memory_mib: int = 0
    pool: str = ""  # the pool that lends this node's devices to training (pools.py); "": none


@dataclass(frozen=True, slots=True)
class Pool(Record):
    """Capacity online serving owns and lends to training while it does not need it (pools.py)."""

    name: str
    lendable: int  # devices of its nodes training may hold now: the caller subtracts serving's demand and headroom
    back_at: float | None = None  # when the caller expects lending to stop (for reasons); None: not known
    # Its nodes that lend nothing now, each with why (e.g. "moved off serve-1: serving p99 ... over its SLO"):
    # training on them goes back first, whatever the pool still lends elsewhere.
    closed: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True, slots=True)
class ReplicaGroup(Record):
    role: str  # "master", "worker", "head", ...
    replicas: int  # what admission needs: a rigid gang's size, an elastic group's minimum
    devices: int  # per replica, of `flavor`
    flavor: str
    cpu_millis: int = 0  # per replica: what its pod requests (0: nothing to count)
    memory_mib: int = 0
    # Elastic: the group runs on replicas..max_replicas (admitted at its minimum, grown into idle capacity, shrunk
    # before its job is evicted: elastic.py). None: a rigid gang of exactly `replicas`. The minimum is the group's
    # `replicas` so that every rule reads a pending job as the gang admission needs, with no copy made per cycle.
    max_replicas: int | None = None


@dataclass(frozen=True, slots=True)
class Assignment(Record):
    """One replica placed on one node."""

    role: str
    index: int  # replica index within its group
    node: str
    devices: int
    cpu_millis: int = 0  # the replica's requests, taken from the node's free CPU and memory
    memory_mib: int = 0


@dataclass(frozen=True, slots=True)
class PendingJob(Record):
    id: int
    project: str
    priority: int  # larger runs first; see PriorityClass values in quotas
    submitted_at: float
    groups: tuple[ReplicaGroup, ...]
    preemptible: bool = False  # runs only on idle capacity, first to be preempted
    topology: Topology = Topology.NONE
    max_runtime: float | None = None  # seconds; used for backfill and ETA
    avoid_nodes: frozenset[str] = frozenset()  # e.g. the node a previous attempt lost
    duration_hint: float | None = None  # oracle duration, only trace replay's SJF baseline may read it
    queued_at: float | None = None  # when it last entered the queue (requeued after preemption); None: submitted_at

    @property
    def queued_since(self) -> float:
        return self.submitted_at if self.queued_at is None else self.queued_at


@dataclass(frozen=True, slots=True)
class Elastic(Record):
    """A running job's elastic group: it may run on min_replicas..max_replicas of its role."""

    role: str
    min_replicas: int
    max_replicas: int


@dataclass(frozen=True, slots=True)
class RunningJob(Record):
    id: int
    project: str
    priority: int | float  # its job's, as given; a grown replica ranks half a priority below it (elastic.py)
    started_at: float
    placement: tuple[Assignment, ...]
    flavor: str
    preemptible: bool = False
    min_runtime: float = 0.0  # may not be preempted before started_at + min_runtime
    max_runtime: float | None = None
    # When this attempt last saved a checkpoint: what it did before survives a preemption. None: none yet (a
    # preemption throws away everything since started_at).
    checkpointed_at: float | None = None
    # Elastic groups (empty: a rigid gang); its last resize (None: none since it started) and the seconds it waits
    # between resizes.
    elastic: tuple[Elastic, ...] = ()
    resized_at: float | None = None
    resize_cooldown: float = 300.0
    grown_of: int | None = None  # set by the core on a grown replica it splits off an elastic job (elastic.py)


@dataclass(frozen=True, slots=True)
class Quota(Record):
    project: str
    flavor: str
    guaranteed: int
    borrow_limit: int = 0  # extra devices the project may borrow from idle capacity of its cohort
    lend_limit: int | None = None  # how much of its idle guarantee others may borrow; None means all of it


@dataclass(frozen=True, slots=True)
class Project(Record):
    name: str
    cohort: str  # the organization: projects of one cohort lend and borrow among themselves
    max_running_jobs: int | None = None
    decayed_usage: float = 0.0  # device-seconds of past use, decayed by the caller; feeds fair share
    # Why its non-preemptible jobs are not admitted: a hard budget spent (the caller words it). Empty: no such stop.
    budget_stop: str = ""


@dataclass(frozen=True, slots=True)
class Policy(Record):
    """Which small named policies a cycle uses; chosen from settings.TIDAL or a replay's options."""

    ordering: str = "priority-fairshare"  # "priority-fairshare" | "fifo" | "sjf" (oracle durations)
    blocking: str = "backfill"  # "strict": a queue's head blocks it; "skip": later jobs may pass; "backfill"
    blocking_scope: str = "project"  # with "strict": "project" (one queue per project) or "global"
    quotas: bool = True  # False: one pooled cluster, no guarantees at all
    borrowing: bool = True
    preemption: bool = True
    # Fair share's memory: past device-seconds decay with this half-life (ordering.decayed_usage), the same in the
    # live scheduler and in replay. Seven days, as Slurm's PriorityDecayHalfLife.
    usage_half_life: float = 7 * 24 * 3600.0
    # Seconds a job must have waited before it preempts another project's jobs (taking back lent capacity, or
    # evicting preemptible jobs): meanwhile capacity that frees by itself goes to it and nobody is preempted, as
    # YARN's preemption monitor waits max_wait_before_kill. 0: at once. Preemption within a project is not delayed.
    reclaim_grace: float = 0.0
    # Seconds a project's recent demand is kept from lending (lending.lend_holds): the most devices it held at any
    # moment of that time, plus what it submitted then, are not lent to other projects. A team whose job just ended,
    # or that is submitting jobs one after another, asks again within seconds; lending that capacity only to take
    # it back by preemption is churn (the Philly week: 140 reclaims, most of 1-GPU jobs minutes old). 0: off.
    lend_hold: float = 5.0
    # Seconds after a job was queued before a reservation for it may start (backfill.py): a head that cannot start
    # yet is promised its start by then (or when the jobs running then end, if later), and until then the jobs
    # behind it that end by then may use its room; one that would still run then never does. Reserving at the
    # earliest start at once made the many small jobs wait for every big gang that did not fit on arrival (on a
    # one-tenant trace, 1-GPU jobs waited 14 times as long, docs/scheduling.md). 0: at the earliest start.
    reserve_after: float = 4 * 3600.0
    # Explain waits in full (reason, positions, ETA). False (trace replay and forecasts, which read only
    # admissions and preemptions): waiting jobs get a Wait with their code, but positions are 0, eta is None and
    # quota waits carry a short reason ("quota: <kind> <flavor>"); jobs behind a blocked head under strict
    # blocking get no Wait at all (they are not even evaluated). Decisions are the same either way.
    explain: bool = True
    # Return a Wait per waiting job. False (trace replay and forecasts, which read only admissions, preemptions,
    # reservations and wake_at): `CycleResult.waits` is empty, and no reason is written nor any position counted.
    # Decisions, stats, reservations and wake_at are the same either way.
    waits: bool = True

    @property
    def usage_window(self) -> float:
        """Seconds of decayed past device-seconds that weigh as much as one device in use now: the decay's mean
        life (half-life / ln 2), so a project that steadily used D devices carries a past weight of D devices."""
        return self.usage_half_life / math.log(2)


DEFAULT_POLICY = Policy()  # what `run_cycle(snapshot)` uses when no policy is given


@dataclass(frozen=True, slots=True)
class EndedUse(Record):
    """Devices of one flavor a project's job held from `started_at` until `ended_at` (finished, failed or
    preempted), for an attempt that ended within the last Policy.lend_hold seconds."""

    project: str
    flavor: str
    devices: int
    started_at: float
    ended_at: float


@dataclass(frozen=True, slots=True)
class Arrival(Record):
    """Devices of one flavor a job of a project asked for when it was submitted, at `at`, within the last
    Policy.lend_hold seconds (whatever became of the job since), and whether the job is preemptible."""

    project: str
    flavor: str
    devices: int
    at: float
    preemptible: bool = False


@dataclass(frozen=True, slots=True)
class ArrivalRate(Record):
    """How often a project lately submitted jobs of one shape at one priority (the caller counts its recent
    submissions, `forecast.arrival_rates`). The forecast reads it: the late end of a start's range adds such
    jobs at this rate, since later arrivals of higher priority or lower share go first. Growth reads it too: an
    elastic job grows only where what its organization's projects submit within its cooldown would leave the grown
    replicas alone (elastic.py)."""

    project: str
    priority: int
    groups: tuple[ReplicaGroup, ...]
    per_hour: float
    preemptible: bool = False
    max_runtime: float | None = None  # the median its jobs declared; None when most declared none
    topology: Topology = Topology.NONE


@dataclass(frozen=True, slots=True)
class Snapshot(Record):
    now: float
    nodes: tuple[Node, ...]
    quotas: tuple[Quota, ...]
    projects: tuple[Project, ...]
    running: tuple[RunningJob, ...]
    pending: tuple[PendingJob, ...]
    # The recent past that Policy.lend_hold keeps from lending; older entries are ignored, so a caller may pass
    # more. Empty: nothing held beyond current use.
    ended: tuple[EndedUse, ...] = ()
    arrivals: tuple[Arrival, ...] = ()
    # Recent submission rates, for the range of estimated starts (the forecast); the cycle ignores them.
    arrival_rates: tuple[ArrivalRate, ...] = ()
    pools: tuple[Pool, ...] = ()  # what the pools of Node.pool lend now


@dataclass(frozen=True, slots=True)
class Admit(Record):
    job_id: int
    placement: tuple[Assignment, ...]
    borrowed: int = 0  # devices above the project's guarantee this admission uses


@dataclass(frozen=True, slots=True)
class Preempt(Record):
    victim_id: int
    for_job_id: int | None  # None: its pool took its capacity back (pools.py)
    reason: str


@dataclass(frozen=True, slots=True)
class Grow(Record):
    """An elastic job runs these replicas more (indexes after its highest)."""

    job_id: int
    placement: tuple[Assignment, ...]


@dataclass(frozen=True, slots=True)
class Shrink(Record):
    """An elastic job gives these replicas back (its highest indexes) so that `for_job_id` can start (None: to the
    pool that lent their capacity); it keeps running on the rest."""

    job_id: int
    removed: tuple[Assignment, ...]
    for_job_id: int | None
    reason: str


class Wait(NamedTuple):
    """Why a pending job was not admitted. A named tuple, not a dataclass like the others: a cycle builds one per
    waiting job (10,000 in a big queue), and a tuple is built in half the time."""

    job_id: int
    reason: str  # a sentence a person can act on
    code: str  # stable machine code: "quota", "capacity", "topology", "blocked", "max_running", "budget", ...
    project_position: int  # 1-based position among the project's waiting jobs
    flavor_position: int  # 1-based position among waiting jobs asking for the same flavor


@dataclass(frozen=True, slots=True)
class Reservation(Record):
    """Backfill: the head job of a flavor waiting for capacity keeps these devices for its earliest start."""

    job_id: int
    start: float  # on the snapshot's clock
    placement: tuple[Assignment, ...]  # where it would start at `start`; later jobs may not delay it


@dataclass(frozen=True, slots=True)
class CycleResult(Record):
    admits: tuple[Admit, ...] = ()
    preemptions: tuple[Preempt, ...] = ()
    waits: tuple[Wait, ...] = ()
    stats: dict[str, int] = field(default_factory=dict)
    reservations: tuple[Reservation, ...] = ()  # backfill reservations held this cycle (one per flavor at most)
    # The earliest moment the cycle's answer may change with nothing else happening: a waiting job's reclaim grace
    # ends (Policy.reclaim_grace), or what the lend hold keeps from a waiting borrower falls (Policy.lend_hold).
    # The caller runs a cycle then. None: no such moment.
    wake_at: float | None = None
    grows: tuple[Grow, ...] = ()
    shrinks: tuple[Shrink, ...] = ()
    # Wall seconds the cycle spent per phase (PHASES); not a decision, so results compare equal without it.
    seconds: dict[str, float] = field(default_factory=dict, compare=False)


# A cycle's phases as CycleResult.seconds names them: yielding the next job in order, the quota check, placement,
# the victim search, backfill reservations, the rest of a job's evaluation (structural checks, blocking, quota
# holds), the growth of elastic jobs, and phase 6's reasons and positions. The forecast is the caller's (jobs.loop).
PHASES = ("order", "quota", "place", "preempt", "backfill", "other", "grow", "explain")
