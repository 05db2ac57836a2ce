"""Table-driven scheduler scenarios: given nodes, quotas, running and pending jobs, expect admits, victims,
reasons."""

from __future__ import annotations

import time
from dataclasses import replace

import pytest

from jobs.scheduling import (
    PHASES,
    Arrival,
    Assignment,
    EndedUse,
    Node,
    PendingJob,
    Policy,
    Pool,
    Project,
    Quota,
    ReplicaGroup,
    RunningJob,
    Snapshot,
    Topology,
    forecast,
    never_fits,
    run_cycle,
)
from jobs.scheduling.cycle import Cycle, Outcome
from jobs.scheduling.state import RunRec

from .builders import (
    A100,
    H100,
    admitted,
    carry_out,
    check_invariants,
    job,
    nodes,
    running,
    snapshot,
    victims,
    waits,
)

NOW = 1000.0
# Queued this long ago, a head reserves its earliest start (Policy.reserve_after has passed).
WAITED = NOW - Policy().reserve_after


def cycle(snap, policy=None):
    policy = policy or Policy()
    result = run_cycle(snap, policy)
    check_invariants(snap, result, policy)
    return result


# -- gang -----------------------------------------------------------------------------------------------------

def test_gang_is_all_or_nothing():
    busy = [running(100, "nlp", {"n0": 8})]
    snap = snapshot(nodes(3), [job(1, replicas=3), job(2, replicas=2)], busy,
                    quotas=[Quota("vision", A100, 64), Quota("nlp", A100, 8)])
    result = cycle(snap, Policy(blocking="skip"))
    assert admitted(result) == [2]
    assert sorted(a.node for a in result.admits[0].placement) == ["n1", "n2"]
    assert waits(result)[1].code == "capacity"
    assert waits(result)[1].reason == "waiting for capacity: 0 nvidia-a100-40gb free, needs 24"


def test_gang_never_spans_clusters():
    snap = snapshot(nodes(1, cluster="east") + nodes(1, cluster="west", start=1), [job(1, replicas=2)],
                    quotas=[Quota("vision", A100, 64)])
    result = cycle(snap)
    assert admitted(result) == []
    assert waits(result)[1].code == "unschedulable"
    assert "needs 2 x 8 nvidia-a100-40gb in one cluster" in waits(result)[1].reason


def test_avoid_nodes_is_respected():
    snap = snapshot(nodes(2), [job(1, avoid_nodes=frozenset({"n0"}))], quotas=[Quota("vision", A100, 64)])
    assert [a.node for a in cycle(snap).admits[0].placement] == ["n1"]


# -- quota ----------------------------------------------------------------------------------------------------

QUOTA_CASES = [
    # (name, quotas, pending (id, project, replicas, devices), expected admits, codes of waits, borrowed)
    ("within guarantee", [Quota("vision", A100, 16)], [(1, "vision", 2, 8)], [1], {}, {1: 0}),
    ("over guarantee, no borrowing allowed", [Quota("vision", A100, 8), Quota("nlp", A100, 24)],
     [(1, "vision", 2, 8)], [], {1: "quota"}, {}),
    ("borrows idle guarantee of the cohort up to its limit",
     [Quota("vision", A100, 8, borrow_limit=8), Quota("nlp", A100, 24)],
     [(1, "vision", 2, 8), (2, "vision", 1, 8)], [1], {2: "quota"}, {1: 8}),
    ("lend limit caps what others borrow",
     [Quota("vision", A100, 8, borrow_limit=32), Quota("nlp", A100, 24, lend_limit=4)],
     [(1, "vision", 2, 8), (2, "vision", 3, 4)], [2], {1: "quota"}, {2: 4}),
    ("unowned capacity can be borrowed",
     [Quota("vision", A100, 8, borrow_limit=32)], [(1, "vision", 4, 8)], [1], {}, {1: 24}),
]


@pytest.mark.parametrize("name,quotas,pending,expect_admits,expect_waits,borrowed", QUOTA_CASES,
                         ids=[c[0] for c in QUOTA_CASES])
def test_quota(name, quotas, pending, expect_admits, expect_waits, borrowed):
    jobs = [job(i, project=p, replicas=r, devices=d) for i, p, r, d in pending]
    snap = snapshot(nodes(4), jobs, quotas=quotas)
    result = cycle(snap)
    assert admitted(result) == expect_admits
    assert {w.job_id: w.code for w in result.waits} == expect_waits
    assert {a.job_id: a.borrowed for a in result.admits} == borrowed


ISOLATION_CASES = [
    # (name, quotas, organizations, pending (id, project, replicas), expected admits, borrowed)
    ("another organization's idle guarantee is not borrowed",
     [Quota("vision", A100, 8, borrow_limit=24), Quota("globex", A100, 24)], {"vision": "acme", "globex": "globex"},
     [(1, "vision", 2)], [], {}),
    ("the same guarantee in the same organization is",
     [Quota("vision", A100, 8, borrow_limit=24), Quota("nlp", A100, 24)], {"vision": "acme", "nlp": "acme"},
     [(1, "vision", 2)], [1], {1: 8}),
    ("capacity nobody is guaranteed is shared by every organization",
     [Quota("vision", A100, 8, borrow_limit=24), Quota("globex", A100, 8)], {"vision": "acme", "globex": "globex"},
     [(1, "vision", 3)], [1], {1: 16}),
    ("unowned capacity is counted once across organizations",
     [Quota("vision", A100, 0, borrow_limit=24), Quota("rival", A100, 0, borrow_limit=24), Quota("x", A100, 16)],
     {"vision": "acme", "rival": "globex", "x": "initech"}, [(1, "vision", 1), (2, "rival", 1), (3, "vision", 1)],
     [1, 2], {1: 8, 2: 8}),
    ("a lender's lend limit caps what its organization borrows",
     [Quota("vision", A100, 0, borrow_limit=32), Quota("nlp", A100, 32, lend_limit=8)],
     {"vision": "acme", "nlp": "acme"}, [(1, "vision", 1), (2, "vision", 1)], [1], {1: 8}),
]


@pytest.mark.parametrize("name,quotas,orgs,pending,expect_admits,borrowed", ISOLATION_CASES,
                         ids=[c[0] for c in ISOLATION_CASES])
def test_borrowing_stays_inside_the_organization(name, quotas, orgs, pending, expect_admits, borrowed):
    """Defect: a cohort counted other organizations' idle guarantees as unowned capacity and borrowed them."""
    projects = [Project(p, org) for p, org in orgs.items()]
    jobs = [job(i, project=p, replicas=r) for i, p, r in pending]
    result = cycle(snapshot(nodes(4), jobs, quotas=quotas, projects=projects), Policy(preemption=False))
    assert admitted(result) == expect_admits
    assert {a.job_id: a.borrowed for a in result.admits} == borrowed
    for w in result.waits:
        assert w.code == "quota"


QUOTA_REASON_CASES = [
    # (name, quotas, running 8-device jobs (project, node, preemptible), pending (id, project, replicas), waiting
    #  job, its reason)
    ("a job that would borrow over the limit says how much it would borrow",
     [Quota("vision", A100, 32, borrow_limit=16), Quota("nlp", A100, 32)],
     [("vision", "n0", False), ("vision", "n1", False), ("vision", "n2", False)], [(1, "vision", 4)], 1,
     "project vision uses 24 of its 32 guaranteed nvidia-a100-40gb; this job needs 32, so it would borrow 24, "
     "over its borrow limit of 16"),
    ("borrowed is what the quota table shows: use above the guarantee, preemptible jobs included",
     [Quota("vision", A100, 8, borrow_limit=8), Quota("nlp", A100, 48)],
     [("vision", "n0", False), ("vision", "n1", True)], [(1, "vision", 1)], 1,
     "project vision uses 16 of its 8 guaranteed nvidia-a100-40gb and borrows 8; this job needs 8, so it would "
     "borrow 16, over its borrow limit of 8"),
    ("lend limits are named",
     [Quota("vision", A100, 8, borrow_limit=32), Quota("nlp", A100, 56, lend_limit=8)],
     [("nlp", "n0", False)], [(1, "vision", 3)], 1,
     "project vision uses 0 of its 8 guaranteed nvidia-a100-40gb; this job needs 24, so it would borrow 16 "
     "(borrow limit 32, 32 of it unused), but organization org has only 8 nvidia-a100-40gb to lend: 8 of its "
     "projects' idle guarantee (their lend limits keep back 40 more) and 0 that nobody is guaranteed"),
    ("a job that lost on ordering quotes the state the cycle ends in, and who borrows what it would",
     [Quota("vision", A100, 0, borrow_limit=16), Quota("speech", A100, 0, borrow_limit=16),
      Quota("nlp", A100, 48)], [("nlp", f"n{k}", False) for k in range(6)],
     [(1, "vision", 1), (2, "speech", 1), (3, "vision", 1)], 3,
     "project vision has no guaranteed nvidia-a100-40gb and borrows 8; this job needs 8, so it would borrow 16 "
     "(borrow limit 16, 8 of it unused), but organization org has only 0 nvidia-a100-40gb to lend: 0 of its "
     "projects' idle guarantee and 0 that nobody is guaranteed; it is borrowed by speech (8)"),
]


@pytest.mark.parametrize("name,quotas,busy,pending,waiting,reason", QUOTA_REASON_CASES,
                         ids=[c[0] for c in QUOTA_REASON_CASES])
def test_quota_reasons_quote_the_quota_tables_numbers(name, quotas, busy, pending, waiting, reason):
    busy_jobs = [running(100 + k, p, {n: 8}, preemptible=pre) for k, (p, n, pre) in enumerate(busy)]
    jobs = [job(i, project=p, replicas=r) for i, p, r in pending]
    w = waits(cycle(snapshot(nodes(8), jobs, busy_jobs, quotas=quotas)))[waiting]
    assert (w.code, w.reason) == ("quota", reason)


def test_max_running_jobs():
    snap = snapshot(nodes(4), [job(1), job(2)], [running(100, "vision", {"n0": 8})],
                    quotas=[Quota("vision", A100, 32)], projects=[Project("vision", "org", max_running_jobs=2)])
    result = cycle(snap)
    assert admitted(result) == [1]
    assert waits(result)[2].code == "max_running"
    assert waits(result)[2].reason == "project vision is at its limit of 2 running jobs"


def test_quotas_off_pools_everything():
    snap = snapshot(nodes(2), [job(1, project="nobody", replicas=2)], quotas=[])
    assert admitted(cycle(snap, Policy(quotas=False))) == [1]
    assert waits(cycle(snap))[1].code == "quota"


# -- preemption -----------------------------------------------------------------------------------------------

def reclaim_setup(extra_running=()):
    """4 nodes; vision is owed 16 but nlp (guarantee 16) borrows the whole cluster."""
    node_list = nodes(4)
    jobs = [running(100, "nlp", {"n0": 8}, started_at=100.0), running(101, "nlp", {"n1": 8}, started_at=200.0),
            running(102, "nlp", {"n2": 8}, started_at=300.0, priority=100),
            running(103, "nlp", {"n3": 8}, started_at=400.0), *extra_running]
    quotas = [Quota("vision", A100, 16), Quota("nlp", A100, 16, borrow_limit=16)]
    return node_list, jobs, quotas


def test_reclaim_guarantee_preempts_lowest_priority_then_most_recent():
    node_list, jobs, quotas = reclaim_setup()
    result = cycle(snapshot(node_list, [job(1, replicas=2)], jobs, quotas))
    assert admitted(result) == [1]
    assert victims(result) == [102, 103]  # lowest priority first, then the most recently started
    assert all(p.for_job_id == 1 for p in result.preemptions)
    assert "give project vision back its guaranteed" in result.preemptions[0].reason


def test_reclaim_respects_min_runtime():
    node_list = nodes(4)
    jobs = [running(100, "nlp", {"n0": 8}, started_at=100.0), running(101, "nlp", {"n1": 8}, started_at=200.0),
            running(102, "nlp", {"n2": 8}, started_at=900.0, min_runtime=3600.0),
            running(103, "nlp", {"n3": 8}, started_at=950.0, min_runtime=3600.0)]
    quotas = [Quota("vision", A100, 16), Quota("nlp", A100, 16, borrow_limit=16)]
    result = cycle(snapshot(node_list, [job(1)], jobs, quotas, now=NOW))
    assert victims(result) == [101]


def test_no_preemption_when_the_job_would_still_not_fit():
    # vision is owed 16 but nlp only borrows 8: removing that one job frees 8, the job needs 16 on one rack.
    node_list = nodes(4)
    jobs = [running(100 + k, "nlp", {f"n{k}": 8}, started_at=100.0 * k) for k in range(3)]
    jobs.append(running(103, "vision", {"n3": 8}))
    quotas = [Quota("vision", A100, 24), Quota("nlp", A100, 16, borrow_limit=16)]
    result = cycle(snapshot(node_list, [job(1, replicas=2)], jobs, quotas))
    assert result.preemptions == ()
    assert admitted(result) == []


def test_job_over_its_guarantee_does_not_reclaim():
    node_list, jobs, quotas = reclaim_setup()
    quotas = [Quota("vision", A100, 4, borrow_limit=32), quotas[1]]
    result = cycle(snapshot(node_list, [job(1)], jobs, quotas))
    assert result.preemptions == ()


def test_priority_preemption_within_a_project_only_of_lower_priority():
    node_list = nodes(2)
    jobs = [running(100, "vision", {"n0": 8}, priority=100), running(101, "vision", {"n1": 8}, priority=500)]
    quotas = [Quota("vision", A100, 16)]
    high = cycle(snapshot(node_list, [job(1, priority=1000)], jobs, quotas))
    assert victims(high) == [100]
    assert "higher-priority job 1" in high.preemptions[0].reason
    equal = cycle(snapshot(node_list, [job(1, priority=100)], jobs, quotas))
    assert equal.preemptions == () and admitted(equal) == []


def test_a_job_whose_quota_no_preemption_can_free_does_not_spend_the_preemption_budget(monkeypatch):
    """Job 1 of project a needs 8 devices on a guarantee of 4 with no borrowing: evicting a's only lower-priority
    job frees 4, not enough, so it is not simulated, and job 2 of project b (which its own lower-priority job makes
    room for) still gets the cycle's one simulated removal."""
    monkeypatch.setattr("jobs.scheduling.preemption.MAX_SIMULATIONS", 1)
    monkeypatch.setattr("jobs.scheduling.cycle.MAX_SIMULATIONS", 1)
    jobs = [running(100, "a", {"n0": 4}, priority=100), running(200, "b", {"n1": 8}, priority=100)]
    quotas = [Quota("a", A100, 4, borrow_limit=0), Quota("b", A100, 8, borrow_limit=0)]
    pending = [job(1, "a", priority=1000), job(2, "b", priority=1000)]
    result = cycle(snapshot(nodes(2), pending, jobs, quotas))
    assert victims(result) == [200] and admitted(result) == [2]
    assert waits(result)[1].code == "quota"


