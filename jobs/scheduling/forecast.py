"""Estimated starts: when each pending job would start if nothing new arrives, by running the scheduler forward.

From a snapshot the cycle runs as the scheduler will run it (the same policy, explanations off); then time jumps to
the next moment a running job reaches its max runtime (a job without one never ends) or the cycle asked to be woken
(CycleResult.wake_at: a reclaim grace ends, what the lend hold keeps back falls), the jobs ending then leave, and
the cycle runs again; and so on. A pending job's estimate is the time of the cycle that admits it, so quotas,
reservations, preemption and the queue ahead count exactly as the scheduler will count them. Victims of a simulated
preemption join the queue again, and a cycle that preempted is followed by one at the same moment (the scheduler is
woken at once, and the victims' capacity may go to more than the job that took it).

Jobs usually end before their max runtime. `runtime_ratio` is the share of its max runtime a job is expected to
use (the caller learns it from finished jobs; 1.0 plans with max runtimes): simulated jobs end at started_at +
ratio x max_runtime, while the simulated scheduler still plans its reservations with max runtimes, as the real one
will. What it cannot know: jobs submitted later, nodes coming and going, a job ending unlike the others. The
caller bounds the work: `forecast_steps` yields one simulated cycle at a time.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import replace

from .cycle import run_cycle
from .model import Assignment, CycleResult, EndedUse, Node, PendingJob, Policy, ReplicaGroup, RunningJob, Snapshot
from .shapes import JobInfo
from .state import RunningUsage


def forecast(snapshot: Snapshot, policy: Policy, max_steps: int, *, first: CycleResult | None = None,
             stop: Callable[[], bool] | None = None, runtime_ratio: float = 1.0) -> dict[int, float]:
    """Start time of every pending job that starts within `max_steps` simulated cycles, by job id. `first`: the
    cycle's result on this very snapshot when the caller has it (it is not run again); `stop()` is asked after
    each simulated cycle whether to give up (a time budget)."""
    starts: dict[int, float] = {}
    for step, (at, admitted) in enumerate(forecast_steps(snapshot, policy, first, runtime_ratio)):
        starts.update(dict.fromkeys(admitted, at))
        if step + 1 >= max_steps or len(starts) == len(snapshot.pending) or (stop is not None and stop()):
            break
    return starts


def forecast_steps(snapshot: Snapshot, policy: Policy, first: CycleResult | None = None,
                   runtime_ratio: float = 1.0) -> Iterator[tuple[float, tuple[int, ...]]]:
    """(time, ids of the originally pending jobs admitted then) per simulated cycle, the first at the snapshot's
    time, until nothing pending is left or no running job will ever end."""
    policy = replace(policy, explain=False, waits=False)  # only admissions and preemptions are read
    usage = RunningUsage()  # the running jobs change little from one simulated cycle to the next
    waiting = {j.id for j in snapshot.pending}
    snap: Snapshot | None = snapshot
    result = first
    again = 0  # cycles in a row at one moment
    while snap is not None and waiting:
        result = result or run_cycle(snap, policy, usage)
        admitted = tuple(a.job_id for a in result.admits if a.job_id in waiting)
        waiting.difference_update(admitted)
        yield snap.now, admitted
        again = again + 1 if result.preemptions and again + 1 < MAX_CYCLES_AT_ONCE else 0
        snap = _next_snapshot(snap, result, runtime_ratio if not again else None, policy.lend_hold)
        result = None


# Cycles run at one moment while they keep preempting (as trace replay does), before time moves on.
MAX_CYCLES_AT_ONCE = 4


def _next_snapshot(snap: Snapshot, result: CycleResult, runtime_ratio: float | None,
                   hold: float) -> Snapshot | None:
    """The snapshot of the next simulated cycle: decisions carried out, then, unless `runtime_ratio` is None (the
    next cycle runs at the same moment), the jobs that end first gone; None when time should move on but no
    running job will ever end. The attempts that ended and the arrivals of the last `hold` seconds (the lend
    hold's) come along, simulated ends and preemptions included."""
    nodes = {n.name: n for n in snap.nodes}
    pending = {j.id: j for j in snap.pending}
    running = {r.id: r for r in snap.running}
    ended = list(snap.ended)
    for p in result.preemptions:
        victim = running.pop(p.victim_id)
        _give_back(nodes, victim)
        ended += _ended(victim, nodes, snap.now)
        pending[victim.id] = _requeued(victim, nodes, snap.now)
    for admit in result.admits:
        job = pending.pop(admit.job_id)
        _take(nodes, admit.placement, -1)
        running[job.id] = RunningJob(job.id, job.project, job.priority, snap.now, admit.placement,
                                     JobInfo(job).primary, job.preemptible, 0.0, job.max_runtime)
    now = snap.now
    if runtime_ratio is not None:
        ends = {r.id: r.started_at + runtime_ratio * r.max_runtime for r in running.values()
                if r.max_runtime is not None}
        if not ends and result.wake_at is None:
            return None
        # The next moment something changes: the first end, or a wake-up (CycleResult.wake_at) before it.
        now = max(min([*ends.values(), result.wake_at or float("inf")]), snap.now)
        for job_id, end in ends.items():
            if end <= now:
                done = running.pop(job_id)
                _give_back(nodes, done)
                ended += _ended(done, nodes, end)
    since = now - hold
    return Snapshot(now, tuple(nodes.values()), snap.quotas, snap.projects, tuple(running.values()),
                    tuple(pending.values()), tuple(e for e in ended if e.ended_at > since),
                    tuple(a for a in snap.arrivals if a.at > since))


def _ended(job: RunningJob, nodes: dict[str, Node], at: float) -> list[EndedUse]:
    """A job that stops holding its devices at `at`, one entry per flavor of its nodes."""
    devices: dict[str, int] = {}
    for a in job.placement:
        node = nodes.get(a.node)
        flavor = node.flavor if node else job.flavor
        devices[flavor] = devices.get(flavor, 0) + a.devices
    return [EndedUse(job.project, f, d, job.started_at, at) for f, d in devices.items()]


def _give_back(nodes: dict[str, Node], job: RunningJob) -> None:
    _take(nodes, job.placement, 1)


def _take(nodes: dict[str, Node], placement: tuple[Assignment, ...], sign: int) -> None:
    """Give (sign=1) or take (sign=-1) the devices, CPU and memory of these replicas on their nodes."""
    for a in placement:
        node = nodes.get(a.node)
        if node is not None:
            nodes[a.node] = replace(node, free=node.free + sign * a.devices,
                                    free_cpu_millis=node.free_cpu_millis + sign * a.cpu_millis,
                                    free_memory_mib=node.free_memory_mib + sign * a.memory_mib)


def _requeued(victim: RunningJob, nodes: dict[str, Node], now: float) -> PendingJob:
    """A preempted job as the queue sees it again: one replica group per role, as it was placed."""
    groups: dict[str, ReplicaGroup] = {}
    for a in victim.placement:
        node = nodes.get(a.node)
        group = groups.get(a.role)
        if group is None:
            group = ReplicaGroup(a.role, 0, a.devices, node.flavor if node else victim.flavor, a.cpu_millis,
                                 a.memory_mib)
        groups[a.role] = replace(group, replicas=group.replicas + 1, devices=max(group.devices, a.devices))
    return PendingJob(victim.id, victim.project, victim.priority, victim.started_at, tuple(groups.values()),
                      victim.preemptible, max_runtime=victim.max_runtime, queued_at=now)
