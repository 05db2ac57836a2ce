"""Phase 4, preempt: free room for a job that does not fit, by simulated removal and fill-back.

Who may be a victim of job J (project P, priority p), among jobs running when the cycle began:
  (a) reclaim: J stays within P's guarantee on every flavor it asks for (quotas on), and passes its quota or fails
      it only on what its organization lent ("lent": quota.py). Then jobs of other projects that are preemptible,
      or whose project is over its guarantee on a flavor J needs (checked again before each removal, so a lender
      is never pushed below what it is owed by more than the job being removed).
  (b) priority: jobs of P with a priority strictly below p. Jobs of P with equal or higher priority never.
  (c) borrowing: J needs capacity above P's guarantee. Then preemptible jobs of other projects, when removing them
      makes room that J's quota allows it (idle guarantee of P's organization, or capacity nobody is guaranteed):
      preemptible jobs are the first to go for any job allowed their capacity.
  With quotas off, (a) becomes: preemptible jobs of any project with a priority below p.
Never: a job before started_at + min_runtime, or anything for a preemptible J (it only ever runs on idle
capacity). A job admitted earlier in this cycle is a candidate by the same rules, a project's borrowing counted
with this cycle's admissions, unless it is preemptible or preempted others to get in: it has not started, so it
is given back (it waits again) rather than preempted, and no work is lost. Otherwise J would wait now and preempt
it in the next cycle, with nothing else changed (a quiet cluster would churn).

Preference (the order victims are tried): preemptible first, then jobs of borrowing projects, then lowest
priority, then the least work lost per device freed (the time since the job's last checkpoint, or since it
started: a job that just checkpointed or just started loses least), then highest id ("borrowing" as of the start
of the cycle). Removal follows this order until J fits (the shortest fitting prefix is found by doubling, then
bisection); then fill-back puts back every removed job J can do without, last removed first skipped. If J does
not fit with every candidate removed, nothing is preempted. For a J of one replica, the victims on a single node
that lose the least work (devices x time since their last checkpoint or start, _lost) replace that choice when
they save most of its lost work (at least three quarters and WORTH_SAVING): jobs that lose little scattered over
many nodes otherwise make the order reach one that loses hours. The order is per device, not devices x time:
measured on the Philly week, that preempted more often, made the mean wait longer and, at 560 GPUs, lost more
work (docs/scheduling.md).

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
- failures are remembered per (project, shape) for the rest of the cycle (Cycle.try_preempt);
- at most MAX_SIMULATIONS preemptions found per cycle (policy constant below): later jobs that would need one
  wait for the next cycle, which starts with fresh state and its own budget. This bounds preemption storms: a
  cycle never evicts for more than MAX_SIMULATIONS jobs. (Counted as found, not as searched, so that the plain
  mode, which searches without the bounds, spends the budget alike.)

The plain mode (`state.accelerate` off) runs the rule without any of this: plain_search.
"""

from __future__ import annotations

from .capacity import CapacityIndex, replicas_fitting
from .model import PendingJob
from .placement import allowed_domains
from .quota import COHORT_KINDS, QuotaFailure
from .shapes import JobInfo
from .state import CycleState, RunRec

INF = float("inf")

# Preemptions found (find_victims calls that found victims) per cycle. A cycle that hits it admits the jobs it
# could, and the rest are considered again next cycle. In steady state a cycle needs a handful.
MAX_SIMULATIONS = 128

# Device-seconds of work a one-replica job's victims must save, against the preference order's, to be chosen
# on another node (see find_victims): 4 GPU-hours.
WORTH_SAVING = 4 * 3600.0



def _preference(rec: RunRec, borrowing: bool) -> tuple:
    return (not rec.preemptible, not borrowing, rec.priority, -rec.saved_at, -rec.id)


def _pools(state: CycleState, flavor: str) -> list[tuple[tuple, RunRec]]:
    """Jobs of a flavor that a project reclaiming its guarantee may take, as of the start of the cycle.

    Built once per flavor per cycle, when first needed: preemptible jobs and jobs of projects that were borrowing
    when the cycle began (`state.borrowed_at_start`, whenever the pool is built), with their preference key. Jobs
    preempted since are skipped, and a job whose project no longer borrows is skipped at removal time
    (_still_eligible), so a superset fixed at the start is exact.
    """
    pool = state.reclaim_pool.get(flavor)
    if pool is None:
        quota = state.quota
        pool = []
        lowest = state.own_lowest
        own_pool = state.own_pool
        now = state.now
        enabled = quota.enabled
        borrows: dict[tuple[str, str], bool] = {}  # state.borrowed_at_start, looked up once per key
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
                        b = borrows[pf] = state.borrowed_at_start(project, f)
                    if b:
                        borrowing = True
                        break
            item = (_preference(rec, borrowing), rec)
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