def test_preemptible_jobs_are_first_victims():
    node_list = nodes(3)
    jobs = [running(100, "nlp", {"n0": 8}, priority=100, started_at=900.0),
            running(101, "nlp", {"n1": 8}, priority=1000, started_at=10.0, preemptible=True),
            running(102, "nlp", {"n2": 8}, priority=100, started_at=950.0)]
    quotas = [Quota("vision", A100, 16), Quota("nlp", A100, 8, borrow_limit=16)]
    result = cycle(snapshot(node_list, [job(1)], jobs, quotas))
    assert victims(result) == [101]


def test_preemptible_jobs_run_on_their_projects_idle_guarantee_without_borrowing():
    """Defect: a preemptible job needed a borrow limit even on its own idle guarantee."""
    quotas = [Quota("vision", A100, 16), Quota("nlp", A100, 16)]  # no borrow limit anywhere
    result = cycle(snapshot(nodes(4), [job(1, preemptible=True)], quotas=quotas))
    assert admitted(result) == [1] and result.admits[0].borrowed == 0
    # The guarantee is taken by vision's own jobs: beyond it a preemptible job borrows, within the borrow limit.
    busy = [running(100, "vision", {"n0": 8}), running(101, "vision", {"n1": 8})]
    w = waits(cycle(snapshot(nodes(4), [job(1, preemptible=True)], busy, quotas=quotas)))[1]
    assert w.code == "quota"
    quotas = [Quota("vision", A100, 16, borrow_limit=8), Quota("nlp", A100, 16)]
    result = cycle(snapshot(nodes(4), [job(1, preemptible=True)], busy, quotas=quotas))
    assert admitted(result) == [1] and result.admits[0].borrowed == 8


def test_a_projects_job_takes_its_guarantee_back_from_its_own_preemptible_jobs():
    quotas = [Quota("vision", A100, 16), Quota("nlp", A100, 16)]
    busy = [running(100, "vision", {"n0": 8}, priority=0, preemptible=True),
            running(101, "vision", {"n1": 8}, priority=0, preemptible=True),
            running(102, "nlp", {"n2": 8}), running(103, "nlp", {"n3": 8})]
    result = cycle(snapshot(nodes(4), [job(1)], busy, quotas=quotas))
    assert admitted(result) == [1] and len(result.preemptions) == 1 and victims(result)[0] in (100, 101)


def test_preemptible_jobs_may_borrow_only_within_their_borrow_limit():
    quotas = [Quota("vision", A100, 8), Quota("nlp", A100, 24)]
    busy = [running(100, "vision", {"n0": 8})]
    w = waits(cycle(snapshot(nodes(4), [job(1, preemptible=True)], busy, quotas=quotas)))[1]
    assert w.code == "quota" and "borrow" in w.reason


def test_a_borrowing_job_evicts_another_projects_preemptible_jobs_from_capacity_it_may_borrow():
    """Defect: a normal job that must borrow could not evict another project's preemptible jobs holding the idle
    capacity it is allowed."""
    quotas = [Quota("vision", A100, 0, borrow_limit=16), Quota("ops", A100, 0, borrow_limit=16),
              Quota("nlp", A100, 16)]
    busy = [running(100, "ops", {"n0": 8}, priority=0, preemptible=True)]
    result = cycle(snapshot(nodes(2), [job(1, replicas=2)], busy, quotas=quotas))
    assert admitted(result) == [1] and victims(result) == [100]
    assert result.admits[0].borrowed == 16
    # Not when its quota would not allow the room anyway: nlp's guarantee belongs to another organization here.
    projects = [Project("vision", "acme"), Project("ops", "acme"), Project("nlp", "globex")]
    result = cycle(snapshot(nodes(2), [job(1, replicas=2)], busy, quotas=quotas, projects=projects))
    assert admitted(result) == [] and result.preemptions == ()


def test_reclaim_takes_young_jobs_on_one_node_rather_than_hours_of_work():
    """Young 1-GPU borrowers are scattered; their project stops borrowing before any node is whole, so the
    preference order would reach a 4-hour-old 8-GPU job. The four young jobs on one node lose minutes instead."""
    quotas = [Quota("vision", A100, 4, borrow_limit=16), Quota("speech", A100, 4, borrow_limit=16),
              Quota("nlp", A100, 16)]
    busy = [running(100, "speech", {"n0": 8}, started_at=NOW - 4 * 3600)]
    busy += [running(101 + k, "vision", {f"n{1 + k % 2}": 1}, started_at=NOW - 100.0 * (k + 1)) for k in range(8)]
    result = cycle(snapshot(nodes(3), [job(1, project="nlp")], busy, quotas=quotas, now=NOW))
    assert admitted(result) == [1]
    assert victims(result) == [101, 103, 105, 107]  # the vision jobs on n1, 100 to 700 s old
    assert result.admits[0].placement[0].node == "n1"
    # A young victim with two replicas on one node is counted (and evicted) once.
    busy[2] = RunningJob(102, "vision", 500, NOW - 200.0, (Assignment("worker", 0, "n2", 1),
                                                          Assignment("worker", 1, "n2", 1)), A100)
    del busy[8]  # vision still holds 8: 4 on n1, 4 on n2 with job 102's two
    result = cycle(snapshot(nodes(3), [job(1, project="nlp")], busy, quotas=quotas, now=NOW))
    assert victims(result) == [102, 104, 106] and admitted(result) == [1]


LOST_WORK_CASES = [
    # (name, nlp's jobs on n0 and n1: (started, checkpointed) seconds before NOW and preemptible, expected victim)
    ("no checkpoints: the one started last", ((7200.0, None, False), (1800.0, None, False)), 101),
    ("the one that just checkpointed loses less than the one started last", ((7200.0, 60.0, False),
                                                                              (1800.0, None, False)), 100),
    ("a checkpoint older than the attempt's start is an earlier attempt's", ((1800.0, 3600.0, False),
                                                                             (7200.0, 3600.0, False)), 100),
    ("of two that checkpointed, the one that did so last", ((7200.0, 600.0, False), (7200.0, 300.0, False)), 101),
    ("preemptible first, however much it loses", ((1800.0, 60.0, False), (7200.0, None, True)), 101),
]


@pytest.mark.parametrize("name,busy,expect", LOST_WORK_CASES, ids=[c[0] for c in LOST_WORK_CASES])
def test_of_equal_victims_the_one_losing_the_least_work_goes(name, busy, expect):
    """vision takes its guarantee back from nlp, which borrows it with two jobs of 8 on n0 and n1: of the victims
    the rules rank equal, the one whose work since its last checkpoint (or its start) is the least goes."""
    jobs = [running(100 + k, "nlp", {f"n{k}": 8}, started_at=NOW - started, preemptible=preemptible,
                    checkpointed_at=None if ago is None else NOW - ago)
            for k, (started, ago, preemptible) in enumerate(busy)]
    quotas = [Quota("vision", A100, 8), Quota("nlp", A100, 8, borrow_limit=8)]
    result = cycle(snapshot(nodes(2), [job(1)], jobs, quotas, now=NOW))
    assert admitted(result) == [1] and victims(result) == [expect]


def test_a_job_that_just_checkpointed_goes_before_young_ones_that_would_lose_more():
    """As in the test above, but speech's 8-GPU job checkpointed a minute ago: evicting it loses 8 GPU-minutes,
    less than the four young vision jobs on n1 (1,600 GPU-seconds), so it goes, and the one-node choice agrees."""
    quotas = [Quota("vision", A100, 4, borrow_limit=16), Quota("speech", A100, 4, borrow_limit=16),
              Quota("nlp", A100, 16)]
    busy = [running(100, "speech", {"n0": 8}, started_at=NOW - 4 * 3600, checkpointed_at=NOW - 60.0)]
    busy += [running(101 + k, "vision", {f"n{1 + k % 2}": 1}, started_at=NOW - 100.0 * (k + 1)) for k in range(8)]
    result = cycle(snapshot(nodes(3), [job(1, project="nlp")], busy, quotas=quotas, now=NOW))
    assert admitted(result) == [1] and victims(result) == [100]


DRAIN_CASES = [
    # (name, seconds until nlp's job 100 on n0 ends (None: no max runtime), nlp's further jobs on n1,
    #  expected: (admitted, victims, wait code of vision's job))
    ("a node drains within a minute: waiting costs 480 device-seconds against 28,800 lost", 60.0, (),
     ([], [], "capacity")),
    ("the node drains in 2 h: waiting would cost more than evicting loses", 7200.0, (), ([1], [100], None)),
    ("no end known: evicts as before", None, (), ([1], [100], None)),
    ("capacity short, not scattered: the guarantee is taken back at once", 60.0, ({"n1": 2},), ([1], [100], None)),
]


@pytest.mark.parametrize("name,ends_in,more,expect", DRAIN_CASES, ids=[c[0] for c in DRAIN_CASES])
def test_a_reclaim_that_only_defragments_waits_for_a_node_to_drain_when_that_costs_less(name, ends_in, more,
                                                                                        expect):
    """vision (owed 12, using none) asks for a whole node; nlp borrows with a 4-GPU job on each node, 2 and 3 h
    old, so 8 devices are free but scattered. Evicting a job throws its hours away while it restarts at once on what
    is free; when a node drains soon enough, vision waits for it with a reservation instead (backfill.drains_instead).
    """
    busy = [running(100, "nlp", {"n0": 4}, started_at=NOW - 7200.0,
                    max_runtime=None if ends_in is None else 7200.0 + ends_in),
            running(101, "nlp", {"n1": 4}, started_at=NOW - 3 * 3600.0)]
    busy += [running(102 + k, "nlp", placement, started_at=NOW - 3 * 3600.0) for k, placement in enumerate(more)]
    quotas = [Quota("vision", A100, 12), Quota("nlp", A100, 4, borrow_limit=12)]
    result = cycle(snapshot(nodes(2), [job(1)], busy, quotas, now=NOW))
    admits, evicted, code = expect
    assert admitted(result) == admits and victims(result) == evicted
    if code is None:
        return
    assert waits(result)[1].code == code
    held = result.reservations[0]  # it starts when job 100 ends, on n0
    assert (held.job_id, held.start, [a.node for a in held.placement]) == (1, NOW + ends_in, ["n0"])
    # The drained room is vision's: a later job that would still run then does not take n0's four free devices.
    later = job(2, project="nlp", devices=4, submitted_at=NOW - 1.0)
    result = cycle(snapshot(nodes(2), [job(1), later], busy, quotas, now=NOW))
    assert admitted(result) == [] and victims(result) == []
    after = [r for r in busy if r.id != 100]
    result = cycle(snapshot(nodes(2), [job(1)], after, quotas, now=NOW + ends_in))
    assert admitted(result) == [1] and result.admits[0].placement[0].node == "n0"


GRACE_CASES = [
    # (name, Policy.reclaim_grace, cycles: (seconds since the owner's job was queued, borrower jobs ended by
    #  then), expected per cycle: (admitted, victims, wait code of the owner's job))
    ("no grace: reclaims at once", 0.0, [(2.0, ())], [([1], [102], None)]),
    ("within the grace: waits, nobody preempted", 30.0, [(2.0, ())], [([], [], "reclaim")]),
    ("capacity freed within the grace goes to the owner without preempting", 30.0,
     [(2.0, ()), (12.0, (101,))], [([], [], "reclaim"), ([1], [], None)]),
    ("grace over with nothing freed: reclaims", 30.0, [(2.0, ()), (30.0, ())],
     [([], [], "reclaim"), ([1], [102], None)]),
    ("a preemptible job of another project is spared for the grace too", 30.0, [(2.0, ()), (30.0, ())],
     [([], [], "reclaim"), ([1], [102], None)]),
]


@pytest.mark.parametrize("name,grace,steps,expect", GRACE_CASES, ids=[c[0] for c in GRACE_CASES])
def test_reclaim_waits_for_its_grace(name, grace, steps, expect):
    """nlp borrows vision's guarantee; its job 102 started 3 s before vision's job was queued (at NOW)."""
    preemptible = "preemptible" in name
    quotas = [Quota("vision", A100, 8), Quota("nlp", A100, 8, borrow_limit=8)]
    busy = [running(101, "nlp", {"n0": 8}, started_at=NOW - 3600, max_runtime=7200.0),
            running(102, "nlp", {"n1": 8}, started_at=NOW - 3, max_runtime=7200.0, preemptible=preemptible)]
    owner = job(1, submitted_at=NOW - 600, queued_at=NOW)  # requeued at NOW: its grace counts from then
    policy = Policy(reclaim_grace=grace)
    for (after, ended), (expect_admits, expect_victims, code) in zip(steps, expect, strict=True):
        snap = snapshot(nodes(2), [owner], [r for r in busy if r.id not in ended], quotas, now=NOW + after)
        result = cycle(snap, policy)
        assert (admitted(result), victims(result)) == (expect_admits, expect_victims)
        assert (waits(result)[1].code if 1 in waits(result) else None) == code
        if code == "reclaim":
            assert result.wake_at == NOW + grace
            assert f"project nlp in {int(grace - after)}s unless capacity frees first" in waits(result)[1].reason
            # Its estimated start: the end of its grace, when it would preempt (nothing ends before).
            assert forecast(snap, policy, 8) == {1: NOW + grace}
        else:
            assert result.wake_at is None


def test_the_grace_does_not_delay_preemption_within_a_project():
    busy = [running(100, "vision", {"n0": 8}, priority=100, started_at=NOW - 3)]
    snap = snapshot(nodes(1), [job(1, submitted_at=NOW)], busy, [Quota("vision", A100, 8)], now=NOW + 1)
    result = cycle(snap, Policy(reclaim_grace=60.0))
    assert victims(result) == [100] and admitted(result) == [1] and result.wake_at is None


