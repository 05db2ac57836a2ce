"""Tidal pools: capacity online serving owns and lends to training while serving does not need it.

The nodes of a pool (`Node.pool`) lend their devices only to work that can be taken back at once: preemptible jobs
and the grown replicas of elastic jobs (elastic.py). The caller says how many of a pool's devices training may hold
now (`Pool.lendable`: its devices less what serving demands, its headroom, and what its forecast expects soon).
Before anything else, a cycle (`lend`):
- gives back what training holds on a pool's closed nodes (`Pool.closed`: nodes that lend nothing now, e.g. where
  serving missed its latency SLO), every grown replica and preemptible job there, with why;
- gives back what training holds on a pool beyond that: grown replicas first (their job shrinks), then preemptible
  jobs, each kind the least work lost first (devices x time since its last checkpoint or start), until training
  holds no more than it may;
- keeps every other job off pool nodes: a job that is not preemptible and asks for a flavor of a pool's nodes
  avoids them (it could not be taken back fast), for admission, reservations and explanations alike (`Fence`: the
  cycle's JobInfo of the job holds the nodes it avoids, so the queue is not copied);
- shows the rest only what is left to lend: the free devices of a pool's nodes beyond it are out of sight, taken
  from the last nodes first; closed nodes show no free device, and what work that stays there frees goes to no
  other job this cycle; where what nothing may take back (jobs that are not preemptible, bases of elastic
  jobs: from before the pool lent less) already holds more than the pool lends, what they free goes back to it.
Quotas are as for any preemptible use: a project borrows pool capacity only within its borrow limit.
"""

from __future__ import annotations

from dataclasses import replace

from .model import Node, PendingJob, RunningJob, Snapshot


class Fence:
    """The nodes of this cycle's lending pools and their flavors: what work that cannot be taken back at once
    keeps off."""

    __slots__ = ("nodes", "flavors")

    def __init__(self, nodes: frozenset[str] = frozenset(), flavors: frozenset[str] = frozenset()) -> None:
        # One set for every job it keeps off (most avoid nothing else): the shapes' keys and the index's lookups
        # of it (CapacityIndex.node_indexes) then compare it by identity, not node by node.
        self.nodes = nodes
        self.flavors = flavors

    def avoided_by(self, job: PendingJob) -> frozenset[str]:
        """The nodes `job` avoids this cycle: its own `avoid_nodes`, and the pools' when it is not preemptible and
        asks for a flavor of their nodes. A job that asks for no such flavor could not be placed there anyway: it
        avoids no more (and no reason blames a pool it never asked for)."""
        own = job.avoid_nodes
        if not self.nodes or job.preemptible or not any(g.flavor in self.flavors for g in job.groups):
            return own
        return own | self.nodes if own else self.nodes


def lend(snapshot: Snapshot) -> tuple[Snapshot, list[tuple[str, RunningJob, str]], Fence]:
    """The snapshot as the cycle sees it with pools lending (see the module), the running jobs (grown replicas
    split off by elastic.split_running included) it gives back, each with its pool and, when it is moved off a
    closed node, that node's why ("" otherwise), and the fence of its pools."""
    if not snapshot.pools:
        return snapshot, [], Fence()
    lendable = {p.name: p.lendable for p in snapshot.pools}
    pool_of = {n.name: n.pool for n in snapshot.nodes if n.pool in lendable}
    if not pool_of:
        return snapshot, [], Fence()
    closed = {node: why for p in snapshot.pools for node, why in p.closed if node in pool_of}
    taken: dict[int, tuple[str, str]] = {}  # job id -> the pool it gives back to, and why when moved off a node
    for r in snapshot.running:
        node = next((a.node for a in r.placement if a.node in closed), None)
        if node is not None and (r.grown_of is not None or r.preemptible):
            taken[r.id] = (pool_of[node], closed[node])
    held = _held(tuple(r for r in snapshot.running if r.id not in taken), pool_of)
    for pool, limit in lendable.items():
        if held.get(pool, 0) > limit:
            excess = held[pool] - limit
            taken.update(dict.fromkeys(_give_back(snapshot, pool, pool_of, excess, set(taken)), (pool, "")))
    for r in snapshot.running:  # a job preempted whole takes its grown replicas with it
        if r.grown_of in taken:
            taken.setdefault(r.id, taken[r.grown_of])
    running = tuple(r for r in snapshot.running if r.id not in taken)
    victims = [(taken[r.id][0], r, taken[r.id][1]) for r in snapshot.running if r.id in taken]
    held_after = _held(running, pool_of)
    room = {pool: limit - held_after.get(pool, 0) for pool, limit in lendable.items()}
    over = {pool for pool, left in room.items() if left < 0}
    # What stays there is work nothing may take back: its devices go back to the pool (or the closed node) when it
    # ends, not to another job of this cycle.
    shut = set(closed) | {node for node, pool in pool_of.items() if pool in over}
    if shut:
        running = tuple(_off_nodes(job, shut) for job in running)
    fence = Fence(frozenset(pool_of), frozenset(n.flavor for n in snapshot.nodes if n.name in pool_of))
    nodes = _lent(_freed(snapshot.nodes, [r for _, r, _ in victims]), room, set(closed))
    return replace(snapshot, nodes=nodes, running=running), victims, fence


