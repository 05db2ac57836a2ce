"""The victim search of preemption.py, with bounds that skip what cannot succeed: `shortcut_search` finds
what `plain_search` finds.

Bounded work (a cycle with thousands of waiting jobs must not simulate thousands of removals):
- arithmetic first: before removing anything, J must fit with every candidate gone by plain counting (free
  devices per flavor, and for identical replicas whole replicas per node, each node counting its scarcest of
  devices, CPU and memory, summed over the domains its topology allows: exact for placement, ignoring only
  quotas and reservations, so it never rejects a job that could fit), and pass its quota with every candidate's
  usage gone (removing a running job never tightens a quota: see could_pass_quota_without). A job its own quota
  keeps out tries its project's lower-priority jobs: when even all of them do not free enough quota, nothing is
  simulated;
- the shortest prefix that may fit first: no prefix fits before the one its quota needs (quota_prefix, by the
  same bound, for a job its quota keeps out; else the first candidate), and when J fits with that prefix's last
  candidate alone removed, that one is the whole answer (lone_victim: removing jobs only adds room and loosens
  quotas, so the prefix search and fill-back would find it too, after removing and putting back the others);
- failures are remembered per (project, shape) until capacity grows, usage falls or a project's borrowing grows
  (Cycle.try_preempt, CycleState.failed_preemptions; quota bounds in CycleState.failed_quota_bounds, which
  Cycle.try_preempt asks first, before counting the reserved heads in: quota_bound_fails);
- candidates are listed from victim pools sorted when built (_pools), not from every running job;
- where the job's replicas fit now and only its quota keeps it out (only_quota_decides), the preemptible jobs of
  other organizations that take no more than their lenders lend are left out of the search (moves_no_check): no
  check of the search reads them, so they never end a prefix and fill-back always puts them back.

Each may-skip predicate below states the fact it relies on (docs/scheduling-invariants.md) and has its property
test in tests/scheduling/test_properties.py: may_have_candidates (test_victim_outline_never_hides_a_candidate),
could_pass_quota_without (test_the_quota_bound_is_the_check_with_every_candidate_removed), quota_prefix and
lone_victim (test_victims_of_a_job_its_quota_keeps_out_are_the_one_by_one_search), only_quota_decides and
moves_no_check (test_a_search_only_the_quota_decides_finds_the_same_victims_without_what_moves_no_check, and an
example: test_what_moves_no_check_is_told_by_an_organization_taking_more_than_its_lenders_lend),
quota_bound_fails (test_a_quota_bound_that_fails_is_a_search_that_finds_nothing, and an example the random
scenarios rarely reach: test_a_quota_bound_known_to_fail_for_a_bigger_job_does_not_skip_a_smaller_one), and
all of them together (test_the_plain_mode_decides_the_same).
"""

from __future__ import annotations

from ..capacity import CapacityIndex, replicas_fitting
from ..model import PendingJob
from ..placement import allowed_domains
from ..preemption import Found, fill_back, preference, reclaims, searched_flavors, still_eligible
from ..quota import COHORT_KINDS, QuotaFailure
from ..shapes import JobInfo
from ..state import CycleState, QuotaHold, RunRec

INF = float("inf")


