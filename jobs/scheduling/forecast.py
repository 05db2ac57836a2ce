"""Estimated starts: when each pending job would start, by running the scheduler forward, and how sure that is.

The forecast (`forecast_steps`): from a snapshot the cycle runs as the scheduler will run it (the same policy,
explanations off); then time jumps to the next moment something changes: a running job reaches its expected end
(a job without a max runtime never ends), the cycle asked to be woken (CycleResult.wake_at: a reclaim grace ends,
what the lend hold keeps back falls) or, when the caller expects arrivals, a job is submitted; the jobs ending then
leave, and the cycle runs again; and so on. A pending job's start is the time of the cycle that admits it, so
quotas, reservations, preemption and the queue ahead count exactly as the scheduler will count them. Victims of a
simulated preemption join the queue again, and a cycle that preempted is followed by one at the same moment (the
scheduler is woken at once, and the victims' capacity may go to more than the job that took it).

Jobs usually end before their max runtime. `runtime_ratio` is the share of its max runtime a job is expected to
use (the caller learns it from finished jobs; 1.0 plans with max runtimes): simulated jobs end at started_at +
ratio x max_runtime, while the simulated scheduler still plans its reservations with max runtimes, as the real one
will.

With a `resolution` the simulated cycles are coarse: the next one comes no sooner than that share of the time
simulated so far (of FINE_AHEAD at least), every job ending by then leaves at once, and what a preemption frees
waits for the next step. A start is then late by about one step (30 s for a job starting 5 min ahead, 30 min for
one 5 h ahead), and the number of cycles grows with the logarithm of the time looked ahead rather than with the
number of jobs that end and the wake-ups of the lend hold: a busy queue of thousands is simulated hours ahead in a
hundred cycles. 0 is the exact forecast (`forecast`); `estimate_starts` is exact for the first EXACT_AHEAD seconds
while it can afford it.

`estimate_starts` is what the scheduler loop writes: every pending job gets an `Estimate`, a start with a range or
a note saying why there is none. Three forecasts make it, within the caller's budget:
- the start: nothing new arriving, jobs using the median share of their max runtime that finished jobs used;
- the range's early end (p10): nothing arriving, jobs using the share one finished job in ten used less of;
- its late end (p90): jobs using the share nine in ten used less of, and arriving at their recent rates
  (`Snapshot.arrival_rates`, per project, priority and shape) as many as one case in ten brings (`kth_arrival`).
The range reaches at least one step of the forecast beyond the start on each side. A job the forecast does not
reach within the budget starts "no earlier than" the moment it reached (less a step).
What none of it can know: nodes coming and going, bursts unlike the recent past.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, replace
from typing import NamedTuple

from .cycle import run_cycle
from .elastic import elastic_groups
from .model import (
    Arrival,
    ArrivalRate,
    Assignment,
    CycleResult,
    EndedUse,
    Node,
    PendingJob,
    Policy,
    RunningJob,
    Snapshot,
)
from .shapes import JobInfo, requeued
from .state import RunningUsage

HORIZON = 24 * 3600.0  # how far ahead estimates look: a later start reads "beyond 24 h"
RESOLUTION = 0.1  # estimate_starts' steps: at least this share of the time simulated so far
ARRIVAL_WINDOW = 3600.0  # seconds of recent submissions callers learn arrival rates from (arrival_rates)
EXACT_AHEAD = 900.0  # seconds ahead that estimate_starts simulates exactly while it can afford to
FINE_AHEAD = 300.0  # seconds ahead within which coarse steps are all as long as at this point
MAX_CYCLES_AT_ONCE = 4  # cycles run at one moment while they keep preempting (as trace replay does)
ARRIVALS_Z = 1.2816  # the standard normal's 90th percentile: arrivals for the late end of a range

# Why an estimate is a bound, or why a job has none (Estimate.note).
NO_EARLIER = "no earlier than"  # its start is a bound: the forecast did not reach it within its budget
BEYOND = f"beyond {HORIZON / 3600:g} h"
NO_RUNTIME = "no runtime known"  # it waits for jobs that declare no max runtime
BUDGET_SPENT = "budget spent"  # its project's hard budget is spent: only preemptible jobs start
NODES_UNAVAILABLE = "nodes unavailable"  # it needs nodes out of service now; nothing says when they return
NEVER = "not as things stand"  # nothing the forecast expects lets it start (its nodes or quota would change)
_NOTE_OF_WAIT = {"unavailable": NODES_UNAVAILABLE, "unschedulable": NEVER}


class RuntimeShares(NamedTuple):
    """The share of its max runtime a job is expected to use: the median (`typical`) of recently finished jobs,
    and the 10th and 90th percentiles for a start's range. All 1.0: plan with max runtimes."""

    low: float = 1.0
    typical: float = 1.0
    high: float = 1.0


