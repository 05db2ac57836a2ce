"""The replay engine reports each attempt of a replayed job as a segment (plain data, as the platform meters a real
one): checked by hand on a preemption, and against the engine's own device-time integrals on a busy trace."""

import pytest

from jobs.scheduling.model import Policy, Project, Quota
from replay.api import run
from replay.cluster import QuotaSet, uniform_cluster
from replay.engine import EngineOptions, Segment, run_replay
from replay.scenarios import Scenario, partition_by_project
from replay.synthetic import synthetic_trace
from replay.trace import trace_from_text
from tests.replay.core import needs_core

pytestmark = needs_core

HEADER = "job_id,submit_s,duration_s,devices_per_replica,replicas,flavor,project,priority,user,max_runtime_s\n"
QUOTAS = QuotaSet((Quota("a", "gpu", 8, borrow_limit=8), Quota("b", "gpu", 8, borrow_limit=8)),
                  (Project("a", "org"), Project("b", "org")))


def test_a_preempted_job_is_two_segments_and_a_timed_out_one_failed():
    """a1 and a2 fill both nodes (a borrows b's); b1 comes at 250 and takes its guarantee back from one of them,
    which resumes at 355, 5 s after b1 ended (b's lend hold), with 10 s of restart overhead and its work since the
    last checkpoint lost.
    a3 (preemptible) asks for 1,000 s but declared 100: stopped at its max runtime, failed."""
    trace = trace_from_text(HEADER + "a1,0,1000,8,1,gpu,a,,,\na2,0,1000,8,1,gpu,a,,,\nb1,250,100,8,1,gpu,b,,,\n"
                                     "a3,2000,1000,4,1,gpu,a,preemptible,,100\n")
    result = run(trace, uniform_cluster(2, 8, "gpu"), QUOTAS, "production",
                 options=EngineOptions(checkpoint_interval=100, restart_overhead=10))
    victim = next(j for j in result.jobs if j.preemptions).job_id
    other = {"a1": "a2", "a2": "a1"}[victim]
    cluster = uniform_cluster(2, 8, "gpu").nodes[0].cluster
    assert result.segments == [
        *sorted([Segment(victim, 1, "a", "gpu", cluster, 8, "normal", False, 0, 250, "preempted"),
                 Segment(other, 1, "a", "gpu", cluster, 8, "normal", False, 0, 1000, "succeeded")],
                key=lambda s: s.job_id),
        Segment("b1", 1, "b", "gpu", cluster, 8, "normal", False, 250, 350, "succeeded"),
        Segment(victim, 2, "a", "gpu", cluster, 8, "normal", False, 355, 355 + 10 + 800, "succeeded"),
        Segment("a3", 1, "a", "gpu", cluster, 4, "preemptible", True, 2000, 2100, "failed"),
    ]


def test_segments_add_up_to_the_device_time_of_every_project_and_splitting_changes_none():
    names = [f"proj-{i:02d}" for i in range(4)]
    quotas = QuotaSet(tuple(Quota(p, "gpu", 16, borrow_limit=48) for p in names),
                      tuple(Project(p, "org") for p in names))
    trace = synthetic_trace(300, devices=64, projects=4, load=1.3, median_duration=600, seed=3)
    options = EngineOptions(checkpoint_interval=300, restart_overhead=30)
    result = run(trace, uniform_cluster(8, 8, "gpu"), quotas, "production", options=options)
    assert sum(j.preemptions for j in result.jobs) > 0  # the trace exercises preemption
    assert len(result.segments) == sum(1 + j.preemptions for j in result.jobs if j.first_start is not None)
    for (project, _), account in result.accounts.items():
        held = sum(s.devices * (s.end - s.start) for s in result.segments if s.project == project)
        assert held == pytest.approx(account.device_seconds, rel=1e-9)
    scn = partition_by_project(Scenario(trace, uniform_cluster(8, 8, "gpu"), quotas))
    policy = Policy(ordering="fifo", blocking="strict", borrowing=False, preemption=False)
    whole = run_replay(scn.trace, scn.cluster, scn.quotas, policy, options=EngineOptions(split_independent=False))
    split = run_replay(scn.trace, scn.cluster, scn.quotas, policy)
    assert whole.segments == split.segments and whole.segments
