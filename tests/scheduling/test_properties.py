"""Property-based tests: random clusters, quotas, running jobs and job mixes, every policy."""

from __future__ import annotations

import os
import random
import re
from dataclasses import replace

from hypothesis import HealthCheck, assume, example, given, settings
from hypothesis import strategies as st

from jobs.scheduling import (
    Arrival,
    Assignment,
    Elastic,
    EndedUse,
    Node,
    PendingJob,
    Policy,
    Pool,
    Project,
    Quota,
    ReplicaGroup,
    RunningJob,
    RunningUsage,
    Snapshot,
    Topology,
    forecast,
    run_cycle,
)
from jobs.scheduling import cycle as cycle_module
from jobs.scheduling import preemption as preemption_module
from jobs.scheduling.cycle import Cycle
from jobs.scheduling.fast.preemption import (
    borrower_candidates,
    candidate_usage,
    could_pass_quota_without,
    lone_victim,
    may_have_candidates,
    moves_no_check,
    only_quota_decides,
    prefix_victims,
    quota_bound_fails,
    quota_prefix,
    shortcut_search,
    victim_candidates,
)
from jobs.scheduling.preemption import MAX_SIMULATIONS, search_in_order
from jobs.scheduling.quota import COHORT_KINDS, QuotaFailure
from jobs.scheduling.shapes import JobInfo
from jobs.scheduling.state import CycleState

from . import builders
from .builders import as_pending, carry_out, check_invariants, rebuilt

FLAVORS = ("a100", "h100")
POLICIES = [
    Policy(),
    Policy(ordering="fifo", blocking="strict", blocking_scope="project"),
    Policy(ordering="fifo", blocking="strict", blocking_scope="global", quotas=False),
    Policy(ordering="sjf", blocking="skip", borrowing=False),
    Policy(blocking="skip", preemption=False),
    Policy(quotas=False),
    Policy(borrowing=False),
    Policy(explain=False),
    Policy(ordering="fifo", blocking="strict", blocking_scope="project", explain=False),
    Policy(reclaim_grace=30.0),  # pending jobs are 1 to 60 s old: some within their grace, some past it
    Policy(reserve_after=30.0),  # likewise: some heads promised a later start, some reserving their earliest
]


@st.composite
def scenarios(draw):
    rnd = random.Random(draw(st.integers(0, 2**32)))
    n_nodes = draw(st.integers(1, 14))
    node_list = []
    for i in range(n_nodes):
        devices = rnd.choice([4, 8, 8, 8])
        cpu, memory = _node_cpu_memory(rnd)
        node_list.append(Node(f"n{i}", rnd.choice(FLAVORS), devices, devices, rnd.choice(["c1", "c1", "c2"]),
                              rnd.choice(["", "b1", "b2"]), rnd.choice(["", "r1", "r2", "r3"]), rnd.random() > 0.1,
                              cpu_millis=cpu, memory_mib=memory, free_cpu_millis=cpu, free_memory_mib=memory))
    projects = [Project(f"p{k}", rnd.choice(["o1", "o2"]), rnd.choice([None, None, 1, 2]),
                        rnd.choice([0.0, 0.0, 3600.0 * 8 * rnd.random() * 100])) for k in range(rnd.randint(1, 4))]
    quotas = []
    for p in projects:
        for f in FLAVORS:
            if rnd.random() < 0.8:
                quotas.append(Quota(p.name, f, rnd.choice([0, 8, 16, 32]), rnd.choice([0, 0, 8, 16, 64]),
                                    rnd.choice([None, None, 0, 8])))
    now = 10_000.0
    # Running jobs placed on the nodes (free devices, CPU and memory reduced accordingly).
    free = {n.name: n.devices for n in node_list}
    free_cpu = {n.name: n.cpu_millis for n in node_list}
    free_mem = {n.name: n.memory_mib for n in node_list}

    def replica(index: int, node: Node, d: int) -> Assignment:
        cpu = _request(rnd, free_cpu[node.name], node.cpu_millis, 1000)
        mem = _request(rnd, free_mem[node.name], node.memory_mib, 1024)
        free[node.name] -= d
        free_cpu[node.name] -= cpu
        free_mem[node.name] -= mem
        return Assignment("worker", index, node.name, d, cpu, mem)

    running = []
    for rid in range(1000, 1000 + draw(st.integers(0, 8))):
        node = rnd.choice(node_list)
        d = rnd.randint(1, free[node.name]) if free[node.name] else 0
        if not d:
            continue
        placement = [replica(0, node, d)]
        others = [n for n in node_list if n.flavor == node.flavor and n.cluster == node.cluster and free[n.name]
                  and n.name != node.name]
        if others and rnd.random() < 0.3:
            other = rnd.choice(others)
            placement.append(replica(1, other, rnd.randint(1, free[other.name])))
        started = now - rnd.choice([10.0, 500.0, 5000.0])
        # Its last checkpoint: none, within this attempt, or an earlier attempt's (before its start).
        checkpointed = rnd.choice([None, None, now - 5.0, now - 400.0, started - 100.0])
        running.append(RunningJob(rid, rnd.choice(projects).name, rnd.choice([100, 500, 1000, 0]), started,
                                  tuple(placement), node.flavor, rnd.random() < 0.2, rnd.choice([0.0, 0.0, 1000.0]),
                                  rnd.choice([None, 600.0, 3000.0, 20_000.0]), checkpointed))
    node_list = [replace(n, free=free[n.name], free_cpu_millis=free_cpu[n.name], free_memory_mib=free_mem[n.name])
                 for n in node_list]
    pending = [_pending_job(rnd, jid, projects, node_list, now) for jid in range(1, draw(st.integers(0, 14)) + 1)]
    # The lend hold's recent past: attempts that ended and jobs submitted in the last seconds (some older).
    ended = tuple(EndedUse(rnd.choice(projects).name, rnd.choice(FLAVORS), rnd.choice([1, 4, 8, 16]),
                           now - rnd.choice([3.0, 100.0]), now - rnd.choice([0.0, 1.0, 4.0, 9.0]))
                  for _ in range(draw(st.integers(0, 3))))
    # Some could never take a guarantee back (preemptible, or larger than it): they hold none (lending.takes_back).
    arrivals = tuple(Arrival(rnd.choice(projects).name, rnd.choice(FLAVORS), rnd.choice([1, 8, 64]),
                             now - rnd.choice([0.0, 2.0, 7.0]), rnd.random() < 0.3)
                     for _ in range(draw(st.integers(0, 3))))
    snap = Snapshot(now, tuple(node_list), tuple(quotas), tuple(projects), tuple(running), tuple(pending), ended,
                    arrivals)
    return snap, draw(st.sampled_from(POLICIES)), rnd.random()


def _pending_job(rnd: random.Random, jid: int, projects, node_list, now: float) -> PendingJob:
    """A job submitted 1 to 60 s before `now`: one or two replica groups, any topology, sometimes a node to
    avoid."""
    flavor = rnd.choice(FLAVORS)
    groups = [ReplicaGroup("worker", rnd.choice([1, 1, 2, 3, 4]), rnd.choice([0, 1, 2, 4, 8, 8]), flavor,
                           *_replica_requests(rnd))]
    if rnd.random() < 0.15:
        groups.insert(0, ReplicaGroup("master", 1, rnd.choice([0, 1, 8]), rnd.choice(FLAVORS),
                                      *_replica_requests(rnd)))
    avoid = frozenset({rnd.choice(node_list).name}) if rnd.random() < 0.1 else frozenset()
    return PendingJob(jid, rnd.choice(projects).name, rnd.choice([100, 500, 1000, 0]),
                      now - rnd.choice([1.0, 2.0, 50.0, 60.0]), tuple(groups), rnd.random() < 0.2,
                      rnd.choice(list(Topology)), rnd.choice([None, 300.0, 900.0, 4000.0]), avoid,
                      rnd.choice([None, 100.0, 1000.0]))


def _node_cpu_memory(rnd: random.Random) -> tuple[int, int]:
    """Allocatable (CPU millicores, memory MiB) of a node; 0 is not modelled (old rows, trace replay)."""
    kind = rnd.random()
    if kind < 0.2:
        return 0, 0
    cpu = rnd.choice([16_000, 32_000, 64_000])
    memory = rnd.choice([65_536, 131_072, 262_144])
    if kind < 0.3:
        return cpu, 0
    if kind < 0.4:
        return 0, memory
    return cpu, memory