def shortcut_search(state: CycleState, job: PendingJob, info: JobInfo, failure: QuotaFailure | None) -> Found | None:
    """plain_search's answer, with the bounds that skip what cannot succeed and the shortcuts that start the
    search where it must end (docs/scheduling-invariants.md; each is a property test's subject)."""
    # A job its quota keeps out (not a lent guarantee, whose candidates are other projects' borrowers), of one
    # flavor: the quota bound first, from its candidates' usage summed (most such jobs end here, before their
    # candidates are listed).
    kept_out = failure is not None and failure.kind != "lent"
    bounded = quota_bounded(info, failure)
    if bounded and not passes_quota_bound(state, job, info):
        return None
    candidates = victim_candidates(state, job, info, failure)
    if not candidates:
        return None
    # Candidates whose project stopped borrowing are skipped at removal anyway: leave them out of the bound.
    eligible = [rec for rec in candidates if still_eligible(state, job, info, rec)]
    if not eligible or (failure is not None and not bounded and
                        not could_pass_quota_without(state, job, info, *candidate_usage(eligible, job, info))):
        return None
    # Searched: the candidates that may change a check of the search (all of them unless only the quota decides).
    searched, searched_eligible = candidates, eligible
    if only_quota_decides(state, job, info, failure):
        left_out = {rec.id for rec in candidates if moves_no_check(state, job, info, rec)}
        searched = [rec for rec in candidates if rec.id not in left_out]
        searched_eligible = [rec for rec in eligible if rec.id not in left_out]
        if not searched_eligible:
            return None
    # A job its quota keeps out: every candidate stays eligible (its own project's and preemptible jobs), and no
    # prefix shorter than what its quota needs removed can fit.
    needed = quota_prefix(state, job, info, searched) if kept_out else 0
    victims = lone_victim(state, job, info, searched_eligible[max(needed, 1) - 1])
    if victims is None:
        if not could_fit_without(state, job, info, eligible):
            return None
        victims = prefix_victims(state, job, info, searched, needed)
    return None if victims is None else (victims, eligible)


def only_quota_decides(state: CycleState, job: PendingJob, info: JobInfo, failure: QuotaFailure | None) -> bool:
    """A search in which placement never decides: the job's replicas fit now, told exactly by counting, and only
    its quota keeps it out. Relies on F4: removing jobs only adds room, so placement answers yes at every step."""
    return failure is not None and state.quota.enabled and state.counted_fit(job, info) is True


def moves_no_check(state: CycleState, job: PendingJob, info: JobInfo, rec: RunRec) -> bool:
    """May leave out of a search that only the quota decides (only_quota_decides): a preemptible job of another
    organization that takes no more of the job's flavors than its lenders lend. Relies on F9: the job's quota check
    reads its own project, its own organization's sums and, of every other organization, only what it takes
    beyond its lenders, which removing jobs never raises; so removing this one, with any others, changes no check
    of the search, and being preemptible it changes no candidate's eligibility (still_eligible). The search finds
    the same victims without it: it never ends a prefix and fill-back always puts it back."""
    if not rec.preemptible or rec.project == job.project:
        return False
    quota = state.quota
    cohort = quota.cohort_of(job.project)
    return not any(quota.moves_checks_of(cohort, rec.project, f) for f in rec.demand if f in info.demand)


def nothing_to_take(state: CycleState, job: PendingJob, info: JobInfo, failure: QuotaFailure | None) -> bool:
    """May skip the victim search: no job runs on the flavors searched and no job admitted in this cycle may be
    taken back, or the running jobs' outline shows no candidate (may_have_candidates). Relies on: candidates are
    running jobs of the flavors searched or jobs admitted in this cycle (preemption.plain_candidates)."""
    flavors = searched_flavors(state, job, info, failure)
    running, revocable = state.running_flavors, state.revocable
    if not any(f in running for f in flavors) and not (
            any(job.priority > state.revocable_lowest(f, job.project) for f in flavors)
            or (any(f in revocable for f in flavors) and reclaims(state, job, info, failure))):
        return True
    return not may_have_candidates(state, job, info, failure)


