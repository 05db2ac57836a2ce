"""Engine bookkeeping with scripted decisions: times, preemption with checkpoints, accounting, errors."""

import pytest

from jobs.scheduling.model import Policy, ReplicaGroup
from replay.cluster import ClusterShape, QuotaSet, uniform_cluster
from replay.engine import EngineError, EngineOptions, run_replay
from replay.results import summarize, utilization_series
from replay.trace import trace_from_text
from tests.replay.scripted import Script

HEADER = "job_id,submit_s,duration_s,devices_per_replica,replicas,flavor,project,priority,user,max_runtime_s\n"
ONE = uniform_cluster(1, 1, "gpu")
NOQ = QuotaSet((), ())


def _trace(*rows):
    return trace_from_text(HEADER + "\n".join(rows) + "\n")


def _run(trace, plan, cluster=ONE, quotas=NOQ, **opts):
    script = Script(plan)
    result = run_replay(trace, cluster, quotas, Policy(), options=EngineOptions(**opts), cycle=script)
    return result, script


def test_wait_jct_and_utilization():
    t = _trace("a,0,100,1,1,gpu,p,,,", "b,10,50,1,1,gpu,p,,,")
    r, script = _run(t, {0: [("admit", 1, "node-000", 1)], 100: [("admit", 2, "node-000", 1)]})
    a, b = r.jobs
    assert (a.first_start, a.end, a.wait, a.jct) == (0, 100, 0, 100)
    assert (b.first_start, b.end, b.wait, b.jct) == (100, 150, 90, 140)
    assert script.calls == [0, 10, 100]  # no cycle once the queue is empty
    s = summarize(r)["overall"]
    assert s["makespan"] == 150 and s["utilization"] == pytest.approx(1.0)
    assert s["wait_mean"] == 45 and s["jct_mean"] == 120
    times, util = utilization_series(r, bins=3)
    assert list(times) == [0, 50, 100] and list(util) == pytest.approx([1, 1, 1])


def test_preemption_loses_work_since_last_checkpoint_and_pays_restart():
    t = _trace("low,0,1000,1,1,gpu,p,preemptible,,", "hi,250,100,1,1,gpu,q,high,,")
    plan = {
        0: [("admit", 1, "node-000", 1)],
        250: [("preempt", 1), ("admit", 2, "node-000", 1)],
        350: [("admit", 1, "node-000", 1)],
    }
    r, _ = _run(t, plan, checkpoint_interval=100, restart_overhead=20)
    low, hi = r.jobs
    assert low.preemptions == 1
    assert low.lost_work == 50  # 250 s of work, checkpoints at 100 and 200
    assert low.first_start == 0 and low.wait == 0
    assert low.end == 350 + 20 + 800  # restart overhead, then the 800 s not checkpointed
    assert low.overhead == 20
    assert hi.end == 350
    s = summarize(r)
    assert s["overall"]["preemptions"] == 1 and s["overall"]["lost_work_device_s"] == 50


def test_preemption_without_checkpoints_and_during_restart():
    t = _trace("low,0,1000,1,1,gpu,p,preemptible,,", "h1,250,100,1,1,gpu,q,high,,", "h2,360,10,1,1,gpu,q,high,,")
    plan = {
        0: [("admit", 1, "node-000", 1)],
        250: [("preempt", 1), ("admit", 2, "node-000", 1)],
        350: [("admit", 1, "node-000", 1)],
        360: [("preempt", 1), ("admit", 3, "node-000", 1)],
        370: [("admit", 1, "node-000", 1)],
    }
    r, _ = _run(t, plan, restart_overhead=20)
    low = r.jobs[0]
    assert low.preemptions == 2
    assert low.lost_work == 250  # no checkpoints: the first attempt is lost; the second did only overhead
    assert low.overhead == 10 + 20  # the interrupted restart, then the one that finished
    assert low.end == 370 + 20 + 1000


def test_stale_completion_of_preempted_attempt_is_ignored():
    t = _trace("a,0,100,1,1,gpu,p,preemptible,,", "b,50,10,1,1,gpu,q,high,,")
    plan = {0: [("admit", 1, "node-000", 1)], 50: [("preempt", 1), ("admit", 2, "node-000", 1)],
            60: [("admit", 1, "node-000", 1)]}  # fmt: skip
    r, _ = _run(t, plan)
    assert r.jobs[0].end == 160  # not 100, the completion of the first attempt


def test_max_runtime_cuts_a_job():
    r, _ = _run(_trace("a,0,100,1,1,gpu,p,,,40"), {0: [("admit", 1, "node-000", 1)]})
    assert (r.jobs[0].end, r.jobs[0].state) == (40, "timed_out")


def test_cycle_interval_runs_cycles_on_ticks_only():
    t = _trace("a,10,100,1,1,gpu,p,,,", "b,20,5,1,1,gpu,p,,,")
    r, script = _run(t, {60: [("admit", 1, "node-000", 1)], 180: [("admit", 2, "node-000", 1)]}, cycle_interval=60)
    assert script.calls == [60, 120, 180]
    assert (r.jobs[0].first_start, r.jobs[1].first_start, r.jobs[1].end) == (60, 180, 185)


def test_jobs_that_never_fit_end_the_run():
    r, _ = _run(_trace("a,0,100,1,1,gpu,p,,,"), {})
    assert r.jobs[0].state == "never_started"
    o = summarize(r)["overall"]
    assert (o["never_started"], o["unfinished"], o["finished"]) == (1, 0, 0)
    r, script = _run(_trace("a,0,100,1,1,gpu,p,,,"), {}, cycle_interval=30)
    assert r.jobs[0].state == "never_started" and len(script.calls) == 1