MAX_RUNTIMES = RuntimeShares()  # every job expected to run for its max runtime


def runtime_shares(used: Sequence[float], least: int = 20) -> RuntimeShares:
    """The p10, median and p90 of the shares of their max runtime finished jobs used (each within 0.01 and 1);
    max runtimes (1.0) until `least` jobs finished."""
    if len(used) < least:
        return MAX_RUNTIMES
    ordered = sorted(min(1.0, max(0.01, share)) for share in used)

    def at(q: float) -> float:
        return ordered[min(len(ordered) - 1, int(q * len(ordered)))]

    return RuntimeShares(at(0.1), at(0.5), at(0.9))


@dataclass(frozen=True, slots=True)
class Estimate:
    """A waiting job's estimated start on the snapshot's clock, or why it has none (`note`)."""

    start: float | None = None  # with note NO_EARLIER: the earliest it can start, a bound
    low: float | None = None  # the range's early end (p10)
    high: float | None = None  # its late end (p90); None: later than the forecast looked
    note: str = ""


def arrival_rates(submitted: Iterable[PendingJob], window: float) -> tuple[ArrivalRate, ...]:
    """The jobs submitted over the last `window` seconds, as rates per hour per project, priority and shape (replica
    groups and topology). A rate's max runtime is the median its jobs declared, None when most declared none."""
    runtimes: dict[tuple, list[float | None]] = {}
    for job in submitted:
        key = (job.project, job.priority, job.preemptible, job.groups, job.topology)
        runtimes.setdefault(key, []).append(job.max_runtime)
    rates = []
    for (project, priority, preemptible, groups, topology), declared in runtimes.items():
        known = sorted(r for r in declared if r is not None)
        typical = known[len(known) // 2] if 2 * len(known) >= len(declared) else None
        rates.append(ArrivalRate(project, priority, groups, len(declared) * 3600.0 / window, preemptible, typical,
                                 topology))
    return tuple(rates)


def forecast(snapshot: Snapshot, policy: Policy, max_steps: int, *, first: CycleResult | None = None,
             stop: Callable[[], bool] | None = None, runtime_ratio: float = 1.0,
             accelerate: bool = True) -> dict[int, float]:
    """The exact forecast: start time of every pending job that starts within `max_steps` simulated cycles, by job
    id. `first`: the cycle's result on this very snapshot when the caller has it (it is not run again); `stop()`
    is asked after each simulated cycle whether to give up (a time budget); `accelerate=False`: its cycles in the
    plain mode."""
    starts: dict[int, float] = {}
    for step, (at, admitted) in enumerate(forecast_steps(snapshot, policy, first, runtime_ratio, accelerate)):
        starts.update(dict.fromkeys(admitted, at))
        if step + 1 >= max_steps or len(starts) == len(snapshot.pending) or (stop is not None and stop()):
            break
    return starts


def forecast_steps(snapshot: Snapshot, policy: Policy, first: CycleResult | None = None,
                   runtime_ratio: float = 1.0, accelerate: bool = True) -> Iterator[tuple[float, tuple[int, ...]]]:
    """(time, ids of the originally pending jobs admitted then) per exact simulated cycle, the first at the
    snapshot's time, until nothing pending is left or no running job will ever end."""
    for state, admitted in _steps(snapshot, policy, first, runtime_ratio, lambda: 0.0, _Arrivals(()), accelerate):
        yield state.now, admitted


def estimate_starts(snapshot: Snapshot, policy: Policy, *, first: CycleResult | None = None,
                    shares: RuntimeShares = MAX_RUNTIMES, max_steps: int = 200, seconds: float = math.inf,
                    clock: Callable[[], float] | None = None, horizon: float = HORIZON,
                    resolution: float = RESOLUTION) -> dict[int, Estimate]:
    """Every pending job's Estimate (see the module's docstring). Each of the (up to) three forecasts runs at most
    `max_steps` cycles; together they take at most `seconds` of `clock` (the start's forecast up to half of it
    when others follow). `first`: the cycle's result on this very snapshot (with its waits, which name why a job
    that never starts waits), when the caller has it."""
    arrivals = _Arrivals(snapshot.arrival_rates, snapshot.now, horizon)
    late = bool(arrivals) or shares.high != shares.typical
    early = shares.low != shares.typical
    budget = _Budget(clock, seconds, 1 + late + early)

    def run(ratio: float, expected: _Arrivals, ahead: float = horizon) -> _Run:
        return _simulate(snapshot, policy, first, ratio, resolution, expected, max_steps, budget.next(), ahead)

    point = run(shares.typical, _Arrivals(()))
    # The early end matters only for jobs the start's forecast started: it need not look further.
    earliest = run(shares.low, _Arrivals(()), point.last.now - snapshot.now) if early else point
    latest = run(shares.high, arrivals) if late else point
    codes = {w.job_id: w.code for w in first.waits} if first is not None else {}

    def step(at: float) -> float:
        """The forecast's resolution at `at`: a coarse step's start is late by up to one step, and batching what
        ends within a step moves who goes first either way; a range is at least that wide on each side."""
        return resolution * max(at - snapshot.now, FINE_AHEAD)

    estimates = {}
    for job in snapshot.pending:
        start = point.starts.get(job.id)
        if start is None:
            bound = max(snapshot.now, point.last.now - step(point.last.now)) if point.cut else None
            estimates[job.id] = _without_start(job, point, bound, codes)
            continue
        low = min(start, earliest.starts.get(job.id, start))
        high = latest.starts.get(job.id)
        estimates[job.id] = Estimate(start, max(snapshot.now, low - step(low)),
                                     None if high is None else max(high, start + step(start)))
    return estimates


def _without_start(job: PendingJob, point: _Run, bound: float | None, codes: dict[int, str]) -> Estimate:
    """The estimate of a job the start's forecast did not start: the moment it reached when the budget cut it
    short (the job starts later, if nothing unforeseen happens), else why it has none."""
    if point.beyond:
        return Estimate(note=BEYOND)
    if codes.get(job.id) == "budget":  # spent for the month: nothing the forecast simulates lifts it
        return Estimate(note=BUDGET_SPENT)
    if bound is not None:
        return Estimate(bound, bound, None, NO_EARLIER)
    if codes.get(job.id) in _NOTE_OF_WAIT:
        return Estimate(note=_NOTE_OF_WAIT[codes[job.id]])
    flavor = JobInfo(job).primary
    if any(r.max_runtime is None and r.flavor == flavor for r in point.last.running):
        return Estimate(note=NO_RUNTIME)
    return Estimate(note=NEVER)


class _Deadline:
    """A forecast's share of the time budget, on the caller's clock (none: no limit)."""

    def __init__(self, clock: Callable[[], float] | None = None, begin: float = 0.0, seconds: float = math.inf):
        self.clock, self.begin, self.seconds = clock, begin, seconds

    def passed(self, share: float = 1.0) -> bool:
        """Whether this share of it is spent."""
        return self.clock is not None and self.clock() > self.begin + share * self.seconds


class _Budget:
    """Deadlines for `runs` forecasts in turn out of `seconds` of `clock`: the first may take half of it when others
    follow, each later one an equal share of what is left."""

    def __init__(self, clock: Callable[[], float] | None, seconds: float, runs: int) -> None:
        self.clock, self.seconds, self.runs = clock, seconds, runs
        self.begin = clock() if clock is not None else 0.0
        self.done = 0

    def next(self) -> _Deadline:
        if self.clock is None or math.isinf(self.seconds):
            return _Deadline()
        self.done += 1
        now = self.clock()
        share = 0.5 if self.done == 1 and self.runs > 1 else 1 / (self.runs - self.done + 1)
        return _Deadline(self.clock, now, share * (self.seconds - (now - self.begin)))


@dataclass
class _Run:
    """What one forecast found: starts by job id, the last state it simulated, and why it stopped."""

    starts: dict[int, float]
    last: Snapshot
    cut: bool = False  # the budget (cycles or seconds) ran out first
    beyond: bool = False  # it reached the horizon with jobs still waiting


def _simulate(snapshot: Snapshot, policy: Policy, first: CycleResult | None, ratio: float, resolution: float,
              arrivals: _Arrivals, max_steps: int, deadline: _Deadline, horizon: float) -> _Run:
    """One forecast within its budget: exact cycles for the first EXACT_AHEAD seconds while they are cheap (half
    of its cycles, a quarter of its time), then steps of `resolution`."""
    run = _Run({}, snapshot)
    end = snapshot.now + horizon
    step = 0

    def coarseness() -> float:
        exact = run.last.now < snapshot.now + EXACT_AHEAD and step < max_steps // 2 and not deadline.passed(1 / 4)
        return 0.0 if exact else resolution

    for step, (state, admitted) in enumerate(_steps(snapshot, policy, first, ratio, coarseness, arrivals)):
        if state.now > end:
            run.beyond = True
            break
        run.last = state
        run.starts.update(dict.fromkeys(admitted, state.now))
        if len(run.starts) == len(snapshot.pending):
            break
        if step + 1 >= max_steps or deadline.passed():
            run.cut = True
            break
    return run


def _steps(snapshot: Snapshot, policy: Policy, first: CycleResult | None, ratio: float,
           coarseness: Callable[[], float], arrivals: _Arrivals,
           accelerate: bool = True) -> Iterator[tuple[Snapshot, tuple[int, ...]]]:
    """Per simulated cycle: the state with its decisions carried out (at the cycle's time), and the originally
    pending jobs it admitted. `coarseness()`: the resolution of the next step (0: exact)."""
    policy = replace(policy, explain=False, waits=False)  # only admissions and preemptions are read
    usage = RunningUsage()  # the running jobs change little from one simulated cycle to the next
    waiting = {j.id for j in snapshot.pending}
    snap: Snapshot | None = snapshot
    result = first
    again = 0  # cycles in a row at one moment
    while snap is not None and waiting:
        result = result or run_cycle(snap, policy, usage, accelerate)
        admitted = tuple(a.job_id for a in result.admits if a.job_id in waiting)
        waiting.difference_update(admitted)
        snap = _carried_out(snap, result)
        yield snap, admitted
        resolution = coarseness()
        # Coarse steps leave what victims free for the next step, which is no more than a step away anyway.
        again = again + 1 if result.preemptions and again + 1 < MAX_CYCLES_AT_ONCE and not resolution else 0
        if not again:
            step = resolution * max(snap.now - snapshot.now, FINE_AHEAD)
            snap = _advanced(snap, result.wake_at, ratio, policy.lend_hold, step, arrivals)
        result = None


class _Arrivals:
    """The jobs the arrival rates bring before the horizon, in submission order, each rate's k-th when a Poisson
    process of its rate brings it in one case in ten (`kth_arrival`). Ids are negative: no real job's."""

    def __init__(self, rates: Iterable[ArrivalRate], origin: float = 0.0, horizon: float = 0.0) -> None:
        self.rates = [r for r in rates if r.per_hour > 0]
        self.origin, self.until = origin, origin + horizon
        self.heap = [(origin + kth_arrival(1, r.per_hour), 1, i) for i, r in enumerate(self.rates)]
        heapq.heapify(self.heap)
        self.made = 0

    def __bool__(self) -> bool:
        return bool(self.heap) and self.heap[0][0] <= self.until

    def next_at(self) -> float | None:
        return self.heap[0][0] if self else None

    def due(self, now: float) -> list[PendingJob]:
        """The jobs submitted by `now`, taken from what is left."""
        jobs = []
        while self and self.heap[0][0] <= now:
            at, k, i = self.heap[0]
            rate = self.rates[i]
            heapq.heapreplace(self.heap, (self.origin + kth_arrival(k + 1, rate.per_hour), k + 1, i))
            self.made += 1
            jobs.append(PendingJob(-self.made, rate.project, rate.priority, at, rate.groups, rate.preemptible,
                                   rate.topology, rate.max_runtime))
        return jobs


def kth_arrival(k: int, per_hour: float) -> float:
    """Seconds until a Poisson process of this rate has brought k arrivals, in one case in ten: the 10th percentile
    of a Gamma(k) wait (Wilson and Hilferty's approximation, within 7% at k = 1 and closer above). Arrivals at
    these moments are, at every moment, as many as nine cases in ten stay under: the late end of a range (p90)."""
    c = 1 / (9 * k)
    return k * max(0.0, 1 - c - ARRIVALS_Z * math.sqrt(c)) ** 3 * 3600.0 / per_hour


def _carried_out(snap: Snapshot, result: CycleResult) -> Snapshot:
    """The snapshot with a cycle's decisions carried out at its moment: victims queue again, elastic jobs shrink,
    admitted jobs run, elastic jobs grow."""
    nodes = {n.name: n for n in snap.nodes}
    pending = {j.id: j for j in snap.pending}
    running = {r.id: r for r in snap.running}
    ended = list(snap.ended)
    for p in result.preemptions:
        victim = running.pop(p.victim_id)
        _give_back(nodes, victim)
        ended += _ended(victim, nodes, snap.now)
        pending[victim.id] = requeued(victim, {name: n.flavor for name, n in nodes.items()}, snap.now)
    for shrink in result.shrinks:
        shrunk = running[shrink.job_id]
        _give_back(nodes, replace(shrunk, placement=shrink.removed))
        running[shrunk.id] = replace(shrunk, placement=tuple(a for a in shrunk.placement if a not in shrink.removed),
                                     resized_at=snap.now)
    for admit in result.admits:
        job = pending.pop(admit.job_id)
        _take(nodes, admit.placement, -1)
        running[job.id] = RunningJob(job.id, job.project, job.priority, snap.now, admit.placement,
                                     JobInfo(job).primary, job.preemptible, 0.0, job.max_runtime,
                                     elastic=elastic_groups(job))
    for grown in result.grows:
        growing = running[grown.job_id]
        _take(nodes, grown.placement, -1)
        running[growing.id] = replace(growing, placement=growing.placement + grown.placement, resized_at=snap.now)
    return replace(snap, nodes=tuple(nodes.values()), running=tuple(running.values()),
                   pending=tuple(pending.values()), ended=tuple(ended))


def _advanced(snap: Snapshot, wake_at: float | None, ratio: float, hold: float, step: float,
              arrivals: _Arrivals) -> Snapshot | None:
    """The snapshot of the next simulated cycle: at the next change (the first expected end, a wake-up or an
    arrival), but no sooner than `step` later, with every job ending by then gone and every job arriving by then
    queued; None when nothing will ever change. The attempts that ended and the arrivals of the last `hold` seconds
    (the lend hold's) come along, simulated ends and arrivals included."""
    ends = {r.id: r.started_at + ratio * r.max_runtime for r in snap.running if r.max_runtime is not None}
    changes = [*ends.values(), *(t for t in (wake_at, arrivals.next_at()) if t is not None)]
    if not changes:
        return None
    now = max(min(changes), snap.now + step)
    nodes = {n.name: n for n in snap.nodes}
    running = {r.id: r for r in snap.running}
    ended = list(snap.ended)
    for job_id, end in ends.items():
        if end <= now:
            done = running.pop(job_id)
            _give_back(nodes, done)
            ended += _ended(done, nodes, end)
    submitted = arrivals.due(now)
    recent = [*snap.arrivals, *(Arrival(j.project, g.flavor, g.replicas * g.devices, j.submitted_at, j.preemptible)
                                for j in submitted for g in j.groups)]
    since = now - hold
    return replace(snap, now=now, nodes=tuple(nodes.values()), running=tuple(running.values()),
                   pending=snap.pending + tuple(submitted), ended=tuple(e for e in ended if e.ended_at > since),
                   arrivals=tuple(a for a in recent if a.at > since))


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