def may_have_candidates(state: CycleState, job: PendingJob, info: JobInfo, failure: QuotaFailure | None) -> bool:
    """False when victim_candidates would surely find none, told from the running jobs' outline (projects,
    priorities, preemptible) and their projects' borrowing alone: a superset of each rule of victim_candidates
    (jobs preempted since, and borrowers' flavors, are not told apart), so True may still find none."""
    quota = state.quota
    pooled = not quota.enabled
    reclaim: bool | None = None  # reclaims(), asked only when it decides
    flavors = searched_flavors(state, job, info, failure)
    for flavor in flavors:  # jobs admitted earlier in this cycle (revocable_candidates)
        per_project = state.revocable.get(flavor)
        if not per_project:
            continue
        if job.priority > state.revocable_lowest(flavor, job.project):
            return True
        if flavor in info.demand and len(per_project) > (job.project in per_project) and not pooled:
            if reclaim is None:
                reclaim = reclaims(state, job, info, failure)
            if reclaim and any(project != job.project and quota.run_borrowing(project, flavor)
                               for project in per_project):
                return True
    outline = state.victim_outline()
    if not any(f in outline for f in flavors):
        return False
    if reclaim is None:
        reclaim = reclaims(state, job, info, failure)
    for flavor in flavors:
        for project, (lowest, preemptible) in outline.get(flavor, {}).items():
            if project == job.project or pooled:  # (b) priority, or quotas off
                if lowest < job.priority and (project == job.project or flavor in info.demand):
                    return True
            elif flavor not in info.demand:
                continue  # another flavor of its project's: only its own jobs free a slot
            # Another project's: preemptible jobs go first under (a) and (c), borrowers' jobs only under (a).
            elif preemptible or (reclaim and any(quota.run_borrowing(project, f)
                                                 for f in quota.flavors_of.get(project, ()))):
                return True
    return False


def could_fit_without(state: CycleState, job: PendingJob, info: JobInfo, candidates: list[RunRec]) -> bool:
    """Necessary condition: would the job fit, by counting alone, if every candidate were removed?

    Counts real free devices (reserved ones included) plus the candidates' devices, so it is an upper bound of
    what simulated removal can reach: False means simulation would fail too.
    """
    index = state.index
    for flavor, need in info.demand.items():
        room = index.actual_free(flavor)
        if room >= need:
            continue
        for r in candidates:
            room += r.demand.get(flavor, 0)
        if room < need:
            return False
    shape = info.shape
    if shape is None:
        return True  # mixed replica sizes: the per-flavor count above is all that is exact enough
    flavor, devices, replicas, cpu, mem = shape.flavor, shape.devices, shape.replicas, shape.cpu, shape.memory
    if devices <= 0:
        return True  # 0-device replicas: counts capped at ZERO_DEVICE_ROOM are no bound; simulation decides
    leaf_of, leaves = index.leaf_of, index.leaves
    extra: dict[int, list[int]] = {}  # node -> candidates' [devices, cpu, memory] on it
    for r in candidates:
        for i, d, c, m in r.usage:
            lid = leaf_of[i]
            if lid >= 0 and leaves[lid].flavor == flavor:
                amounts = extra.get(i)
                if amounts is None:
                    extra[i] = [d, c, m]
                else:
                    amounts[0] += d
                    amounts[1] += c
                    amounts[2] += m
    # A reservation keeps max(0, need - released_by_start) of a node's capacity from jobs that would still run at
    # its start, and removing jobs only lowers what is released by then: at most actual - that stays usable.
    kept: dict[int, tuple[int, int, int]] = {}
    for h in state.holds_for((flavor,)):
        long = state.is_long(job.max_runtime, h)
        for i, x in h.need.items():
            if long:
                rel = h.released_by_start[i]
                kept[i] = (max(0, x[0] - rel[0]), max(0, x[1] - rel[1]), max(0, x[2] - rel[2]))
            if i not in extra:
                extra[i] = [0, 0, 0]
    avoid = index.node_indexes(info.avoid)
    # Nodes to avoid that fill whole leaves (a pool's racks, placement.fits_by_count) leave those leaves out of the
    # count; other avoided nodes count as losing their room, node by node.
    covered = index.covered_leaves(info.avoid) if avoid and index.avoids_whole_leaves(info.avoid) \
        else frozenset()
    if not covered:
        for i in avoid:
            extra.setdefault(i, [0, 0, 0])
    gain = _gains(index, extra, kept, avoid, devices, cpu, mem)
    for domain in allowed_domains(index, job.topology, flavor, replicas):
        usable = [lid for lid in domain.leaves if lid not in covered] if covered else domain.leaves
        more = 0
        for lid in usable:
            more += gain.get(lid, 0)
        if index.has_room(usable, devices, cpu, mem, replicas - more):  # counted only as far as needed
            return True
    return False


