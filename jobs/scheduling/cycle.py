"""One scheduling cycle: snapshot in, decisions out. Pure, deterministic, no I/O.

Phases:
  1. order     the next pending job by the policy (ordering.py): fifo and sjf sort once, priority-fairshare
               picks among the projects' head jobs by their share as the cycle admits and preempts
  2. quota     a spent hard budget (only preemptible jobs of its project admitted), then guarantee, borrowing,
               lend limits, running-job caps (quota.py)
  3. place     gang placement, every replica or none, best fit by topology (placement.py)
  4. preempt   when it does not fit: simulated removal and fill-back (preemption.py)
  5. backfill  the first job of a flavor waiting for capacity reserves its earliest start, the first job of a
               project its own quota keeps out reserves that quota (backfill.py)
  6. explain   reasons and positions for every job left waiting (explain.py); with Policy.explain=False
               only codes and short reasons, positions 0, and no wait at all for the jobs behind a blocked
               strict queue (they are not evaluated: see Cycle.run); with Policy.waits=False (trace replay,
               forecasts) no wait at all. Estimated starts: forecast.py
Phases 2-5 run per job in cycle order, on one mutable CycleState; each job's decision is kept in an `Outcome`.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import replace

from mypy_extensions import mypyc_attr

from .backfill import drains_instead, held_demand, hold_quota, quota_start, reserve
from .capacity import CapacityIndex
from .elastic import arriving_rates, grow, split_running
from .explain import Explainer, WaitEntry, fmt_duration
from .fast.memo import DominanceMemo
from .fast.preemption import nothing_to_take, quota_bound_fails, shortcut_search
from .feasibility import ideal_index, structural_reason, surely_fits, unavailability
from .lending import expiry
from .model import (
    DEFAULT_POLICY,
    PHASES,
    Admit,
    Assignment,
    CycleResult,
    Grow,
    PendingJob,
    Policy,
    Preempt,
    Reservation,
    Shrink,
    Snapshot,
    Wait,
)
from .ordering import job_order
from .placement import Taken
from .pools import lend
from .preemption import MAX_SIMULATIONS, find_victims, plain_search, reclaims
from .quota import COHORT_KINDS, QuotaFailure
from .shapes import JobInfo, describe_shape
from .state import CycleState, QuotaHold, RunningUsage, RunRec, Tentative
from .unsearched import Unsearched, unsearched_reason


class Outcome:
    """What evaluating one job decided: admitted (with its victims), or waiting (`wait`: what phase 6 explains,
    explain.WaitEntry)."""

    __slots__ = ("job", "info", "code", "reason", "quota_kind", "quota_flavor", "constrained", "considered",
                 "victims", "admit", "grace_end", "deferred", "retry_on", "released")

    def __init__(self, job: PendingJob, info: JobInfo) -> None:
        self.job = job
        self.info = info
        self.code = ""  # not waiting (yet)
        self.reason = self.quota_kind = self.quota_flavor = ""
        self.constrained = False  # it waits where backfill holds limit it
        self.considered = False  # reached the quota phase (not blocked by strict ordering)
        self.victims: Sequence[RunRec] = ()  # shared empty tuples until set: most jobs have none
        self.admit: Admit | None = None
        # Preempting other projects' jobs would make room, but its reclaim grace ends only then (the victims it
        # would take, kept running): see Cycle.decide.
        self.grace_end: float | None = None
        self.deferred: Sequence[RunRec] = ()
        # Left waiting on what a commit may give back: ("flavor", f) or ("project", p) (Cycle.committed), or on
        # another project starting to borrow ("borrowers", f: Cycle.borrowing_grew); () when nothing in this cycle
        # can end its wait (strict blocking, never fits, a spent budget), or on the heads whose quota holds keep it
        # out giving them up ("hold", head id: Cycle.released_holds).
        self.retry_on: tuple[tuple[str, str], ...] = ()
        # It gave up the reservation and quota hold it made earlier in the cycle (admitted, or no longer kept out by
        # what its own project's running jobs ending cures): the jobs they kept out are evaluated again (settle).
        self.released = False

    def wait(self, code: str, reason: str = "", quota_kind: str = "", quota_flavor: str = "",
             constrained: bool = False) -> None:
        self.code = code
        self.reason = reason
        self.quota_kind = quota_kind
        self.quota_flavor = quota_flavor
        self.constrained = constrained


# Quota failures of its project's own limits, which its project's running jobs ending cure: a head reserves its
# start ("no_quota" never can; what its organization can lend is not reserved, see backfill). A head waiting for a
# running-job slot reserves it too: else a later job of its project that ends in time takes the slot, the head
# then reserves nothing, and a job behind it would preempt that one for the slot in the next cycle.
RESERVABLE = ("borrow_limit", "borrowing_off", "max_running")


UNKNOWN = object()  # a cache's answer not known yet (None is an answer)

# Jobs evaluated again after commits, per cycle (Cycle.committed): a cycle that reaches it leaves the rest for the
# next cycle, as MAX_SIMULATIONS does with preemption. Those evaluated again because another project borrows more
# (Cycle.borrowing_grew) have a budget of their own: many waiting jobs that can take back their guarantee and many
# borrowers admitted after them would otherwise spend the commits' budget.
MAX_RETRIES = 500


def queue_of(job: PendingJob, policy: Policy) -> str:
    return job.project if policy.blocking_scope == "project" else "*"


def assignments(job: PendingJob, taken: Taken, index: CapacityIndex) -> tuple[Assignment, ...]:
    ordered = sorted(taken)  # by (group, replica): no two entries share both
    return tuple(Assignment(job.groups[gi].role, r, index.nodes[i].name, d, c, m) for gi, r, i, d, c, m in ordered)


def held_reason(state: CycleState, job: PendingJob, hold: QuotaHold) -> str:
    when = "when jobs without a max runtime end" if hold.start is None else f"in {fmt_duration(hold.start - state.now)}"
    return (f"project {job.project}'s quota is held for its job {hold.job_id}, which can start {when}; this job "
            f"would still run then and the quota has no room for both")


def grace_reason(state: CycleState, job: PendingJob, victims: Sequence[RunRec], end: float) -> str:
    others = [v for v in victims if v.project != job.project]
    names = sorted({v.project for v in others})
    projects = f"project{'s' if len(names) > 1 else ''} {', '.join(names)}"
    # Another project's job that is not preemptible is a victim only of a reclaim (preemption.py, rule (a)).
    what = "preempt preemptible jobs of" if all(v.preemptible for v in others) else \
        "take back its guaranteed capacity from"
    return (f"will {what} {projects} in {fmt_duration(end - state.now)} unless capacity frees first "
            f"(a preemption waits {fmt_duration(state.policy.reclaim_grace)} after the job is queued)")


def shrink_reason(job: PendingJob | None, replicas: int, pool: str, moved: str = "") -> str:
    """Why an elastic job shrank: for a job (None: its pool took its capacity back, `moved`: why off a node)."""
    given = f"gave back {replicas} grown replica{'s' if replicas > 1 else ''}"
    if job is None:
        return f"{given} to pool {pool}, which took back the capacity it lent" + (f" ({moved})" if moved else "")
    return f"{given} to job {job.id} of project {job.project} (an elastic job's replicas above its minimum go first)"


def preempt_reason(state: CycleState, job: PendingJob, info: JobInfo, victim: RunRec) -> str:
    if victim.project == job.project:
        # A victim's priority is a float (a grown replica ranks half below its job): 500, not 500.0, when whole.
        return f"preempted for higher-priority job {job.id} ({job.priority} > {victim.priority:g}) in its project"
    # A job that took the place of one that preempted for its own flavors may ask none of them.
    flavors = ", ".join([f for f in info.flavors if f in victim.demand] or list(victim.demand))
    if victim.preemptible:
        return f"preemptible job preempted for job {job.id} of project {job.project} ({flavors})"
    return (f"preempted to give project {job.project} back its guaranteed {flavors} (project {victim.project} "
            f"was borrowing)")


# Compiled (compiled.py), a class is closed to subclasses written in Python unless it says so: the property tests
# subclass the cycle to record each admission as it is decided.
@mypyc_attr(allow_interpreted_subclasses=True)
class Cycle:
    def __init__(self, snapshot: Snapshot, policy: Policy, accelerate: bool = True,
                 usage: RunningUsage | None = None) -> None:
        """`accelerate=False`: the plain mode, every remembered answer, bound and counting shortcut off (see
        docs/scheduling-invariants.md): the same decisions, reasons and positions, found the long way."""
        # Elastic jobs (elastic.py): running ones split into base and grown replicas (pending ones are already the
        # gang of their minimum).
        self.elastic = tuple(job for job in snapshot.running if job.elastic)
        self.grown: dict[int, tuple[int, Assignment]] = {}  # grown replica's id -> (its job's id, its assignment)
        if self.elastic:
            running, self.grown = split_running(snapshot.running)
            snapshot = replace(snapshot, running=running)
        # Pools (pools.py): what training holds beyond what they lend goes back first; the rest see what is left.
        snapshot, self.given_back, fence = lend(snapshot)
        self.short: set[str] = set()  # flavors a job that passed its quota waited for (no growth into them)
        self.unsearched = Unsearched()  # jobs this cycle's budgets left unsearched (unsearched.py)
        self.grows: list[Grow] = []
        self.arrival_rates = snapshot.arrival_rates  # growth leaves room for what they bring (elastic.arriving_rates)
        self.policy = policy
        self.state = CycleState(snapshot, policy, usage, accelerate)
        self.order = job_order(snapshot.pending, policy, self.state.quota, snapshot.projects, fence)  # phase 1
        self.outcomes: list[Outcome] = []
        self.admitted_at: dict[int, int] = {}  # job id -> its position in `outcomes`, while it stays admitted
        self.blocked_at: dict[str, int] = {}  # strict blocking: queue -> the position of the job blocking it
        # ("flavor", f), ("project", p), ... -> positions in `outcomes` of jobs waiting on it (Outcome.retry_on)
        self.waiting: dict[tuple[str, str], dict[int, None]] = {}  # (a set in insertion order: O(1) removal)
        self.retries = {"commit": 0, "borrowers": 0}  # jobs evaluated again this cycle, per cause (MAX_RETRIES)
        self.structural: dict[tuple, tuple[str, str] | None] = {}  # see structural_check
        # (flavor, devices, topology) -> sizes known to fit the inventory: follows no event (the inventory does not
        # change within a cycle)
        self.fits_inventory = DominanceMemo(accelerate)
        self.ideal: CapacityIndex | None = None  # the inventory back in service, built when a job needs it
        self.budget_stops = {p.name: p.budget_stop for p in snapshot.projects if p.budget_stop}
        self.waits = policy.waits  # a waiting job's outcome records why (`wait`) only when Waits are returned
        self.strict = policy.blocking == "strict"
        # Strict blocking without explanations (trace replay, forecasts): a job behind its queue's blocked head
        # could only get a "blocked" wait nobody reads, so the order stops yielding that queue's jobs once its head
        # blocks it (settle), also when a job evaluated again becomes that head; once every queue is blocked the
        # cycle is over. Its cost then depends on the jobs up to the heads, not on how many wait behind them. With
        # explanations on, they are evaluated and explained as before.
        self.close_blocked = self.strict and not policy.explain
        self.backfill = policy.blocking == "backfill"
        self.preempting = policy.preemption
        self.borrower_waits = False  # a job waits for its organization's lenders (what a lend hold may keep back)
        self.seconds = dict.fromkeys(PHASES, 0.0)  # CycleResult.seconds

    def run(self) -> None:
        clock, seconds = time.perf_counter, self.seconds
        evaluating = 0.0
        last = clock()
        for job, info in self.order:
            yielded = clock()
            seconds["order"] += yielded - last
            out = self.evaluate(job, info, len(self.outcomes))
            self.outcomes.append(out)
            self.settle(len(self.outcomes) - 1)
            last = clock()
            evaluating += last - yielded
        seconds["order"] += clock() - last
        seconds["other"] = evaluating - sum(seconds[p] for p in ("quota", "place", "preempt", "backfill"))
        if self.elastic:
            started = clock()
            arriving = arriving_rates(self.arrival_rates, self.state.quota.cohort)
            self.grows = grow(self.state, self.elastic, self.resized(), self.short, arriving)
            seconds["grow"] = clock() - started

    def resized(self) -> set[int]:
        """Elastic jobs shrunk or preempted in this cycle."""
        found = {job.grown_of or job.id for _, job, _ in self.given_back}
        for out in self.outcomes:
            for victim in out.victims:
                if victim.at_start:
                    found.add(self.grown[victim.id][0] if victim.grown else victim.id)
        return found

    def settle(self, position: int) -> None:
        """Keep what an evaluation at this position of the cycle decided: an admitted job and what its victims
        gave back, or a waiting job under what could end its wait (Outcome.retry_on)."""
        out = self.outcomes[position]
        # Tested through a local: a test of `out.admit` itself would let the type checker, and so the compiled code,
        # take it for admitted below too, after committing its victims, which may give this very job back.
        admit = out.admit
        if admit is None:
            for key in out.retry_on:
                self.waiting.setdefault(key, {})[position] = None
            if self.close_blocked:
                queue = queue_of(out.job, self.policy)
                if self.state.blocked.get(queue) == out.job.id:  # it now blocks its queue (evaluated again too)
                    self.order.close(out.job.project if queue != "*" else None)
            if out.released:
                self.released_holds(out.job)
            return
        self.admitted_at[out.job.id] = position
        if out.victims:
            self.committed(out.victims)
        if out.admit is not None and out.admit.borrowed > 0 and not out.job.preemptible:  # (not given back since)
            self.borrowing_grew(out)
        if out.released:
            self.released_holds(out.job)

    def released_holds(self, head: PendingJob) -> None:
        """A head gave up its quota hold: the jobs evaluated since that it kept out are evaluated again, before any
        later job, as a fresh cycle would evaluate them without it (otherwise the next cycle admits them, preempting
        what this one admitted meanwhile: a quiet cluster would churn)."""
        for position in sorted(self.waiting.get(("hold", str(head.id)), ())):
            self.try_again(position)

    def borrowing_grew(self, out: Outcome) -> None:
        """An admitted job raised its project's borrowing: the project's running jobs are reclaim victims while it
        borrows (preemption.py, rule (a)), so the jobs of other projects evaluated earlier that would take back
        their guarantee on its flavors are evaluated again, before any later job: otherwise they would take one
        of its jobs in the next cycle, with nothing else changed."""
        if self.retries["borrowers"] >= MAX_RETRIES:
            return
        project = out.job.project
        again = {p for f in out.info.demand for p in self.waiting.get(("borrowers", f), ())
                 if self.outcomes[p].job.project != project}
        for position in sorted(again):
            self.try_again(position, "borrowers")

    def committed(self, victims: Sequence[RunRec]) -> None:
        """Victims were committed: capacity and quota came back on their flavors. The jobs among them admitted
        earlier in this cycle (given back) and the jobs evaluated earlier that wait on those flavors are evaluated
        again, in cycle order, before any later job: otherwise a later job of lower order would take what they now
        fit in, and they would preempt it in the next cycle. (Under strict blocking, the jobs a head admitted so
        held back wait for the next cycle: without explanations the order never yields them, and the cycle decides
        the same with explanations or without.)"""
        self.order.changed({victim.project for victim in victims})
        again = {self.admitted_at.pop(rec.id) for rec in victims if not rec.at_start}
        again.update(p for key in self.freed_keys(victims) for p in self.waiting.get(key, ()))
        for position in sorted(again):
            self.try_again(position)

    def freed_keys(self, victims: Sequence[RunRec]) -> set[tuple[str, str]]:
        """What committed victims gave back (see retry_keys): capacity of their flavors, their projects' devices
        and slots, what their organizations can lend, and the unowned capacity where their organization claimed
        some."""
        quota = self.state.quota
        keys: set[tuple[str, str]] = set()
        for rec in victims:
            cohort = quota.cohort_of(rec.project)
            keys.add(("project", rec.project))
            for f in rec.demand:
                keys.add(("flavor", f))
                keys.add(("cohort", f"{cohort}/{f}"))
                if quota.beyond_lenders(cohort, f) + rec.demand[f] > 0:  # it claimed unowned capacity before
                    keys.add(("excess", f))
        return keys

    def try_again(self, position: int, cause: str = "commit") -> None:
        """Evaluate the job at this position again (MAX_RETRIES per cycle and cause)."""
        before = self.outcomes[position]
        if before.admit is not None:
            return  # admitted by an earlier try again
        if self.retries[cause] >= MAX_RETRIES:
            job = before.job
            if self.preempting and not job.preemptible and not any(k[0] == "hold" for k in before.retry_on):
                capacity = all(k[0] == "flavor" for k in before.retry_on)
                self.unsearched.add(position, job, before.info, capacity)
            return
        self.retries[cause] += 1
        for key in before.retry_on:
            del self.waiting[key][position]
        self.outcomes[position] = self.evaluate(before.job, before.info, position)
        self.settle(position)

    # -- phases 2 to 5, per job -------------------------------------------------------------------------------

    def evaluate(self, job: PendingJob, info: JobInfo, position: int) -> Outcome:
        """Phases 2 to 5 for the job at this position of the cycle order (an earlier one when it is evaluated
        again: a job blocks only those after it)."""
        state, policy, waits = self.state, self.policy, self.waits
        state.at = position
        out = Outcome(job, info)
        strict = self.strict
        queue = queue_of(job, policy) if strict else ""
        if strict and queue in state.blocked and self.blocked_at[queue] < position:
            # Without explanations a job behind its queue's head gets no Wait, as the jobs the closed queue no
            # longer yields (settle): this one was evaluated before the head blocked it, and again after.
            if waits and not self.close_blocked:
                blocker = state.blocked[queue]
                order = {"fifo": "FIFO", "sjf": "shortest-job-first"}.get(policy.ordering, "priority")
                out.wait("blocked", f"behind job {blocker} in strict {order} order")
            return out
        out.considered = True
        structural = self.structural_check(job, info)
        if structural is not None:
            # Never blocks a queue: it could not run even on an empty cluster, at least until nodes come back.
            if waits:
                out.wait(*structural)
            return out
        if not job.preemptible and job.project in self.budget_stops:
            # Never blocks a queue either: its project's preemptible jobs behind it are still admitted.
            if waits:
                out.wait("budget", self.budget_stops[job.project])
            return out
        started = time.perf_counter()
        failure = state.quota.check_demand(job.project, info.demand_key, info.demand)  # phase 2
        self.seconds["quota"] += time.perf_counter() - started
        # Whether backfill holds limit where it may go (a job its quota keeps out is asked only if it may preempt).
        constrained = failure is None and state.constrained(job.max_runtime, info)
        # Its project's reserved heads whose start it would still run at are counted in for every quota check
        # up to the decision (preemption's included).
        held = beside = None
        holds: list[QuotaHold] = []
        if failure is None and state.quota_holds:
            holds = state.quota_holds_against(job, info)
            beside = state.failure_beside(job, info, holds) if holds else None
            if beside is not None:
                # Named in its reason: the head holding its flavors, else the first (which holds a running-job slot).
                held = next((h for h in holds if any(f in h.need for f in info.demand)), holds[0])
        tentative = None
        search_spent = self.preempting and not job.preemptible and state.simulations >= MAX_SIMULATIONS
        if held is None and (failure is None or self.may_preempt(job)):
            tentative = self.decide(out, constrained, failure)
        elif held is not None and self.may_preempt(job):
            # Kept out only with the heads counted in, it may preempt as a job its quota keeps out does (the heads
            # counted in): its project's jobs of lower priority make room for it and the heads alike.
            tentative = self.decide(out, constrained, beside)
        if tentative is not None:
            head = self.unsearched.head_over(job, info, position, self.admitted_at_position)
            if head is None:
                self.admit(out, tentative)
                return out
            # Admitted now, it would be preempted in the next cycle by the search this cycle could not afford.
            out.retry_on = (("hold", str(head.id)),)
            self.short.update(info.flavors)
            if waits:
                out.wait("held", unsearched_reason(head))
            if strict:
                self.blocks(queue, job, position)
            return out
        if position < len(self.outcomes) and self.outgrew_reservation(job, failure, held):  # evaluated again
            state.release(job)
            out.released = True
        if search_spent and held is None and out.grace_end is None and (failure is None or failure.kind != "no_quota"):
            self.unsearched.add(position, job, info, failure is None or failure.kind == "lent")
        if held is None:  # in its grace too: a commit may free what it fits in without preempting another project
            out.retry_on = self.retry_keys(job, info, failure)
            if self.may_preempt(job) and reclaims(state, job, info, failure):
                # Another project that starts borrowing its flavors later in the cycle makes its running jobs
                # victims of this one (settle).
                out.retry_on += tuple(("borrowers", f) for f in info.flavors)
        if held is not None:
            out.retry_on = tuple(("hold", str(h.job_id)) for h in holds)
            if waits:
                reason = held_reason(state, job, held) if policy.explain else f"quota: held for job {held.job_id}"
                out.wait("quota", reason, quota_kind="held")
        elif failure is not None:
            # Phase 6 writes its reason from the state the cycle ends in (what the quota API will show).
            code = "max_running" if failure.kind == "max_running" else "quota"
            if waits:
                out.wait(code, quota_kind=failure.kind, quota_flavor=failure.flavor)
            if failure.kind == "cohort":
                self.borrower_waits = True
            elif self.reserves_quota(job, failure):
                started = time.perf_counter()
                self.reserve_for_quota(out)  # phase 5
                self.seconds["backfill"] += time.perf_counter() - started
        else:
            if waits:
                out.wait("place", constrained=constrained)
            if self.backfill and not job.preemptible and not any(f in state.head_flavors for f in info.flavors):
                started = time.perf_counter()
                self.reserve_for_capacity(out)  # phase 5
                self.seconds["backfill"] += time.perf_counter() - started
        if (failure is None or failure.kind == "lent" or out.grace_end is not None
                or (failure.kind == "cohort" and not job.preemptible)):
            # It waits for capacity of its flavors: no elastic job grows into them. A borrower its organization
            # has nothing to lend to now would take a grown replica back as soon as what keeps it out lapses (a
            # lend hold: seconds), well within the grown job's cooldown.
            self.short.update(info.flavors)
        if waits and out.grace_end is not None:  # the reservation above stands; what it waits for is its grace
            out.wait("reclaim", grace_reason(state, job, out.deferred, out.grace_end))
        if strict:
            self.blocks(queue, job, position)
        return out

    def blocks(self, queue: str, job: PendingJob, position: int) -> None:
        """Strict blocking: the job waits, so its queue is blocked from its position on."""
        if position < self.blocked_at.get(queue, position + 1):
            self.state.blocked[queue] = job.id
            self.blocked_at[queue] = position

    def admitted_at_position(self, position: int) -> bool:
        return self.outcomes[position].admit is not None

    def outgrew_reservation(self, job: PendingJob, failure: QuotaFailure | None, held: QuotaHold | None) -> bool:
        """Does a job evaluated again hold a reservation or quota hold from an earlier evaluation of this cycle that
        a fresh cycle would not make: it now waits for its organization or for another head's hold, not for its own
        project's limits? (One waiting for capacity keeps what it reserved.)"""
        if held is None and (failure is None or self.reserves_quota(job, failure)):
            return False
        return self.state.reserved(job)

    def reserves_quota(self, job: PendingJob, failure: QuotaFailure) -> bool:
        """Does a job its quota keeps out reserve that quota (backfill, phase 5)?"""
        return self.backfill and not job.preemptible and failure.kind in RESERVABLE

    def retry_keys(self, job: PendingJob, info: JobInfo, failure: QuotaFailure | None) -> tuple[tuple[str, str], ...]:
        """What a commit must give back for a job left waiting to fit now (Outcome.retry_on): capacity of its
        flavors, and its own project's devices or slots when its project's own limits keep it out. A job its own
        limits keep out needs capacity too when it may preempt its project's jobs (otherwise their ending is what
        it waits for)."""
        flavors = tuple(("flavor", f) for f in info.flavors)
        if failure is None:
            return flavors
        if failure.kind in COHORT_KINDS:  # what its organization can lend, or the unowned capacity others hold
            return (("cohort", f"{self.state.quota.cohort_of(job.project)}/{failure.flavor}"),
                    ("excess", failure.flavor))
        if failure.kind == "no_quota":
            return ()
        own = (("project", job.project),)
        return own + flavors if self.preempting and not job.preemptible else own

    def decide(self, out: Outcome, constrained: bool, failure: QuotaFailure | None) -> Tentative | None:
        """Phases 3 and 4: a placement, after preempting if it must (victims kept in `out`), or None. `failure`:
        why the job fails its quota now (None: it passes)."""
        state, job, info = self.state, out.job, out.info
        tentative = None
        clock, seconds = time.perf_counter, self.seconds
        if failure is None:
            started = clock()
            tentative = self.try_place(job, info, constrained)  # phase 3
            seconds["place"] += clock() - started
        if tentative is None and self.may_preempt(job):
            started = clock()
            victims = self.try_preempt(job, info, failure, constrained)  # phase 4
            seconds["preempt"] += clock() - started
            if (victims is not None and self.backfill and not any(f in state.head_flavors for f in info.flavors)
                    and drains_instead(state, job, info, victims)):
                self.reserve_for_capacity(out, at_once=True)  # what it is owed: no promise to wait for
                victims = None
            if victims is not None and self.in_grace(job, victims):
                for rec in reversed(victims):  # they keep running until the grace ends, for this job
                    state.add_run(rec)
                    state.spared.setdefault(rec.id, state.at)
                state.in_grace.setdefault(job.project, state.at)
                out.grace_end, out.deferred = job.queued_since + self.policy.reclaim_grace, victims
                victims = None
            if victims is not None:
                tentative = state.place_tentative(job, info)
                assert tentative is not None  # find_victims checked it fits on this very state
                out.victims = victims
                state.capacity_grew()  # earlier failures may fit now
                state.usage_fell(victims)
                for rec in victims:
                    if not rec.at_start:
                        self.give_back(rec, out)
        return tentative

    def give_back(self, rec: RunRec, taker: Outcome) -> None:
        """A job admitted earlier in this cycle, taken back (preemption.plain_candidates): it waits again
        (`committed` then evaluates it again). What it preempted to get in stays preempted, for the job that took
        its place (only a job of its project of higher priority takes such a job back). What it took back of this
        cycle's admissions was given back already, when it was admitted (`committed`), and may have been admitted
        again since: not the taker's."""
        out = self.outcomes[self.admitted_at[rec.id]]
        out.admit = None
        if out.victims:
            taker.victims = [*taker.victims, *(victim for victim in out.victims if victim.at_start)]
            out.victims = ()
        if self.waits:
            failure = self.state.quota.check(out.job.project, out.info.demand, out.job.preemptible)
            if failure is None:
                out.wait("place")
            else:
                out.wait("max_running" if failure.kind == "max_running" else "quota", quota_kind=failure.kind,
                         quota_flavor=failure.flavor)

    def may_preempt(self, job: PendingJob) -> bool:
        """Could phase 4 run for this job: preemption on, the job not preemptible itself, and this cycle's budget of
        preemptions not spent (preemption.MAX_SIMULATIONS; most waiting jobs of a busy cycle come after)."""
        return self.preempting and not job.preemptible and self.state.simulations < MAX_SIMULATIONS

    def in_grace(self, job: PendingJob, victims: list[RunRec]) -> bool:
        """Preempting another project's job waits until the job has been queued for the reclaim grace: capacity
        that frees meanwhile goes to it without throwing anyone's work away. Its own project's are not spared, nor
        jobs admitted in this cycle (given back before they start, they lose no work)."""
        grace = self.policy.reclaim_grace
        return (grace > 0 and self.state.now < job.queued_since + grace
                and any(rec.project != job.project and rec.at_start for rec in victims))

    def reserve_for_quota(self, out: Outcome) -> None:
        """A job its own project's quota keeps out: the first of its project and flavors reserves that quota from
        when the project's running jobs will have released enough of it, and capacity from then on unless a job
        before it holds capacity of those flavors."""
        state, job, info = self.state, out.job, out.info
        for f in held_demand(info):  # a loop, not any() over a generator: asked for most jobs a quota keeps out
            if (job.project, f) in state.quota_holds:
                return  # a head of its project holds that quota already
        possible, start = quota_start(state, job, info)
        if not possible:
            return  # it cannot get in even once every running job ends: holding quota for it would starve others
        promised = self.promised_start(job)
        if start is not None and promised is not None and promised > start:
            start = promised
        if start is not None and not any(f in state.head_flavors for f in info.flavors):
            state.head_flavors.update(info.flavors)
            hold = reserve(state, job, info, not_before=start)
            if hold is not None:
                start = hold.start
        hold_quota(state, job, info, start)

    def reserve_for_capacity(self, out: Outcome, at_once: bool = False) -> None:
        """The first job in cycle order that waits for capacity of its flavors reserves its earliest start (from
        its promised start on, unless `at_once`), and its project's quota for then."""
        state, job, info = self.state, out.job, out.info
        state.head_flavors.update(info.flavors)
        hold = reserve(state, job, info, not_before=None if at_once else self.promised_start(job))
        if hold is not None:
            hold_quota(state, job, info, hold.start)

    def promised_start(self, job: PendingJob) -> float | None:
        """The earliest start a reservation of this job may have (Policy.reserve_after after it was queued), None
        once that has passed: then its earliest start as capacity and quota allow."""
        at = job.queued_since + self.policy.reserve_after
        return at if at > self.state.now else None

    def structural_check(self, job: PendingJob, info: JobInfo) -> tuple[str, str] | None:
        """(code, reason) when the job cannot fit the inventory even with every node empty: "unschedulable" when
        it never can, "unavailable" when only nodes out of service (cordoned, not ready, a disabled cluster) or
        devices foreign pods hold keep it out. None when it could fit."""
        if not self.state.accelerate:
            return self._structural(job, info)  # the plain mode: asked of every job, nothing remembered
        shape = info.shape
        key: tuple = shape if shape is not None else (
            tuple((g.flavor, g.devices, g.replicas, g.cpu_millis, g.memory_mib) for g in job.groups), job.topology)
        known = self.structural.get(key, UNKNOWN)  # the same shape seen before: most jobs
        if known is not UNKNOWN:
            return known  # type: ignore[return-value]
        # A job of identical replicas that asks for no more replicas, CPU and memory per replica than one that
        # could fit could fit too: a few entries per (flavor, devices, topology) settle most others.
        context = (shape.flavor, shape.devices, shape.topology) if shape is not None else None
        if shape is not None and self.fits_inventory.known(context, shape.size):
            found = None
        else:
            found = None if surely_fits(self.state.index, job) else self._structural(job, info)
            if found is None and shape is not None:
                self.fits_inventory.record(context, shape.size, True)
        self.structural[key] = found
        return found

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
        shape = info.shape
        # Exact for identical replicas: free capacity only shrinks until it grows (an invalidation event), and at
        # least as many replicas, each asking for at least the CPU and memory of a gang that did not fit, do not
        # fit either. Beside reservations (constrained): what did not fit unconstrained, or beside them.
        if shape is not None:
            failed, size = state.failed_placements, shape.size
            context = (shape.flavor, shape.devices, shape.topology, shape.avoid)
            if failed.known_to_fail((context, False), size) or (
                    constrained and failed.known_to_fail((context, True), size)):
                return None
        tentative = state.place_tentative(job, info)
        if tentative is None and shape is not None:
            state.failed_placements.record((context, constrained), size, False)
        return tentative

    def try_preempt(self, job: PendingJob, info: JobInfo, failure: QuotaFailure | None,
                    constrained: bool) -> list[RunRec] | None:
        state = self.state
        holds = state.quota_holds_against(job, info) if state.quota_holds else []
        if state.accelerate and quota_bound_fails(state, job, info, failure, holds):
            return None  # most attempts of the cycle after a busy one, before counting heads in and searching
        if state.accelerate and nothing_to_take(state, job, info, failure):
            return None  # most attempts of an emptier cluster, before any running job's record or pool is built
        if failure is not None:
            constrained = state.constrained(job.max_runtime, info)
        context = None
        # (Not once a job in its grace spared victims: jobs before it may take them, jobs after it may not, and the
        # memo tells neither apart.)
        shape = info.shape
        if shape is not None and state.accelerate and not state.spared:
            # Exact dominance: if preemption could not make room for (priority, replicas, devices, CPU, memory), it
            # cannot for a job of the same project and the same victim rules that asks for more of the same, with
            # no higher priority (fewer candidates), until capacity grows or usage falls.
            context = (job.project, failure is not None, reclaims(state, job, info, failure), constrained,
                       shape.flavor, shape.topology, shape.avoid, tuple(h.job_id for h in holds) if holds else ())
            size = (-job.priority, shape.replicas, shape.devices, shape.cpu, shape.memory)
            if state.failed_preemptions.known_to_fail(context, size):
                return None
        state.count_heads(holds, 1)
        victims = find_victims(state, job, info, failure, shortcut_search if state.accelerate else plain_search)
        state.count_heads(holds, -1)
        if victims is None and context is not None:
            state.failed_preemptions.record(context, size, False)
        return victims

    def admit(self, out: Outcome, tentative: Tentative) -> None:
        state, job, info = self.state, out.job, out.info
        if state.reserved(job):  # a head evaluated again after a commit: what it reserved is not needed now
            state.release(job)
            out.released = True
        borrowed = state.quota.change(job.project, info.demand, job.preemptible, 1)
        if borrowed > 0 and not job.preemptible:
            state.borrowing_grew(job.project)  # its running jobs may be victims now (Cycle.borrowing_grew)
        end = state.now + job.max_runtime if job.max_runtime is not None else None
        usage = [(i, d, c, m) for _, _, i, d, c, m in tentative.taken]
        state.admitted(RunRec(job.id, job.project, job.priority, state.now, end, state.now, job.preemptible,
                              usage, dict(info.demand), False), revocable=not job.preemptible,
                       preempted=bool(out.victims))
        out.admit = Admit(job.id, assignments(job, tentative.taken, state.index),
                          borrowed if state.quota.enabled else 0)

    # -- phase 6 and the result -------------------------------------------------------------------------------

    def result(self) -> CycleResult:
        if not self.policy.waits:
            return self.assemble([])
        started = time.perf_counter()
        state = self.state
        entries: list[WaitEntry] = [o for o in self.outcomes if o.code]
        explainer = Explainer(state)
        waits = explainer.explain(entries) if self.policy.explain else explainer.brief(entries)
        self.seconds["explain"] = time.perf_counter() - started
        return self.assemble(waits)

    def assemble(self, waits: list[Wait]) -> CycleResult:
        state = self.state
        admits = []
        preempts = []
        shrunk: dict[tuple[int, int | None], list[Assignment]] = {}  # (elastic job, for job) -> replicas given back
        pool_of: dict[int, str] = {}  # elastic job -> the pool its replicas went back to
        moved_of: dict[int, str] = {}  # elastic job -> why its replicas were moved off a pool's node
        for pool, job, moved in self.given_back:
            if job.grown_of is None:
                preempts.append(Preempt(job.id, None, f"pool {pool} took back the capacity it lent"
                                        + (f" ({moved})" if moved else "")))
            else:
                shrunk.setdefault((job.grown_of, None), []).append(job.placement[0])
                pool_of[job.grown_of] = pool
                if moved:
                    moved_of[job.grown_of] = moved
        considered = 0
        for out in self.outcomes:
            considered += out.considered
            for victim in out.victims:
                if not victim.at_start:
                    continue  # one admitted this cycle was given back (Cycle.give_back)
                if victim.grown:
                    job_id, replica = self.grown[victim.id]
                    shrunk.setdefault((job_id, out.job.id), []).append(replica)
                else:
                    preempts.append(Preempt(victim.id, out.job.id, preempt_reason(state, out.job, out.info, victim)))
            if out.admit is not None:
                admits.append(out.admit)
        preempted = {p.victim_id for p in preempts}  # an elastic job preempted whole: its grown replicas go too
        shrinks = tuple(Shrink(job_id, tuple(sorted(removed, key=lambda a: (a.role, a.index))), for_id,
                               shrink_reason(None if for_id is None else self._job(for_id), len(removed),
                                             pool_of.get(job_id, ""), moved_of.get(job_id, "")))
                        for (job_id, for_id), removed in shrunk.items() if job_id not in preempted)
        reservations = tuple(
            Reservation(h.job_id, h.start, assignments(self._job(h.job_id), h.taken, state.index))
            for h in state.hold_list
        )
        pending = len(state.snapshot.pending)
        stats = {
            "pending": pending,
            "considered": considered,
            "admitted": len(admits),
            "preempted": len(preempts),
            # Jobs left waiting; with Policy.explain=False, `waits` leaves out those behind a blocked strict head.
            "waiting": pending - len(admits),
            "reservations": len(reservations),
        }
        wakes: list[float | None] = [o.grace_end for o in self.outcomes if o.grace_end is not None]
        if state.quota.held and self.borrower_waits:
            # A borrower waits, maybe on what the lend hold keeps back: run again when that falls.
            wakes.append(expiry(state.snapshot, self.policy.lend_hold, state.quota.binding_holds(), state.quota.guar))
        wake_at = min((w for w in wakes if w is not None), default=None)
        return CycleResult(tuple(admits), tuple(preempts), tuple(waits), stats, reservations, wake_at,
                           tuple(self.grows), shrinks, dict(self.seconds))

    def _job(self, job_id: int) -> PendingJob:
        return next(o.job for o in self.outcomes if o.job.id == job_id)


def run_cycle(snapshot: Snapshot, policy: Policy = DEFAULT_POLICY, usage: RunningUsage | None = None,
              accelerate: bool = True) -> CycleResult:
    """Decide which pending jobs start where, which running jobs to preempt for them, and why the rest wait.

    `usage`: a RunningUsage the caller passes to every cycle it runs, when it runs many on nearly the same running
    jobs (trace replay, forecasts); the decisions are the same without it. `accelerate=False`: the plain mode
    (Cycle), to prove the accelerations."""
    cycle = Cycle(snapshot, policy, accelerate, usage)
    cycle.run()
    return cycle.result()


__all__ = ["Cycle", "Outcome", "run_cycle", "describe_shape"]
