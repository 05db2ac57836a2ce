"""Phase 4, preempt: free room for a job that does not fit, by simulated removal and fill-back.

Who may be a victim of job J (project P, priority p), among jobs running when the cycle began:
  (a) reclaim: J stays within P's guarantee on every flavor it asks for (quotas on), and passes its quota or fails
      it only on what its organization lent ("lent": quota.py). Then jobs of other projects that are preemptible,
      or whose project is over its guarantee on a flavor J needs, counting the jobs it runs now, those admitted
      this cycle included, as Kueue counts a workload's usage from its admission (checked again before each
      removal, so a lender is never pushed below what it is owed by more than the job being removed). A project
      that starts borrowing within the cycle makes its older jobs victims too: when giving back its new job makes
      no room (the reclaiming job fits only where an older one runs), the older one goes now, not next cycle.
  (b) priority: jobs of P with a priority strictly below p. Jobs of P with equal or higher priority never.
  (c) borrowing: J needs capacity above P's guarantee. Then preemptible jobs of other projects, when removing them
      makes room that J's quota allows it (idle guarantee of P's organization, or capacity nobody is guaranteed):
      preemptible jobs are the first to go for any job allowed their capacity.
  With quotas off, (a) becomes: preemptible jobs of any project with a priority below p.
Never: a job before started_at + min_runtime, or anything for a preemptible J (it only ever runs on idle
capacity). A job admitted earlier in this cycle is a candidate by the same rules, a project's borrowing counted
with this cycle's admissions, unless it is preemptible: it has not started, so it is given back (it waits again)
rather than preempted, and no work is lost. Otherwise J would wait now and preempt it in the next cycle, with
nothing else changed (a quiet cluster would churn). One that preempted others to get in is given back only to a
job of its own project (rule (b)), which takes over the running jobs it preempted (Cycle.give_back): each is of
that project with a lower priority, preemptible, or a borrower the project took its guarantee back from. (The
jobs of this cycle it took back were given back when it was admitted.)

Preference (the order victims are tried): preemptible first, then jobs of borrowing projects, then lowest
priority, then the least work lost per device freed (the time since the job's last checkpoint, or since it
started: a job that just checkpointed or just started loses least), then highest id ("borrowing" as of the search's
start). Removal follows this order until J fits (fast/preemption.py finds the same shortest prefix by
doubling, then bisection); then fill-back puts back every removed job J can do without, last removed first
skipped. If J does not fit with every candidate removed, nothing is preempted. For a J of one replica, the victims
on a single node that lose the least work (devices x time since their last checkpoint or start, lost_work)
replace that choice when they save most of its lost work (at least three quarters and WORTH_SAVING): jobs that
lose little scattered over many nodes otherwise make the order reach one that loses hours. The order is per
device, not devices x time: measured on the Philly week, that preempted more often, made the mean wait longer
and, at 560 GPUs, lost more work (docs/scheduling.md).

Bounded work: at most MAX_SIMULATIONS preemptions found per cycle (policy constant below): later jobs that would
need one wait for the next cycle, which starts with fresh state and its own budget. This bounds preemption storms:
a cycle never evicts for more than MAX_SIMULATIONS jobs. (Counted as found, not as searched, so that both searches
spend the budget alike.)

A reclaim whose victims only defragment (the free devices are there, on no node the job fits on) may wait for a
node to drain instead, when that costs less than the victims would lose (backfill.drains_instead, called by the
cycle with the victims found here).

The search here is the rule itself, read top to bottom: find_victims, plain_search (remove candidates in preference
order until the job fits: search_in_order), fill_back, then who the candidates are (plain_candidates) and in which order
(preference). fast/preemption.py finds the same victims with bounds that skip what cannot succeed
(shortcut_search); the cycle uses it unless in the plain mode.
"""

from __future__ import annotations

from collections.abc import Callable

from .model import PendingJob
from .quota import QuotaFailure
from .shapes import JobInfo
from .state import CycleState, RunRec

# Preemptions found (find_victims calls that found victims) per cycle. A cycle that hits it admits the jobs it
# could, and the rest are considered again next cycle. In steady state a cycle needs a handful.
MAX_SIMULATIONS = 128


# Device-seconds of work a one-replica job's victims must save, against the preference order's, to be chosen
# on another node (see find_victims): 4 GPU-hours.
WORTH_SAVING = 4 * 3600.0