def could_pass_quota_without(state: CycleState, job: PendingJob, info: JobInfo, own: list[RunRec],
                             others: dict[tuple[str, str, bool], int]) -> bool:
    """Necessary condition: would the job pass its quota if every candidate's usage were gone (its own project's
    candidates `own`, and `others`: other projects' candidates' devices on the job's flavors per (project,
    flavor, preemptible))? Removing a running job never tightens a quota (its project holds less: it borrows
    less or lends more, so its cohort's excess and the running-job count only fall), so when this fails, no
    subset of the candidates frees enough quota and simulated removal would fail too. Its own project's
    candidates are counted out first (check()'s `extra`, negative): what they leave failing on its project's own
    limits, no other project's removal cures."""
    quota = state.quota
    if not quota.enabled:
        return True
    extra: dict[str, int] = {}
    for rec in own:
        for flavor, d in rec.demand.items():
            extra[flavor] = extra.get(flavor, 0) - d
    slots = sum(not rec.grown for rec in own)  # a grown replica of an elastic job frees no running-job slot
    failure = quota.check(job.project, info.demand, job.preemptible, (extra, -slots))
    if failure is None or failure.kind in OWN_LIMITS or not others:
        return failure is None
    if failure.kind in COHORT_KINDS and len(info.demand) == 1 and failure.short > sum(others.values()):
        # Taking d devices from other projects lowers what the cohorts borrow beyond their lenders and the
        # unowned capacity by d at most (a project that holds d fewer borrows up to d less or lends up to d
        # more, not both): less than the shortfall cannot cure it.
        return False
    devices = dict(others)
    for rec in own:
        for flavor, d in rec.demand.items():
            if flavor in info.demand:
                key = (rec.project, flavor, rec.preemptible)
                devices[key] = devices.get(key, 0) + d
    return quota.check_without(job.project, info.demand, job.preemptible, (devices, slots)) is None


OWN_LIMITS = ("max_running", "no_quota", "borrowing_off", "borrow_limit")  # QuotaFailure kinds of a project alone


def quota_bounded(info: JobInfo, failure: QuotaFailure | None) -> bool:
    """Does shortcut_search ask passes_quota_bound first: a job of one flavor its own quota or its organization
    keeps out? (Its running-job cap is freed by its project's jobs of any flavor, which borrower_candidates does not
    sum; a lent guarantee's candidates are other projects' borrowers.)"""
    return failure is not None and failure.kind not in ("lent", "max_running") and len(info.flavors) == 1


def quota_bound_fails(state: CycleState, job: PendingJob, info: JobInfo, failure: QuotaFailure | None,
                      holds: list[QuotaHold]) -> bool:
    """May skip counting these reserved heads in and searching (Cycle.try_preempt): shortcut_search would stop at
    passes_quota_bound. Known when passes_quota_bound remembers a failure with the heads counted in (F3, F6); else
    asked without them, as a job without heads asks it: counting heads in only adds usage, which never turns a
    failing quota check into a passing one (F2), so a bound that fails without them fails with them."""
    if not quota_bounded(info, failure):
        return False
    heads = tuple(h.job_id for h in holds)
    if heads and state.failed_quota_bounds.known_to_fail(*_bound_key(job, info, heads)):
        return True
    return not passes_quota_bound(state, job, info)


def passes_quota_bound(state: CycleState, job: PendingJob, info: JobInfo) -> bool:
    """could_pass_quota_without for a job of one flavor its quota keeps out, over borrower_candidates; failures
    remembered per (project, flavor, reserved heads counted in) until victims are committed. Exact dominance: a
    job of that project asking for at least as many devices with no higher priority (its own candidates a
    subset) fails too, and admissions in between only raise quota usage, which never loosens a quota."""
    context, size = _bound_key(job, info, state.heads_in)
    if state.failed_quota_bounds.known_to_fail(context, size):
        return False
    if could_pass_quota_without(state, job, info, *borrower_candidates(state, job, info.primary)):
        return True
    state.failed_quota_bounds.record(context, size, False)
    return False


def _bound_key(job: PendingJob, info: JobInfo, heads: tuple[int, ...]) -> tuple[tuple, tuple[int, ...]]:
    """passes_quota_bound's memo context (project, flavor, reserved heads counted in) and size (a lower priority,
    devices)."""
    return (job.project, info.primary, heads), (-job.priority, info.demand[info.primary])