def test_what_a_job_in_its_grace_would_take_back_is_spared_for_it():
    """Defect (the quiet-cluster property): a job of lower priority whose grace had ended took back what a job of
    its project still in its grace waited for, and the next cycle preempted it for that job. The grace's job has
    those victims to itself: they keep running until its grace ends, then go to it."""
    quotas = [Quota("vision", A100, 8), Quota("nlp", A100, 8, borrow_limit=8)]
    busy = [running(100, "nlp", {"n0": 8}, started_at=NOW - 3600), running(101, "nlp", {"n1": 8})]
    early = job(2, priority=500, submitted_at=NOW - 600)  # queued 600 s ago: its grace has ended
    late = job(1, priority=1000, submitted_at=NOW)  # queued now: in its grace for 60 s
    policy = Policy(reclaim_grace=60.0)
    for now in (NOW, NOW + 30):  # the same answer, cycle after cycle, until the grace ends
        result = cycle(snapshot(nodes(2), [early, late], busy, quotas, now=now), policy)
        assert (admitted(result), victims(result), result.wake_at) == ([], [], NOW + 60)
        assert {i: w.code for i, w in waits(result).items()} == {1: "reclaim", 2: "quota"}
        assert "its borrowers' jobs are preempted to give it back as soon as they may be" in waits(result)[2].reason
    result = cycle(snapshot(nodes(2), [early, late], busy, quotas, now=NOW + 60), policy)
    assert (admitted(result), victims(result)) == ([1], [101])  # the youngest borrower's job


def test_a_head_holds_no_quota_of_a_flavor_it_asks_no_devices_of():
    """Defect (the quiet-cluster property): a head whose launcher asks no devices on an A100 node held its
    project's A100 quota, so the head waiting for A100 quota reserved none, and a job behind that one was kept
    out in one cycle and let in the next, once the first head waited on something else."""
    quotas = [Quota("vision", A100, 8), Quota("vision", H100, 8)]
    busy = [running(100, "vision", {"n0": 8}, max_runtime=3600.0),
            running(101, "vision", {"h0": 8}, flavor=H100, max_runtime=3600.0)]
    launcher = PendingJob(1, "vision", 1000, 1.0, (ReplicaGroup("launcher", 1, 0, A100),
                                                   ReplicaGroup("worker", 1, 8, H100)))
    a100_head = job(2, priority=900)
    snap = snapshot(nodes(2) + nodes(1, flavor=H100, prefix="h"), [launcher, a100_head], busy, quotas)
    run = Cycle(snap, Policy(borrowing=False, preemption=False, reserve_after=0.0))
    run.run()
    holds = {key: hold.job_id for key, hold in run.state.quota_holds.items()}
    assert holds == {("vision", H100): 1, ("vision", A100): 2}


def test_a_head_admitted_after_it_reserved_keeps_no_reservation():
    """Defect (a property, on new examples): a head waiting for its project's running-job slot reserved it, a
    later job's preemption freed the slot, the head was evaluated again and admitted, and its reservation stayed
    in the result. Admitted, a head's reservations go (and a head that reserved is still evaluated again: left to
    the next cycle, it preempted what a later job took meanwhile)."""
    quotas = [Quota("vision", A100, 8), Quota("nlp", A100, 0, borrow_limit=8)]
    projects = [Project("vision", "org"), Project("nlp", "org", max_running_jobs=1)]
    node_list = nodes(1) + nodes(1, devices=1, start=1)  # n0 (8 GPUs) that nlp borrows, n1 (1 GPU) free
    borrower = running(100, "nlp", {"n0": 8}, priority=1000, max_runtime=3600.0)
    head = job(1, project="nlp", devices=1, priority=1000, max_runtime=600.0)
    owner = job(2, priority=500)  # takes its guarantee back from nlp
    snap = snapshot(node_list, [head, owner], [borrower], quotas, projects)
    result = cycle(snap, Policy(ordering="fifo", blocking="backfill"))
    assert (admitted(result), victims(result), result.reservations) == ([1, 2], [100], ())


def test_a_job_evaluated_again_that_now_blocks_its_queue_closes_it_without_explanations():
    """Strict FIFO without explanations (trace replay, forecasts): the order stops yielding a queue's jobs once its
    head blocks it, also when the head became so on being evaluated again after a commit, so exactly the jobs the
    explained cycle calls "blocked" get no Wait (builders.check_invariants). Found by the pools property test:
    p0's gang 11 is admitted first, given back when p1's job 9 takes its guarantee back, then waits; before, p0's
    job 8 behind it was still evaluated."""
    usable = nodes(2)
    lent = tuple(replace(n, pool="pl") for n in nodes(4, start=2))
    quotas = [Quota("p0", A100, 8, borrow_limit=64), Quota("p1", A100, 32, borrow_limit=0, lend_limit=0)]
    projects = [Project("p0", "o1"), Project("p1", "o2"), Project("p2", "o2")]
    pending = [job(11, project="p0", replicas=2, priority=1000, submitted_at=9940.0),
               job(9, project="p1", replicas=2, devices=4, submitted_at=9940.0),
               job(8, project="p0", replicas=3, devices=4, flavor=H100, submitted_at=9998.0),
               job(3, project="p2", devices=1, submitted_at=9999.0), job(5, project="p2", submitted_at=9999.0)]
    snap = replace(snapshot(usable + lent, pending, (), quotas, projects, now=10000.0), pools=(Pool("pl", 32),))
    policy = Policy(ordering="fifo", blocking="strict", explain=False)
    result = cycle(snap, policy)
    explained = run_cycle(snap, replace(policy, explain=True))
    assert admitted(result) == admitted(explained) and victims(result) == victims(explained)
    assert 8 not in waits(result) and waits(explained)[8].code == "blocked"


def test_a_job_behind_its_queues_new_head_evaluated_again_gets_no_wait_without_explanations():
    """The same rule for the job behind such a head (found by the elastic property test, exploring): p1's job 3 is
    admitted borrowing, p1's job 8 then waits and blocks p1, p0's job 5 takes its guarantee back and 3 is given
    back; evaluated again, 3 now blocks p1, and 8, evaluated again after it, is behind it. Without explanations it
    got a "blocked" Wait; the explained cycle calls it blocked, so it gets none."""
    quotas = [Quota("p0", A100, 8, borrow_limit=0), Quota("p1", A100, 0, borrow_limit=8, lend_limit=8),
              Quota("p3", A100, 32, borrow_limit=8)]
    projects = [Project("p0", "o2"), Project("p1", "o1"), Project("p3", "o1")]
    pending = [job(3, project="p1", priority=1000, submitted_at=9940.0),
               job(8, project="p1", submitted_at=9940.0),
               job(5, project="p0", submitted_at=9999.0)]
    snap = snapshot(nodes(1), pending, (), quotas, projects, now=10000.0)
    policy = Policy(ordering="fifo", blocking="strict", explain=False)
    result = cycle(snap, policy)
    explained = run_cycle(snap, replace(policy, explain=True))
    assert admitted(result) == admitted(explained) == [5]
    assert waits(explained)[8].code == "blocked" and 8 not in waits(result)


def test_jobs_asking_the_same_devices_in_another_order_are_told_of_the_same_flavor():
    """Defect (the consecutive-cycles property, exploring): a quota check reports the first flavor that fails, in
    the order the job's groups named them, but remembered answers and reasons are shared by every job of the same
    devices per flavor; so of two such jobs failing on both flavors, the plain mode told each of the flavor the
    first one explained named, the accelerated mode of the one the first one checked named."""
    quotas = [Quota("p0", A100, 0, borrow_limit=8), Quota("p0", H100, 16, borrow_limit=8)]
    busy = [running(100, "p0", {"h0": 8}, flavor=H100), running(101, "p0", {"h1": 1}, flavor=H100)]
    a100_first = PendingJob(1, "p0", 500, 1.0, (ReplicaGroup("master", 1, 1, A100),
                                                ReplicaGroup("worker", 1, 8, H100)))
    h100_first = PendingJob(2, "p0", 500, 2.0, (ReplicaGroup("master", 1, 8, H100),
                                                ReplicaGroup("worker", 1, 1, A100)))
    between = job(3, "p1", devices=8, submitted_at=1.5)  # admitted between them: the quota state moves on
    quotas.append(Quota("p1", A100, 8))
    snap = snapshot(nodes(2) + nodes(3, flavor=H100, prefix="h"), [h100_first, between, a100_first], busy, quotas)
    policy = Policy(ordering="fifo", blocking="skip", borrowing=False)
    result = cycle(snap, policy)
    assert run_cycle(snap, policy, accelerate=False) == result
    told = {w.job_id: w.reason for w in result.waits}
    assert told[1] == told[2] and "a100" in told[1], told


def test_a_head_evaluated_again_is_not_held_to_a_later_heads_quota_hold():
    """Defect (the quiet-cluster property, on new examples): two heads of a project at its running-job limit each
    held a slot; when a commit freed one, each, evaluated again, was kept out by the other's hold, and the next
    cycle admitted the first. A quota hold keeps out only the jobs after its head in the cycle."""
    quotas = [Quota("vision", A100, 8), Quota("nlp", A100, 0, borrow_limit=8), Quota("nlp", H100, 1)]
    projects = [Project("vision", "org"), Project("nlp", "org", max_running_jobs=1)]
    node_list = nodes(1) + nodes(1, devices=2, start=1) + nodes(1, flavor=H100, devices=1, prefix="h")
    borrower = running(100, "nlp", {"n0": 8}, priority=1000, max_runtime=3600.0)
    first = job(1, project="nlp", devices=1, priority=1000)
    second = job(2, project="nlp", devices=1, flavor=H100, priority=500)
    owner = job(3, priority=100)  # takes its guarantee back from nlp
    snap = snapshot(node_list, [first, second, owner], [borrower], quotas, projects)
    result = cycle(snap, Policy(ordering="fifo", blocking="backfill"))
    assert (admitted(result), victims(result)) == ([1, 3], [100])
    assert waits(result)[2].code == "max_running"


def test_a_head_no_longer_kept_out_by_its_own_quota_gives_up_its_quota_hold():
    """Defect (the busy worlds of bench_scheduler.py, their simulation and retry budgets lifted): a head its
    project's borrow limit kept out held its project's quota; another organization's job then took back a
    preemptible job of that project, and the head, evaluated again, waited for what its organization can lend,
    which reserves nothing, yet kept its hold: a later job of its project was held to it, and the next cycle, with
    no hold, admitted that job by preempting the project's lower priority. The hold goes when the head no longer
    waits for its own project's limits, and the jobs it kept out are evaluated again in the same cycle."""
    node_list = nodes(3)  # 24 devices, all guaranteed: nothing unowned
    quotas = [Quota("vision", A100, 16, borrow_limit=16), Quota("nlp", A100, 16)]
    projects = [Project("vision", "org1"), Project("nlp", "org2")]
    low = running(100, "vision", {"n0": 8}, priority=100)
    lent = running(101, "vision", {"n1": 8}, priority=100, preemptible=True)
    # 8 + 8 + 24 = 40, 24 over the guarantee: over the borrow limit, and with both gone over what org1 can lend
    head = job(1, replicas=3, priority=1000)
    owner = job(2, project="nlp", replicas=2, priority=700)  # takes n1 back from the preemptible job
    later = job(3, priority=500)  # within vision's guarantee once the preemptible job is gone: takes n0 back
    snap = snapshot(node_list, [head, owner, later], [low, lent], quotas, projects)
    policy = Policy(ordering="fifo", blocking="backfill")
    first = cycle(snap, policy)
    assert run_cycle(snap, policy, accelerate=False) == first
    assert (admitted(first), victims(first)) == ([2, 3], [100, 101])
    assert waits(first)[1].code == "quota" and "organization org1 has only 0" in waits(first)[1].reason
    assert first.reservations == ()
    again = cycle(carry_out(snap, first, NOW), policy)
    assert again.preemptions == () and admitted(again) == []


def test_a_job_held_to_its_projects_heads_names_the_head_holding_its_flavor():
    """Defect (read in the busy worlds' waits): a job kept out by the quota holds of its project's heads named the
    first of them, a head of another flavor, whose hold cannot keep it out."""
    node_list = nodes(1) + nodes(2, flavor=H100, prefix="h")
    quotas = [Quota("vision", A100, 8), Quota("vision", H100, 16)]
    a100_work = running(100, "vision", {"n0": 8}, priority=2000)  # never a victim of the jobs below
    h100_work = running(101, "vision", {"h0": 8}, flavor=H100, priority=2000)
    first = job(1, priority=1000)  # over its A100 guarantee: holds A100 quota
    second = job(2, replicas=2, flavor=H100, priority=900)  # over its H100 guarantee: holds H100 quota
    third = job(3, flavor=H100, priority=800)  # fits its guarantee, but not beside the second
    snap = snapshot(node_list, [first, second, third], [a100_work, h100_work], quotas)
    result = cycle(snap, Policy(ordering="fifo", blocking="backfill"))
    assert admitted(result) == []
    assert waits(result)[3].reason.startswith("project vision's quota is held for its job 2,"), waits(result)[3]


def test_preemptible_jobs_never_preempt():
    node_list = nodes(1)
    jobs = [running(100, "vision", {"n0": 8}, priority=100)]
    result = cycle(snapshot(node_list, [job(1, priority=1000, preemptible=True)], jobs,
                            [Quota("vision", A100, 8, borrow_limit=8)]))
    assert result.preemptions == ()


# -- topology and placement -----------------------------------------------------------------------------------

def test_single_replica_best_fit_lowest_index_on_ties():
    node_list = (Node("a", A100, 8, 8), Node("b", A100, 8, 5), Node("c", A100, 8, 4), Node("d", A100, 8, 4))
    snap = snapshot((), [job(1, devices=4)], quotas=[Quota("vision", A100, 64)])
    snap = snap.__class__(snap.now, node_list, snap.quotas, snap.projects, (), snap.pending)
    assert [a.node for a in cycle(snap).admits[0].placement] == ["c"]


def test_whole_node_gang_uses_free_nodes_lowest_index_first():
    node_list = nodes(5)
    busy = [running(100, "nlp", {"n1": 2})]
    snap = snapshot(node_list, [job(1, replicas=3)], busy, quotas=[Quota("vision", A100, 64),
                                                                   Quota("nlp", A100, 8)])
    assert [a.node for a in cycle(snap).admits[0].placement] == ["n0", "n2", "n3"]


def test_a_gang_fits_where_its_biggest_replica_would_first_take_the_node_its_master_needs():
    """Defect (the preemption search's property, on new examples): replicas were placed biggest first, each best
    fit, so the worker took the node whose CPU the master then needed, and the gang waited beside room it fits in;
    freeing more room could make it stop fitting, which the victim search (shortest prefix, then fill-back)
    cannot rely on. The master is tried on each node it fits on when that order fails."""
    node_list = (Node("small", A100, 4, 4, cpu_millis=64000, free_cpu_millis=64000),
                 Node("big", A100, 8, 8, cpu_millis=16000, free_cpu_millis=16000))
    gang = PendingJob(1, "vision", 500, 1.0, (ReplicaGroup("master", 1, 1, A100, 24000),
                                              ReplicaGroup("worker", 1, 4, A100, 16000)))
    snap = snapshot(node_list, [gang], quotas=[Quota("vision", A100, 16)])
    result = cycle(snap)
    assert run_cycle(snap, Policy(), accelerate=False) == result
    assert {a.role: a.node for a in result.admits[0].placement} == {"master": "small", "worker": "big"}


