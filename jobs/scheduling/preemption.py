"""Phase 4, preempt: free room for a job that does not fit, by simulated removal and fill-back.

Who may be a victim of job J (project P, priority p), among jobs running when the cycle began:
  (a) reclaim: J stays within P's guarantee on every flavor it asks for (quotas on). Then jobs of other projects
      that are preemptible, or whose project is over its guarantee on a flavor J needs (checked again before
      each removal, so a lender is never pushed below what it is owed by more than the job being removed).
  (b) priority: jobs of P with a priority strictly below p. Jobs of P with equal or higher priority never.
  With quotas off, (a) becomes: preemptible jobs of any project with a priority below p.
Never: a job admitted this cycle (no thrashing), a job before started_at + min_runtime, or anything for a
preemptible J (it only ever runs on idle capacity).

Preference (the order victims are tried): preemptible first, then jobs of borrowing projects, then lowest
priority, then most recently started, then highest id ("borrowing" as of the start of the cycle). Removal
follows this order until J fits (the shortest fitting prefix is found by doubling, then bisection); then
fill-back puts back every removed job J can do without, last removed first skipped. If J does not fit with
every candidate removed, nothing is preempted.
"""

from __future__ import annotations

from .model import PendingJob
from .shapes import JobInfo
from .state import CycleState, RunRec


def _preference(rec: RunRec, borrowing: bool) -> tuple:
    return (not rec.preemptible, not borrowing, rec.priority, -rec.started_at, -rec.id)


def _pools(state: CycleState, flavor: str) -> list[tuple[tuple, RunRec]]:
    """Jobs of a flavor that a project reclaiming its guarantee may take, as of the start of the cycle.

    Built once per flavor per cycle: preemptible jobs and jobs of projects that were borrowing when the cycle
    began, with their preference key. Jobs preempted since are skipped, and a job whose project no longer
    borrows is skipped at removal time (_still_eligible), so a superset fixed at the start is exact.
    """
    pool = state.reclaim_pool.get(flavor)
    if pool is None:
        quota = state.quota
        pool = []
        for rec in state.runs_by_flavor.get(flavor, ()):
            if state.now < rec.evictable_at:
                continue
            own = state.own_pool.setdefault((rec.project, flavor), [])
            borrowing = rec.preemptible or (quota.enabled and any(quota.run_borrowing(rec.project, f)
                                                                  for f in rec.demand))
            own.append((_preference(rec, borrowing), rec))
            if borrowing:
                pool.append((_preference(rec, borrowing), rec))
        state.reclaim_pool[flavor] = pool
    return pool


def victim_candidates(state: CycleState, job: PendingJob, info: JobInfo, quota_failed: bool) -> list[RunRec]:
    quota = state.quota
    reclaim = not quota_failed and quota.within_guarantee(job.project, info.demand)
    pooled = not quota.enabled
    found: dict[int, tuple[tuple, RunRec]] = {}
    for flavor in info.flavors:
        pool = _pools(state, flavor)
        runs = state.runs
        for key, rec in state.own_pool.get((job.project, flavor), ()):
            if rec.priority < job.priority and rec.id in runs:
                found[rec.id] = (key, rec)
        if reclaim:
            for key, rec in pool:
                if rec.project != job.project and rec.id in runs:
                    found[rec.id] = (key, rec)
        elif pooled:
            for key, rec in pool:
                if rec.project != job.project and rec.priority < job.priority and rec.id in runs:
                    found[rec.id] = (key, rec)
    return [rec for _, rec in sorted(found.values(), key=lambda item: item[0])]


def _still_eligible(state: CycleState, job: PendingJob, info: JobInfo, rec: RunRec) -> bool:
    """Reclaim victims of other projects only while their project still borrows a flavor the job needs."""
    if rec.project == job.project or rec.preemptible or not state.quota.enabled:
        return True
    return any(state.quota.run_borrowing(rec.project, f) for f in rec.demand if f in info.demand)


def find_victims(state: CycleState, job: PendingJob, info: JobInfo, quota_failed: bool) -> list[RunRec] | None:
    """Victims to remove so the job fits, already removed from `state`; None (state untouched) if impossible."""
    if job.preemptible:
        return None
    candidates = victim_candidates(state, job, info, quota_failed)
    if not candidates:
        return None
    # Cheap bound: even every candidate's devices would not cover the shortfall of free capacity.
    if not quota_failed:
        for flavor, need in info.demand.items():
            room = state.index.actual_free(flavor) + sum(r.demand.get(flavor, 0) for r in candidates)
            if room < need:
                return None
    # Remove in preference order, checking at 1, 2, 4, ... removals and once all are removed: the first
    # fitting check bounds the shortest fitting prefix, which bisection then finds.
    removed: list[RunRec] = []
    lo, hi, next_check = 0, 0, 1
    for rec in candidates:
        if not _still_eligible(state, job, info, rec):
            continue
        state.remove_run(rec)
        removed.append(rec)
        if len(removed) == next_check:
            if state.fits(job, info):
                hi = len(removed)
                break
            lo, next_check = len(removed), next_check * 2
    if not hi and len(removed) > lo and state.fits(job, info):
        hi = len(removed)
    if not hi:
        for rec in reversed(removed):
            state.add_run(rec)
        return None
    current = hi

    def set_prefix(k: int) -> None:
        nonlocal current
        while current > k:
            current -= 1
            state.add_run(removed[current])
        while current < k:
            state.remove_run(removed[current])
            current += 1

    while hi - lo > 1:
        mid = (lo + hi) // 2
        set_prefix(mid)
        if state.fits(job, info):
            hi = mid
        else:
            lo = mid
    set_prefix(hi)
    victims = removed[:hi]
    # Fill-back: keep running every victim the job can do without (the last one removed is the one that made
    # it fit, so it stays a victim).
    kept: set[int] = set()
    for rec in reversed(victims[:-1]):
        state.add_run(rec)
        if state.fits(job, info):
            kept.add(rec.id)
        else:
            state.remove_run(rec)
    return [rec for rec in victims if rec.id not in kept]
