"""The benchmark scripts' own logic (not their speed): a failing case is reported, figures are named for what
they count. The scripts live in bench/, outside any package, so they are loaded from their files."""

import importlib.util
import os
import sys
from pathlib import Path

import pytest

from replay.cluster import QuotaSet, uniform_cluster
from tests.replay.core import needs_core

BENCH = Path(__file__).resolve().parents[2] / "bench"


def _load(name: str):
    spec = importlib.util.spec_from_file_location(name, BENCH / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses look their module up while the class is built
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def bench_replay():
    return _load("bench_replay")


@pytest.fixture(scope="module")
def bench_e2e():
    return _load("bench_e2e_scheduler")


def _raises(_arg):
    raise RuntimeError("boom in the child")


def _dies(_arg):
    os._exit(3)  # no exception, no result: as if the child were killed


def test_a_case_that_raises_is_reported_not_waited_for(bench_replay):
    r = bench_replay.measure(_raises, None, poll=0.05)
    assert "RuntimeError: boom in the child" in r["error"] and "Traceback" in r["error"]
    r = bench_replay.measure(_dies, None, poll=0.05)
    assert r == {"error": "the benchmark process exited with status 3 without a result"}


def test_a_failing_case_fails_the_run(bench_replay, monkeypatch, capsys):
    case = bench_replay.Case("exploding case", _raises, None, 10.0)
    monkeypatch.setattr(bench_replay, "cases", lambda args: [case])
    assert bench_replay.main([]) == 1
    captured = capsys.readouterr()
    assert "exploding case" in captured.out and "ERROR" in captured.out
    assert "RuntimeError: boom in the child" in captured.err


def test_rows_judge_cpu_time_against_the_target(bench_replay):
    case = bench_replay.Case("c", _raises, None, 10.0)
    measured = {"jobs": 10, "cycles": 4, "wall": 30.0, "cpu": 9.0, "peak_mb": 50.0}
    assert bench_replay.row(case, measured)[1] is True  # wall time over the target does not fail a CPU target
    assert bench_replay.row(case, {**measured, "cpu": 10.5})[1] is False


@needs_core
def test_the_blocked_backlog_case_blocks_the_backlog_behind_its_head(bench_replay):
    from jobs.scheduling.model import Project, Quota
    from replay.engine import run_replay
    from replay.policies import get_policy

    trace = bench_replay.blocked_backlog_trace(20)
    quotas = QuotaSet((Quota("p", "gpu", 8),), (Project("p", "org"),))
    r = run_replay(trace, uniform_cluster(1, 8, "gpu"), quotas, get_policy("strict-fifo"))
    running, head, *backlog = r.jobs
    assert head.first_start == running.end == 30  # the head waits for the whole node
    # Every backlog job arrived while the head was blocked and could have fit in no GPU: all wait behind it.
    assert all(j.submit < running.end and j.first_start >= head.end for j in backlog)


def test_e2e_counts_admissions_and_explained_waits_apart(bench_e2e):
    run = bench_e2e.Run(wall=2.0, cpu=1.5, admitted=480, explained=14520, unexplained=0,
                        cycles=[(2.0, 480, 14520)])  # fmt: skip
    assert run.admissions_per_s == 240 and run.explained_per_s == 7260
    lines, ok = bench_e2e.report([run], 15000)
    assert ok
    header, row = lines[0].split(), lines[1]
    assert "admissions/s" in header and "explained/s" in header and "jobs/s" not in lines[0]
    assert "240" in row.split() and "7260" in row.split()
    kueue = lines[-1]
    # Only admissions are set beside Kueue's admitted workloads (15,000 in 351 s).
    assert "15,000 workloads admitted in 351 s = 43 admissions/s" in kueue and "240 admissions/s" in kueue
    assert "7260" not in kueue


def test_e2e_medians_over_runs_and_target(bench_e2e):
    runs = [bench_e2e.Run(w, w / 2, 480, 14520, 0) for w in (2.0, 9.0, 3.0)]
    lines, ok = bench_e2e.report(runs, 15000)
    assert ok
    assert "3.00" in lines[1].split() and "1.50" in lines[1].split()  # median wall and median CPU
    assert len([x for x in lines if x.startswith("  run ")]) == 3
    _, ok = bench_e2e.report([bench_e2e.Run(2.0, 1.0, 480, 14000, 520)], 15000)
    assert not ok  # jobs left without a reason fail the run
    _, ok = bench_e2e.report([bench_e2e.Run(16.0, 1.0, 480, 14520, 0)], 15000)
    assert not ok  # over 15 s for the queue


def test_eta_bench_learns_the_shares_of_max_runtime_from_jobs_already_finished():
    bench_eta = _load("bench_eta")
    from jobs.scheduling import runtime_shares
    from jobs.scheduling.forecast import MAX_RUNTIMES

    used = [(100.0 + k, 0.1 + k / 100) for k in range(30)]  # 30 jobs finished between 100 s and 129 s
    recorder = bench_eta.Recorder({1: 500.0}, [1], used)
    assert recorder.shares(50.0) == MAX_RUNTIMES  # nothing finished yet: plan with max runtimes
    assert recorder.shares(110.0) == MAX_RUNTIMES  # 11 finished: too few to learn from
    assert recorder.shares(200.0) == runtime_shares([share for _, share in used])
    assert bench_eta.Recorder({1: 500.0}, [1], None).shares(1000.0) == MAX_RUNTIMES


def test_eta_bench_counts_a_missing_estimate_as_wrong_until_the_end_and_measures_the_range():
    bench_eta = _load("bench_eta")
    from jobs.scheduling.forecast import Estimate

    starts = {1: 1000.0, 2: 2000.0, 3: 3000.0}
    asked = {1: (400.0, Estimate(1100.0, 900.0, 1200.0)),  # within its range
             2: (1500.0, Estimate(note="beyond 24 h")),  # no start: wrong until the end of the replay
             3: (2000.0, Estimate(2500.0, 2400.0, None))}  # open at the late end: covers any later start
    row = bench_eta.row(asked, starts, end=5000.0)
    assert row.eta == pytest.approx((100 + 3000 + 500) / 3)
    assert row.now == pytest.approx((600 + 500 + 1000) / 3)
    assert (row.jobs, row.without, row.coverage, row.early, row.late, row.open) == (3, 1, pytest.approx(2 / 3), 0, 0, 1)
    assert row.width == pytest.approx(300.0)


@needs_core
def test_bench_elastic_counts_a_preemption_as_avoidable_only_when_shrinking_would_have_made_room():
    """One node of 8: elastic job 1 of project p (4..8 workers) and a waiting 4-device job of q, each guaranteed
    4. Running on 8, job 1's 4 grown workers would make room: a preemption for q's job was avoidable. At its
    minimum beside a rigid 4-device job, shrinking frees nothing: a preemption was needed."""
    from jobs.scheduling.model import (
        Assignment,
        Elastic,
        Node,
        PendingJob,
        Policy,
        Project,
        Quota,
        ReplicaGroup,
        RunningJob,
        Snapshot,
    )

    bench = _load("bench_elastic")
    quotas = (Quota("p", "gpu", 4, borrow_limit=4), Quota("q", "gpu", 4, borrow_limit=4))
    projects = (Project("p", "org"), Project("q", "org"))
    waiting = PendingJob(9, "q", 500, 0.0, (ReplicaGroup("worker", 1, 4, "gpu"),))

    def snapshot(running, free):
        return Snapshot(100.0, (Node("n0", "gpu", 8, free),), quotas, projects, running, (waiting,))

    workers = tuple(Assignment("worker", i, "n0", 1) for i in range(8))
    grown = RunningJob(1, "p", 500, 0.0, workers, "gpu", elastic=(Elastic("worker", 4, 8),))
    assert bench.shrink_sufficed(snapshot((grown,), 0), Policy(), 9)
    at_minimum = RunningJob(1, "p", 500, 0.0, workers[:4], "gpu", elastic=(Elastic("worker", 4, 8),))
    rigid = RunningJob(2, "p", 500, 0.0, (Assignment("worker", 0, "n0", 4),), "gpu")
    assert not bench.shrink_sufficed(snapshot((at_minimum, rigid), 0), Policy(), 9)
    # A job of a higher priority than the waiting one keeps its grown workers: they are not the waiting job's to take.
    higher = RunningJob(1, "p", 1000, 0.0, workers, "gpu", elastic=(Elastic("worker", 4, 8),))
    assert not bench.shrink_sufficed(snapshot((higher,), 0), Policy(), 9)