def test_gang_packs_into_the_fullest_rack_that_fits():
    node_list = nodes(6, rack_size=3)  # racks nr0 (n0-n2) and nr1 (n3-n5)
    busy = [running(100, "nlp", {"n3": 8})]  # nr1 has 2 free nodes: the tightest fit for 2 x 8
    snap = snapshot(node_list, [job(1, replicas=2)], busy, quotas=[Quota("vision", A100, 64),
                                                                   Quota("nlp", A100, 8)])
    assert sorted(a.node for a in cycle(snap).admits[0].placement) == ["n4", "n5"]


@pytest.mark.parametrize("topology,expect", [
    (Topology.REQUIRE_SAME_RACK, "topology"),
    (Topology.NONE, None),
    (Topology.PREFER_SAME_RACK, None),
])
def test_required_rack(topology, expect):
    node_list = nodes(4, rack_size=2)
    busy = [running(100, "nlp", {"n0": 8}), running(101, "nlp", {"n2": 8})]
    snap = snapshot(node_list, [job(1, replicas=2, topology=topology)], busy,
                    quotas=[Quota("vision", A100, 64), Quota("nlp", A100, 16)])
    result = cycle(snap)
    if expect is None:
        assert admitted(result) == [1]
    else:
        w = waits(result)[1]
        assert w.code == expect
        assert w.reason == "needs 2 x 8 nvidia-a100-40gb in one rack; largest free rack has room for 1 replica"


def test_required_block():
    node_list = nodes(8, rack_size=2, block_size=2)  # blocks nb0 = n0..n3, nb1 = n4..n7
    busy = [running(100 + k, "nlp", {f"n{k}": 8}) for k in (0, 1, 4)]
    snap = snapshot(node_list, [job(1, replicas=3, topology=Topology.REQUIRE_SAME_BLOCK)], busy,
                    quotas=[Quota("vision", A100, 64), Quota("nlp", A100, 24)])
    result = cycle(snap)
    assert sorted(a.node for a in result.admits[0].placement) == ["n5", "n6", "n7"]


# -- backfill and blocking ------------------------------------------------------------------------------------

def backfill_snapshot(later: list[PendingJob]):
    node_list = nodes(3)
    busy = [running(100, "nlp", {"n0": 8}, started_at=0.0, max_runtime=2000.0),
            running(101, "nlp", {"n1": 8}, started_at=0.0, max_runtime=5000.0)]
    head = job(1, replicas=2, max_runtime=3600.0, submitted_at=WAITED)
    quotas = [Quota("vision", A100, 64, borrow_limit=0), Quota("nlp", A100, 16)]
    return snapshot(node_list, [head, *later], busy, quotas, now=NOW)


def test_backfill_reserves_the_head_and_admits_only_jobs_ending_before():
    snap = backfill_snapshot([job(2, max_runtime=5000.0), job(3), job(4, max_runtime=500.0)])
    result = cycle(snap)
    (res,) = result.reservations
    assert res.job_id == 1 and res.start == 2000.0
    assert sorted(a.node for a in res.placement) == ["n0", "n2"]
    assert admitted(result) == [4]  # ends at 1500, before the reservation at 2000
    assert forecast(snap, Policy(), 8)[1] == 2000.0
    # Without the short job, the held node n2 is still free at the end of the cycle: the reason says why.
    w = waits(cycle(backfill_snapshot([job(2, max_runtime=5000.0), job(3)])))
    assert w[2].code == "reserved" and "max runtime of 1h23m would end after that" in w[2].reason
    assert w[3].code == "reserved" and "without a max runtime" in w[3].reason


QUOTA_HEAD_CASES = [
    # (name, guarantee, nodes, running (node, devices, max_runtime), pending (id, devices, max_runtime) after the
    #  head (job 1, 2 x 8), expected admits, expected reservation start of the head)
    ("a later job of the project that would run past the head's start waits; one ending before runs",
     16, 2, [("n0", 8, 1000.0), ("n1", 4, 2000.0)], [(2, 4, 5000.0), (3, 4, 500.0)], [3], NOW + 2000),
    ("later jobs may take the quota the head will not need at its start",
     24, 4, [("n0", 8, 1000.0), ("n1", 4, 2000.0)], [(2, 4, 5000.0), (3, 4, 5000.0)], [2], NOW + 1000),
    ("with running jobs of unknown end, no later job takes the quota the head waits for",
     16, 2, [("n0", 8, None), ("n1", 4, 2000.0)], [(2, 4, 5000.0), (3, 4, 500.0)], [], None),
]


@pytest.mark.parametrize("name,guarantee,node_count,busy,later,expect_admits,expect_start", QUOTA_HEAD_CASES,
                         ids=[c[0] for c in QUOTA_HEAD_CASES])
def test_a_head_its_own_quota_keeps_out_reserves_that_quota(name, guarantee, node_count, busy, later,
                                                             expect_admits, expect_start):
    busy_jobs = [running(100 + k, "vision", {n: d}, started_at=NOW, max_runtime=m)
                 for k, (n, d, m) in enumerate(busy)]
    pending = [job(1, replicas=2, max_runtime=3600.0, submitted_at=WAITED)] + [job(i, devices=d, max_runtime=m)
                                                                            for i, d, m in later]
    result = cycle(snapshot(nodes(node_count), pending, busy_jobs, quotas=[Quota("vision", A100, guarantee)], now=NOW))
    assert admitted(result) == expect_admits
    head = waits(result)[1]
    assert head.code == "quota"
    assert [(r.job_id, r.start) for r in result.reservations] == ([] if expect_start is None else [(1, expect_start)])
    for job_id in set(waits(result)) - {1}:
        assert waits(result)[job_id].reason.startswith("project vision's quota is held for its job 1, which can start")


PROMISE_CASES = [
    # (name, what keeps the head out, seconds it has been queued, Policy.reserve_after, expected admits among the
    #  later jobs 2 (ends at NOW + 20,000) and 3 (ends at NOW + 3,000), expected reservation start of the head)
    # The jobs running when it arrived end at NOW + 1,000 and NOW + 2,000: its earliest start is NOW + 2,000.
    ("just queued: a job ending before its promised start uses its room", "quota", 10.0, 4 * 3600.0, [3],
     NOW - 10.0 + 4 * 3600.0),
    ("just queued, waiting for capacity: the same", "capacity", 10.0, 4 * 3600.0, [3], NOW - 10.0 + 4 * 3600.0),
    ("queued reserve_after ago: its earliest start", "quota", 4 * 3600.0, 4 * 3600.0, [], NOW + 2000.0),
    ("queued reserve_after ago, waiting for capacity: its earliest start", "capacity", 4 * 3600.0, 4 * 3600.0, [],
     NOW + 2000.0),
    ("reserve_after 0: its earliest start at once", "quota", 10.0, 0.0, [], NOW + 2000.0),
    ("a promise nearer than its earliest start: its earliest start", "quota", 10.0, 1000.0, [], NOW + 2000.0),
]


@pytest.mark.parametrize("name,kind,queued,reserve_after,expect_admits,expect_start", PROMISE_CASES,
                         ids=[c[0] for c in PROMISE_CASES])
def test_a_head_is_promised_its_start_reserve_after_it_was_queued(name, kind, queued, reserve_after, expect_admits,
                                                                  expect_start):
    """A gang that cannot start yet (its own quota, or capacity others hold, keeps it out) reserves a start no
    earlier than reserve_after after it was queued: until then later jobs that end by then may use its room, and
    one that would still run then never does, so the promise holds."""
    busy = [running(100, "vision", {"n0": 8}, started_at=NOW, max_runtime=1000.0),
            running(101, "vision" if kind == "quota" else "nlp", {"n1": 4}, started_at=NOW, max_runtime=2000.0)]
    pending = [job(1, replicas=2, max_runtime=3600.0, submitted_at=NOW - queued),
               job(2, devices=4, max_runtime=20_000.0, submitted_at=NOW),
               job(3, devices=4, max_runtime=3000.0, submitted_at=NOW)]
    quotas = [Quota("vision", A100, 16)] if kind == "quota" else [Quota("vision", A100, 64), Quota("nlp", A100, 4)]
    result = cycle(snapshot(nodes(2), pending, busy, quotas=quotas, now=NOW), Policy(reserve_after=reserve_after))
    assert waits(result)[1].code == ("quota" if kind == "quota" else "capacity")
    assert [(r.job_id, r.start) for r in result.reservations] == [(1, expect_start)]
    assert admitted(result) == expect_admits


def test_skip_lets_any_fitting_job_pass():
    snap = backfill_snapshot([job(3, max_runtime=5000.0)])
    result = cycle(snap, Policy(blocking="skip"))
    assert admitted(result) == [3] and result.reservations == ()


@pytest.mark.parametrize("scope,expect_admits", [("project", [3]), ("global", [])])
def test_strict_blocking(scope, expect_admits):
    snap = snapshot(nodes(3), [job(1, replicas=3), job(2), job(3, project="nlp")],
                    [running(100, "ops", {"n0": 8})],
                    quotas=[Quota("vision", A100, 64), Quota("nlp", A100, 64), Quota("ops", A100, 8)])
    result = cycle(snap, Policy(ordering="fifo", blocking="strict", blocking_scope=scope))
    assert admitted(result) == expect_admits
    w = waits(result)[2]
    assert w.code == "blocked" and w.reason == "behind job 1 in strict FIFO order"


def blocked_backlog(backlog: int) -> Snapshot:
    """Two projects on their own node, each with an 8-GPU job running and an 8-GPU head waiting, then `backlog`
    1-GPU jobs of each behind the heads (in arrival order: the projects' jobs interleave)."""
    node_list = nodes(2, devices=8, free=0)
    runs = [running(100, "vision", {"n0": 8}), running(101, "nlp", {"n1": 8})]
    pending = [job(1, "vision"), job(2, "nlp")]
    pending += [job(10 + k, "vision" if k % 2 else "nlp", devices=1) for k in range(2 * backlog)]
    return snapshot(node_list, pending, runs, quotas=[Quota("vision", A100, 8), Quota("nlp", A100, 8)])


@pytest.mark.parametrize("ordering,scope", [("fifo", "project"), ("fifo", "global"), ("sjf", "project"),
                                            ("priority-fairshare", "project")])
def test_strict_blocked_backlog_is_not_evaluated_without_explanations(ordering, scope):
    """The work of a cycle does not grow with the jobs waiting behind blocked strict heads when nothing reads
    their waits (Policy.explain=False): only the heads are evaluated, whatever the backlog. With explanations
    on, every job is evaluated and the backlog gets its "blocked" waits, and the decisions are the same."""
    brief = Policy(ordering=ordering, blocking="strict", blocking_scope=scope, explain=False)
    evaluated = []
    for backlog in (10, 1000):
        snap = blocked_backlog(backlog)
        work = Cycle(snap, brief)
        work.run()
        evaluated.append(len(work.outcomes))
        result = cycle(snap, brief)
        full = cycle(snap, replace(brief, explain=True))
        assert result.admits == full.admits == ()
        assert len(full.waits) == 2 + 2 * backlog and {w.code for w in full.waits[2:]} == {"blocked"}
        assert sorted(w.job_id for w in result.waits) == ([1] if scope == "global" else [1, 2])
        assert result.stats == full.stats and result.stats["waiting"] == 2 + 2 * backlog
    assert evaluated == ([1, 1] if scope == "global" else [2, 2])


# -- ordering -------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("ordering,expect", [("fifo", [3]), ("sjf", [1]), ("priority-fairshare", [3])])
def test_ordering_policies(ordering, expect):
    pending = [job(3, submitted_at=1.0, duration_hint=900.0), job(1, submitted_at=2.0, duration_hint=10.0)]
    snap = snapshot(nodes(1), pending, quotas=[Quota("vision", A100, 64)])
    assert admitted(cycle(snap, Policy(ordering=ordering, blocking="skip", preemption=False))) == expect


@pytest.mark.parametrize("ordering", ["fifo", "sjf", "priority-fairshare"])
def test_every_order_takes_priority_first(ordering):
    """Defect: fifo and sjf let a job of lower priority start ahead of a waiting one of higher priority, which
    preempted it in the next cycle (a quiet cluster churned)."""
    pending = [job(3, submitted_at=1.0, duration_hint=900.0), job(1, submitted_at=2.0, duration_hint=10.0),
               job(2, submitted_at=3.0, priority=1000, duration_hint=None)]
    snap = snapshot(nodes(1), pending, quotas=[Quota("vision", A100, 64)])
    assert admitted(cycle(snap, Policy(ordering=ordering, blocking="skip", preemption=False))) == [2]


def test_fair_share_puts_a_project_with_past_bursts_behind():
    projects = [Project("vision", "org", decayed_usage=3600.0 * 64 * 24), Project("nlp", "org")]
    quotas = [Quota("vision", A100, 8, borrow_limit=8), Quota("nlp", A100, 8, borrow_limit=8)]
    pending = [job(1, project="vision", submitted_at=1.0), job(2, project="nlp", submitted_at=2.0)]
    snap = snapshot(nodes(1), pending, quotas=quotas, projects=projects)
    assert admitted(cycle(snap)) == [2]
    calm = snapshot(nodes(1), pending, quotas=quotas, projects=[Project("vision", "org"), Project("nlp", "org")])
    assert admitted(cycle(calm)) == [1]


def test_fair_share_counts_current_use_against_guarantee():
    quotas = [Quota("vision", A100, 16, borrow_limit=16), Quota("nlp", A100, 16, borrow_limit=16)]
    busy = [running(100, "vision", {"n0": 8})]  # vision uses 8/16, nlp 0/16
    pending = [job(1, project="vision", submitted_at=1.0), job(2, project="nlp", submitted_at=2.0)]
    snap = snapshot(nodes(2), pending, busy, quotas=quotas)
    assert admitted(cycle(snap)) == [2]