def searched_flavors(state: CycleState, job: PendingJob, info: JobInfo,
                     failure: QuotaFailure | None) -> tuple[str, ...]:
    """The flavors whose jobs may be victims: the job's own, and for a job its project's running-job cap keeps out
    every flavor its project uses (rule (b): a job of any flavor frees a slot)."""
    if failure is None or failure.kind != "max_running":
        return info.flavors
    return info.flavors + tuple(sorted(state.quota.flavors_of.get(job.project, set()) - set(info.flavors)))


def reclaims(state: CycleState, job: PendingJob, info: JobInfo, failure: QuotaFailure | None) -> bool:
    """Rule (a): may the job take back its guarantee from other projects' borrowing jobs?"""
    return (failure is None or failure.kind == "lent") and state.quota.within_guarantee(job.project, info.demand)


def revocable_candidates(state: CycleState, job: PendingJob, info: JobInfo, reclaim: bool,
                         failure: QuotaFailure | None) -> dict[int, tuple[tuple, RunRec]]:
    """Jobs admitted earlier in this cycle (not preemptible, none preempted for) that the job could preempt in the
    next cycle: its project's of lower priority, and under rule (a) those of projects over their guarantee now."""
    quota = state.quota
    found: dict[int, tuple[tuple, RunRec]] = {}
    for flavor in searched_flavors(state, job, info, failure):
        for project, recs in state.revocable.get(flavor, {}).items():
            if project == job.project:
                lower = [rec for rec in recs.values() if rec.priority < job.priority]
            elif flavor in info.demand and reclaim and quota.enabled and quota.borrows_now(project, flavor):
                lower = list(recs.values())
            else:
                continue
            for rec in lower:
                borrowing = any(quota.borrows_now(rec.project, f) for f in rec.demand)
                found[rec.id] = (_preference(rec, borrowing), rec)
    return found


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
            if reclaim and any(project != job.project and quota.borrows_now(project, flavor)
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


def _still_eligible(state: CycleState, job: PendingJob, info: JobInfo, rec: RunRec) -> bool:
    """Reclaim victims of other projects only while their project still borrows a flavor the job needs (for a job
    admitted this cycle, counting this cycle's admissions)."""
    if rec.project == job.project or rec.preemptible or not state.quota.enabled:
        return True
    borrows = state.quota.run_borrowing if rec.at_start else state.quota.borrows_now
    return any(borrows(rec.project, f) for f in rec.demand if f in info.demand)


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
    avoid = {index.index_of[n] for n in job.avoid_nodes if n in index.index_of}
    for i in avoid:
        extra.setdefault(i, [0, 0, 0])
    gain = _gains(index, extra, kept, avoid, devices, cpu, mem)
    for domain in allowed_domains(index, job.topology, flavor, replicas):
        more = 0
        for lid in domain.leaves:
            more += gain.get(lid, 0)
        if index.has_room(domain.leaves, devices, cpu, mem, replicas - more):  # counted only as far as needed
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
    failure = quota.check(job.project, info.demand, job.preemptible, (extra, -len(own)))
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
    return quota.check_without(job.project, info.demand, job.preemptible, (devices, len(own))) is None


OWN_LIMITS = ("max_running", "no_quota", "borrowing_off", "borrow_limit")  # QuotaFailure kinds of a project alone


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


def passes_quota_bound(state: CycleState, job: PendingJob, info: JobInfo) -> bool:
    """could_pass_quota_without for a job of one flavor its quota keeps out, over borrower_candidates; failures
    remembered per (project, flavor, reserved heads counted in) until victims are committed. Exact dominance: a
    job of that project asking for at least as many devices with no higher priority (its own candidates a
    subset) fails too, and admissions in between only raise quota usage, which never loosens a quota."""
    flavor, devices = info.primary, info.demand[info.primary]
    context, size = (job.project, flavor, state.heads_in), (-job.priority, devices)
    if state.failed_quota_bounds.known_to_fail(context, size):
        return False
    if could_pass_quota_without(state, job, info, *borrower_candidates(state, job, flavor)):
        return True
    state.failed_quota_bounds.record(context, size, False)
    return False


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


def _one_node_victims(state: CycleState, job: PendingJob, info: JobInfo, eligible: list[RunRec],
                      below: float) -> list[RunRec] | None:
    """For a job of one replica: the fewest victims on one node, then the least work lost (_lost),
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
        recs.sort(key=lambda r: (_kind(r), _lost(r, now)))
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
        lost = sum(_lost(r, now) for r in chosen)
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


def _kind(rec: RunRec) -> tuple[bool, int]:
    return not rec.preemptible, rec.priority


def _lost(rec: RunRec, now: float) -> float:
    """Work evicting a job throws away: its devices x the time since its last checkpoint, or since it started."""
    return sum(u[1] for u in rec.usage) * max(0.0, now - rec.saved_at)


def _gains(index: CapacityIndex, extra: dict[int, list[int]], kept: dict[int, tuple[int, int, int]], avoid: set[int],
           devices: int, cpu: int, mem: int) -> dict[int, int]:
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


def find_victims(state: CycleState, job: PendingJob, info: JobInfo,
                 failure: QuotaFailure | None) -> list[RunRec] | None:
    """Victims to remove so the job fits, already removed from `state`; None (state untouched) if impossible.
    `failure`: why the job fails its quota now (None: it passes)."""
    if job.preemptible or state.simulations >= MAX_SIMULATIONS:
        return None
    found = shortcut_search(state, job, info, failure) if state.accelerate else plain_search(state, job, info, failure)
    if found is None:
        return None
    victims, eligible = found
    state.simulations += 1
    if info.replicas == 1 and len(info.flavors) == 1:
        # Evicting in preference order may throw away hours of work where another node holds only young jobs:
        # take those instead when that saves most of it. Only then: evicting small young jobs rather than a big
        # one frees less, so later jobs preempt more often (measured on the Philly week, bench_policy.py).
        lost = sum(_lost(rec, state.now) for rec in victims)
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


def plain_search(state: CycleState, job: PendingJob, info: JobInfo, failure: QuotaFailure | None) -> Found | None:
    """The rule without shortcuts: remove the candidates in preference order (each while still eligible) until
    the job fits, then put back every one it can do without, last removed first skipped."""
    candidates = plain_candidates(state, job, info, failure)
    eligible = [rec for rec in candidates if _still_eligible(state, job, info, rec)]
    removed: list[RunRec] = []
    for rec in candidates:
        if not _still_eligible(state, job, info, rec):
            continue
        state.remove_run(rec)
        removed.append(rec)
        if state.fits(job, info):
            return fill_back(state, job, info, removed), eligible
    for rec in reversed(removed):
        state.add_run(rec)
    return None


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
            borrowing = rec.preemptible or (quota.enabled and any(state.borrowed_at_start(rec.project, f)
                                                                  for f in rec.demand))
        else:
            if not any(rec.id in state.revocable.get(f, {}).get(rec.project, {}) for f in rec.demand):
                continue  # preemptible, or admitted by preempting others: never given back
            borrowing = any(quota.borrows_now(rec.project, f) for f in rec.demand)
        if rec.project == job.project:  # (b), of any flavor searched
            ok = rec.priority < job.priority
        elif not any(f in info.demand for f in rec.demand):
            ok = False  # another project's job frees nothing the job asks for
        elif not rec.at_start:  # given back only to a job taking back its guarantee from a borrower
            ok = reclaim and quota.enabled and any(quota.borrows_now(rec.project, f) for f in rec.demand
                                                   if f in info.demand)
        elif not quota.enabled:
            ok = rec.preemptible and rec.priority < job.priority
        elif reclaim:  # (a)
            ok = rec.preemptible or any(quota.run_borrowing(rec.project, f) for f in rec.demand)
        else:  # (c)
            ok = rec.preemptible
        if ok:
            found.append((_preference(rec, borrowing), rec))
    return [rec for _, rec in sorted(found, key=lambda item: item[0])]


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


def shortcut_search(state: CycleState, job: PendingJob, info: JobInfo, failure: QuotaFailure | None) -> Found | None:
    """plain_search's answer, with the bounds that skip what cannot succeed and the shortcuts that start the
    search where it must end (docs/scheduling-invariants.md; each is a property test's subject)."""
    if not may_have_candidates(state, job, info, failure):
        return None  # Cycle.try_preempt asks first; kept here so that this function stands alone
    # A job its quota keeps out (not a lent guarantee, whose candidates are other projects' borrowers), of one
    # flavor: the quota bound first, from its candidates' usage summed (most such jobs end here, before their
    # candidates are listed).
    kept_out = failure is not None and failure.kind != "lent"
    # (Its running-job cap is freed by its project's jobs of any flavor, which borrower_candidates does not sum.)
    bounded = failure is not None and failure.kind not in ("lent", "max_running") and len(info.flavors) == 1
    if bounded and not passes_quota_bound(state, job, info):
        return None
    candidates = victim_candidates(state, job, info, failure)
    if not candidates:
        return None
    # Candidates whose project stopped borrowing are skipped at removal anyway: leave them out of the bound.
    eligible = [rec for rec in candidates if _still_eligible(state, job, info, rec)]
    if not eligible or (failure is not None and not bounded and
                        not could_pass_quota_without(state, job, info, *candidate_usage(eligible, job, info))):
        return None
    # A job its quota keeps out: every candidate stays eligible (its own project's and preemptible jobs), and no
    # prefix shorter than what its quota needs removed can fit.
    needed = quota_prefix(state, job, info, candidates) if kept_out else 0
    victims = lone_victim(state, job, info, eligible[max(needed, 1) - 1])
    if victims is None:
        if not could_fit_without(state, job, info, eligible):
            return None
        victims = prefix_victims(state, job, info, candidates, needed)
    return None if victims is None else (victims, eligible)


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
        if not _still_eligible(state, job, info, rec):
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
