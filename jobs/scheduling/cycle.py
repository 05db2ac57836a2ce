"""One scheduling cycle: snapshot in, decisions out. Pure, deterministic, no I/O.

Phases:
  1. order     the next pending job by the policy (ordering.py): fifo and sjf sort once, priority-fairshare
               picks among the projects' head jobs by their share as the cycle admits and preempts
  2. quota     guarantee, borrowing, lend limits, running-job caps (quota.py)
  3. place     gang placement, every replica or none, best fit by topology (placement.py)
  4. preempt   when it does not fit: simulated removal and fill-back (preemption.py)
  5. backfill  the first job of a flavor waiting for capacity reserves its earliest start (backfill.py)
  6. explain   reasons, positions and ETA for every job left waiting (explain.py); with Policy.explain=False
               (trace replay) only codes and reasons: positions 0, eta None, short quota reasons
Phases 2-5 run per job in cycle order, on one mutable CycleState; each job's decision is kept in an `Outcome`.
"""

from __future__ import annotations

from .backfill import reserve
from .capacity import CapacityIndex
from .explain import Explainer, WaitEntry
from .feasibility import ideal_index, structural_reason, unavailability
from .model import DEFAULT_POLICY, Admit, Assignment, CycleResult, PendingJob, Policy, Preempt, Reservation, Snapshot
from .ordering import job_order
from .placement import Taken
from .preemption import MAX_SIMULATIONS, find_victims
from .quota import QuotaFailure
from .shapes import JobInfo, describe_shape
from .state import CycleState, RunRec, Tentative


class Outcome:
    """What evaluating one job decided: admitted (with its victims), or a wait entry for phase 6."""

    __slots__ = ("job", "info", "considered", "victims", "admit", "entry")

    def __init__(self, job: PendingJob, info: JobInfo) -> None:
        self.job = job
        self.info = info
        self.considered = False  # reached the quota phase (not blocked by strict ordering)
        self.victims: list[RunRec] = []
        self.admit: Admit | None = None
        self.entry: WaitEntry | None = None


def queue_of(job: PendingJob, policy: Policy) -> str:
    return job.project if policy.blocking_scope == "project" else "*"


def assignments(job: PendingJob, taken: Taken, index) -> tuple[Assignment, ...]:
    ordered = sorted(taken, key=lambda t: (t[0], t[1]))
    return tuple(Assignment(job.groups[gi].role, r, index.nodes[i].name, d) for gi, r, i, d in ordered)


def quota_reason(state: CycleState, job: PendingJob, info: JobInfo, failure: QuotaFailure) -> str:
    quota = state.quota
    p = job.project
    if failure.kind == "max_running":
        return f"project {p} is at its limit of {quota.max_running.get(p)} running jobs"
    f = failure.flavor
    key = (p, f)
    g = quota.guar.get(key, 0)
    b = quota.blimit.get(key, 0)
    used = quota.used[key]
    need = info.demand[f]
    if job.preemptible:
        head = (f"preemptible jobs run only on idle capacity and count as borrowing: project {p} borrows "
                f"{quota.borrowed(p, f)} {f}")
    else:
        head = f"project {p} is using {used}/{g} guaranteed {f}"
    if failure.kind == "no_quota":
        return f"project {p} has no quota for {f} (needs {need})"
    if failure.kind == "borrowing_off":
        return f"{head} and borrowing is off; this job needs {need}"
    if failure.kind == "borrow_limit":
        return f"{head} and borrowing is at its limit of {b}; this job needs {need}"
    idle = int(quota.idle_supply(p, f))
    return (f"{head}; this job needs {need} and cohort {quota.cohort_of(p)} has only {idle} {f} idle to lend "
            f"(borrow limit {b})")


def short_quota_reason(failure: QuotaFailure) -> str:
    """The reason of a quota wait when the policy does not explain waits (Policy.explain=False)."""
    if failure.kind == "max_running":
        return "project is at its limit of running jobs"
    return f"quota: {failure.kind} {failure.flavor}"