FAIR_CASES = [
    # (name, nodes, quotas, running, pending (id, project, flavor, priority), expected admits in cycle order)
    ("a job within its guarantee goes before an earlier one that would borrow that guarantee",
     nodes(2), [Quota("vision", A100, 8, borrow_limit=8), Quota("nlp", A100, 8)], [],
     [(1, "vision", A100, 500), (2, "vision", A100, 500), (3, "nlp", A100, 500)], [1, 3]),
    ("even before a borrowing job of higher priority",
     nodes(2), [Quota("vision", A100, 8, borrow_limit=8), Quota("nlp", A100, 8)], [],
     [(1, "vision", A100, 500), (2, "vision", A100, 1000), (3, "nlp", A100, 100)], [2, 3]),
    ("shares move as the cycle admits: equal guarantees split a burst",
     nodes(4), [Quota("vision", A100, 8, borrow_limit=32), Quota("nlp", A100, 8, borrow_limit=32)], [],
     [(1, "vision", A100, 500), (2, "vision", A100, 500), (3, "vision", A100, 500), (4, "vision", A100, 500),
      (5, "nlp", A100, 500), (6, "nlp", A100, 500), (7, "nlp", A100, 500), (8, "nlp", A100, 500)],
     [1, 5, 2, 6]),
    ("borrowed use of a flavor without guarantee counts: 56 borrowed H100s go behind an idle project",
     nodes(8, flavor=H100, prefix="h"),
     [Quota("vision", A100, 16), Quota("vision", H100, 0, borrow_limit=64),
      Quota("nlp", A100, 16), Quota("nlp", H100, 0, borrow_limit=64)],
     [running(100 + k, "vision", {f"h{k}": 8}, flavor=H100) for k in range(7)],
     [(1, "vision", H100, 500), (2, "nlp", H100, 500)], [2]),
]


@pytest.mark.parametrize("name,node_list,quotas,busy,pending,expect", FAIR_CASES, ids=[c[0] for c in FAIR_CASES])
def test_fair_order(name, node_list, quotas, busy, pending, expect):
    jobs = [job(i, project=p, flavor=f, priority=prio) for i, p, f, prio in pending]
    result = cycle(snapshot(node_list, jobs, busy, quotas), Policy(preemption=False))
    assert admitted(result) == expect


def test_no_borrow_then_reclaim_churn_across_cycles():
    quotas = [Quota("vision", A100, 8, borrow_limit=8), Quota("nlp", A100, 8)]
    snap = snapshot(nodes(2), [job(1), job(2), job(3, project="nlp")], quotas=quotas)
    first = cycle(snap)
    second = cycle(carry_out(snap, first, NOW + 60))
    assert admitted(first) == [1, 3] and victims(second) == [] and admitted(second) == []


def test_a_job_that_preempted_to_get_in_is_given_back_to_a_higher_priority_job_of_its_project():
    """Defect (the quiet-cluster property, on new examples): a job of lower priority that preempted to get in took
    room a higher-priority job of its project could use once a later job had preempted for CPU, and the next cycle
    preempted it for that job. It is given back in the cycle instead, its victim preempted for the job that took
    its place."""
    projects = [Project("p0", "org"), Project("p1", "org", max_running_jobs=2)]
    quotas = [Quota("p0", A100, 0), Quota("p1", A100, 1, borrow_limit=4)]
    spare = running(100, "p0", {"n0": 3}, priority=0, preemptible=True, cpu=8000)
    equal = running(101, "p1", {"n0": 1}, priority=100, preemptible=True, cpu=8000)  # 4's equal: not its victim
    pending = [job(4, project="p1", devices=4, priority=100),
               job(5, project="p0", replicas=4, devices=0, cpu=16000, priority=0),  # preempts `equal` for CPU
               job(6, project="p1", replicas=3, devices=1, priority=0)]  # preempts `spare`, and is given back
    snap = snapshot(nodes(1, devices=4, cpu=64000), pending, [spare, equal], quotas, projects)
    policy = Policy(ordering="fifo")
    first = cycle(snap, policy)
    assert run_cycle(snap, policy, accelerate=False) == first
    assert (admitted(first), victims(first)) == ([4, 5], [100, 101])
    assert {p.victim_id: p.for_job_id for p in first.preemptions} == {100: 4, 101: 5}
    assert waits(first)[6].code == "quota"
    again = cycle(carry_out(snap, first, NOW))
    assert (admitted(again), victims(again)) == ([], [])


def test_a_job_held_for_a_head_may_preempt_its_projects_lower_priorities_to_make_room_for_both():
    """Defect (the quiet-cluster property, on new examples): a job that passed its quota alone but not with its
    project's reserved head counted in waited without looking for victims; once a later job of the cycle raised
    the usage, it failed its quota alone too, and the next cycle preempted for it what this one could have."""
    quotas = [Quota("vision", A100, 8), Quota("vision", H100, 8)]
    low = running(100, "vision", {"n0": 4}, priority=100, max_runtime=3000.0)
    forever = running(101, "vision", {"h0": 4}, flavor=H100, priority=1000)  # no max runtime: the head's start
    head = PendingJob(3, "vision", 1000, 1.0, (ReplicaGroup("master", 1, 1, A100), ReplicaGroup("worker", 1, 8, H100)))
    pending = [head, job(1, devices=4, max_runtime=4000.0, submitted_at=2.0),
               job(2, devices=1, max_runtime=300.0, submitted_at=3.0)]
    snap = snapshot(nodes(2) + nodes(1, flavor=H100, prefix="h"), pending, [low, forever], quotas)
    first = cycle(snap)
    assert run_cycle(snap, Policy(), accelerate=False) == first
    assert (admitted(first), victims(first)) == ([1, 2], [100])
    assert waits(first)[3].code == "quota"  # over its borrow limit of h100: it holds the quota, unknown start
    again = cycle(carry_out(snap, first, NOW))
    assert (admitted(again), victims(again)) == ([], [])


def test_a_reclaim_takes_a_running_borrower_when_giving_back_this_cycles_does_not_make_room():
    """Found exploring the quiet-cluster property: vision borrows only through job 6, admitted in the cycle. Giving
    it back frees n1, which nlp's job (300 GB of memory a replica) cannot use. When a lender's jobs were borrowers
    only by the usage the cycle began with, its running job on n0 was no victim, and the next cycle preempted it;
    borrowing counts the cycle's admissions now (as Kueue's usage does), so the first cycle takes it."""
    quotas = [Quota("vision", H100, 8, borrow_limit=8), Quota("nlp", H100, 16, lend_limit=8)]
    node_list = (Node("n0", H100, 8, 8),  # memory not modelled: room for any request
                 Node("n1", H100, 8, 8, cpu_millis=32000, memory_mib=65536, free_cpu_millis=32000,
                      free_memory_mib=65536))
    old = running(100, "vision", {"n0": 8}, flavor=H100, priority=0)
    pending = [job(6, replicas=2, devices=4, flavor=H100, priority=1000),
               job(1, project="nlp", replicas=2, devices=1, flavor=H100, memory=300_000)]
    snap = snapshot(node_list, pending, [old], quotas)
    first = cycle(snap)
    again = cycle(carry_out(snap, first, NOW))
    assert (victims(first), victims(again)) == ([100], [])


@pytest.mark.parametrize("accelerate", [True, False], ids=["accelerated", "plain"])
def test_a_project_that_starts_borrowing_later_in_the_cycle_is_reclaimed_from_in_both_modes(accelerate):
    """As above, with a preemptible job of a third project on a node nlp's job cannot use either: nlp's first search
    lists candidates (so the accelerated mode builds its victim pools, without vision, which does not borrow yet)
    and fails (so it remembers the failure). Vision's job 6 then borrows; evaluated again, nlp's job must find
    vision's running job: pools built before vision borrowed, or the remembered failure, would hide it."""
    quotas = [Quota("vision", H100, 8, borrow_limit=8), Quota("nlp", H100, 16, lend_limit=8), Quota("misc", H100, 1)]
    small = dict(cpu_millis=32000, memory_mib=65536, free_cpu_millis=32000, free_memory_mib=65536)
    node_list = (Node("n0", H100, 8, 8), Node("n1", H100, 8, 8, **small), Node("n2", H100, 8, 8, **small))
    old = running(100, "vision", {"n0": 8}, flavor=H100, priority=0)
    spare = running(200, "misc", {"n2": 1}, flavor=H100, priority=0, preemptible=True)
    pending = [job(6, replicas=2, devices=4, flavor=H100, priority=1000),
               job(1, project="nlp", replicas=2, devices=1, flavor=H100, memory=300_000)]
    snap = snapshot(node_list, pending, [old, spare], quotas)
    result = run_cycle(snap, Policy(), accelerate=accelerate)
    check_invariants(snap, result, Policy())
    assert (victims(result), admitted(result)) == ([100], [1, 6])
    assert victims(cycle(carry_out(snap, result, NOW))) == []


def test_a_cycle_reports_the_seconds_of_each_phase_and_they_add_up_to_at_most_its_time():
    busy = [running(100 + k, "nlp", {f"n{k}": 8}, priority=100) for k in range(4)]
    pending = [job(k, priority=1000 if k % 3 else 100, max_runtime=600.0) for k in range(1, 40)]
    snap = snapshot(nodes(6), pending, busy, quotas=[Quota("vision", A100, 32), Quota("nlp", A100, 16, 16)])
    started = time.perf_counter()
    result = run_cycle(snap, Policy())
    took = time.perf_counter() - started
    assert set(result.seconds) == set(PHASES)
    assert all(seconds >= 0 for seconds in result.seconds.values())
    assert sum(result.seconds.values()) <= took
    assert result.seconds["preempt"] > 0 and result.seconds["explain"] > 0  # it preempted and explained
    assert result == replace(result, seconds={})  # time is not a decision


# -- explain --------------------------------------------------------------------------------------------------

def test_positions_and_forecast():
    node_list = nodes(2) + nodes(1, flavor=H100, prefix="h")
    busy = [running(100, "nlp", {"n0": 8}, started_at=0.0, max_runtime=1500.0),
            running(101, "nlp", {"n1": 8}, started_at=0.0, max_runtime=4000.0),
            running(102, "nlp", {"h0": 8}, flavor=H100, started_at=0.0)]
    quotas = [Quota("vision", A100, 32), Quota("nlp", A100, 16), Quota("vision", H100, 8),
              Quota("nlp", H100, 8)]
    pending = [job(1, submitted_at=1.0), job(2, project="nlp", submitted_at=2.0, priority=100),
               job(3, submitted_at=3.0), job(4, flavor=H100, submitted_at=4.0)]
    snap = snapshot(node_list, pending, busy, quotas, now=NOW)
    w = waits(cycle(snap, Policy(blocking="skip")))
    assert [(w[i].project_position, w[i].flavor_position) for i in (1, 3, 4)] == [(1, 1), (2, 2), (3, 1)]
    assert w[2].code == "quota"
    # Job 2 (nlp) waits for its quota, and then behind job 3 of higher priority: job 1 takes n0 and has no max
    # runtime, so nothing frees after n1; the only h100 job has no max runtime either.
    assert forecast(snap, Policy(blocking="skip"), 16) == {1: 1500.0, 3: 4000.0}


def test_never_fits_reasons():
    node_list = nodes(4, rack_size=2)
    quotas = [Quota("vision", A100, 16, borrow_limit=8), Quota("nlp", A100, 8)]
    projects = [Project("vision", "org"), Project("nlp", "org")]

    def reason(j, policy=None):
        return never_fits(j, node_list, quotas, projects, policy or Policy())

    assert reason(job(1, replicas=3)) is None
    assert reason(job(1, devices=16)) == ("needs 16 nvidia-a100-40gb per replica; the largest schedulable node "
                                          "of that flavor has 8")
    assert reason(job(1, flavor=H100)) == "no schedulable nodes offer nvidia-h100-80gb"
    assert reason(job(1, replicas=4)) == ("needs 32 nvidia-a100-40gb but project vision may use at most 24 "
                                          "(16 guaranteed + 8 borrowed)")
    assert reason(job(1, replicas=4), Policy(quotas=False)) is None
    assert reason(job(1, replicas=3, topology=Topology.REQUIRE_SAME_RACK)).startswith(
        "needs 3 x 8 nvidia-a100-40gb in one labelled rack; the largest has room for 2")
    assert reason(job(1, project="ghost")) == "project ghost has no quota for nvidia-a100-40gb"
    mixed = PendingJob(1, "vision", 500, 0.0, (ReplicaGroup("master", 1, 1, A100), ReplicaGroup("w", 1, 8, A100)))
    assert reason(mixed) is None


def test_a_gang_whose_groups_need_the_same_big_nodes_never_fits_where_only_one_group_would():
    """Found exploring the elastic property test: a master and a worker of 8 devices each passed the check on a
    cluster with one node of 8 (each group fitted alone, and the devices added up), so the job waited for its
    quota instead of being told it can never run, and a job of 2 x 8 devices in one group, judged by dominance
    after it, was told the same. Replicas at least as big as a group's take a slot of its size each."""
    node_list = (Node("big", A100, 8, 8), Node("small", A100, 4, 4), Node("small2", A100, 4, 4))
    quotas = [Quota("vision", A100, 16)]
    projects = [Project("vision", "org")]
    two_groups = PendingJob(1, "vision", 500, 0.0, (ReplicaGroup("master", 1, 8, A100),
                                                    ReplicaGroup("worker", 1, 8, A100)))
    expected = "needs 2 x 8 nvidia-a100-40gb in one cluster; the largest has room for 1 even when empty"
    assert never_fits(two_groups, node_list, quotas, projects) == expected
    one_group = job(2, replicas=2, devices=8)
    result = cycle(snapshot(node_list, [two_groups, one_group], quotas=quotas))
    assert {w.job_id: (w.code, w.reason) for w in result.waits} == {
        1: ("unschedulable", f"can never run here: {expected}"),
        2: ("unschedulable", f"can never run here: {expected}")}
    # A smaller master beside them still fits: it takes a small node's slot, not the big node's.
    mixed = PendingJob(3, "vision", 500, 0.0, (ReplicaGroup("master", 1, 4, A100), ReplicaGroup("w", 1, 8, A100)))
    assert never_fits(mixed, node_list, quotas, projects) is None
    # Every group fits, not all of them: the reason names the devices, not a group it has room for.
    assert never_fits(mixed, node_list[:1], quotas, projects) == (
        "needs 12 nvidia-a100-40gb in one cluster; the largest has 8 even when empty")
    racks = (Node("big", A100, 8, 8, rack="r1"), *(Node(f"s{k}", A100, 4, 4, rack="r2") for k in range(3)))
    assert never_fits(replace(mixed, topology=Topology.REQUIRE_SAME_RACK), racks, quotas, projects) == (
        "needs 12 nvidia-a100-40gb in one labelled rack; each size of its replicas fits one, but none holds all "
        "of them even when empty")


# -- replicas without devices ---------------------------------------------------------------------------------