def quota_prefix(state: CycleState, job: PendingJob, info: JobInfo, candidates: list[RunRec]) -> int:
    """For a job its quota keeps out (could_pass_quota_without lets every candidate's removal through): the fewest
    leading candidates whose removal lets it past its quota. No shorter prefix fits: the bound is the quota check
    with those jobs removed, and removing more never tightens a quota."""
    lo, hi = 0, len(candidates)  # the quota fails with none removed and passes with all of them
    mid = hi - 1  # asked first: its own project's jobs, which free its quota, come last in preference order
    while hi - lo > 1:
        if could_pass_quota_without(state, job, info, *candidate_usage(candidates[:mid], job, info)):
            hi = mid
        else:
            lo = mid
        mid = (lo + hi) // 2
    return hi


def lone_victim(state: CycleState, job: PendingJob, info: JobInfo, rec: RunRec) -> list[RunRec] | None:
    """[rec], removed from `state`, when the job fits with it alone removed; None (state untouched) otherwise.
    Asked of the candidate at the shortest prefix that may fit: the first, or for a job its quota keeps out the one
    that lets it past its quota (quota_prefix). Removing jobs only adds room and loosens quotas, so if the job fits
    then, that prefix is the shortest that fits and fill-back keeps every other candidate of it: prefix_victims
    would find [rec] too, after removing and filling back the candidates before it."""
    state.remove_run(rec)
    if state.fits(job, info):
        return [rec]
    state.add_run(rec)
    return None


def prefix_victims(state: CycleState, job: PendingJob, info: JobInfo, candidates: list[RunRec],
                   needed: int) -> list[RunRec] | None:
    """Remove the shortest prefix of the candidates (those still eligible, in preference order) the job fits
    without, then fill back every one it can do without: the victims, removed from `state`; None (state
    untouched) when even all of them do not make room. No prefix shorter than `needed` fits (its quota)."""
    # Remove in preference order, checking at 1, 2, 4, ... removals and once all are removed: the first
    # fitting check bounds the shortest fitting prefix, which bisection then finds. Prefixes shorter than
    # `needed` are known not to fit: not checked.
    removed: list[RunRec] = []
    lo, hi, next_check = 0, 0, 1
    for rec in candidates:
        if not still_eligible(state, job, info, rec):
            continue
        state.remove_run(rec)
        removed.append(rec)
        if len(removed) == next_check:
            if len(removed) >= needed and state.fits(job, info):
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
        if mid < needed:
            lo = mid
            continue
        set_prefix(mid)
        if state.fits(job, info):
            hi = mid
        else:
            lo = mid
    set_prefix(hi)
    return fill_back(state, job, info, removed[:hi])


def candidate_usage(candidates: list[RunRec], job: PendingJob, info: JobInfo) -> tuple[
        list[RunRec], dict[tuple[str, str, bool], int]]:
    """The candidates of the job's own project, and the others' devices on the job's flavors summed."""
    own: list[RunRec] = []
    others: dict[tuple[str, str, bool], int] = {}
    for rec in candidates:
        if rec.project == job.project:
            own.append(rec)
            continue
        for flavor, d in rec.demand.items():
            if flavor in info.demand:
                key = (rec.project, flavor, rec.preemptible)
                others[key] = others.get(key, 0) + d
    return own, others


def borrower_candidates(state: CycleState, job: PendingJob, flavor: str) -> tuple[
        list[RunRec], dict[tuple[str, str, bool], int]]:
    """What victim_candidates finds for a job of one flavor its quota keeps out, as _split gives it, without
    listing other projects' jobs: its project's jobs of lower priority, and other projects' preemptible jobs
    (summed per project as the live pool keeps them)."""
    _, _, preemptible = _live_pool(state, flavor)
    own: list[RunRec] = []
    if job.priority > state.own_lowest.get((job.project, flavor), INF):
        runs = state.runs
        own = [rec for _, rec in state.own_pool.get((job.project, flavor), ())
               if rec.priority < job.priority and rec.id in runs]
    own.extend(rec for rec in state.revocable.get(flavor, {}).get(job.project, {}).values()
               if rec.priority < job.priority)
    others = {(project, flavor, True): d for project, d in preemptible.items() if project != job.project}
    return own, others