def _request(rnd: random.Random, free: int, allocatable: int, unit: int) -> int:
    """A running replica's request that fits what is free (anything where the node does not model it)."""
    if allocatable <= 0:
        return rnd.choice([0, unit, 8 * unit])
    return rnd.randint(0, max(0, free) // unit) * unit


def _replica_requests(rnd: random.Random) -> tuple[int, int]:
    """(CPU millicores, memory MiB) a pending replica requests: often none, sometimes more than any node has."""
    return (rnd.choice([0, 0, 0, 1000, 4000, 8000, 16_000, 24_000, 80_000]),
            rnd.choice([0, 0, 0, 8192, 32_768, 65_536, 131_072, 300_000]))


# `make test` tries the same examples on every run (derandomized: a red CI names a change, not a draw);
# `make fuzz` explores new ones (TIDAL_PROPERTY_EXPLORE=1, TIDAL_PROPERTY_EXAMPLES each).
EXPLORE = bool(os.environ.get("TIDAL_PROPERTY_EXPLORE"))
PROPS = settings(max_examples=int(os.environ.get("TIDAL_PROPERTY_EXAMPLES", 300)), deadline=None,
                 suppress_health_check=[HealthCheck.too_slow], derandomize=not EXPLORE)


@PROPS
@given(scenarios())
def test_invariants_hold(case):
    snap, policy, _ = case
    check_invariants(snap, run_cycle(snap, policy), policy)


@PROPS
@given(scenarios())
def test_deterministic_and_independent_of_input_order(case):
    snap, policy, seed = case
    first = run_cycle(snap, policy)
    assert run_cycle(snap, policy) == first
    rnd = random.Random(seed)
    shuffled = replace(snap, running=tuple(rnd.sample(snap.running, len(snap.running))),
                       pending=tuple(rnd.sample(snap.pending, len(snap.pending))),
                       quotas=tuple(rnd.sample(snap.quotas, len(snap.quotas))),
                       projects=tuple(rnd.sample(snap.projects, len(snap.projects))))
    assert run_cycle(shuffled, policy) == first


@st.composite
def elastic_scenarios(draw):
    """A scenario whose jobs are elastic in part: running ones above, at or below a random minimum (max up to four
    replicas more), some past their resize cooldown; pending ones asking for a minimum and a maximum."""
    snap, policy, x = draw(scenarios())
    rnd = random.Random(draw(st.integers(0, 2**32)))
    running = []
    for r in snap.running:
        workers = sum(1 for a in r.placement if a.role == "worker")
        if rnd.random() < 0.6:
            low = rnd.choice([1, 1, workers])  # most with a grown replica where they have two
            r = replace(r, elastic=(Elastic("worker", low, workers + rnd.choice([0, 1, 2, 4])),),
                        resized_at=rnd.choice([None, snap.now - 100.0, snap.now - 1000.0]),
                        resize_cooldown=rnd.choice([0.0, 300.0]))
        running.append(r)
    pending = []
    for j in snap.pending:
        worker = j.groups[-1]
        if rnd.random() < 0.5:
            high = worker.replicas + rnd.choice([0, 1, 3])
            elastic = replace(worker, replicas=rnd.randint(1, high), max_replicas=high)
            j = replace(j, groups=(*j.groups[:-1], elastic))
        pending.append(j)
    return replace(snap, running=tuple(running), pending=tuple(pending)), policy, x


@PROPS
@given(elastic_scenarios())
def test_elastic_jobs_keep_every_invariant_and_the_plain_mode_decides_the_same(case):
    """Elastic jobs (elastic.py): admitted at their minimum, shrunk only of grown replicas and never below their
    minimum, grown only past their cooldown, up to their maximum and never into a flavor a job waits for; devices,
    CPU, memory and quotas never over-allocated (builders.check_invariants); the plain mode and the forecast
    agree."""
    snap, policy, _ = case
    result = run_cycle(snap, policy)
    check_invariants(snap, result, policy)
    assert run_cycle(snap, policy, accelerate=False) == result
    assert forecast(snap, policy, 10, accelerate=False) == forecast(snap, policy, 10)


@st.composite
def pool_scenarios(draw):
    """An elastic scenario where some nodes belong to a pool that lends anything from nothing to all of them (less
    than training holds there now, often), and some of them are closed (serving missed its SLO there)."""
    snap, policy, x = draw(elastic_scenarios())
    rnd = random.Random(draw(st.integers(0, 2**32)))
    if rnd.random() < 0.5:  # node by node
        nodes = tuple(replace(n, pool="pl") if rnd.random() < 0.4 else n for n in snap.nodes)
    else:  # whole racks, as a pool of a node group is (placement then passes its racks by: covered_leaves)
        racks = {(n.cluster, n.rack) for n in snap.nodes if rnd.random() < 0.4}
        nodes = tuple(replace(n, pool="pl") if (n.cluster, n.rack) in racks else n for n in snap.nodes)
    devices = sum(n.devices for n in nodes if n.pool)
    closed = tuple((n.name, f"moved off {n.name}") for n in nodes if n.pool and rnd.random() < 0.3)
    return replace(snap, nodes=nodes, pools=(Pool("pl", rnd.randint(0, devices), closed=closed),)), policy, x


@PROPS
@given(pool_scenarios())
def test_pools_keep_every_invariant_and_the_plain_mode_decides_the_same(case):
    """Pools (pools.py): nothing but preemptible work and grown replicas on a pool's nodes, no more than it lends
    once the cycle is carried out (beyond what nothing may take back), given back only as needed and only from
    what may go (builders.check_pools); every other invariant; the plain mode and the forecast agree."""
    snap, policy, _ = case
    result = run_cycle(snap, policy)
    check_invariants(snap, result, policy)
    assert run_cycle(snap, policy, accelerate=False) == result
    assert forecast(snap, policy, 10, accelerate=False) == forecast(snap, policy, 10)


@PROPS
@given(scenarios())
def test_the_plain_mode_decides_the_same(case):
    """Every acceleration (remembered answers, bounds, counting shortcuts: docs/scheduling-invariants.md) only makes
    the cycle cheaper: the plain mode finds the same admissions, placements, victims, wait reasons and positions,
    and the forecast the same starts. (It found one that did not: preemption's capacity bound kept a single
    replica of a required topology off nodes of no rack, where placement puts it.)"""
    snap, policy, _ = case
    assert run_cycle(snap, policy, accelerate=False) == run_cycle(snap, policy)
    assert forecast(snap, policy, 20, accelerate=False) == forecast(snap, policy, 20)


def _next_snapshot(snap: Snapshot, result, rnd: random.Random, next_id: int) -> Snapshot:
    """The snapshot of the next cycle, as the loop would read it: the cycle's decisions carried out (admitted jobs
    run, victims wait again) and, a few seconds to minutes later, a little changed: jobs finished, submitted,
    cancelled or reprioritised, a node added, cordoned or back, a quota raised or lowered."""
    now = snap.now + rnd.choice([1.0, 30.0, 300.0])
    victims = {p.victim_id for p in result.preemptions}
    requeued = [as_pending(r, snap) for r in snap.running if r.id in victims]
    after = carry_out(snap, result, now)
    running = [r for r in after.running if rnd.random() > 0.15]  # finished
    pending = [j for j in after.pending if rnd.random() > 0.05]  # cancelled
    pending = [replace(j, priority=rnd.choice([0, 100, 500, 1000])) if rnd.random() < 0.05 else j for j in pending]
    pending += requeued
    pending += [_pending_job(rnd, next_id + k, list(snap.projects), list(snap.nodes), now)
                for k in range(rnd.choice([0, 0, 1, 3]))]
    nodes = [replace(n, schedulable=not n.schedulable) if rnd.random() < 0.05 else n for n in snap.nodes]
    if rnd.random() < 0.2:
        cpu, memory = _node_cpu_memory(rnd)
        nodes.append(Node(f"n{len(nodes)}", rnd.choice(FLAVORS), 8, 8, "c1", "b1", "r1", cpu_millis=cpu,
                          memory_mib=memory, free_cpu_millis=cpu, free_memory_mib=memory))
    quotas = [replace(q, guaranteed=rnd.choice([0, 8, 16, 32]), borrow_limit=rnd.choice([0, 8, 64]))
              if rnd.random() < 0.1 else q for q in snap.quotas]
    return rebuilt(replace(snap, nodes=tuple(nodes), quotas=tuple(quotas)), running, tuple(pending), now)


@PROPS
@given(scenarios(), st.integers(0, 2**32))
def test_the_plain_mode_decides_the_same_over_consecutive_cycles(case, seed):
    """Cycle after cycle as the loop runs them (decisions carried out, then a few jobs finished, submitted,
    cancelled or reprioritised, a node added or cordoned, a quota changed): the accelerated mode, with what a caller
    carries from one cycle to the next (RunningUsage), decides as the plain mode does each cycle afresh. What an
    acceleration keeps across cycles (issue 27's parking, see docs/scheduling-invariants.md) must pass this."""
    snap, policy, _ = case
    rnd = random.Random(seed)
    usage = RunningUsage()
    next_id = 10_000
    for _ in range(4):
        result = run_cycle(snap, policy, usage=usage)
        assert run_cycle(snap, policy, accelerate=False) == result, snap.now
        snap = _next_snapshot(snap, result, rnd, next_id)
        next_id += 10


@PROPS
@given(scenarios())
def test_explain_off_changes_only_positions_and_quota_reasons(case):
    """Policy.explain=False (trace replay) takes the same decisions and gives every waiting job it evaluates the
    same code; positions are 0, and only quota waits get a shorter reason. Under strict blocking the jobs behind
    a blocked head are not evaluated: they, and only they, get no Wait."""
    snap, policy, _ = case
    full = run_cycle(snap, replace(policy, explain=True))
    brief = run_cycle(snap, replace(policy, explain=False))
    assert (brief.admits, brief.preemptions, brief.stats, brief.reservations) == (
        full.admits, full.preemptions, full.stats, full.reservations)
    # A job behind a blocked head that the cycle evaluated again after a commit (Cycle.committed) is blocked in both.
    strict = policy.blocking == "strict"
    expected = [w for w in full.waits if not strict or w.code != "blocked"]
    got = [w for w in brief.waits if not strict or w.code != "blocked"]
    assert [(w.job_id, w.code) for w in got] == [(w.job_id, w.code) for w in expected]
    assert {w.job_id for w in brief.waits if w.code == "blocked"} <= {w.job_id for w in full.waits
                                                                       if w.code == "blocked"}
    for b, f in zip(got, expected, strict=True):
        assert (b.project_position, b.flavor_position) == (0, 0)
        if f.code not in ("quota", "max_running"):
            assert b.reason == f.reason


@PROPS
@given(scenarios())
def test_waits_off_changes_only_waits(case):
    """Policy.waits=False (trace replay, forecasts) takes the same decisions, reservations, stats and wake-up time,
    and returns no Wait."""
    snap, policy, _ = case
    full = run_cycle(snap, policy)
    bare = run_cycle(snap, replace(policy, waits=False))
    assert bare.waits == ()
    assert (bare.admits, bare.preemptions, bare.stats, bare.reservations, bare.wake_at) == (
        full.admits, full.preemptions, full.stats, full.reservations, full.wake_at)


@PROPS
@given(scenarios())
def test_running_usage_carried_between_cycles_decides_the_same(case):
    """A RunningUsage carried from cycle to cycle (trace replay, forecasts) sums only the running jobs that
    changed: over cycles whose decisions are carried out, with a running job ending and one given twice between
    them, and with the inventory's flavors changing, every cycle decides as one that sums its running jobs
    afresh."""
    snap, policy, _ = case
    usage = RunningUsage()
    for step in range(4):
        fresh = run_cycle(snap, policy)
        assert run_cycle(snap, policy, usage) == fresh
        snap = carry_out(snap, fresh, snap.now + 1.0)
        if step == 0 and snap.running:  # the first one ends
            snap = rebuilt(snap, snap.running[1:], snap.pending, snap.now)
        if step == 1 and snap.running:  # a caller that gives a job twice: it counts twice, as in a fresh sum
            snap = replace(snap, running=snap.running + snap.running[:1])
        if step == 2:  # nodes change flavor: every sum afresh
            snap = replace(snap, nodes=tuple(replace(n, flavor=FLAVORS[0]) for n in snap.nodes))


def _held(snap: Snapshot, project: str, flavor: str, hold: float) -> int:
    """What the lend hold keeps of a project's guarantee, counted the plain way: its most devices held at any
    moment of the last `hold` seconds (jobs running now and attempts that ended, each holding from its start until
    its end), plus the devices of the jobs it submitted in them that could take its guarantee back (neither
    preemptible nor larger than it: lending.py)."""
    if hold <= 0:
        return 0
    since = snap.now - hold
    spans = [(r.started_at, snap.now + 1, sum(a.devices for a in r.placement))
             for r in snap.running if (r.project, r.flavor) == (project, flavor)]
    spans += [(e.started_at, e.ended_at, e.devices) for e in snap.ended if (e.project, e.flavor) == (project, flavor)]
    moments = {since, *(start for start, _, _ in spans if since < start <= snap.now)}
    peak = max(sum(d for start, end, d in spans if start <= t < end) for t in moments)
    guaranteed = sum(q.guaranteed for q in snap.quotas if (q.project, q.flavor) == (project, flavor))
    return peak + sum(a.devices for a in snap.arrivals if (a.project, a.flavor) == (project, flavor) and a.at > since
                      and not a.preemptible and a.devices <= guaranteed)


def _excess_beyond_lenders(snap: Snapshot, admitted: set[int], flavor: str, hold: float) -> tuple[int, int]:
    """(what every organization borrows beyond its own lenders' idle guarantee within their lend limits and what
    their lend holds keep, the capacity nobody is guaranteed) on one flavor, after the cycle's admissions."""
    guar: dict[str, int] = {}
    lend_limit: dict[str, int | None] = {}
    for q in snap.quotas:
        if q.flavor == flavor:
            guar[q.project] = guar.get(q.project, 0) + q.guaranteed
            lend_limit[q.project] = q.lend_limit
    use: dict[str, int] = {}
    for r in snap.running:
        if r.flavor == flavor:
            use[r.project] = use.get(r.project, 0) + sum(a.devices for a in r.placement)
    for j in snap.pending:
        if j.id in admitted:
            use[j.project] = use.get(j.project, 0) + sum(g.replicas * g.devices for g in j.groups
                                                        if g.flavor == flavor)
    cohort = {p.name: p.cohort for p in snap.projects}
    borrowed: dict[str, int] = {}
    lendable: dict[str, int] = {}
    for p in set(guar) | set(use):
        c = cohort.get(p, p)
        borrowed[c] = borrowed.get(c, 0) + max(0, use.get(p, 0) - guar.get(p, 0))
        idle = max(0, guar.get(p, 0) - max(use.get(p, 0), _held(snap, p, flavor, hold)))
        limit = lend_limit.get(p)
        lendable[c] = lendable.get(c, 0) + (idle if limit is None else min(idle, limit))
    excess = sum(max(0, borrowed[c] - lendable.get(c, 0)) for c in borrowed)
    total = sum(n.devices for n in snap.nodes if n.flavor == flavor and n.schedulable)
    return excess, max(0, total - sum(guar.values()))


def _arrivals_that_hold_nothing() -> tuple[Snapshot, Policy, float]:
    """Found by `make fuzz` (a new example): p1 lends its idle h100 guarantee to its sibling p0 although it just
    submitted a preemptible job and one larger than its guarantee, neither of which could take the guarantee back,
    so neither holds it (lending.takes_back, since a527024). The property's own count of the hold still counted every
    submission and took the loan for borrowing beyond the lenders."""
    node_list = tuple(Node(f"n{k}", "h100", 8, 8, "c1", "", "", True) for k in range(2))
    quotas = (Quota("p0", "h100", 0, 16), Quota("p1", "h100", 16, 0))
    projects = (Project("p0", "o1"), Project("p1", "o1"))
    borrower = PendingJob(1, "p0", 500, 9990.0, (ReplicaGroup("worker", 1, 8, "h100"),))
    arrivals = (Arrival("p1", "h100", 8, 9999.0, preemptible=True), Arrival("p1", "h100", 64, 9999.0))
    return Snapshot(10_000.0, node_list, quotas, projects, (), (borrower,), arrivals=arrivals), Policy(), 0.9


@PROPS
@given(scenarios())
@example(_arrivals_that_hold_nothing())
def test_no_borrowing_across_organizations_or_beyond_lend_limits(case):
    """With nobody borrowing at the start and only projects without a guarantee of the flavor asking (so every
    admission borrows), an organization borrows only its own lenders' idle guarantee, within their lend limits and
    less what their lend holds keep (their recent demand), and capacity nobody is guaranteed: never another
    organization's guarantee."""
    snap, policy, coin = case
    policy = replace(policy, quotas=True, borrowing=True, preemption=False)
    guaranteed = {(q.project, q.flavor) for q in snap.quotas if q.guaranteed > 0}
    running = tuple(r for r in snap.running if not r.preemptible and (r.project, r.flavor) in guaranteed)
    within = []
    used: dict[tuple[str, str], int] = {}
    guar = {(q.project, q.flavor): q.guaranteed for q in snap.quotas}
    for r in running:  # keep only what fits each project's guarantee: nobody borrows at the start
        key = (r.project, r.flavor)
        devices = sum(a.devices for a in r.placement)
        if used.get(key, 0) + devices <= guar.get(key, 0):
            used[key] = used.get(key, 0) + devices
            within.append(r)
    pending = tuple(j for j in snap.pending if not j.preemptible
                    and all((j.project, g.flavor) not in guaranteed for g in j.groups))
    ended = snap.ended
    if coin < 0.5:  # half the lenders' jobs just ended: the lend hold keeps their idle guarantee
        idle = {(q.project, q.flavor): q.guaranteed - used.get((q.project, q.flavor), 0) for q in snap.quotas}
        ended += tuple(EndedUse(q.project, q.flavor, idle[(q.project, q.flavor)], snap.now - 100, snap.now - 1)
                       for k, q in enumerate(snap.quotas) if k % 2 and idle[(q.project, q.flavor)] > 0)
    snap = replace(snap, running=tuple(within), pending=pending, nodes=_freed(snap, within), ended=ended)
    result = run_cycle(snap, policy)
    admitted = {a.job_id for a in result.admits}
    for flavor in FLAVORS:
        excess, unowned = _excess_beyond_lenders(snap, admitted, flavor, policy.lend_hold)
        assert excess <= unowned, f"{flavor}: {excess} borrowed beyond the organizations' lenders, {unowned} unowned"


def _freed(snap: Snapshot, kept: list[RunningJob]) -> tuple[Node, ...]:
    """The snapshot's nodes with only the kept running jobs' devices, CPU and memory taken."""
    gone: dict[str, list[int]] = {}
    for r in snap.running:
        if r not in kept:
            for a in r.placement:
                amounts = gone.setdefault(a.node, [0, 0, 0])
                amounts[0] += a.devices
                amounts[1] += a.cpu_millis
                amounts[2] += a.memory_mib
    return tuple(replace(n, free=n.free + gone[n.name][0], free_cpu_millis=n.free_cpu_millis + gone[n.name][1],
                         free_memory_mib=n.free_memory_mib + gone[n.name][2]) if n.name in gone else n
                 for n in snap.nodes)


@PROPS
@given(scenarios())
def test_no_job_admitted_after_a_head_pushes_its_reservation_back(case):
    """Carry a backfill cycle out; at each reservation's start, once the jobs that end by then have ended, the
    head fits beside every job still running (those admitted after it in the cycle too), quotas included. A head
    that borrows then may still find its lenders took their guarantee back, and one inside its guarantee may find
    other organizations' borrowers on the capacity nobody is guaranteed that its own organization's borrowers
    need: borrowing is always revocable (preemption takes it back)."""
    snap, policy, _ = case
    policy = replace(policy, blocking="backfill")
    result = run_cycle(snap, policy)
    after = carry_out(snap, result, snap.now)
    pending = {j.id: j for j in snap.pending}
    for res in result.reservations:
        head = pending[res.job_id]
        still = tuple(r for r in after.running
                      if r.max_runtime is None or max(r.started_at + r.max_runtime, snap.now) > res.start)
        decision = run_cycle(rebuilt(after, still, [head], res.start),
                             replace(policy, blocking="skip", preemption=False, explain=True))
        if [a.job_id for a in decision.admits] == [head.id]:
            continue
        (wait,) = decision.waits
        # The organization has too little to lend then (the full reason, or the short one without explanations).
        lenders_short = "to lend:" in wait.reason or wait.reason.startswith("quota: cohort ")
        lent = ", within the guarantee, but organization" in wait.reason or wait.reason.startswith("quota: lent ")
        assert policy.quotas and ((_borrows(head, still, snap.quotas) and lenders_short) or lent), wait


def _borrows(job: PendingJob, running: tuple[RunningJob, ...], quotas: tuple[Quota, ...]) -> bool:
    """Would the job take its project above its guarantee on some flavor, beside these running jobs?"""
    for g in job.groups:
        use = sum(a.devices for r in running if r.project == job.project for a in r.placement
                  if r.flavor == g.flavor)
        guaranteed = sum(q.guaranteed for q in quotas if q.project == job.project and q.flavor == g.flavor)
        if use + sum(x.replicas * x.devices for x in job.groups if x.flavor == g.flavor) > guaranteed:
            return True
    return False


USES = re.compile(r"project (\S+) uses (\d+) of its (\d+) guaranteed (\S+?)(?: and borrows (\d+))?;")
BORROW_LIMIT = re.compile(r"borrow limit (?:of )?(\d+)")
NO_GUARANTEE = re.compile(r"project (\S+) has no guaranteed (\S+?)(?: and uses (\d+))?(?: and borrows (\d+))?;")
WOULD_BORROW = re.compile(r"so it would borrow (\d+)")
TO_LEND = re.compile(r"has only (\d+) \S+ to lend")
LENT = re.compile(r"would take (\d+) \S+ more than its lenders may lend, and only (\d+) that nobody")


@PROPS
@given(scenarios())
def test_quota_reasons_quote_what_the_quota_table_shows(case):
    """Once the cycle's decisions are carried out, every number a quota reason quotes is the quota table's: the
    project's used devices (preemptible jobs' too), its guarantee, borrowed (used above it) and borrow limit; and
    no reason states numbers by which the job would fit (what it would borrow within its borrow limit or what its
    organization has to lend, what its organization would hold beyond its guarantees within what is free)."""
    snap, policy, _ = case
    policy = replace(policy, explain=True)
    result = run_cycle(snap, policy)
    after = carry_out(snap, result, snap.now)
    flavor_of = {n.name: n.flavor for n in snap.nodes}
    used: dict[tuple[str, str], int] = {}
    for r in after.running:
        for a in r.placement:
            key = (r.project, flavor_of[a.node])
            used[key] = used.get(key, 0) + a.devices
    guaranteed: dict[tuple[str, str], int] = {}
    limit: dict[tuple[str, str], int] = {}
    for q in snap.quotas:
        guaranteed[(q.project, q.flavor)] = guaranteed.get((q.project, q.flavor), 0) + q.guaranteed
        limit[(q.project, q.flavor)] = limit.get((q.project, q.flavor), 0) + q.borrow_limit
    quoted = 0
    for w in result.waits:
        m, none = USES.search(w.reason), NO_GUARANTEE.search(w.reason)
        if m is not None:
            key = (m.group(1), m.group(4))
            assert int(m.group(2)) == used.get(key, 0), w.reason
            assert int(m.group(3)) == guaranteed.get(key, 0), w.reason
            assert int(m.group(5) or 0) == max(0, used.get(key, 0) - guaranteed.get(key, 0)), w.reason
        elif none is not None:  # all it uses is borrowed
            key = (none.group(1), none.group(2))
            assert guaranteed.get(key, 0) == 0, w.reason
            assert int(none.group(3) or none.group(4) or 0) == used.get(key, 0), w.reason
        else:
            continue
        quoted += 1
        b = BORROW_LIMIT.search(w.reason)
        assert b is None or int(b.group(1)) == limit.get(key, 0), w.reason
        # A reason never states numbers by which the job would fit.
        would = WOULD_BORROW.search(w.reason)
        if would and "over its borrow limit" in w.reason:
            assert int(would.group(1)) > int(b.group(1)), w.reason
        lend = TO_LEND.search(w.reason)
        if lend:
            assert int(would.group(1)) > int(lend.group(1)), w.reason
        lent = LENT.search(w.reason)
        if lent:
            assert int(lent.group(1)) > int(lent.group(2)), w.reason
    assert quoted or not any(w.code == "quota" and "guaranteed" in w.reason for w in result.waits)


@PROPS
@given(scenarios())
def test_a_job_starts_when_its_forecast_says_if_nothing_new_arrives(case):
    """Drive the scheduler forward the way the scheduler loop would, nothing submitted: a cycle, its decisions
    carried out (victims queue again), and the next cycle at once after a preemption (at most 4 at one moment)
    or else when the next running job reaches its max runtime or a job's reclaim grace ends. Every job starts
    when the forecast said."""
    snap, policy, _ = case
    assert forecast(snap, policy, 30) == _drive(snap, policy, 30)


def _drive(snap: Snapshot, policy: Policy, steps: int) -> dict[int, float]:
    waiting = {j.id for j in snap.pending}
    started: dict[int, float] = {}
    at_once = 0
    for _ in range(steps):
        result = run_cycle(snap, policy)
        for a in result.admits:
            if a.job_id in waiting:
                started[a.job_id] = snap.now
                waiting.discard(a.job_id)
        if not waiting:
            break
        gone = {p.victim_id for p in result.preemptions}
        requeued = [as_pending(r, snap) for r in snap.running if r.id in gone]
        ended = [*snap.ended, *(e for r in snap.running if r.id in gone for e in _ended(r, snap, snap.now))]
        after = carry_out(snap, result, snap.now)
        at_once = at_once + 1 if result.preemptions and at_once + 1 < 4 else 0
        now = snap.now
        still = list(after.running)
        if not at_once:
            ends = [r.started_at + r.max_runtime for r in still if r.max_runtime is not None]
            if result.wake_at is not None:
                ends.append(result.wake_at)
            if not ends:
                break
            now = max(min(ends), snap.now)
            for r in still:
                if r.max_runtime is not None and r.started_at + r.max_runtime <= now:
                    ended += _ended(r, snap, r.started_at + r.max_runtime)
            still = [r for r in still if r.max_runtime is None or r.started_at + r.max_runtime > now]
        # The attempts that ended come along, as the loop's snapshot reads them (the lend hold's window).
        snap = replace(rebuilt(after, still, [*after.pending, *requeued], now), ended=tuple(ended),
                       arrivals=snap.arrivals)
    return started


def _ended(job: RunningJob, snap: Snapshot, at: float) -> list[EndedUse]:
    flavor_of = {n.name: n.flavor for n in snap.nodes}
    devices: dict[str, int] = {}
    for a in job.placement:
        flavor = flavor_of.get(a.node, job.flavor)
        devices[flavor] = devices.get(flavor, 0) + a.devices
    return [EndedUse(job.project, f, d, job.started_at, at) for f, d in devices.items()]


@st.composite
def capacity_edits(draw):
    """Nodes of one flavor (some not modelling CPU or memory), a sequence of takes, gives and reservations, and
    a replica shape to count and place."""
    rnd = random.Random(draw(st.integers(0, 2**32)))
    node_list = []
    for i in range(rnd.randint(1, 12)):
        devices = rnd.choice([0, 4, 8])
        cpu, memory = _node_cpu_memory(rnd)
        node_list.append(Node(f"n{i}", "a100", devices, devices, "c1", "", rnd.choice(["r1", "r2"]),
                              cpu_millis=cpu, memory_mib=memory, free_cpu_millis=cpu, free_memory_mib=memory))
    edits = [(rnd.choice(["take", "give", "hide"]), rnd.randrange(len(node_list)), rnd.randint(0, 4),
              rnd.choice([0, 1000, 8000]), rnd.choice([0, 4096, 65_536])) for _ in range(rnd.randint(0, 30))]
    shape = (rnd.choice([0, 1, 2, 4, 8]), *_replica_requests(rnd))
    return tuple(node_list), edits, shape


@PROPS
@given(capacity_edits())
def test_replica_room_and_best_fit_are_exact_with_cpu_and_memory(case):
    """The per-bucket CPU and memory bounds only ever skip counting node by node when it cannot change the
    answer: replica_room equals a plain count over nodes of their scarcest resource (and has_room compares it
    right), and best_node picks the fewest free devices, then lowest index, among nodes where the replica fits."""
    from jobs.scheduling.capacity import ZERO_DEVICE_ROOM, CapacityIndex, replicas_fitting
    from jobs.scheduling.placement import best_node

    node_list, edits, (devices, cpu, mem) = case
    index = CapacityIndex(node_list)
    for kind, i, d, c, m in edits:
        if kind == "take" and index.free[i] >= d and index.cpu[i] >= c and index.mem[i] >= m:
            index.take(i, d, c, m)
        elif kind == "give":
            index.give(i, d, c, m)
        elif kind == "hide":
            index.set_hidden(i, min(d, index.free[i] + index.hidden[i]), min(c, index.cpu[i] + index.hidden_cpu[i]),
                             min(m, index.mem[i] + index.hidden_mem[i]))
    leaves = index.flavor_leaves["a100"]
    expected = sum(replicas_fitting(index.free[i], index.cpu[i], index.mem[i], devices, cpu, mem)
                   for i in range(len(node_list)))
    assert index.replica_room(leaves, devices, cpu, mem) == min(expected, ZERO_DEVICE_ROOM)
    for need in range(0, min(expected, 40) + 2):
        assert index.has_room(leaves, devices, cpu, mem, need) == (expected >= need)
    fitting = [i for i in range(len(node_list))
               if index.free[i] >= devices and index.cpu[i] >= cpu and index.mem[i] >= mem]
    best = min(fitting, key=lambda i: (index.free[i], i)) if fitting else None
    assert best_node(index, leaves, devices, frozenset(), cpu, mem) == best


@PROPS
@given(scenarios())
def test_a_job_told_it_can_never_run_cannot_be_placed_on_the_empty_inventory(case):
    """structural_reason refuses only what placing on every node empty and in service cannot place (a refused job
    is refused at submission: a wrong refusal loses it), and for a job of identical replicas, whose placement is
    exact, refuses exactly that, whether its replicas come as one group or as a master and workers (a master and a
    worker of 8 devices each passed where one node had 8)."""
    from jobs.scheduling.feasibility import ideal_index, structural_reason
    from jobs.scheduling.placement import place
    from jobs.scheduling.shapes import JobInfo

    snap, _, _ = case
    index = ideal_index(snap.nodes)
    for job in snap.pending:
        info = JobInfo(job, avoid=frozenset())  # nodes a job avoids now are no reason never to run
        refused = structural_reason(index, job, info) is not None
        placed = place(index, job, info) is not None
        if placed:
            index = ideal_index(snap.nodes)
        assert not (refused and placed)
        if info.single:
            assert refused != placed
        if len(job.groups) == 1 and job.groups[0].replicas > 1:  # the same replicas as a master and workers
            g = job.groups[0]
            split = replace(job, groups=(replace(g, role="master", replicas=1, max_replicas=None),
                                         replace(g, replicas=g.replicas - 1, max_replicas=None)))
            assert (structural_reason(index, split, JobInfo(split, avoid=frozenset())) is not None) == refused


@PROPS
@given(scenarios())
def test_counting_shortcuts_agree_with_placement_and_structural_checks(case):
    """Explanations tell "would it fit, reserved capacity included?" by counting, and the cycle skips structural
    checks of shapes some domain holds: both must give the answers placing and structural_reason give."""
    from jobs.scheduling.capacity import CapacityIndex
    from jobs.scheduling.feasibility import structural_reason, surely_fits
    from jobs.scheduling.placement import fits_by_count, place, undo
    from jobs.scheduling.shapes import JobInfo

    snap, _, seed = case
    index = CapacityIndex(snap.nodes)
    rnd = random.Random(seed)
    reserved = {i for i in range(len(snap.nodes)) if rnd.random() < 0.3}
    for i in reserved:  # some capacity hidden as a backfill reservation would
        index.set_hidden(i, rnd.randint(0, index.free[i]), rnd.randint(0, max(0, min(index.cpu[i], 64_000))),
                         rnd.randint(0, max(0, min(index.mem[i], 262_144))))
    hidden = {i: (index.hidden[i], index.hidden_cpu[i], index.hidden_mem[i]) for i in reserved}
    for job in snap.pending:
        info = JobInfo(job)
        if surely_fits(index, job):
            assert structural_reason(index, job, info) is None
        counted = fits_by_count(index, job, info)
        counted_lifted = fits_by_count(index, job, info, reserved)
        taken = place(index, job, info)
        if taken is not None:
            undo(index, taken)
        assert counted is None or counted == (taken is not None)
        for i in reserved:
            index.set_hidden(i, 0, 0, 0)
        taken = place(index, job, info)
        if taken is not None:
            undo(index, taken)
        for i, amounts in hidden.items():
            index.set_hidden(i, *amounts)
        assert counted_lifted is None or counted_lifted == (taken is not None)
    # Jobs that avoid the nodes of whole racks (a pool's), or of racks and some node more: counted over the other
    # racks, or placed.
    racks = sorted({(n.cluster, n.rack) for n in snap.nodes})
    for job in snap.pending:
        chosen = {r for r in racks if rnd.random() < 0.4}
        avoided = {n.name for n in snap.nodes if (n.cluster, n.rack) in chosen}
        for avoid in (avoided, avoided | {rnd.choice(snap.nodes).name}):
            avoiding = replace(job, avoid_nodes=frozenset(avoid))
            info = JobInfo(avoiding)
            counted = fits_by_count(index, avoiding, info)
            taken = place(index, avoiding, info)
            if taken is not None:
                assert not {snap.nodes[i].name for _, _, i, *_ in taken} & avoid
                undo(index, taken)
            assert counted is None or counted == (taken is not None)


@PROPS
@given(scenarios())
def test_victim_outline_never_hides_a_candidate(case):
    """may_have_candidates is a necessary condition: when it says no, victim_candidates finds none."""
    snap, policy, _ = case
    state = CycleState(snap, policy)
    for job in snap.pending:
        info = JobInfo(job)
        for failure in (None, QuotaFailure("borrow_limit"), QuotaFailure("lent")):
            if not may_have_candidates(state, job, info, failure):
                assert victim_candidates(state, job, info, failure) == []


def quota_blocked(state: CycleState, lent: bool = False):
    """Each pending job its quota keeps out (not preemptible), with its JobInfo and its victim candidates listed when
    it comes up (a test puts the state back before the next). With `lent`, also the jobs inside their guarantee
    that fail on what their organization lent (whose candidates are other projects' borrowers)."""
    for job in state.snapshot.pending:
        info = JobInfo(job)
        failure = None if job.preemptible else state.quota.check(job.project, info.demand, job.preemptible)
        if failure is not None and (lent or failure.kind != "lent"):
            yield job, info, victim_candidates(state, job, info, failure)


@PROPS
@given(scenarios())
def test_the_quota_bound_is_the_check_with_every_candidate_removed(case):
    """fast.preemption.could_pass_quota_without says what the quota check says once every victim candidate of a job its
    quota keeps out is really removed (remove_run), from the candidates listed (candidate_usage) or, for a job
    of one flavor, summed without listing them (borrower_candidates): a job it turns away could not have been
    admitted by any simulated removal, and one it lets through is simulated as before."""
    snap, policy, _ = case
    state = CycleState(snap, policy)
    for job, info, candidates in quota_blocked(state, lent=True):
        own, others = candidate_usage(candidates, job, info)
        bound = could_pass_quota_without(state, job, info, own, others)
        kind = state.quota.check(job.project, info.demand, job.preemptible).kind
        if len(info.flavors) == 1 and kind not in ("lent", "max_running"):  # what find_victims sums unlisted
            summed_own, summed_others = borrower_candidates(state, job, info.primary)
            assert sorted(rec.id for rec in summed_own) == sorted(rec.id for rec in own)
            assert summed_others == others
        for rec in candidates:
            state.remove_run(rec)
        passes = state.quota.check(job.project, info.demand, job.preemptible) is None
        for rec in reversed(candidates):
            state.add_run(rec)
        assert bound == passes


def one_by_one_victims(state: CycleState, job, info, candidates) -> list[int] | None:
    """Victim ids the plain way (preemption.search_in_order): remove candidates in order until the job fits, then
    put back, last first, every one it still fits without. The state is left as it was."""
    victims = search_in_order(state, job, info, candidates)
    for rec in reversed(victims or []):
        state.add_run(rec)
    return None if victims is None else sorted(rec.id for rec in victims)


@PROPS
@given(scenarios())
def test_victims_of_a_job_its_quota_keeps_out_are_the_one_by_one_search(case):
    """For a job its quota keeps out, preemption's search starts from the candidate whose removal lets it past its
    quota (quota_prefix: no shorter prefix passes it) and takes that one alone when the job then fits
    (lone_victim), else searches the prefixes from there (prefix_victims): the same victims as removing candidates
    one by one until the job fits and putting back every one it can do without."""
    snap, policy, _ = case
    state = CycleState(snap, policy)
    for job, info, candidates in quota_blocked(state):
        if not candidates or not could_pass_quota_without(state, job, info, *candidate_usage(candidates, job, info)):
            continue
        needed = quota_prefix(state, job, info, candidates)
        for n in (needed - 1, needed):
            own, others = candidate_usage(candidates[:n], job, info)
            assert could_pass_quota_without(state, job, info, own, others) == (n == needed)
        expected = one_by_one_victims(state, job, info, candidates)
        victims = lone_victim(state, job, info, candidates[needed - 1]) or prefix_victims(state, job, info,
                                                                                          candidates, needed)
        assert (None if victims is None else sorted(rec.id for rec in victims)) == expected
        for rec in reversed(victims or []):
            state.add_run(rec)


@PROPS
@given(scenarios())
def test_a_search_only_the_quota_decides_finds_the_same_victims_without_what_moves_no_check(case):
    """Where a job's replicas fit now and only its quota keeps it out (only_quota_decides), the candidates that
    move no check (moves_no_check: preemptible jobs of organizations taking no more than their lenders lend, F9)
    never end a prefix and are always put back: the search over the others finds the same victims, and when none
    is left it finds none."""
    snap, policy, _ = case
    state = CycleState(snap, policy)
    for job, info, candidates in quota_blocked(state, lent=True):
        failure = state.quota.check(job.project, info.demand, job.preemptible)
        if not candidates or not only_quota_decides(state, job, info, failure):
            continue
        kept = [rec for rec in candidates if not moves_no_check(state, job, info, rec)]
        assert one_by_one_victims(state, job, info, kept) == one_by_one_victims(state, job, info, candidates)


def test_what_moves_no_check_is_told_by_an_organization_taking_more_than_its_lenders_lend():
    """The random scenarios seldom reach a search only the quota decides with another organization beyond its
    lenders, so an example: vision (org1) borrows 8 for job 1, which fits on the free node of idle (org3, which
    lends nothing); nlp (org2) takes all the unowned capacity with its preemptible jobs 10 and 11, and text (org4)
    runs a preemptible job 12 inside its own guarantee. Taking 10 or 11 is what lets job 1 past its organization's
    check, so they must stay in the search; 12 moves no check and is left out. Both modes preempt 11 (the later
    of the two equal ones), never 12."""
    flavor, run = builders.A100, builders.running
    quotas = [Quota("vision", flavor, 8, borrow_limit=8), Quota("nlp", flavor, 8, borrow_limit=24),
              Quota("idle", flavor, 8, lend_limit=0), Quota("text", flavor, 16, lend_limit=0)]
    projects = (Project("vision", "org1"), Project("nlp", "org2"), Project("idle", "org3"), Project("text", "org4"))
    jobs_running = [run(2, "vision", {"n0": 8}), run(3, "nlp", {"n1": 8}), run(10, "nlp", {"n2": 8}, preemptible=True),
                    run(11, "nlp", {"n3": 8}, preemptible=True), run(12, "text", {"n5": 8}, preemptible=True)]
    snap = builders.snapshot(builders.nodes(7), [builders.job(1, "vision")], jobs_running, quotas, projects)
    waiting = snap.pending[0]
    state = CycleState(snap, Policy())
    info = JobInfo(waiting)
    failure = state.quota.check("vision", info.demand, False)
    assert failure is not None and failure.kind == "cohort"
    assert only_quota_decides(state, waiting, info, failure)
    left_out = {rec.id for rec in victim_candidates(state, waiting, info, failure)
                if moves_no_check(state, waiting, info, rec)}
    assert left_out == {12}
    for accelerate in (True, False):
        result = run_cycle(snap, Policy(), accelerate=accelerate)
        assert [a.job_id for a in result.admits] == [1]
        assert [p.victim_id for p in result.preemptions] == [11]


class BoundChecked(Cycle):
    """A cycle that, at every preemption attempt fast.preemption.quota_bound_fails would skip, runs the search it
    skips (the reserved heads counted in, as Cycle.try_preempt would) and records what it found. A subclass, not a
    patched module function: the compiled core calls its own functions directly."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.skipped: list[tuple[int, bool]] = []  # (job, whether the skipped search changed the state or found)

    def try_preempt(self, job, info, failure, constrained):
        state = self.state
        holds = state.quota_holds_against(job, info) if state.quota_holds else []
        if quota_bound_fails(state, job, info, failure, holds):
            version = state.quota.version
            state.count_heads(holds, 1)
            found = shortcut_search(state, job, info, failure) is not None
            state.count_heads(holds, -1)
            self.skipped.append((job.id, found or state.quota.version != version))
        return super().try_preempt(job, info, failure, constrained)


@PROPS
@given(scenarios())
def test_a_quota_bound_that_fails_is_a_search_that_finds_nothing(case):
    """fast.preemption.quota_bound_fails lets Cycle.try_preempt skip counting the reserved heads in and the victim
    search: whenever it says so in a cycle, the search with those heads counted in finds nothing (and leaves the
    state as it was), whether the failure was remembered with the heads or found without them."""
    snap, policy, _ = case
    cycle = BoundChecked(snap, policy)
    cycle.run()
    assert not [job for job, wrong in cycle.skipped if wrong]
    assert cycle.result() == run_cycle(snap, policy)


def test_a_quota_bound_known_to_fail_for_a_bigger_job_does_not_skip_a_smaller_one():
    """The bound remembered for a job its project's borrow limit keeps out (16 devices: even with its project's
    job of lower priority gone it would borrow 8) does not hold for a later job of the same project, flavor and
    priority asking for 8, which fits its guarantee once that job is preempted. (The random scenarios rarely ask
    the bound twice in a cycle.)"""
    node_list = tuple(Node(f"n{i}", "a100", 8, 8) for i in range(2))
    quotas = (Quota("p", "a100", 8, 0),)
    own = RunningJob(1000, "p", 50, 0.0, (Assignment("worker", 0, "n0", 8),), "a100")
    big = PendingJob(1, "p", 100, 10.0, (ReplicaGroup("worker", 2, 8, "a100"),))
    small = PendingJob(2, "p", 100, 20.0, (ReplicaGroup("worker", 1, 8, "a100"),))
    snap = rebuilt(Snapshot(1000.0, node_list, quotas, (Project("p", "o1"),), (), ()), [own], (big, small), 1000.0)
    policy = Policy(ordering="fifo")  # the big one first
    result = run_cycle(snap, policy)
    assert [(a.job_id, [p.victim_id for p in result.preemptions]) for a in result.admits] == [(2, [1000])]
    assert run_cycle(snap, policy, accelerate=False) == result


def _two_flavor_shortfall() -> tuple[Snapshot, Policy, float]:
    """Hypothesis' stored example (reproduce_failure 6.170.17 b'AEEFQQVBAUEFQQBBAEEAQQA='), kept in its shape: a
    job of two flavors whose organization cannot lend the one device of a100 it would borrow while another
    organization holds the 4 a100 nobody is guaranteed beyond its own; once that organization gives back one, the
    job fails on its h100 borrow limit instead. The property's old form checked the whole job's demand and took
    that for the shortfall bound being wrong; the bound (fast.preemption.could_pass_quota_without) is used only for jobs
    of one flavor, and holds per flavor."""
    node_list = tuple(Node(name, "a100", devices, devices, "c1", "", "", True) for name, devices in
                      (("n0", 8), ("n1", 4), ("n2", 8), ("n3", 4), ("n4", 8)))
    quotas = (Quota("p0", "a100", 8, 0, 0), Quota("p1", "a100", 20, 16, 0), Quota("p1", "h100", 32, 8, 8),
              Quota("p2", "a100", 0, 16), Quota("p2", "h100", 8, 0))
    projects = (Project("p0", "o2"), Project("p1", "o1"), Project("p2", "o1"), Project("p3", "o2"))
    busy = RunningJob(1000, "p3", 100, 9990.0, (Assignment("worker", 0, "n2", 6), Assignment("worker", 1, "n4", 6)),
                      "a100", min_runtime=1000.0, max_runtime=3000.0)
    two_flavors = PendingJob(5, "p2", 0, 9950.0, (ReplicaGroup("master", 1, 1, "a100"),
                                                  ReplicaGroup("worker", 4, 8, "h100")), max_runtime=900.0)
    nodes_left = tuple(replace(n, free=n.devices - 6) if n.name in ("n2", "n4") else n for n in node_list)
    return Snapshot(10_000.0, nodes_left, quotas, projects, (busy,), (two_flavors,)), Policy(), 0.5


@PROPS
@given(scenarios(), st.integers(0, 2**32))
@example(_two_flavor_shortfall(), 0)
def test_a_cohort_shortfall_falls_by_at_most_each_device_other_projects_give_back(case, seed):
    """A cohort or lent failure's `short` bounds what other projects' removals can do for the job's demand of that
    flavor (preemption's bound skips the simulated removal on it for a job of one flavor): taking other projects'
    devices of the flavor one at a time, of any cohort, preemptible or not, lowers it by one at most, the demand
    keeps failing the same way while it is above zero, and it passes only once it was 1 or less. (A job of several
    flavors may then fail on another flavor's limits: the bound is not used for those.)"""
    snap, policy, _ = case
    rnd = random.Random(seed)
    quota = CycleState(snap, policy).quota
    for job in snap.pending:
        info = JobInfo(job)
        failure = quota.check(job.project, info.demand, False)
        if failure is None or failure.kind not in COHORT_KINDS:
            continue
        flavor = failure.flavor
        demand = {flavor: info.demand[flavor]}
        assert quota.check(job.project, demand, False).short == failure.short
        units = [(p, pre) for p in quota.cohort if p != job.project for pre in (False, True)
                 for _ in range((quota.pre if pre else quota.used)[(p, flavor)])]
        rnd.shuffle(units)
        short, taken = failure.short, 0
        for p, pre in units:
            quota.change(p, {flavor: 1}, pre, -1)
            taken += 1
            after = quota.check(job.project, demand, False)
            if after is None:
                assert short <= 1
                break
            assert after.kind == failure.kind and after.short >= short - 1
            short = after.short
        for p, pre in units[:taken]:
            quota.change(p, {flavor: 1}, pre, 1)


@PROPS
@given(scenarios(), st.integers(0, 2**32))
def test_quota_check_with_extra_usage_is_the_check_with_that_usage_held(case, seed):
    """QuotaState.check with `extra` (reserved heads, state.CycleState.fails_beside) answers as the plain check
    once the project really holds that much more (quota.shift), the cohort's sums moved with it."""
    snap, policy, _ = case
    rnd = random.Random(seed)
    quota = CycleState(snap, policy).quota
    for job in snap.pending:
        info = JobInfo(job)
        extra = ({f: rnd.choice([0, 0, 1, 4, 8, 20]) for f in FLAVORS}, rnd.choice([0, 1]))
        answer = quota.check(job.project, info.demand, job.preemptible, extra)
        quota.shift(job.project, *extra, 1)
        held = quota.check(job.project, info.demand, job.preemptible)
        quota.shift(job.project, *extra, -1)
        assert (answer and (answer.kind, answer.flavor)) == (held and (held.kind, held.flavor))


@PROPS
@given(scenarios(), st.integers(0, 2**32))
def test_remembered_quota_answers_are_the_check(case, seed):
    """QuotaState.check_demand (answers remembered per state and spread over larger and smaller demands) says what
    check says, for demands of one flavor of every size and of several flavors, as usage grows and shrinks."""
    snap, policy, _ = case
    rnd = random.Random(seed)
    quota = CycleState(snap, policy).quota
    projects = [p.name for p in snap.projects]
    for _ in range(12):
        project = rnd.choice(projects)
        demands = [{rnd.choice(FLAVORS): rnd.choice([0, 1, 2, 4, 8, 16, 40])} for _ in range(4)]
        demands.append({FLAVORS[0]: rnd.randint(0, 20), FLAVORS[1]: rnd.randint(0, 20)})
        for demand in demands:
            key = tuple(x for f in sorted(demand) for x in (f, demand[f]))
            remembered = quota.check_demand(project, key, demand)
            plain = quota.check(project, demand, False)
            assert (remembered and (remembered.kind, remembered.flavor)) == (plain and (plain.kind, plain.flavor))
        quota.change(rnd.choice(projects), {rnd.choice(FLAVORS): rnd.randint(1, 12)}, rnd.random() < 0.3,
                     rnd.choice([1, 1, -1]))


def requeued(snap: Snapshot, result) -> Snapshot:
    """The next snapshot, at the same moment, once a cycle's decisions are carried out: admitted jobs run where they
    were placed, victims wait again (their attempts ended now, as the loop's snapshot reads them), nothing new is
    submitted."""
    gone = {p.victim_id for p in result.preemptions}
    after = carry_out(snap, result, snap.now)
    again = tuple(as_pending(r, snap) for r in snap.running if r.id in gone)
    ended = (*snap.ended, *(e for r in snap.running if r.id in gone for e in _ended(r, snap, snap.now)))
    return replace(after, pending=after.pending + again, ended=ended, arrivals=snap.arrivals)


@PROPS
@given(scenarios())
def test_a_quiet_cluster_does_not_churn(case):
    """Defect: the next cycle, with nothing changed, preempted jobs the first had just admitted (preemptible jobs
    admitted ahead of jobs that then waited; borrowers ahead of the owners of what they borrowed; jobs of lower
    priority ahead of higher ones, also once they had preempted to get in; jobs that waited before capacity came
    back in the cycle; a job held for its project's reserved head that could have preempted that project's lower
    priorities). A cycle's decisions
    carried out, the same cycle run again at once preempts nothing. Not claimed where the first cycle reserved
    for a head: reservations are recomputed each cycle from the state the last left, so the first cycle's own
    admissions may move one (another head reserves first), and with it which later jobs a quota hold keeps out;
    nor under strict blocking, where the jobs behind a head that a commit later in the cycle let in wait for the
    next cycle (the order does not yield a blocked queue again); nor for a job the first cycle preempted, which
    waits again only from the next cycle (as in Kueue) and may take back what a job of lower order took after it
    (found on CI; holding its place within the cycle made the reasons quote usage the quota table does not show)."""
    snap, policy, _ = case
    assume(policy.blocking != "strict")
    first = run_cycle(snap, policy)
    assume(first.stats["preempted"] < MAX_SIMULATIONS)  # the budget leaves the rest to the next cycle
    assume(not first.reservations)
    again = run_cycle(requeued(snap, first), policy)
    victims = {p.victim_id for p in first.preemptions}
    assert [p for p in again.preemptions if p.for_job_id not in victims] == []


@PROPS
@given(scenarios(), st.integers(0, 3), st.integers(0, 4))
def test_a_cycle_stopped_by_its_budgets_leaves_the_next_nothing_of_its_own_to_preempt(case, searches, retries):
    """A cycle that stopped at its simulation or retry budget admits nothing the next cycle preempts: with tiny
    budgets, the next cycle may still find victims among the jobs that ran before, but none among those the first
    admitted (the same exclusions as test_a_quiet_cluster_does_not_churn). The defect it guards against (found in
    bench_scheduler.py's busy worlds, whose cycles reserve) is pinned by the scenario tests
    test_a_job_the_search_budget_left_unsearched_keeps_... and ..._retry_budget_left_unevaluated_...: these
    random clusters, without reservations, did not reach it in 3,000 examples before the fix."""
    snap, policy, _ = case
    assume(policy.blocking != "strict")
    budgets = ((preemption_module, "MAX_SIMULATIONS", searches), (cycle_module, "MAX_SIMULATIONS", searches),
               (cycle_module, "MAX_RETRIES", retries))
    kept = [(module, name, getattr(module, name)) for module, name, _ in budgets]
    try:
        for module, name, value in budgets:
            setattr(module, name, value)
        first = run_cycle(snap, policy)
        assume(not first.reservations)
        again = run_cycle(requeued(snap, first), policy)
    finally:
        for module, name, value in kept:
            setattr(module, name, value)
    victims = {p.victim_id for p in first.preemptions}
    admitted = {a.job_id for a in first.admits}
    assert [p for p in again.preemptions if p.victim_id in admitted and p.for_job_id not in victims] == []


class Recording(Cycle):
    """A cycle that records each admission with the victims taken for it, in the order it decides them."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.events: list[tuple[PendingJob, tuple[int, ...]]] = []

    def admit(self, out, tentative) -> None:
        super().admit(out, tentative)
        self.events.append((out.job, tuple(v.id for v in out.victims)))


@PROPS
@given(scenarios())
def test_no_admission_takes_an_organization_beyond_its_guarantees_and_the_unowned_capacity(case):
    """Defect: a job within its project's guarantee was admitted onto devices another organization is guaranteed
    while a sibling project borrowed that guarantee. Checked after every admission (victims removed first): an
    organization that then holds more of a flavor than its projects are guaranteed holds it within the capacity
    nobody is guaranteed, with every other organization's excess counted."""
    snap, policy, _ = case
    if not policy.quotas:
        return
    cycle = Recording(snap, policy)
    cycle.run()
    org = {p.name: p.cohort for p in snap.projects}
    flavor_of = {n.name: n.flavor for n in snap.nodes}
    net: dict[tuple[str, str], int] = {}
    for q in snap.quotas:
        key = (org.get(q.project, q.project), q.flavor)
        net[key] = net.get(key, 0) - max(0, q.guaranteed)
    held: dict[int, list[tuple[tuple[str, str], int]]] = {}
    for r in snap.running:
        held[r.id] = [((org.get(r.project, r.project), flavor_of.get(a.node, r.flavor)), a.devices)
                      for a in r.placement]
    for items in held.values():
        for key, d in items:
            net[key] = net.get(key, 0) + d
    total = {f: sum(n.devices for n in snap.nodes if n.flavor == f and n.schedulable) for f in flavor_of.values()}
    guaranteed = {f: sum(max(0, q.guaranteed) for q in snap.quotas if q.flavor == f) for f in total}
    unowned = {f: max(0, total[f] - guaranteed[f]) for f in total}
    given_back: set[int] = set()
    for job, victim_ids in cycle.events:
        for v in victim_ids:
            for key, d in held.pop(v, ()):
                net[key] = net.get(key, 0) - d
        held[job.id] = [((org.get(job.project, job.project), g.flavor), g.replicas * g.devices) for g in job.groups]
        before = dict(net)
        for key, d in held[job.id]:
            net[key] = net.get(key, 0) + d
        for key, d in held[job.id]:
            if d and net[key] > max(0, before.get(key, 0)):
                excess = sum(max(0, n) for (_, f), n in net.items() if f == key[1])
                assert excess <= unowned.get(key[1], 0), (job.id, key, net)
        given_back.update(v for v in victim_ids if v not in {r.id for r in snap.running})