def _held(running: tuple[RunningJob, ...], pool_of: dict[str, str]) -> dict[str, int]:
    """Devices training holds on each pool's nodes."""
    held: dict[str, int] = {}
    for job in running:
        for a in job.placement:
            pool = pool_of.get(a.node)
            if pool is not None:
                held[pool] = held.get(pool, 0) + a.devices
    return held


def _off_nodes(job: RunningJob, shut: set[str]) -> RunningJob:
    """The job with its replicas on these nodes counted on no node: they still count for its quota (on its flavor),
    but ending it (a victim of this cycle) frees nothing there for anyone else."""
    if not any(a.node in shut for a in job.placement):
        return job
    return replace(job, placement=tuple(replace(a, node="") if a.node in shut else a for a in job.placement))


def _give_back(snapshot: Snapshot, pool: str, pool_of: dict[str, str], excess: int, gone: set[int]) -> list[int]:
    """Jobs on the pool's nodes to take back, in order, until they free `excess` devices there (`gone`: already
    taken)."""
    now = snapshot.now

    def on_pool(job: RunningJob) -> int:
        return sum(a.devices for a in job.placement if pool_of.get(a.node) == pool)

    def lost(job: RunningJob) -> float:
        saved = job.started_at if job.checkpointed_at is None else max(job.started_at, job.checkpointed_at)
        return sum(a.devices for a in job.placement) * max(0.0, now - saved)

    candidates = sorted((job for job in snapshot.running if job.id not in gone and on_pool(job)
                         and (job.grown_of is not None or job.preemptible)),
                        key=lambda job: (job.grown_of is None, lost(job), job.id))
    taken = []
    for job in candidates:
        if excess <= 0:
            break
        taken.append(job.id)
        excess -= on_pool(job)
    return taken


def _freed(nodes: tuple[Node, ...], victims: list[RunningJob]) -> tuple[Node, ...]:
    back: dict[str, list[int]] = {}
    for job in victims:
        for a in job.placement:
            amounts = back.setdefault(a.node, [0, 0, 0])
            amounts[0] += a.devices
            amounts[1] += a.cpu_millis
            amounts[2] += a.memory_mib
    return tuple(replace(n, free=n.free + back[n.name][0], free_cpu_millis=n.free_cpu_millis + back[n.name][1],
                         free_memory_mib=n.free_memory_mib + back[n.name][2]) if n.name in back else n
                 for n in nodes)


def _lent(nodes: tuple[Node, ...], room: dict[str, int], closed: set[str]) -> tuple[Node, ...]:
    """Pool nodes with only what is left to lend free, from the first nodes on (node order); closed ones none."""
    left = dict(room)
    out = []
    for n in nodes:
        if n.pool in left:
            visible = 0 if n.name in closed else max(0, min(n.free, left[n.pool]))
            left[n.pool] -= visible
            n = replace(n, free=visible)
        out.append(n)
    return tuple(out)

