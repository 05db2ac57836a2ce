"""The dispatch port: everything jobs needs from the clusters that run them, without importing the clusters app.

The clusters app implements it and connects itself to `clusters` at start-up (`ClustersConfig.ready`); the system
check fails while nothing is connected (`core.checks`). It provides the backend interface
(dispatch, stop, observe, logs) per cluster, the queueing of dispatch and stop as tasks, the node inventory the
scheduler places gangs on, and the environment variables its launchers set (which a job spec may not). Jobs calls
only the functions below; dependencies run one way, clusters -> jobs.

What a backend observes comes back as `Observation`s, which one function on the jobs side
(`jobs.observations.record_observation`) turns into job state, whatever the backend.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum
from typing import TYPE_CHECKING, Any, Protocol

from core.hooks import Hook
from jobs import scheduling as core

if TYPE_CHECKING:
    from jobs.models import Attempt, AttemptResize


class Phase(StrEnum):
    """Where an attempt's workload stands."""

    PENDING = "pending"  # dispatched; not every replica runs yet
    RUNNING = "running"  # every replica runs
    SUCCEEDED = "succeeded"  # by the launcher's rule (rank 0, or every replica)
    FAILED = "failed"  # a replica failed
    VANISHED = "vanished"  # the workload is gone without having finished (deleted, garbage-collected)


@dataclass(frozen=True)
class Observation:
    """What a backend saw of one open attempt."""

    attempt_id: int
    phase: Phase
    message: str = ""  # what the backend saw, in words ("replica worker-1 on gpu-3 failed: OOMKilled")
    cause: str = ""  # FAILED: the backend's classification, one of jobs.failures.CAUSES
    exit_code: int | None = None
    lost_nodes: tuple[str, ...] = ()  # nodes of the attempt that went away or are not ready
    details: dict[str, Any] = field(default_factory=dict)  # replica, node, rack, container reason...
    logs: dict[str, list[str]] = field(default_factory=dict)  # last lines per replica, kept with the attempt


class LogsUnavailable(Exception):
    """A live log could not be read (the pod is gone, the cluster's API is down); the message says why."""


class FollowedLog(Protocol):
    """A replica's log as it is followed: its lines (iterate once), and where it stands."""

    # Read-only (properties in the backends' streams).
    @property
    def position(self) -> str:
        """What `follow(after=...)` resumes from to give exactly the lines after the last one given."""

    @property
    def paused(self) -> str:
        """Once the lines are exhausted: "" when the replica's log ended, else why it stopped early."""

    def __iter__(self) -> Iterator[str]: ...


class Backend(Protocol):
    log_source: str  # what the job page calls its live logs: "pod", "simulated"

    def dispatch(self, attempt: Attempt) -> None:
        """Create the attempt's workload. Idempotent: a redelivered task meets its own objects."""

    def stop(self, attempt: Attempt, reason: str) -> None:
        """Delete what is left of the attempt's workload (with the cluster's grace period). Idempotent."""

    def resize(self, attempt: Attempt, resize: AttemptResize) -> None:
        """Carry out a resize of an elastic job's running attempt (`attempt.placement` is already the new one): a
        grow starts the replicas `resize.replicas` lists, joining the running ones; a shrink stops them (highest
        ranks, with the cluster's grace). Idempotent. Asked only for the launchers `Inventory.resizable` gives the
        attempt's cluster."""

    def observe(self, attempts: Iterable[Attempt]) -> Iterable[Observation]:
        """What these open attempts on the backend's cluster look like now (one per attempt at most)."""

    def logs(self, attempt: Attempt, role: str, index: int, tail: int) -> list[str]:
        """The last `tail` lines of one replica of a live attempt; LogsUnavailable when they cannot be read."""

    def follow(self, attempt: Attempt, role: str, index: int, tail: int, max_seconds: float,
               after: str | None = None) -> FollowedLog:
        """The tail (or, given the `position` of an earlier follow, every line after it), then new lines until the
        replica ends or `max_seconds` pass; LogsUnavailable before any line when the replica cannot be reached."""

    def cordon(self, node: str, cordoned: bool) -> None:
        """Mark `node` unschedulable on the cluster itself (a quarantine), or undo a cordon this made (its release):
        a cordon someone else made is left alone both ways. A no-op where the cluster has no such thing."""


@dataclass(frozen=True)
class Inventory:
    """The nodes (free = capacity: the caller subtracts what its jobs hold) and each cluster's id by name."""

    nodes: tuple[core.Node, ...]
    cluster_ids: Mapping[str, int]
    # Per cluster, the launchers whose jobs its backend resizes (Backend.resize): elsewhere an elastic job runs as a
    # rigid gang of the size it was admitted at (the snapshot gives the scheduler no elastic groups for it).
    resizable: Mapping[str, frozenset[str]] = field(default_factory=dict)


@dataclass(frozen=True)
class Clusters:
    """What the clusters app connects."""

    backend_for: Callable[[Attempt], Backend]
    queue_dispatch: Callable[[int], None]  # attempt id: dispatch it in a task
    queue_stop: Callable[[int, str], None]  # attempt id, reason: stop it in a task
    inventory: Callable[[], Inventory]
    is_reserved_env: Callable[[str], bool]  # environment variables the launchers set: a job may not
    queue_resize: Callable[[int, int], None] | None = None  # attempt id, AttemptResize id: resize it in a task
    queue_cordon: Callable[[int, bool], None] | None = None  # node id, cordoned: (un)cordon it in a task


