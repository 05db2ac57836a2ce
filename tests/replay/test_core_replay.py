"""Replays through the real core: determinism, invariants, preemption, splitting (small traces)."""

import dataclasses

import pytest

from jobs.scheduling.model import Policy, Project, Quota
from replay.api import run
from replay.cluster import ConfigError, QuotaSet, uniform_cluster
from replay.engine import EngineOptions, run_replay
from replay.results import summarize
from replay.scenarios import Scenario, partition_by_project
from replay.synthetic import synthetic_trace
from replay.trace import Trace, trace_from_text
from tests.replay.core import needs_core

pytestmark = needs_core

CLUSTER = uniform_cluster(8, 8, "gpu")
NAMES = [f"proj-{i:02d}" for i in range(4)]
QUOTAS = QuotaSet(tuple(Quota(p, "gpu", 16, borrow_limit=48) for p in NAMES), tuple(Project(p, "org") for p in NAMES))
# Preemptible jobs run only on borrowed idle capacity in the core, so the no-borrowing baselines would never
# start them; the baselines compare ordering and blocking, not priority classes.
TRACE = synthetic_trace(400, devices=64, projects=4, load=1.2, median_duration=600, seed=7,
                        priorities=("high", "normal", "low"))  # fmt: skip
MIXED = synthetic_trace(400, devices=64, projects=4, load=1.2, median_duration=600, seed=8)


def _outcomes(r):
    return [dataclasses.astuple(j) for j in r.jobs]


def test_same_inputs_same_run():
    opts = EngineOptions(checkpoint_interval=300, restart_overhead=30)
    a = run(MIXED, CLUSTER, QUOTAS, "production", options=opts)
    b = run(MIXED, CLUSTER, QUOTAS, "production", options=opts)
    assert sum(j.preemptions for j in a.jobs) > 0
    assert _outcomes(a) == _outcomes(b)
    assert (a.util_times, a.util_used) == (b.util_times, b.util_used)


def test_invariants_under_every_policy():
    opts = EngineOptions(checkpoint_interval=300, restart_overhead=30)
    for name in ("production", "strict-fifo", "fifo-skip", "sjf", "pooled-fifo"):
        r = run(TRACE, CLUSTER, QUOTAS, name, options=opts)
        assert all(j.end is not None for j in r.jobs), name
        for j in r.jobs:
            assert j.first_start >= j.submit, (name, j)
            if j.preemptions == 0:
                assert j.end == j.first_start + j.duration, (name, j)
                assert j.lost_work == 0
            else:
                # Lost work and restart time delay the end; a checkpoint keeps the rest.
                assert j.end >= j.first_start + j.duration
                assert 0 <= j.lost_work <= (j.end - j.first_start) * j.devices
        assert max(r.util_used) <= CLUSTER.total_devices
        if name != "production":
            assert sum(j.preemptions for j in r.jobs) == 0, name


def test_guaranteed_job_preempts_a_borrower_and_work_since_checkpoint_is_lost():
    quotas = QuotaSet(
        (Quota("a", "gpu", 8, borrow_limit=8), Quota("b", "gpu", 8, borrow_limit=8)),
        (Project("a", "org"), Project("b", "org")),
    )
    header = "job_id,submit_s,duration_s,devices_per_replica,replicas,flavor,project,priority,user,max_runtime_s\n"
    trace = trace_from_text(header + "a1,0,1000,8,1,gpu,a,,,\na2,0,1000,8,1,gpu,a,,,\nb1,250,100,8,1,gpu,b,,,\n")
    r = run(trace, uniform_cluster(2, 8, "gpu"), quotas, "production",
            options=EngineOptions(checkpoint_interval=100, restart_overhead=10))  # fmt: skip
    a1, a2, b1 = r.jobs
    assert b1.first_start == 250 and b1.wait == 0  # b gets its guarantee when it asks
    victim = a1 if a1.preemptions else a2
    assert victim.preemptions == 1
    assert victim.lost_work == 50 * 8  # 250 s done, checkpoints every 100 s
    # It resumes on b's guarantee once b1 ended and b's lend hold (Policy.lend_hold, 5 s) let it go, then spends the
    # restart overhead.
    assert victim.end == 350 + 5 + 10 + 800


CHECKPOINT_REPLAYS = [
    # (name, EngineOptions.checkpoint_interval, the victim, the work it loses in device-seconds)
    # a1 started at 0, a2 at 2000; b reclaims 4 of its 8 GPUs at 3700.
    ("no checkpoints: the one started last, 1,700 s of work", None, "a2", 1700 * 4),
    ("a1 checkpointed at 3600: it loses 100 s where a2 would lose 1,700", 1800.0, "a1", 100 * 4),
]


@pytest.mark.parametrize("name,interval,victim,lost", CHECKPOINT_REPLAYS, ids=[c[0] for c in CHECKPOINT_REPLAYS])
def test_the_victim_is_the_one_whose_work_since_its_checkpoint_is_least(name, interval, victim, lost):
    quotas = QuotaSet((Quota("a", "gpu", 0, borrow_limit=8), Quota("b", "gpu", 8)),
                      (Project("a", "org"), Project("b", "org")))
    header = "job_id,submit_s,duration_s,devices_per_replica,replicas,flavor,project,priority,user,max_runtime_s\n"
    trace = trace_from_text(header + "a1,0,10000,4,1,gpu,a,,,\na2,2000,10000,4,1,gpu,a,,,\nb1,3700,100,4,1,gpu,b,,,\n")
    r = run(trace, uniform_cluster(1, 8, "gpu"), quotas, "production",
            options=EngineOptions(checkpoint_interval=interval))
    by_id = {j.job_id: j for j in r.jobs}
    assert by_id["b1"].first_start == 3700
    assert [j.job_id for j in r.jobs if j.preemptions] == [victim]
    assert by_id[victim].lost_work == lost