def victim_candidates(state: CycleState, job: PendingJob, info: JobInfo,
                      failure: QuotaFailure | None) -> list[RunRec]:
    quota = state.quota
    reclaim = reclaims(state, job, info, failure)
    pooled = not quota.enabled
    found = revocable_candidates(state, job, info, reclaim, failure) if state.revocable else {}
    project = job.project
    for flavor in searched_flavors(state, job, info, failure):
        pool, projects, _ = _live_pool(state, flavor)
        runs = state.runs
        if job.priority > state.own_lowest.get((project, flavor), INF):
            for key, rec in state.own_pool.get((project, flavor), ()):
                if rec.priority < job.priority and rec.id in runs:
                    found[rec.id] = (key, rec)
        if flavor not in info.demand or not (len(projects) > 1 or (projects and project not in projects)):
            continue  # only its own project's jobs free a slot, or the pool holds no job of another project
        if reclaim:
            for key, rec in pool:
                if rec.project != job.project and rec.id in runs:
                    found[rec.id] = (key, rec)
        elif pooled:
            for key, rec in pool:
                if rec.project != job.project and rec.priority < job.priority and rec.id in runs:
                    found[rec.id] = (key, rec)
        else:  # (c): it borrows; other projects' preemptible jobs holding capacity it is allowed go first
            for key, rec in pool:
                if not rec.preemptible:
                    break  # the pool is in preference order: its preemptible jobs come first
                if rec.project != job.project and rec.id in runs:
                    found[rec.id] = (key, rec)
    if state.spared:
        return [rec for _, rec in sorted(found.values(), key=lambda item: item[0]) if state.may_take(rec, project)]
    return [rec for _, rec in sorted(found.values(), key=lambda item: item[0])]


def revocable_candidates(state: CycleState, job: PendingJob, info: JobInfo, reclaim: bool,
                         failure: QuotaFailure | None) -> dict[int, tuple[tuple, RunRec]]:
    """Jobs admitted earlier in this cycle (not preemptible) that the job could preempt in the next cycle: its
    project's of lower priority, and under rule (a) those of projects over their guarantee now that preempted
    nobody to get in."""
    quota = state.quota
    found: dict[int, tuple[tuple, RunRec]] = {}
    for flavor in searched_flavors(state, job, info, failure):
        for project, recs in state.revocable.get(flavor, {}).items():
            if project == job.project:
                lower = [rec for rec in recs.values() if rec.priority < job.priority]
            elif flavor in info.demand and reclaim and quota.enabled and quota.run_borrowing(project, flavor):
                lower = [rec for rec in recs.values() if rec.id not in state.preempted_to_enter]
            else:
                continue
            for rec in lower:
                borrowing = any(quota.run_borrowing(rec.project, f) for f in rec.demand)
                found[rec.id] = (preference(rec, borrowing), rec)
    return found


def _pools(state: CycleState, flavor: str) -> list[tuple[tuple, RunRec]]:
    """Jobs of a flavor that a project reclaiming its guarantee may take: preemptible jobs and jobs of projects
    borrowing when the pool is built, with their preference key, in preference order.

    Built when first needed, and again when a project in it started or stopped borrowing since (the events that
    may do so, an admission and committed victims, drop it: CycleState._pools_follow). Jobs preempted since are
    skipped, and a job whose project no longer borrows is skipped at removal time (preemption.still_eligible).
    """
    pool = state.reclaim_pool.get(flavor)
    if pool is None:
        quota = state.quota
        pool = []
        lowest = state.own_lowest
        own_pool = state.own_pool
        now = state.now
        enabled = quota.enabled
        borrows = state.pool_borrowing  # quota.run_borrowing, looked up once per key (CycleState._pools_follow)
        for rec in state.runs_by_flavor.get(flavor, ()):
            if now < rec.evictable_at:
                continue
            project = rec.project
            key = (project, flavor)
            if rec.priority < lowest.get(key, INF):
                lowest[key] = rec.priority
            own = own_pool.get(key)
            if own is None:
                own = own_pool[key] = []
            borrowing = rec.preemptible
            if not borrowing and enabled:
                for f in rec.demand:
                    pf = (project, f)
                    b = borrows.get(pf)
                    if b is None:
                        b = borrows[pf] = quota.run_borrowing(project, f)
                    if b:
                        borrowing = True
                        break
            item = (preference(rec, borrowing), rec)
            own.append(item)
            if borrowing:
                pool.append(item)
                if len(rec.demand) > 1:
                    state.mixed_pools.add(flavor)
        pool.sort(key=lambda item: item[0])  # candidates are then gathered in near-sorted order
        for (_, f), own in state.own_pool.items():
            if f == flavor:
                own.sort(key=lambda item: item[0])
        state.reclaim_pool[flavor] = pool
    return pool