def find_victims(state: CycleState, job: PendingJob, info: JobInfo, failure: QuotaFailure | None,
                 search: Search) -> list[RunRec] | None:
    """Victims to remove so the job fits, already removed from `state`; None (state untouched) if impossible.
    `failure`: why the job fails its quota now (None: it passes). `search`: plain_search, or the same answer found
    faster (fast.preemption.shortcut_search)."""
    if job.preemptible or state.simulations >= MAX_SIMULATIONS:
        return None
    found = search(state, job, info, failure)
    if found is None:
        return None
    victims, eligible = found
    state.simulations += 1
    if info.replicas == 1 and len(info.flavors) == 1:
        # Evicting in preference order may throw away hours of work where another node holds only young jobs:
        # take those instead when that saves most of it. Only then: evicting small young jobs rather than a big
        # one frees less, so later jobs preempt more often (measured on the Philly week, bench_policy.py).
        lost = sum(lost_work(rec, state.now) for rec in victims)
        kind = max(_kind(rec) for rec in victims)
        for rec in reversed(victims):
            state.add_run(rec)
        cheaper = _one_node_victims(state, job, info, [r for r in eligible if _kind(r) <= kind],
                                    min(lost / 4, lost - WORTH_SAVING))
        if cheaper is not None:
            return cheaper
        for rec in victims:
            state.remove_run(rec)
    return victims


Found = tuple[list[RunRec], list[RunRec]]  # (victims, removed from the state; the candidates eligible before)
Search = Callable[[CycleState, PendingJob, JobInfo, QuotaFailure | None], "Found | None"]


def plain_search(state: CycleState, job: PendingJob, info: JobInfo, failure: QuotaFailure | None) -> Found | None:
    """The rule without shortcuts: remove the candidates in preference order (each while still eligible) until
    the job fits, then put back every one it can do without, last removed first skipped."""
    candidates = plain_candidates(state, job, info, failure)
    eligible = [rec for rec in candidates if still_eligible(state, job, info, rec)]
    victims = search_in_order(state, job, info, candidates)
    return None if victims is None else (victims, eligible)


def search_in_order(state: CycleState, job: PendingJob, info: JobInfo, candidates: list[RunRec]) -> list[RunRec] | None:
    """Remove these candidates in their order (each while still eligible) until the job fits, then fill back: the
    victims, removed from `state`; None (state untouched) when even all of them do not make room."""
    removed: list[RunRec] = []
    for rec in candidates:
        if not still_eligible(state, job, info, rec):
            continue
        state.remove_run(rec)
        removed.append(rec)
        if state.fits(job, info):
            return fill_back(state, job, info, removed)
    for rec in reversed(removed):
        state.add_run(rec)
    return None


def fill_back(state: CycleState, job: PendingJob, info: JobInfo, removed: list[RunRec]) -> list[RunRec]:
    """Put back, last removed first (but the last, which made the job fit), every victim the job still fits
    without; the rest stay removed: the victims."""
    kept: set[int] = set()
    for rec in reversed(removed[:-1]):
        state.add_run(rec)
        if state.fits(job, info):
            kept.add(rec.id)
        else:
            state.remove_run(rec)
    return [rec for rec in removed if rec.id not in kept]


def plain_candidates(state: CycleState, job: PendingJob, info: JobInfo, failure: QuotaFailure | None) -> list[RunRec]:
    """victim_candidates without its pools: every running job (and every one admitted this cycle that may be
    given back) tested against the rules, sorted by preference."""
    quota, now = state.quota, state.now
    reclaim = reclaims(state, job, info, failure)
    flavors = set(searched_flavors(state, job, info, failure))
    found: list[tuple[tuple, RunRec]] = []
    for rec in state.live_runs():
        if not flavors.intersection(rec.demand) or not state.may_take(rec, job.project):
            continue
        if rec.at_start:
            if now < rec.evictable_at:
                continue
            borrowing = rec.preemptible or (quota.enabled and any(quota.run_borrowing(rec.project, f)
                                                                  for f in rec.demand))
        else:
            if not any(rec.id in state.revocable.get(f, {}).get(rec.project, {}) for f in rec.demand):
                continue  # preemptible: never given back
            borrowing = any(quota.run_borrowing(rec.project, f) for f in rec.demand)
        if rec.project == job.project:  # (b), of any flavor searched
            ok = rec.priority < job.priority
        elif not any(f in info.demand for f in rec.demand):
            ok = False  # another project's job frees nothing the job asks for
        elif not rec.at_start:  # given back only to a job taking back its guarantee from a borrower
            ok = (reclaim and quota.enabled and rec.id not in state.preempted_to_enter
                  and any(quota.run_borrowing(rec.project, f) for f in rec.demand if f in info.demand))
        elif not quota.enabled:
            ok = rec.preemptible and rec.priority < job.priority
        elif reclaim:  # (a)
            ok = rec.preemptible or any(quota.run_borrowing(rec.project, f) for f in rec.demand)
        else:  # (c)
            ok = rec.preemptible
        if ok:
            found.append((preference(rec, borrowing), rec))
    return [rec for _, rec in sorted(found, key=lambda item: item[0])]