GRACE_REPLAYS = [
    # (name, Policy.reclaim_grace, duration of a's job started 5 s before b's, b's start, a's preemptions)
    ("no grace: b reclaims at once", 0.0, 1000, 5, 1),
    ("a ends within the grace: b starts then, nobody preempted", 30.0, 20, 20, 0),
    ("nothing frees: b reclaims when its grace ends, a cycle of its own", 30.0, 1000, 35, 1),
]


@pytest.mark.parametrize("name,grace,a_runs,b_start,preemptions", GRACE_REPLAYS, ids=[c[0] for c in GRACE_REPLAYS])
def test_a_reclaim_waits_for_its_grace_in_replay(name, grace, a_runs, b_start, preemptions):
    quotas = QuotaSet((Quota("a", "gpu", 0, borrow_limit=8), Quota("b", "gpu", 8)),
                      (Project("a", "org"), Project("b", "org")))
    header = "job_id,submit_s,duration_s,devices_per_replica,replicas,flavor,project,priority,user,max_runtime_s\n"
    trace = trace_from_text(header + f"a1,0,{a_runs},8,1,gpu,a,,,\nb1,5,100,8,1,gpu,b,,,\n")
    r = run(trace, uniform_cluster(1, 8, "gpu"), quotas, Policy(reclaim_grace=grace))
    a1, b1 = r.jobs
    assert (b1.first_start, a1.preemptions) == (b_start, preemptions)


def test_splitting_partitions_changes_nothing():
    scn = partition_by_project(Scenario(TRACE, CLUSTER, QUOTAS))
    for policy in (Policy(ordering="fifo", blocking="strict", borrowing=False, preemption=False), Policy()):
        whole = run_replay(scn.trace, scn.cluster, scn.quotas, policy, options=EngineOptions(split_independent=False))
        split = run_replay(scn.trace, scn.cluster, scn.quotas, policy)
        assert _outcomes(whole) == _outcomes(split)
        assert (whole.util_times, whole.util_used) == (split.util_times, split.util_used)
        for key, acc in whole.accounts.items():  # integrals over differently cut intervals: equal up to rounding
            other = dataclasses.asdict(split.accounts[key])
            assert dataclasses.asdict(acc) == pytest.approx(other, rel=1e-9, abs=1e-6)


def test_cycle_interval_delays_starts_to_ticks():
    r = run(TRACE, CLUSTER, QUOTAS, "production", options=EngineOptions(cycle_interval=60))
    assert all(j.first_start % 60 == 0 for j in r.jobs)
    assert all(j.end is not None for j in r.jobs)


def test_progress_is_monotonic_and_ends_at_total_when_split():
    scn = partition_by_project(Scenario(TRACE, CLUSTER, QUOTAS))
    seen = []
    run_replay(scn.trace, scn.cluster, scn.quotas, Policy(), progress=lambda d, t, now: seen.append((d, t)))
    assert seen[-1] == (len(TRACE), len(TRACE))
    assert [d for d, _ in seen] == sorted(d for d, _ in seen)


def test_a_12_gpu_job_takes_a_whole_node_and_4_gpus_of_another():
    # node-000 keeps 4 GPUs busy until t=500; the 12-GPU job fits at t=1 only as a whole free node (node-001)
    # plus the 4 GPUs left on node-000, which is how the core places its two replica groups.
    quotas = QuotaSet((Quota("p", "gpu", 16),), (Project("p", "org"),))
    trace = trace_from_text("submit_s,duration_s,total_devices,flavor,project\n0,500,4,gpu,p\n1,100,12,gpu,p\n"
                            "2,100,4,gpu,p\n")
    r = run(trace, uniform_cluster(2, 8, "gpu"), quotas, "strict-fifo")
    small, twelve, late = r.jobs
    assert (twelve.devices, twelve.first_start, twelve.end) == (12, 1, 101)
    assert late.first_start == 101  # all 16 GPUs were in use until the 12-GPU job ended
    assert max(r.util_used) == 16


def test_a_project_without_a_quota_gets_no_partition_and_its_jobs_never_start():
    orphan = trace_from_text("job_id,submit_s,duration_s,devices_per_replica,replicas,flavor,project\n"
                             "o1,0,100,1,1,gpu,no-quota\no2,50,100,1,1,gpu,no-quota\n")
    trace = Trace(TRACE.jobs + orphan.jobs, source="mixed")
    for name in ("strict-fifo", "fifo-skip", "sjf"):
        r = run(trace, CLUSTER, QUOTAS, name, partition=None)  # partitioned, as the reference experiment
        s = summarize(r)
        assert [j.state for j in r.jobs if j.project == "no-quota"] == ["never_started"] * 2, name
        assert s["projects"]["no-quota"]["never_started"] == 2 and s["projects"]["no-quota"]["wait_mean"] is None
        assert s["overall"]["never_started"] == 2
        # The other projects replay exactly as without the orphan's jobs: a project without nodes touches nothing.
        alone = run(TRACE, CLUSTER, QUOTAS, name, partition=None)
        assert _outcomes(alone) == [dataclasses.astuple(j) for j in r.jobs if j.project != "no-quota"], name


def test_a_quota_on_a_flavor_the_cluster_lacks_is_a_config_error():
    quotas = QuotaSet(QUOTAS.quotas + (Quota("proj-00", "tpu", 8),), QUOTAS.projects)
    with pytest.raises(ConfigError, match="project proj-00 names flavor 'tpu', which the cluster lacks"):
        partition_by_project(Scenario(TRACE, CLUSTER, quotas))