def _live_pool(state: CycleState, flavor: str) -> tuple[list[tuple[tuple, RunRec]], set[str], dict[str, int]]:
    """The reclaim pool without jobs preempted since and jobs whose project no longer borrows any of its flavors
    (a superset of the eligible victims of any job), with the projects it holds and the devices of the flavor its
    preemptible jobs hold per project. Rebuilt after a commit that may change it (CycleState.forget_failures)."""
    live = state.live_pool.get(flavor)
    if live is None:
        quota, runs = state.quota, state.runs
        borrows: dict[tuple[str, str], bool] = {}
        entries = []
        for key, rec in _pools(state, flavor):
            if rec.id not in runs:
                continue
            keep = rec.preemptible or not quota.enabled
            if not keep:
                for f in rec.demand:
                    pf = (rec.project, f)
                    b = borrows.get(pf)
                    if b is None:
                        b = borrows[pf] = quota.run_borrowing(rec.project, f)
                    if b:
                        keep = True
                        break
            if keep:
                entries.append((key, rec))
        preemptible: dict[str, int] = {}
        for _, rec in entries:
            if not rec.preemptible:
                break  # in preference order: preemptible jobs first
            preemptible[rec.project] = preemptible.get(rec.project, 0) + rec.demand[flavor]
        live = state.live_pool[flavor] = (entries, {rec.project for _, rec in entries}, preemptible)
    return live


def _gains(index: CapacityIndex, extra: dict[int, list[int]], kept: dict[int, tuple[int, int, int]],
           avoid: frozenset[int], devices: int, cpu: int, mem: int) -> dict[int, int]:
    """Replicas gained (or lost) per leaf over its visible room when the candidates' capacity on these nodes is
    free and reservations keep what they must."""
    leaf_of = index.leaf_of
    free, hidden = index.free, index.hidden
    cpus, hidden_cpu, mems, hidden_mem = index.cpu, index.hidden_cpu, index.mem, index.hidden_mem
    gain: dict[int, int] = {}
    for i, (d, c, m) in extra.items():
        lid = leaf_of[i]
        if lid < 0:
            continue
        after = 0
        kd, kc, km = kept.get(i, NOTHING)
        if not (d or c or m) and hidden[i] == kd and hidden_cpu[i] == kc and hidden_mem[i] == km and i not in avoid:
            continue  # no candidate here, and what stays hidden is what is hidden now: no gain
        if cpu <= 0 and mem <= 0:  # devices alone: plain arithmetic (most jobs of replay traces)
            if i not in avoid:
                after = max(0, free[i] + hidden[i] + d - kd) // devices
            gain[lid] = gain.get(lid, 0) + after - free[i] // devices
            continue
        if i not in avoid:
            after = replicas_fitting(max(0, free[i] + hidden[i] + d - kd), max(0, cpus[i] + hidden_cpu[i] + c - kc),
                                     max(0, mems[i] + hidden_mem[i] + m - km), devices, cpu, mem)
        gain[lid] = gain.get(lid, 0) + after - replicas_fitting(free[i], cpus[i], mems[i], devices, cpu, mem)
    return gain


NOTHING = (0, 0, 0)