def ray_job(id: int, workers: int, devices: int = 8, head_flavor: str = A100, **kw) -> PendingJob:
    """A Ray job: a CPU-only head (0 devices) and GPU workers."""
    return PendingJob(id, "vision", 500, float(id), (ReplicaGroup("head", 1, 0, head_flavor),
                                                      ReplicaGroup("worker", workers, devices, A100)), **kw)


def test_zero_device_replica_needs_a_node_but_no_devices():
    # Every node is full: a job of 0-device replicas still runs (on a node of its flavor), nothing is preempted.
    node_list = nodes(2, rack_size=1, block_size=2)
    busy = [running(100, "nlp", {"n0": 8}), running(101, "nlp", {"n1": 8})]
    quotas = [Quota("vision", A100, 16), Quota("nlp", A100, 16)]
    for topology in Topology:
        snap = snapshot(node_list, [job(1, replicas=3, devices=0, topology=topology)], busy, quotas)
        result = cycle(snap)
        assert admitted(result) == [1] and result.preemptions == ()
        assert [a.devices for a in result.admits[0].placement] == [0, 0, 0]
    # No node of its flavor: it can never run, and says so.
    w = waits(cycle(snapshot(node_list, [job(1, devices=0, flavor=H100)], busy, quotas)))[1]
    assert w.code == "unschedulable" and "no schedulable nodes offer nvidia-h100-80gb" in w.reason