def test_starvation_under_guarantee_is_measured():
    from jobs.scheduling.model import Project, Quota

    quotas = QuotaSet((Quota("p", "gpu", 1), Quota("q", "gpu", 1)), (Project("p", "c"), Project("q", "c")))
    t = _trace("a,0,100,1,1,gpu,p,,,", "b,50,100,1,1,gpu,q,,,")
    # q borrows p's guarantee (both nodes) until 50; p's job fits its unused guarantee and waits for it.
    t = _trace("x,0,50,1,1,gpu,q,,,", "y,0,200,1,1,gpu,q,,,", "a,0,100,1,1,gpu,p,,,")
    plan = {0: [("admit", 1, "node-000", 1), ("admit", 2, "node-001", 1)], 50: [("admit", 3, "node-000", 1)]}
    r, _ = _run(t, plan, cluster=uniform_cluster(2, 1, "gpu"), quotas=quotas)
    p = summarize(r)["projects"]["p"]
    assert p["starved_seconds"] == 50 and p["starved_device_s"] == 50 and p["longest_starved_s"] == 50
    assert p["guarantee_met"] == 0.0 and p["guarantee_met_any"] == 0.0
    assert summarize(r)["projects"]["q"]["guarantee_met"] == 1.0
    assert summarize(r)["overall"]["projects_starved"] == 1


def test_waiting_with_the_devices_free_is_not_starvation_by_others():
    """Defect: a project whose own reserved head kept its job out (devices free) counted as not getting its
    guarantee; guarantee_met counts only waits while others held the devices, guarantee_met_any every wait."""
    from jobs.scheduling.model import Project, Quota

    quotas = QuotaSet((Quota("p", "gpu", 1), Quota("q", "gpu", 1)), (Project("p", "c"), Project("q", "c")))
    t = _trace("a,0,100,1,1,gpu,p,,,", "b,50,100,1,1,gpu,q,,,")
    plan = {50: [("admit", 1, "node-000", 1), ("admit", 2, "node-001", 1)]}
    r, _ = _run(t, plan, cluster=uniform_cluster(2, 1, "gpu"), quotas=quotas)
    p = summarize(r)["projects"]["p"]
    assert p["starved_seconds"] == 0 and p["guarantee_met"] == 1.0
    assert p["waited_within_seconds"] == 50 and p["guarantee_met_any"] == 0.0


@pytest.mark.parametrize(
    ("plan", "words"),
    [
        ({0: [("admit", 1, "node-000", 1), ("admit", 2, "node-000", 1)]}, "does not fit node node-000"),
        ({0: [("admit", 7, "node-000", 1)]}, "not pending"),
        ({0: [("admit", 1, "nowhere", 1)]}, "unknown node"),
        ({0: [("admit", 1, "node-000", 2)]}, "placement has 2 devices"),
        ({0: [("preempt", 1)]}, "not running"),
    ],
)
def test_impossible_decisions_fail_loudly(plan, words):
    with pytest.raises(EngineError, match=words):
        _run(_trace("a,0,100,1,1,gpu,p,,,", "b,0,100,1,1,gpu,p,,,"), plan)


def test_progress_callback_reaches_total():
    seen = []
    t = _trace("a,0,100,1,1,gpu,p,,,")
    run_replay(t, ONE, NOQ, Policy(), cycle=Script({0: [("admit", 1, "node-000", 1)]}),
               progress=lambda done, total, now: seen.append((done, total, now)))  # fmt: skip
    assert seen[-1] == (1, 1, 100)


def test_oracle_duration_hint_only_for_sjf():
    hints = []

    def cycle(snapshot, policy):
        hints.extend(j.duration_hint for j in snapshot.pending)
        return Script({})(snapshot, policy)

    t = _trace("a,0,100,1,1,gpu,p,,,")
    run_replay(t, ONE, NOQ, Policy(), cycle=cycle)
    run_replay(t, ONE, NOQ, Policy(ordering="sjf"), cycle=cycle)
    assert hints == [None, 100]


def test_a_job_of_whole_nodes_plus_a_rest_asks_the_core_for_two_replica_groups():
    seen = []

    def cycle(snapshot, policy):
        seen.extend(j.groups for j in snapshot.pending)
        return Script({})(snapshot, policy)

    t = trace_from_text("submit_s,duration_s,total_devices,flavor,project\n0,100,12,gpu,p\n0,100,16,gpu,p\n")
    run_replay(t, uniform_cluster(4, 8, "gpu"), NOQ, Policy(), cycle=cycle)
    assert seen == [
        (ReplicaGroup("worker", 1, 8, "gpu"), ReplicaGroup("remainder", 1, 4, "gpu")),
        (ReplicaGroup("worker", 2, 8, "gpu"),),  # whole nodes only: one group, as before
    ]


def test_a_cluster_without_nodes_never_asks_the_core():
    # A project without a partition replays on no node at all: every job never starts, without a cycle.
    script = Script({})
    r = run_replay(_trace("a,0,100,1,1,gpu,p,,,", "b,5,100,1,1,gpu,p,,,"), ClusterShape(()), NOQ, Policy(),
                   cycle=script)
    assert script.calls == []
    assert [j.state for j in r.jobs] == ["never_started", "never_started"]
    acc = r.accounts[("p", "gpu")]
    assert acc.demand_seconds == 5 and acc.device_seconds == 0  # the time a job waited is still accounted