def preempt_reason(state: CycleState, job: PendingJob, info: JobInfo, victim: RunRec) -> str:
    if victim.project == job.project:
        return f"preempted for higher-priority job {job.id} ({job.priority} > {victim.priority}) in its project"
    flavors = ", ".join(f for f in info.flavors if f in victim.demand)
    if victim.preemptible:
        return f"preemptible job preempted for job {job.id} of project {job.project} ({flavors})"
    return (f"preempted to give project {job.project} back its guaranteed {flavors} (project {victim.project} "
            f"was borrowing)")


class Cycle:
    def __init__(self, snapshot: Snapshot, policy: Policy, use_cache: bool = True) -> None:
        self.policy = policy
        self.state = CycleState(snapshot, policy)
        self.state.use_cache = use_cache
        self.order = job_order(snapshot.pending, policy, self.state.quota, snapshot.projects)  # phase 1
        self.outcomes: list[Outcome] = []
        self.structural: dict[tuple, tuple[str, str] | None] = {}
        self.ideal: CapacityIndex | None = None  # the inventory back in service, built when a job needs it

    def run(self) -> None:
        for job, info in self.order:
            out = self.evaluate(job, info)
            self.outcomes.append(out)
            if out.victims:
                self.order.changed({victim.project for victim in out.victims})

    # -- phases 2 to 5, per job -------------------------------------------------------------------------------

    def evaluate(self, job: PendingJob, info: JobInfo) -> Outcome:
        state, policy = self.state, self.policy
        out = Outcome(job, info)
        strict = policy.blocking == "strict"
        queue = queue_of(job, policy)
        if strict and queue in state.blocked:
            blocker = state.blocked[queue]
            order = {"fifo": "FIFO", "sjf": "shortest-job-first"}.get(policy.ordering, "priority")
            out.entry = WaitEntry(job, info, "blocked", f"behind job {blocker} in strict {order} order",
                                  blocker=blocker)
            return out
        out.considered = True
        structural = self.structural_check(job, info)
        if structural is not None:
            # Never blocks a queue: it could not run even on an empty cluster, at least until nodes come back.
            out.entry = WaitEntry(job, info, *structural)
            return out
        failure = state.quota.check(job.project, info.demand, job.preemptible)  # phase 2
        constrained = state.constrained(job.max_runtime, info)
        tentative = None
        if failure is None:
            tentative = self.try_place(job, info, constrained)  # phase 3
        if tentative is None and policy.preemption and not job.preemptible:
            victims = self.try_preempt(job, info, failure is not None, constrained)  # phase 4
            if victims is not None:
                tentative = state.place_tentative(job, info)
                assert tentative is not None  # find_victims checked it fits on this very state
                out.victims = victims
                state.forget_failures()  # capacity grew: earlier failures may fit now
        if tentative is not None:
            self.admit(out, tentative)
            return out
        if failure is not None:
            code = "max_running" if failure.kind == "max_running" else "quota"
            reason = quota_reason(state, job, info, failure) if policy.explain else short_quota_reason(failure)
            out.entry = WaitEntry(job, info, code, reason, quota_kind=failure.kind, quota_flavor=failure.flavor)
        else:
            out.entry = WaitEntry(job, info, "place", constrained=constrained)
            if (policy.blocking == "backfill" and not job.preemptible
                    and not any(f in state.head_flavors for f in info.flavors)):
                # The head of these flavors: the first job in cycle order that waits for their capacity.
                state.head_flavors.update(info.flavors)
                out.entry.hold = reserve(state, job, info)  # phase 5
        if strict:
            state.blocked[queue] = job.id
        return out

    def structural_check(self, job: PendingJob, info: JobInfo) -> tuple[str, str] | None:
        """(code, reason) when the job cannot fit the inventory even with every node empty: "unschedulable" when
        it never can, "unavailable" when only nodes out of service (cordoned, not ready, a disabled cluster) or
        devices foreign pods hold keep it out. None when it could fit."""
        key = info.shape_key[:4] if info.shape_key is not None else (
            tuple((g.flavor, g.devices, g.replicas) for g in job.groups), job.topology)
        if key not in self.structural:
            self.structural[key] = self._structural(job, info)
        return self.structural[key]

    def _structural(self, job: PendingJob, info: JobInfo) -> tuple[str, str] | None:
        now = structural_reason(self.state.index, job, info)
        if now is None:
            return None
        if self.ideal is None:
            self.ideal = ideal_index(self.state.snapshot.nodes)
        ever = structural_reason(self.ideal, job, info)
        if ever is not None:
            return "unschedulable", f"can never run here: {ever}"
        why = unavailability(self.state.snapshot.nodes, info.flavors)
        return "unavailable", f"{why}: {now.replace(' even when empty', ' now')}"

    def try_place(self, job: PendingJob, info: JobInfo, constrained: bool) -> Tentative | None:
        state = self.state
        key = info.shape_key
        # Exact for identical replicas: free capacity only shrinks between preemptions (which clear it).
        if (key is not None and state.use_cache
                and ((key, False) in state.neg_place or (constrained and (key, True) in state.neg_place))):
            return None
        tentative = state.place_tentative(job, info)
        if tentative is None and key is not None:
            state.neg_place[(key, constrained)] = True
        return tentative

    def try_preempt(self, job: PendingJob, info: JobInfo, quota_failed: bool, constrained: bool):
        state = self.state
        if state.simulations >= MAX_SIMULATIONS:
            return None  # this cycle's budget of simulated removals is spent
        if not any(f in state.running_flavors for f in info.flavors):
            return None  # nothing was running on these flavors
        key = None
        if info.shape_key is not None and state.use_cache:
            # Exact dominance: if preemption could not make room for (priority, replicas, devices), it cannot
            # for a job of the same project that asks for more of the same, with no higher priority (fewer
            # candidates), until victims are committed (which clears this).
            within = state.quota.within_guarantee(job.project, info.demand)
            flavor, devices, replicas, topology, avoid = info.shape_key
            key = (job.project, quota_failed, within, constrained, flavor, topology, avoid)
            for priority, r, d in state.neg_preempt.get(key, ()):
                if job.priority <= priority and replicas >= r and devices >= d:
                    return None
        victims = find_victims(state, job, info, quota_failed)
        if victims is None and key is not None:
            state.neg_preempt.setdefault(key, []).append((job.priority, info.replicas, info.groups[0][1].devices))
        return victims

    def admit(self, out: Outcome, tentative: Tentative) -> None:
        state, job, info = self.state, out.job, out.info
        borrowed = state.quota.change(job.project, info.demand, job.preemptible, 1)
        end = state.now + job.max_runtime if job.max_runtime is not None else None
        usage = [(i, d) for _, _, i, d in tentative.taken]
        state.new_runs.append(RunRec(job.id, job.project, job.priority, state.now, end, state.now, job.preemptible,
                                     usage, dict(info.demand), False))
        out.admit = Admit(job.id, assignments(job, tentative.taken, state.index),
                          borrowed if state.quota.enabled else 0)

    # -- phase 6 and the result -------------------------------------------------------------------------------

    def result(self) -> CycleResult:
        state = self.state
        entries = [o.entry for o in self.outcomes if o.entry is not None]
        if self.policy.explain:
            waits = Explainer(state).explain(entries)
        else:
            waits = Explainer(state, etas=False).brief(entries)
        return self.assemble(waits)

    def assemble(self, waits) -> CycleResult:
        state = self.state
        admits = []
        preempts = []
        considered = 0
        for out in self.outcomes:
            considered += out.considered
            for victim in out.victims:
                preempts.append(Preempt(victim.id, out.job.id, preempt_reason(state, out.job, out.info, victim)))
            if out.admit is not None:
                admits.append(out.admit)
        reservations = tuple(
            Reservation(h.job_id, h.start, assignments(self._job(h.job_id), h.taken, state.index))
            for h in state.hold_list
        )
        stats = {
            "pending": len(self.outcomes),
            "considered": considered,
            "admitted": len(admits),
            "preempted": len(preempts),
            "waiting": len(waits),
            "reservations": len(reservations),
        }
        return CycleResult(tuple(admits), tuple(preempts), tuple(waits), stats, reservations)

    def _job(self, job_id: int) -> PendingJob:
        return next(o.job for o in self.outcomes if o.job.id == job_id)


def run_cycle(snapshot: Snapshot, policy: Policy = DEFAULT_POLICY) -> CycleResult:
    """Decide which pending jobs start where, which running jobs to preempt for them, and why the rest wait."""
    cycle = Cycle(snapshot, policy)
    cycle.run()
    return cycle.result()


__all__ = ["Cycle", "Outcome", "run_cycle", "describe_shape"]