def preference(rec: RunRec, borrowing: bool) -> tuple:
    return (not rec.preemptible, not borrowing, rec.priority, -rec.saved_at, -rec.id)


def reclaims(state: CycleState, job: PendingJob, info: JobInfo, failure: QuotaFailure | None) -> bool:
    """Rule (a): may the job take back its guarantee from other projects' borrowing jobs?"""
    return (failure is None or failure.kind == "lent") and state.quota.within_guarantee(job.project, info.demand)


def searched_flavors(state: CycleState, job: PendingJob, info: JobInfo,
                     failure: QuotaFailure | None) -> tuple[str, ...]:
    """The flavors whose jobs may be victims: the job's own, and for a job its project's running-job cap keeps out
    every flavor its project uses (rule (b): a job of any flavor frees a slot)."""
    if failure is None or failure.kind != "max_running":
        return info.flavors
    return info.flavors + tuple(sorted(state.quota.flavors_of.get(job.project, set()) - set(info.flavors)))


def still_eligible(state: CycleState, job: PendingJob, info: JobInfo, rec: RunRec) -> bool:
    """Reclaim victims of other projects only while their project still borrows a flavor the job needs (counting
    the jobs admitted this cycle)."""
    if rec.project == job.project or rec.preemptible or not state.quota.enabled:
        return True
    return any(state.quota.run_borrowing(rec.project, f) for f in rec.demand if f in info.demand)


def _one_node_victims(state: CycleState, job: PendingJob, info: JobInfo, eligible: list[RunRec],
                      below: float) -> list[RunRec] | None:
    """For a job of one replica: the fewest victims on one node, then the least work lost (lost_work),
    if that is below `below` and no worse in kind (preemptible before others, lowest priority first), removed
    from `state` once it is checked that the job fits; None (state untouched) otherwise. A borrower stays a
    victim only while its project still borrows, as in the preference order."""
    index, now, quota = state.index, state.now, state.quota
    flavor = info.primary
    need = info.demand[flavor]
    on_node: dict[int, list[RunRec]] = {}
    for rec in eligible:
        for i in {u[0] for u in rec.usage}:  # replicas of a job may share a node
            if index.node_flavor[i] == flavor:
                on_node.setdefault(i, []).append(rec)
    options = []
    for i, recs in on_node.items():
        recs.sort(key=lambda r: (_kind(r), lost_work(r, now)))
        over: dict[str, int] = {}  # project -> devices it borrows, less what was chosen so far
        room, chosen = index.free[i], []
        for rec in recs:
            if room >= need:
                break
            reclaimed = rec.project != job.project and not rec.preemptible and quota.enabled
            if reclaimed:
                left = over.setdefault(rec.project, quota.run_used[(rec.project, flavor)]
                                       - quota.guar.get((rec.project, flavor), 0))
                if left <= 0:
                    continue
                over[rec.project] = left - rec.demand.get(flavor, 0)
            room += sum(u[1] for u in rec.usage if u[0] == i)
            chosen.append(rec)
        lost = sum(lost_work(r, now) for r in chosen)
        if chosen and room >= need and lost < below:
            options.append((max(_kind(r) for r in chosen), len(chosen), lost, i, chosen))
    for *_, chosen in sorted(options, key=lambda o: o[:4])[:2]:  # the two cheapest, checked for real
        for rec in chosen:
            state.remove_run(rec)
        if state.fits(job, info):
            return chosen
        for rec in reversed(chosen):
            state.add_run(rec)
    return None


def _kind(rec: RunRec) -> tuple[bool, float]:
    return not rec.preemptible, rec.priority


def lost_work(rec: RunRec, now: float) -> float:
    """Work evicting a job throws away: its devices x the time since its last checkpoint, or since it started."""
    return sum(u[1] for u in rec.usage) * max(0.0, now - rec.saved_at)