clusters: Hook[Clusters] = Hook("jobs.ports.clusters", single=True, required=True)


def _clusters() -> Clusters:
    if not clusters.receivers:
        raise RuntimeError("no clusters app connected its backends (is `clusters` in INSTALLED_APPS?)")
    return clusters.one()


def backend_for(attempt: Attempt) -> Backend:
    return _clusters().backend_for(attempt)


def dispatch(attempt_id: int) -> None:
    _clusters().queue_dispatch(attempt_id)


def stop(attempt_id: int, reason: str) -> None:
    _clusters().queue_stop(attempt_id, reason)


def resize(attempt_id: int, resize_id: int) -> None:
    queue = _clusters().queue_resize
    if queue is None:
        raise RuntimeError("the connected clusters app cannot resize attempts")
    queue(attempt_id, resize_id)


def cordon(node_id: int, cordoned: bool) -> None:
    """Cordon a quarantined node on its cluster (or uncordon a released one), in a task; nothing when the connected
    clusters app cannot."""
    queue = _clusters().queue_cordon
    if queue is not None:
        queue(node_id, cordoned)


def inventory() -> Inventory:
    return _clusters().inventory()


def is_reserved_env(name: str) -> bool:
    """Whether a job spec may not set `name`: the launchers or the cluster set it, or an env source does."""
    return _clusters().is_reserved_env(name) or any(name in source.names for source in env_sources)


# ------------------------------------------------------------------------------------- env of an attempt's process

@dataclass(frozen=True)
class AttemptEnv:
    """Variables an app above jobs gives every attempt's process (tracking: the run and its token). `secret` values
    never go into a pod spec as literals: the Kubernetes backend puts them in a Secret the pods read."""

    plain: Mapping[str, str]
    secret: Mapping[str, str]


@dataclass(frozen=True)
class EnvSource:
    """`env(attempt)`, with every name it may set (a job spec may then not set them: the job's own env comes last in
    a pod and would override them)."""

    env: Callable[[Attempt], AttemptEnv]
    names: frozenset[str]


# Connected once per app in its AppConfig.ready().
env_sources: Hook[EnvSource] = Hook("jobs.ports.env_sources")


def env_for(attempt: Attempt) -> AttemptEnv:
    """Everything connected sources give this attempt, merged (backends call it at dispatch)."""
    plain: dict[str, str] = {}
    secret: dict[str, str] = {}
    for source in env_sources:
        env = source.env(attempt)
        plain.update(env.plain)
        secret.update(env.secret)
    return AttemptEnv(plain, secret)


# ------------------------------------------------------------------------------------------- spent hard budgets

# fn(now) -> {project id: why its non-preemptible jobs are not admitted}: projects whose hard budget is spent.
# Connected in an app's AppConfig.ready() (costs).
BudgetSource = Callable[[datetime], Mapping[int, str]]
budget_sources: Hook[BudgetSource] = Hook("jobs.ports.budget_sources")


# fn(now) -> {user id: why their non-preemptible jobs are not admitted}: users whose hard budget is spent. The
# scheduler core knows projects, not users: the snapshot keeps such jobs out of the cycle and the loop writes their
# wait (jobs.snapshot.hold_spent_users). Connected in an app's AppConfig.ready() (costs).
UserBudgetSource = Callable[[datetime], Mapping[int, str]]
user_budget_sources: Hook[UserBudgetSource] = Hook("jobs.ports.user_budget_sources")


def spent_user_budgets(now: datetime) -> dict[int, str]:
    """Every connected source's users whose hard budget is spent, with the reason (asked once per cycle)."""
    stops: dict[int, str] = {}
    for found in user_budget_sources.send(now):
        stops.update(found)
    return stops


def spent_budgets(now: datetime) -> dict[int, str]:
    """Every connected source's projects whose hard budget is spent, with the reason (the snapshot builder asks
    once per cycle)."""
    stops: dict[int, str] = {}
    for found in budget_sources.send(now):
        stops.update(found)
    return stops


# ------------------------------------------------------------------------------------------------------------ pools

@dataclass(frozen=True)
class PoolReading:
    """What the pools lend this cycle: each pool node's pool (by node key), the core's pools, and what the source
    wants back after the cycle to record (`PoolSource.record`)."""

    node_pool: Mapping[str, str] = field(default_factory=dict)
    pools: tuple[core.Pool, ...] = ()
    details: Any = None


@dataclass(frozen=True)
class PoolSource:
    """`read(now, nodes, running)` before a cycle (nodes as the inventory gives them, running jobs with their
    placements); `record(now, reading)` inside the cycle's transaction after its decisions were applied."""

    read: Callable[[float, tuple[core.Node, ...], tuple[core.RunningJob, ...]], PoolReading]
    record: Callable[[float, PoolReading], None]


# Connected by the pools app; with nothing connected no node lends.
pool_source: Hook[PoolSource] = Hook("jobs.ports.pool_source", single=True)


def read_pools(now: float, nodes: tuple[core.Node, ...], running: tuple[core.RunningJob, ...]) -> PoolReading:
    return pool_source.one().read(now, nodes, running) if pool_source.receivers else PoolReading()


def record_pools(now: float, reading: PoolReading) -> None:
    if pool_source.receivers and reading.pools:
        pool_source.one().record(now, reading)