def test_ray_job_with_cpu_only_head():
    node_list = nodes(4, rack_size=2)
    quotas = [Quota("vision", A100, 32), Quota("nlp", A100, 16)]
    result = cycle(snapshot(node_list, [ray_job(1, workers=2, topology=Topology.REQUIRE_SAME_RACK)],
                            quotas=quotas))
    assert admitted(result) == [1]
    placement = {(a.role, a.index): a for a in result.admits[0].placement}
    assert placement[("head", 0)].devices == 0 and placement[("worker", 0)].devices == 8
    assert len({int(a.node[1:]) // 2 for a in result.admits[0].placement}) == 1  # one rack (n0-n1 or n2-n3)
    # Workers do not fit: the job waits with a capacity reason (no crash), and its ETA counts only its devices.
    busy = [running(100 + k, "nlp", {f"n{k}": 8}, started_at=0.0, max_runtime=2000.0) for k in range(2)]
    snap = snapshot(node_list, [ray_job(1, workers=3)], busy, quotas, now=NOW)
    w = waits(cycle(snap))[1]
    assert w.code == "capacity" and "needs 24" in w.reason and forecast(snap, Policy(), 8) == {1: 2000.0}
    # Preemption for it works and never frees more than the workers need.
    hog = [running(100 + k, "nlp", {f"n{k}": 8}, started_at=100.0 * k) for k in range(4)]
    quotas = [Quota("vision", A100, 16), Quota("nlp", A100, 16, borrow_limit=16)]
    result = cycle(snapshot(node_list, [ray_job(1, workers=2)], hog, quotas))
    assert admitted(result) == [1] and len(result.preemptions) == 2


def test_preemptible_jobs_are_not_refused_for_a_zero_borrow_limit():
    """Defect: preemptible jobs were refused at submission as "never fits" with borrow_limit 0."""
    quotas = [Quota("vision", A100, 16)]
    projects = [Project("vision", "org")]
    assert never_fits(job(1, replicas=2, preemptible=True), nodes(4), quotas, projects) is None
    assert never_fits(job(1, replicas=3, preemptible=True), nodes(4), quotas, projects) == (
        "needs 24 nvidia-a100-40gb but project vision may use at most 16 (16 guaranteed + 0 borrowed)")


def test_submission_checks_never_count_another_organizations_guarantee():
    quotas = [Quota("vision", A100, 8, borrow_limit=32), Quota("globex", A100, 24)]
    projects = [Project("vision", "acme"), Project("globex", "globex")]
    assert never_fits(job(1, replicas=2), nodes(4), quotas, projects) == (
        "needs 16 nvidia-a100-40gb but project vision may use at most 8 (8 guaranteed + 0 borrowed)")


def test_zero_device_jobs_pass_submission_checks():
    node_list = nodes(2)
    quotas = [Quota("vision", A100, 8)]
    projects = [Project("vision", "org")]
    assert never_fits(ray_job(1, workers=1), node_list, quotas, projects) is None
    assert never_fits(job(1, replicas=5, devices=0), node_list, quotas, projects) is None
    assert never_fits(job(1, devices=0, flavor=H100), node_list, quotas, projects) == (
        "no schedulable nodes offer nvidia-h100-80gb")


# -- nodes out of service -------------------------------------------------------------------------------------

def test_nodes_out_of_service_make_a_job_wait_not_never_fit():
    """Defect: a 4x8 job submitted while one of four nodes was cordoned was refused as "never fits"."""
    node_list = nodes(3) + (Node("n3", A100, 8, 8, schedulable=False, unavailable="cordoned"),)
    quotas = [Quota("vision", A100, 32)]
    projects = [Project("vision", "org")]
    gang = job(1, replicas=4)
    assert never_fits(gang, node_list, quotas, projects) is None
    snap = snapshot(node_list, [gang], quotas=quotas, projects=projects)
    w = waits(cycle(snap))[1]
    assert w.code == "unavailable" and forecast(snap, Policy(), 8) == {}  # nothing says when the node comes back
    assert w.reason == ("1 of the 4 nvidia-a100-40gb nodes is cordoned: needs 4 x 8 nvidia-a100-40gb in one cluster; "
                        "the largest has room for 3 now")
    # What can never exist is still refused, and said so.
    huge = job(2, replicas=5)
    assert never_fits(huge, node_list, quotas, projects) == (
        "needs 5 x 8 nvidia-a100-40gb in one cluster; the largest has room for 4 even when empty")
    assert waits(cycle(snapshot(node_list, [job(3, flavor=H100)], quotas=quotas, projects=projects)))[3].code == (
        "unschedulable")


def test_devices_held_by_foreign_pods_are_not_missing_for_ever():
    node_list = (Node("n0", A100, 0, 0, foreign=8), Node("n1", A100, 8, 8))
    quotas = [Quota("vision", A100, 16)]
    projects = [Project("vision", "org")]
    gang = job(1, replicas=2)
    assert never_fits(gang, node_list, quotas, projects) is None
    w = waits(cycle(snapshot(node_list, [gang], quotas=quotas, projects=projects)))[1]
    assert w.code == "unavailable" and w.reason.startswith("pods Tidal did not create hold 8 nvidia-a100-40gb")


def test_a_disabled_cluster_and_not_ready_nodes_are_named():
    node_list = (Node("n0", A100, 8, 8, schedulable=False, unavailable="not ready"),
                 Node("n1", A100, 8, 8, cluster="old", schedulable=False, unavailable="in a disabled cluster"))
    w = waits(cycle(snapshot(node_list, [job(1)], quotas=[Quota("vision", A100, 8)])))[1]
    assert w.code == "unavailable"
    assert w.reason == ("1 of the 2 nvidia-a100-40gb nodes is in a disabled cluster; 1 of the 2 nvidia-a100-40gb "
                        "nodes is not ready: no schedulable nodes offer nvidia-a100-40gb")


# -- CPU and memory -------------------------------------------------------------------------------------------

CPU = "cpu"  # a flavor of nodes without accelerators
GIB = 1024  # MiB


def cpu_jobs(count: int, cpu: int, memory: int, first: int = 1) -> list[PendingJob]:
    """`count` single-replica CPU-only jobs (0 devices) requesting `cpu` millicores and `memory` MiB."""
    return [job(i, devices=0, flavor=CPU, cpu=cpu, memory=memory) for i in range(first, first + count)]


SPREAD_CASES = [
    # (name, nodes (count, cores, GiB), jobs (count, cores, GiB), replicas per node, reason of the first waiting job)
    ("CPU fills a node, then the next", (3, 96, 384), (50, 4, 8), [24, 24, 2], None),
    ("memory fills a node, then the next", (3, 96, 384), (50, 1, 32), [12, 12, 12], (
        "waiting for memory: needs 1 x 32 GiB of memory on cpu nodes; 0 MiB of memory free on cpu nodes, room for 0 "
        "replicas in one cluster")),
    ("what does not fit waits for CPU", (2, 96, 384), (50, 4, 8), [24, 24], (
        "waiting for CPU: needs 1 x 4 cores on cpu nodes; 0 cores free on cpu nodes, room for 0 replicas in one "
        "cluster")),
    ("nodes that do not model CPU or memory never limit", (2, 0, 0), (50, 4, 8), [50, 0], None),
]


@pytest.mark.parametrize("name,node_shape,job_shape,per_node,reason", SPREAD_CASES, ids=[c[0] for c in SPREAD_CASES])
def test_cpu_only_jobs_spread_over_nodes_by_cpu_and_memory(name, node_shape, job_shape, per_node, reason):
    """Defect: 50 CPU-only jobs all landed on one node, whatever its CPU and memory."""
    count, cores, gib = node_shape
    node_list = nodes(count, flavor=CPU, devices=0, prefix="c", cpu=cores * 1000, memory=gib * GIB)
    jobs, job_cores, job_gib = job_shape
    result = cycle(snapshot(node_list, cpu_jobs(jobs, job_cores * 1000, job_gib * GIB),
                            quotas=[Quota("vision", CPU, 0)]), Policy(blocking="skip"))
    on = [a.node for adm in result.admits for a in adm.placement]
    assert [on.count(n.name) for n in node_list] == per_node
    assert len(result.admits) + len(result.waits) == jobs
    if reason is not None:
        assert {(w.code, w.reason) for w in result.waits} == {("capacity", reason)}
    else:
        assert result.waits == ()


def test_a_cpu_only_gang_is_counted_by_cpu():
    node_list = nodes(3, flavor=CPU, devices=0, prefix="c", cpu=64_000, memory=256 * GIB)
    gang = job(1, replicas=5, devices=0, flavor=CPU, cpu=32_000, memory=8 * GIB)
    result = cycle(snapshot(node_list, [gang, job(2, replicas=2, devices=0, flavor=CPU, cpu=32_000)],
                            quotas=[Quota("vision", CPU, 0)]), Policy(blocking="skip"))
    assert admitted(result) == [1]
    assert sorted(a.node for a in result.admits[0].placement) == ["c0", "c0", "c1", "c1", "c2"]
    assert waits(result)[2].reason.startswith("waiting for CPU: needs 2 x 32 cores on cpu nodes; 32 cores free")


def busy_cpu_node(held_cores: int = 0, held_gib: int = 0):
    """One 8-GPU node with 64 cores and 512 GiB; nlp's 1-GPU job holds `held_cores` and `held_gib` of it."""
    node_list = nodes(1, cpu=64_000, memory=512 * GIB)
    busy = [running(100, "nlp", {"n0": 1}, cpu=held_cores * 1000, memory=held_gib * GIB, started_at=100.0)]
    return node_list, busy


WAIT_CASES = [
    # (name, cores and GiB nlp's job holds, the pending job's 4 GPUs' cores and GiB, code, reason)
    ("devices free but CPU taken", (60, 0), (8, 0), (
        "waiting for CPU: needs 1 x 8 cores with 4 nvidia-a100-40gb each; 4 cores free on nvidia-a100-40gb nodes, "
        "room for 0 replicas in one cluster")),
    ("devices free but memory taken", (0, 500), (0, 64), (
        "waiting for memory: needs 1 x 64 GiB of memory with 4 nvidia-a100-40gb each; 12 GiB of memory free on "
        "nvidia-a100-40gb nodes, room for 0 replicas in one cluster")),
    ("devices free but CPU and memory taken", (60, 500), (8, 64), (
        "waiting for CPU and memory: needs 1 x 8 cores and 64 GiB of memory with 4 nvidia-a100-40gb each; 4 cores "
        "and 12 GiB of memory free on nvidia-a100-40gb nodes, room for 0 replicas in one cluster")),
]


@pytest.mark.parametrize("name,held,asks,reason", WAIT_CASES, ids=[c[0] for c in WAIT_CASES])
def test_a_gpu_job_waits_for_cpu_and_memory_even_with_devices_free(name, held, asks, reason):
    node_list, busy = busy_cpu_node(*held)
    pending = [job(1, devices=4, cpu=asks[0] * 1000, memory=asks[1] * GIB)]
    result = cycle(snapshot(node_list, pending, busy, quotas=[Quota("vision", A100, 8), Quota("nlp", A100, 8)]))
    assert admitted(result) == [] and result.preemptions == ()
    assert (waits(result)[1].code, waits(result)[1].reason) == ("capacity", reason)


def test_a_gang_goes_around_a_node_whose_cpu_is_taken():
    node_list = nodes(3, cpu=64_000, memory=512 * GIB)
    busy = [running(100, "nlp", {"n0": 0}, cpu=60_000)]  # a CPU-only replica on n0: its 8 GPUs stay free
    result = cycle(snapshot(node_list, [job(1, replicas=2, cpu=8000)], busy,
                            quotas=[Quota("vision", A100, 16), Quota("nlp", A100, 8)]))
    assert sorted(a.node for a in result.admits[0].placement) == ["n1", "n2"]
    assert [(a.cpu_millis, a.memory_mib) for a in result.admits[0].placement] == [(8000, 0), (8000, 0)]


PREEMPT_CASES = [
    # (name, nlp's job's cores and GiB, its priority, vision's quota, the pending job's cores and GiB, its priority,
    #  victims)
    ("reclaiming a guarantee frees the CPU a borrower holds", (60, 0), 500, 8, (16, 0), 500, [100]),
    ("and its memory", (0, 500), 500, 8, (0, 64), 500, [100]),
    ("priority preemption in a project frees CPU too", (60, 0), 100, 0, (16, 0), 1000, [100]),
    ("no preemption when the CPU would still not be enough", (60, 0), 500, 8, (80, 0), 500, []),
]


@pytest.mark.parametrize("name,held,victim_priority,vision_guarantee,asks,priority,expect", PREEMPT_CASES,
                         ids=[c[0] for c in PREEMPT_CASES])
def test_preemption_gives_cpu_and_memory_back(name, held, victim_priority, vision_guarantee, asks, priority,
                                              expect):
    # n1 has the CPU but no free devices (pods the platform did not create hold them): the job must use n0.
    node_list = nodes(1, cpu=64_000, memory=512 * GIB) + nodes(1, cpu=128_000, start=1, free=0)
    project = "nlp" if vision_guarantee == 0 else "vision"
    busy = [running(100, "nlp", {"n0": 1}, cpu=held[0] * 1000, memory=held[1] * GIB, priority=victim_priority)]
    quotas = [Quota("vision", A100, vision_guarantee), Quota("nlp", A100, 0 if vision_guarantee else 16,
                                                             borrow_limit=8)]
    pending = [job(1, project=project, devices=4, cpu=asks[0] * 1000, memory=asks[1] * GIB, priority=priority)]
    result = cycle(snapshot(node_list, pending, busy, quotas=quotas))
    assert victims(result) == expect
    assert admitted(result) == ([1] if expect else [])


def test_backfill_reserves_cpu_for_the_head():
    """The head waits for CPU, not devices: later jobs that would still run at its start may not take the CPU it
    needs then; a job that ends before may."""
    node_list = nodes(1, cpu=64_000, memory=512 * GIB)
    busy = [running(100, "nlp", {"n0": 4}, cpu=40_000, started_at=0.0, max_runtime=2000.0)]
    head = job(1, devices=2, cpu=48_000, max_runtime=3600.0, submitted_at=WAITED)
    long = job(2, devices=1, cpu=20_000, max_runtime=5000.0)
    short = job(3, devices=1, cpu=4000, max_runtime=500.0)
    result = cycle(snapshot(node_list, [head, long, short], busy,
                            quotas=[Quota("vision", A100, 8), Quota("nlp", A100, 4)], now=NOW))
    (res,) = result.reservations
    assert (res.job_id, res.start) == (1, 2000.0)
    assert admitted(result) == [3]
    assert waits(result)[1].reason.startswith("waiting for CPU: needs 1 x 48 cores")
    assert waits(result)[2].code == "reserved"


NEVER_FITS_CASES = [
    # (name, nodes, the job, reason)
    ("more CPU than any node", nodes(4, cpu=96_000, memory=1024 * GIB), job(1, cpu=128_000),
     "needs 128 cores per replica; the largest schedulable nvidia-a100-40gb node has 96 cores allocatable"),
    ("more memory than any node", nodes(4, cpu=96_000, memory=1024 * GIB), job(1, memory=1536 * GIB),
     "needs 1.5 TiB of memory per replica; the largest schedulable nvidia-a100-40gb node has 1 TiB allocatable"),
    ("the devices on one node, the CPU on another", nodes(1, cpu=32_000) + nodes(1, devices=4, cpu=96_000, start=1),
     job(1, cpu=64_000),
     "needs 8 nvidia-a100-40gb and 64 cores per replica on one node; no schedulable node of that flavor has all of "
     "them"),
    ("a gang whose CPU only one replica per node holds", nodes(2, cpu=96_000),
     job(1, replicas=3, devices=4, cpu=64_000),
     "needs 3 x 4 nvidia-a100-40gb with 64 cores each in one cluster; the largest has room for 2 even when empty"),
    ("a CPU-only job bigger than any CPU node", nodes(2, flavor=CPU, devices=0, prefix="c", cpu=96_000),
     job(1, devices=0, flavor=CPU, cpu=100_000),
     "needs 100 cores per replica; the largest schedulable cpu node has 96 cores allocatable"),
    ("nodes that do not model CPU or memory never refuse", nodes(4), job(1, cpu=10**6, memory=10**7), None),
    ("one node that does not model CPU is enough", nodes(1, cpu=32_000) + nodes(1, start=1), job(1, cpu=64_000), None),
]


@pytest.mark.parametrize("name,node_list,pending,reason", NEVER_FITS_CASES, ids=[c[0] for c in NEVER_FITS_CASES])
def test_never_fits_on_cpu_and_memory(name, node_list, pending, reason):
    quotas = [Quota("vision", A100, 64), Quota("vision", CPU, 0)]
    projects = [Project("vision", "org")]
    assert never_fits(pending, node_list, quotas, projects) == reason
    w = waits(cycle(snapshot(node_list, [pending], quotas=quotas, projects=projects)))
    if reason is None:
        assert w == {}
    else:
        assert (w[1].code, w[1].reason) == ("unschedulable", f"can never run here: {reason}")


def test_cpu_requests_of_zero_and_unmodelled_nodes_keep_the_old_placement():
    """Jobs requesting CPU on nodes that do not model it are placed exactly as jobs requesting none."""
    node_list = nodes(6, rack_size=3)
    busy = [running(100, "nlp", {"n3": 8})]
    quotas = [Quota("vision", A100, 64), Quota("nlp", A100, 8)]
    plain = cycle(snapshot(node_list, [job(1, replicas=2), job(2, devices=2)], busy, quotas))
    asking = cycle(snapshot(node_list, [job(1, replicas=2, cpu=8000, memory=64 * GIB),
                                        job(2, devices=2, cpu=4000, memory=GIB)], busy, quotas))
    assert [[a.node for a in adm.placement] for adm in asking.admits] == [
        [a.node for a in adm.placement] for adm in plain.admits]


# -- lend hold ------------------------------------------------------------------------------------------------

HOLD_QUOTAS = [Quota("vision", A100, 0, borrow_limit=16), Quota("nlp", A100, 16)]


def nlp_ended(ago: float, devices: int = 8, ran: float = 600.0) -> EndedUse:
    return EndedUse("nlp", A100, devices, NOW - ago - ran, NOW - ago)


LEND_HOLD_CASES = [
    # (name, Policy.lend_hold, nlp's ended attempts, nlp's arrivals, running (id, project, node, started ago),
    #  pending (id, project, replicas), admitted, wake_at)
    ("nlp's job ended 2 s ago: the 8 it held are kept from vision until 3 s from now", 5.0, [nlp_ended(2)], [], [],
     [(1, "vision", 2)], [], NOW + 3),
    ("it ended 6 s ago, before the hold's window: vision borrows all 16", 5.0, [nlp_ended(6)], [], [],
     [(1, "vision", 2)], [1], None),
    ("no hold (0): vision borrows at once", 0.0, [nlp_ended(2)], [], [], [(1, "vision", 2)], [1], None),
    ("what nlp did not hold is lent: 8 of its 16", 5.0, [nlp_ended(2)], [], [], [(1, "vision", 1)], [1], None),
    ("nlp submitted 8 a second ago and runs them: as much again is held, vision waits", 5.0, [],
     [Arrival("nlp", A100, 8, NOW - 1)], [(50, "nlp", "n0", 1)], [(1, "vision", 1)], [], NOW + 4),
    ("nlp submitted a preemptible 8 a second ago: it never takes a guarantee back, nothing is held", 5.0, [],
     [Arrival("nlp", A100, 8, NOW - 1, preemptible=True)], [], [(1, "vision", 2)], [1], None),
    ("nlp submitted 24 a second ago, more than its 16: that job borrows itself, nothing is held", 5.0, [],
     [Arrival("nlp", A100, 24, NOW - 1)], [], [(1, "vision", 2)], [1], None),
    ("nlp submitted 16 a second ago, its whole guarantee: all of it is held", 5.0, [],
     [Arrival("nlp", A100, 16, NOW - 1)], [], [(1, "vision", 2)], [], NOW + 4),
    ("an ended job and its successor on the same devices count once", 5.0, [nlp_ended(2)], [],
     [(50, "nlp", "n0", 2)], [(1, "vision", 1)], [1], None),
    ("the hold never keeps a project from its own guarantee", 5.0, [nlp_ended(2)], [], [],
     [(1, "nlp", 2)], [1], None),
]


@pytest.mark.parametrize("name,hold,ended,arrivals,busy,pending,expect,wake", LEND_HOLD_CASES,
                         ids=[c[0] for c in LEND_HOLD_CASES])
def test_a_projects_recent_demand_is_not_lent(name, hold, ended, arrivals, busy, pending, expect, wake):
    busy_jobs = [running(i, p, {n: 8}, started_at=NOW - ago) for i, p, n, ago in busy]
    snap = replace(snapshot(nodes(2), [job(i, project=p, replicas=r) for i, p, r in pending], busy_jobs,
                            quotas=HOLD_QUOTAS), ended=tuple(ended), arrivals=tuple(arrivals))
    result = cycle(snap, Policy(lend_hold=hold))
    assert (admitted(result), result.wake_at) == (expect, wake)


def test_a_borrower_waiting_on_the_hold_is_told_so_and_its_eta_is_when_it_lapses():
    snap = replace(snapshot(nodes(2), [job(1, replicas=2)], quotas=HOLD_QUOTAS), ended=(nlp_ended(2),))
    w = waits(cycle(snap))[1]
    assert w.reason == (
        "project vision has no guaranteed nvidia-a100-40gb; this job needs 16, so it would borrow 16 (borrow limit "
        "16, 16 of it unused), but organization org has only 8 nvidia-a100-40gb to lend: 8 of its projects' idle "
        "guarantee (the lend hold keeps back 8 more, their recent use and waiting jobs) and 0 that nobody is "
        "guaranteed")
    assert forecast(snap, Policy(), 10) == {1: NOW + 3}


def test_a_preemptible_job_is_not_started_where_a_borrower_the_hold_kept_out_takes_it_back_seconds_later():
    """Defect (`make run`'s demo, a quiet cluster churning): robotics' preemptible job and vision's job larger than
    its guarantee, both submitted a second ago, held their projects' guarantees from nlp's borrower for the lend
    hold's 5 s, though neither could ever take a guarantee back. The preemptible job started in robotics' idle
    guarantee meanwhile, and when the hold lapsed nlp's borrower preempted it. Now neither holds anything: nlp
    borrows at once, and nothing is preempted when the hold would have lapsed."""
    quotas = [Quota("nlp", A100, 8, borrow_limit=16), Quota("vision", A100, 8), Quota("robotics", A100, 8)]
    pending = [job(1, "nlp", replicas=2, submitted_at=NOW - 1),
               job(2, "robotics", preemptible=True, submitted_at=NOW - 1),
               job(3, "vision", replicas=4, submitted_at=NOW - 1)]  # 32: more than its guarantee, and the cluster
    arrivals = (Arrival("nlp", A100, 16, NOW - 1), Arrival("robotics", A100, 8, NOW - 1, preemptible=True),
                Arrival("vision", A100, 32, NOW - 1))
    snap = replace(snapshot(nodes(3), pending, [running(50, "nlp", {"n0": 8})], quotas=quotas, now=NOW),
                   arrivals=arrivals)
    first = cycle(snap)
    assert admitted(first) == [1]
    assert waits(first)[2].code == "quota"
    later = cycle(carry_out(snap, first, NOW + Policy().lend_hold))
    assert (admitted(later), victims(later)) == ([], [])


# -- organizations never hold each other's guarantees (issue 25) ------------------------------------------------

def orgs_setup(q_jobs, r_jobs=(), r_lend_limit=0):
    """48 devices (6 nodes); org1: P (guarantee 16, borrow limit 16) runs 32 on n0-n3, Q (guarantee 16) idle; org2:
    R (guarantee 16, lend limit 0 by default) idle."""
    quotas = [Quota("P", A100, 16, borrow_limit=16), Quota("Q", A100, 16),
              Quota("R", A100, 16, lend_limit=r_lend_limit)]
    projects = [Project("P", "org1"), Project("Q", "org1"), Project("R", "org2")]
    busy = [running(100 + k, "P", {f"n{k}": 8}, started_at=0.0) for k in range(4)]
    pending = [job(i, project="Q", replicas=r) for i, r in q_jobs] + [job(i, project="R", replicas=r)
                                                                      for i, r in r_jobs]
    return snapshot(nodes(6), pending, busy, quotas=quotas, projects=projects, now=NOW)


def test_a_job_within_its_guarantee_takes_it_back_from_its_organization_not_another():
    """Defect: Q's 2x8 within its guarantee was admitted on R's free nodes while its sibling P borrowed Q's
    guarantee, so org1 held 48 devices against 32 guaranteed and R (which lends nothing) had to preempt to get its
    own back. Now P's borrowed jobs are preempted for it."""
    result = cycle(orgs_setup([(1, 2)]))
    assert admitted(result) == [1]
    assert sorted(victims(result)) == [102, 103]
    assert all("give project Q back its guaranteed" in p.reason for p in result.preemptions)
    placed = {a.node for a in result.admits[0].placement}
    assert placed <= {"n2", "n3"}, placed


def test_what_a_cycle_lends_does_not_grow_when_it_admits_a_lenders_waiting_job():
    """Defect (the quiet-cluster property): a waiting job held its project's guarantee from lending only while it
    fit the part left idle, so admitting one of two waiting jobs (5 and 4 of a guarantee of 8) let the next cycle
    lend 3 that this one held. Each fits the guarantee: both are held, in this cycle and the next."""
    quotas = [Quota("vision", A100, 8), Quota("nlp", A100, 0, borrow_limit=8)]
    pending = [job(1, devices=5), job(2, devices=4), job(3, project="nlp", devices=3)]
    snap = snapshot(nodes(1), pending, quotas=quotas)  # all of it vision's guarantee
    policy = Policy(lend_hold=0.0)
    first = cycle(snap, policy)
    second = cycle(carry_out(snap, first, NOW), policy)
    assert (admitted(first), admitted(second)) == ([1], [])
    assert waits(second)[3].code == "quota"


def test_a_quiet_cycle_later_leaves_the_organizations_within_their_guarantees():
    snap = orgs_setup([(1, 2)])
    first = cycle(snap)
    after = carry_out(snap, first, NOW + 60)
    held = {}
    for r in after.running:
        org = "org1" if r.project in ("P", "Q") else "org2"
        held[org] = held.get(org, 0) + sum(a.devices for a in r.placement)
    assert held == {"org1": 32}
    again = cycle(after)
    assert again.preemptions == () and again.admits == ()


def test_a_lent_guarantee_waits_with_an_honest_reason_while_its_borrowers_may_not_be_preempted():
    snap = orgs_setup([(1, 2)])
    snap = replace(snap, running=tuple(replace(r, min_runtime=10_000.0) for r in snap.running))
    result = cycle(snap)
    assert admitted(result) == []
    w = waits(result)[1]
    assert w.code == "quota"
    assert w.reason == ("project Q uses 0 of its 16 guaranteed nvidia-a100-40gb; this job needs 16, within the "
                        "guarantee, but organization org1's projects borrow it: with this job its borrowers would "
                        "take 16 nvidia-a100-40gb more than its lenders may lend, and only 0 that nobody is "
                        "guaranteed are free of other organizations' use; its borrowers' jobs are preempted to give "
                        "it back as soon as they may be")


def test_what_an_organization_borrows_beyond_what_its_lenders_may_lend_comes_out_of_the_unowned_capacity():
    """Defect (a property, on new examples): org1's only lender had just used its guarantee (the lend hold keeps it
    from lending), so org1's borrower took the 8 devices nobody is guaranteed; org1 still held less than its
    guarantees, so org2's borrower was let onto that capacity too (11 of 8). An organization claims of the unowned
    capacity what its borrowers take beyond what its lenders may lend."""
    quotas = [Quota("lender", H100, 16), Quota("borrower", H100, 0, borrow_limit=8),
              Quota("other", H100, 0, borrow_limit=8)]
    projects = [Project("lender", "org1"), Project("borrower", "org1"), Project("other", "org2")]
    pending = [job(1, project="borrower", flavor=H100, priority=1000), job(2, project="other", flavor=H100, devices=3)]
    snap = snapshot(nodes(3, flavor=H100, prefix="h"), pending, quotas=quotas, projects=projects)
    snap = replace(snap, ended=(EndedUse("lender", H100, 16, NOW - 100, NOW - 1),))  # kept from lending for 4 s
    result = cycle(snap)
    assert admitted(result) == [1]
    assert waits(result)[2].code == "quota"


def test_a_siblings_recent_use_never_makes_a_job_within_its_guarantee_reclaim():
    """Defect (bench_policy.py: the Philly week's preemptions rose from 120 to 144, its goal of fewer than 130
    failed): the lend hold of a project that had just used its guarantee counted against a sibling's job within
    its own guarantee, which a borrower held. The job preempted the borrower while the held devices sat idle; it
    now runs on them. What recent use holds is a guess that it comes back: it still makes borrowers wait."""
    quotas = [Quota("busy", A100, 8), Quota("owner", A100, 8), Quota("borrower", A100, 0, borrow_limit=16)]
    projects = [Project(name, "org") for name in ("busy", "owner", "borrower")]
    borrowing = running(100, "borrower", {"n0": 8}, started_at=0.0)
    pending = [job(1, project="owner"), job(2, project="borrower")]
    # 16 devices, every one of them guaranteed: nothing is left beyond what the organization owns
    snap = snapshot(nodes(2), pending, [borrowing], quotas=quotas, projects=projects, now=NOW)
    snap = replace(snap, ended=(EndedUse("busy", A100, 8, NOW - 100, NOW - 1),))  # kept from lending for 4 s
    result = cycle(snap)
    assert admitted(result) == [1]
    assert victims(result) == []
    assert waits(result)[2].code == "quota"


def test_a_quota_reason_counts_what_borrowers_hold_of_the_projects_own_guarantee():
    """Defect (a property, on new examples): vision lends its idle guarantee to nlp's preemptible job; a vision job
    that needs its whole guarantee and 10 more was told its organization had 12 to lend (the capacity nobody is
    guaranteed), by which it would fit: once vision uses its guarantee, nlp's 6 come out of those 12 too."""
    quotas = [Quota("vision", H100, 16, borrow_limit=64), Quota("nlp", H100, 0, borrow_limit=8)]
    busy = [running(100, "vision", {"h0": 2}, flavor=H100), running(101, "nlp", {"h1": 6}, flavor=H100,
                                                                  preemptible=True)]
    node_list = nodes(3, flavor=H100, prefix="h") + nodes(1, flavor=H100, devices=4, prefix="h", start=3)
    snap = snapshot(node_list, [job(1, flavor=H100, devices=8, replicas=3)], busy, quotas)
    result = cycle(snap, Policy(preemption=False))
    assert waits(result)[1].code == "quota"
    assert "this job needs 24, so it would borrow 10" in waits(result)[1].reason
    assert "has only 6 nvidia-h100-80gb to lend: 0 of its projects' idle guarantee and 6 that nobody" in (
        waits(result)[1].reason)


def test_one_organizations_excess_does_not_stop_another_borrowing_its_own_lenders():
    """Defect: org1 holding more than its guarantees (here: a node of the unowned capacity went away) stopped every
    other organization borrowing that flavor, even from idle guarantees of its own projects, and the reason quoted
    numbers by which the job fit."""
    quotas = [Quota("P", A100, 16, borrow_limit=16), Quota("Q", A100, 16), Quota("R", A100, 16, borrow_limit=16),
              Quota("S", A100, 16)]
    projects = [Project("P", "org1"), Project("Q", "org1"), Project("R", "org2"), Project("S", "org2")]
    busy = [running(100 + k, "P", {f"n{k}": 8}) for k in range(5)] + [running(200 + k, "R", {f"n{5 + k}": 8})
                                                                         for k in range(2)]
    snap = snapshot(nodes(8), [job(1, project="R")], busy, quotas=quotas, projects=projects)
    result = cycle(snap)
    assert admitted(result) == [1]  # from S's idle guarantee, on the one free node
    assert {a.job_id: a.borrowed for a in result.admits} == {1: 8}


def test_a_single_replica_of_a_required_rack_preempts_on_a_node_of_no_rack():
    """Defect (found by the plain mode): preemption's capacity bound counted only labelled racks for a job of one
    replica that requires one, while placement puts a single replica on any node: the job waited for nothing."""
    node_list = (Node("n0", A100, 8, 8, "default", "", ""),)  # a node of no rack, taken by lower-priority jobs
    busy = [running(100, "vision", {"n0": 4}, priority=100), running(101, "vision", {"n0": 4}, priority=100)]
    one = job(1, topology=Topology.REQUIRE_SAME_RACK, priority=1000)
    result = cycle(snapshot(node_list, [one], busy, quotas=[Quota("vision", A100, 8)]))
    assert (admitted(result), victims(result)) == ([1], [100, 101])


def test_two_heads_of_one_project_hold_one_running_job_slot_between_them():
    # p is at its cap of 2 running jobs; q's jobs, within its guarantee, keep p's two heads (of two flavors) from
    # room now, and both wait for the slot `ending` frees in 10 minutes. Counting that slot once per head made
    # preempting `ending` raise the usage counted in by one more than the slot it frees, so the plain search found
    # no victim for `later` where the fast one did (the plain mode's property test found it): a project's first
    # quota hold holds its slot, the others their devices. `later` takes `idle`'s slot: `ending`'s is the heads'.
    node_list = nodes(3) + nodes(2, flavor=H100, prefix="h")
    ending = running(11, "p", {"h0": 1}, flavor=H100, priority=0, started_at=NOW - 10, max_runtime=600.0)
    idle = running(12, "p", {"n1": 2}, priority=0, started_at=0.0)
    fixed = [running(13, "q", {"h1": 8}, flavor=H100), running(14, "q", {"n2": 8})]
    heads = [job(1, "p", replicas=2, flavor=H100, priority=1000, submitted_at=WAITED),
             job(2, "p", replicas=3, priority=500, submitted_at=WAITED)]
    later = job(3, "p", devices=4, priority=100, submitted_at=WAITED)
    quotas = [Quota("p", A100, 32), Quota("p", H100, 32), Quota("q", A100, 8), Quota("q", H100, 8)]
    projects = [Project("p", "org", max_running_jobs=2), Project("q", "org")]
    snap = snapshot(node_list, [*heads, later], [ending, idle, *fixed], quotas=quotas, projects=projects, now=NOW)
    result = cycle(snap)
    assert run_cycle(snap, Policy(), accelerate=False) == result
    assert admitted(result) == [3] and victims(result) == [12]



def spent_search_budget(monkeypatch, searches: int = 1) -> None:
    monkeypatch.setattr("jobs.scheduling.preemption.MAX_SIMULATIONS", searches)
    monkeypatch.setattr("jobs.scheduling.cycle.MAX_SIMULATIONS", searches)


def spender_and(pending, running_jobs):
    """Job 1 of project nlp preempts nlp's lower priority on n0 (A100): the cycle's one search (spent_search_budget);
    the jobs given follow it, of H100 on h0 and h1."""
    node_list = nodes(1) + nodes(2, flavor=H100, prefix="h")
    low = running(100, "nlp", {"n0": 8}, priority=0)
    return snapshot(node_list, [job(1, project="nlp", priority=1000), *pending], [low, *running_jobs])


FIFO_NO_QUOTAS = Policy(ordering="fifo", blocking="backfill", quotas=False)


def test_a_job_the_search_budget_left_unsearched_keeps_its_projects_lower_priority_out(monkeypatch):
    """Defect (bench_scheduler.py's busy worlds: 4 and 7 jobs a cycle admitted were preempted by the next): a job left
    without a preemption search once the cycle's budget was spent waited, a later job of its project of lower
    priority took free room, and the next cycle's search took that job back. A fresh cycle, searching it first,
    admits the later job only after it: so the later job waits for that search, and the next cycle preempts
    nothing the first admitted."""
    spent_search_budget(monkeypatch)
    old = running(101, "vision", {"h0": 8}, flavor=H100, priority=100)
    beside = running(102, "vision", {"h1": 4}, flavor=H100, priority=2000)
    head = job(2, flavor=H100, priority=1000)  # would preempt vision's priority 100 on h0: left unsearched
    later = job(3, devices=4, flavor=H100, priority=100)  # fits beside job 102 on h1
    snap = spender_and([head, later], [old, beside])
    first = cycle(snap, FIFO_NO_QUOTAS)
    assert run_cycle(snap, FIFO_NO_QUOTAS, accelerate=False) == first
    assert (admitted(first), victims(first)) == ([1], [100])
    held = waits(first)[3]
    assert held.code == "held" and held.reason.startswith("job 2 of project vision (priority 1000) waits for a")
    second = cycle(carry_out(snap, first, NOW), FIFO_NO_QUOTAS)
    assert (admitted(second), victims(second)) == ([2, 3], [101])


def test_a_job_the_search_budget_left_unsearched_keeps_other_projects_preemptible_jobs_out(monkeypatch):
    """A job left unsearched that passes its quota would take preemptible jobs of any project: one admitted after
    it into the room its search would free would be preempted by the next cycle. A job of higher priority of
    another project, and a preemptible one on another flavor, are not held."""
    spent_search_budget(monkeypatch)
    filler = running(101, "audio", {"h0": 4}, flavor=H100, priority=0, preemptible=True)
    full = running(102, "audio", {"h1": 8}, flavor=H100, priority=2000)
    head = job(2, flavor=H100, priority=1000)  # 4 free on h0: would take the preemptible job beside them
    scavenger = job(3, project="audio", devices=4, flavor=H100, priority=0, preemptible=True)
    snap = spender_and([head, scavenger], [filler, full])
    first = cycle(snap, FIFO_NO_QUOTAS)
    assert run_cycle(snap, FIFO_NO_QUOTAS, accelerate=False) == first
    assert (admitted(first), victims(first)) == ([1], [100])
    assert waits(first)[3].code == "held"
    second = cycle(carry_out(snap, first, NOW), FIFO_NO_QUOTAS)
    assert (admitted(second), victims(second)) == ([2], [101])
    # Not held: a job of another project the head's search could not take (not preemptible).
    firm = job(4, project="audio", devices=4, flavor=H100, priority=0)
    assert admitted(cycle(spender_and([head, firm], [filler, full]), FIFO_NO_QUOTAS)) == [1, 4]

def test_a_job_the_retry_budget_left_unevaluated_keeps_its_projects_lower_priority_out(monkeypatch):
    """Defect (the busy worlds' later cycles): a job waiting for capacity nobody is guaranteed was not evaluated
    again after a commit gave some back, the cycle's budget of evaluations again being spent; a later job of its
    project of lower priority took that room, and the next cycle preempted it for the first."""
    monkeypatch.setattr("jobs.scheduling.cycle.MAX_RETRIES", 0)
    node_list = nodes(3, flavor=H100, prefix="h")  # 24 devices, 16 guaranteed: 8 nobody is guaranteed
    quotas = [Quota("vision", H100, 8, borrow_limit=8), Quota("audio", H100, 8, borrow_limit=8)]
    projects = [Project("vision", "org1"), Project("audio", "org2")]
    keep = running(100, "vision", {"h0": 8}, flavor=H100, priority=2000)
    low = running(101, "audio", {"h1": 8}, flavor=H100, priority=0)  # audio holds the 8 nobody is guaranteed
    high = running(102, "audio", {"h2": 8}, flavor=H100, priority=2000)
    head = job(2, devices=4, flavor=H100, priority=1000)  # would borrow 4: nothing unowned is left
    taker = job(3, project="audio", devices=4, flavor=H100, priority=1000)  # preempts audio's own: 4 come back
    later = job(4, devices=4, flavor=H100, priority=100)
    snap = snapshot(node_list, [head, taker, later], [keep, low, high], quotas, projects)
    policy = Policy(ordering="fifo", blocking="backfill")
    first = cycle(snap, policy)
    assert run_cycle(snap, policy, accelerate=False) == first
    assert (admitted(first), victims(first)) == ([3], [101])
    assert waits(first)[2].code == "quota" and waits(first)[4].code == "held"
    second = cycle(carry_out(snap, first, NOW), policy)
    assert second.preemptions == () and admitted(second) == [2]


def test_a_job_given_back_hands_on_only_the_running_jobs_it_preempted():
    """Defect (the load test's scheduler, in a forecast's simulated cycle: `KeyError` in Cycle.committed, the loop's
    cycle failing until the queue changed): job A took back job C, admitted earlier in the cycle (C waits again, and
    may be admitted again later); then job B, of A's project and of higher priority, took A back, and with it A's
    victims, C included, which B's commit then gave back a second time. Only the running job A preempted is B's now.
    (Driven here on the cycle's own records: the random clusters of test_properties.py have not produced the
    sequence.)"""
    snap = snapshot(nodes(2), [job(1, project="q"), job(2, project="q", priority=1000), job(3, project="p")],
                    [running(100, "p", {"n0": 8})], [Quota("q", A100, 8), Quota("p", A100, 0)])
    the_cycle = Cycle(snap, Policy())
    infos = {pending.id: info for pending, info in the_cycle.order}
    a, b, c = (the_cycle.state.snapshot.pending[i] for i in range(3))
    given_back = Outcome(c, infos[c.id])  # waits again since A took it back
    taken_back = Outcome(a, infos[a.id])
    held, admitted_c = RunRec(100, "p", 500, 0.0, None, 0.0, False, [], {A100: 8}, True), \
        RunRec(c.id, "p", 500, NOW, None, NOW, False, [], {A100: 8}, False)
    taken_back.victims = (admitted_c, held)
    taker = Outcome(b, infos[b.id])
    the_cycle.outcomes = [given_back, taken_back, taker]
    the_cycle.admitted_at = {a.id: 1}
    the_cycle.give_back(RunRec(a.id, "q", 500, NOW, None, NOW, False, [], {A100: 8}, False), taker)
    assert [victim.id for victim in taker.victims] == [100]
    # B's commit gives A back, evaluated again; C, given back before, is not given back again (a KeyError).
    the_cycle.committed([RunRec(a.id, "q", 500, NOW, None, NOW, False, [], {A100: 8}, False), *taker.victims])
    assert the_cycle.outcomes[1].admit is not None and given_back.admit is None
