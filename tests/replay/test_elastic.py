"""Elastic jobs in trace replay (issue 29): the progress model checked by hand on scripted decisions, which jobs
are chosen, and the flags of the command line."""

import io
import math

import pytest
from django.core.management import CommandError, call_command

from jobs.scheduling.model import Elastic, Policy, Project, Quota
from replay.api import run
from replay.cli import main
from replay.cluster import QuotaSet, uniform_cluster
from replay.elastic import elastic_range, is_elastic, peak_workers, speed
from replay.engine import EngineOptions, Segment, run_replay
from replay.synthetic import synthetic_trace
from replay.trace import trace_from_text
from tests.replay.core import needs_core
from tests.replay.scripted import Script

HEADER = "job_id,submit_s,duration_s,devices_per_replica,replicas,flavor,project,priority,user,max_runtime_s\n"
NOQ = QuotaSet((), ())
E = 0.9
NODE = "node-000"


def _trace(*rows):
    return trace_from_text(HEADER + "\n".join(rows) + "\n")


def _run(trace, plan, devices=8, **opts):
    script = Script(plan)
    options = EngineOptions(elastic_fraction=1.0, **opts)
    result = run_replay(trace, uniform_cluster(1, devices, "gpu"), NOQ, Policy(), options=options, cycle=script)
    return result, script


def rate(n):
    """Work per second of n workers, in one worker's: n x e^(n-1) (docs/replay.md)."""
    return n * E ** (n - 1)


def test_the_speed_is_the_rate_relative_to_the_trace_size_and_growth_stops_where_it_stops_helping():
    assert speed(4, 4, E) == 1.0
    assert speed(2, 4, E) == pytest.approx(rate(2) / rate(4))
    assert speed(8, 4, E) == pytest.approx(rate(8) / rate(4))
    assert peak_workers(E) == 9  # rate(10) == rate(9): a tenth worker adds nothing
    assert rate(9) > rate(8) and rate(10) == pytest.approx(rate(9)) and rate(11) < rate(10)
    assert peak_workers(1.0) is None
    assert elastic_range(8, 1.0, E) == (4, 8)
    assert elastic_range(5, 1.0, E) == (3, 5)
    assert elastic_range(4, 2.0, E) == (2, 8)
    assert elastic_range(8, 2.0, E) == (4, 9)  # not 16: beyond 9 workers it would run slower
    assert elastic_range(16, 1.0, E) == (8, 16)  # never below its own size
    assert elastic_range(1, 1.0, E) == (1, 1)


def test_a_job_growing_from_2_to_4_workers_ends_when_the_model_says():
    """A 4-GPU job admitted at its minimum of 2 at t=0; its cooldown (400 s) ends at 400, when a cycle runs and
    it grows to 4. W = 1000 x rate(4); it did 400 x rate(2) by 400, then pauses 30 s, then does the rest at
    rate(4)."""
    trace = _trace("e,0,1000,4,1,gpu,p,,,")
    plan = {0: [("admit-workers", 1, [NODE, NODE])], 400: [("grow", 1, 2, [NODE, NODE])]}
    result, script = _run(trace, plan, devices=4, resize_cooldown=400)
    job = result.jobs[0]
    expected_end = 400 + 30 + (1000 * rate(4) - 400 * rate(2)) / rate(4)
    assert job.elastic and job.grows == 1 and job.shrinks == 0
    assert job.first_start == 0
    assert job.end == pytest.approx(expected_end, rel=1e-12)
    assert job.rescale_pause == 30 and job.rescale_pause_device_s == 30 * 4
    assert job.lost_work == 0
    assert script.calls == [0, 400]  # the arrival, then the end of its cooldown (nothing else happens)
    running = script.snapshots[1].running[0]
    assert running.elastic == (Elastic("worker", 2, 4),) and len(running.placement) == 2
    assert running.started_at == 0 and running.resize_cooldown == 400
    cluster = result.segments[0].cluster
    assert result.segments == [Segment("e", 1, "p", "gpu", cluster, 2, "normal", False, 0, 400, "resized"),
                               Segment("e", 1, "p", "gpu", cluster, 4, "normal", False, 400, job.end, "succeeded")]
    assert result.accounts[("p", "gpu")].device_seconds == pytest.approx(2 * 400 + 4 * (job.end - 400))


def test_the_pending_elastic_job_asks_for_its_minimum_of_one_device_workers():
    trace = _trace("e,0,1000,8,1,gpu,p,,,")
    _, script = _run(trace, {})
    (pending,) = script.snapshots[0].pending
    (group,) = pending.groups
    assert (group.replicas, group.max_replicas, group.devices) == (4, 8, 1)
    # At its minimum it is slowest: that is its runtime at most.
    assert pending.max_runtime == pytest.approx(1000 * rate(8) / rate(4))


def _grown_then(step):
    """e (4 GPUs) at 2 workers from 0, grown to 4 at 300 (its cooldown), then at 1000, when r arrives, `step`.
    Checkpoints every 200 s of work (seconds of its recorded duration)."""
    trace = _trace("e,0,1000,4,1,gpu,p,,,", "r,1000,10,1,1,gpu,q,high,,")
    plan = {0: [("admit-workers", 1, [NODE, NODE])], 300: [("grow", 1, 2, [NODE, NODE])],
            1000: [step, ("admit", 2, NODE, 1)]}
    return _run(trace, plan, devices=4, checkpoint_interval=200)


def _work_at_1000():
    """Seconds of e's recorded duration done by 1000: 300 s at 2 workers, a 30 s pause, 670 s at 4."""
    return 300 * rate(2) / rate(4) + 670


def test_a_shrink_loses_the_work_since_the_last_checkpoint_and_pauses():
    result, script = _grown_then(("shrink", 1, [(3, NODE)]))
    e = result.jobs[0]
    work = _work_at_1000()
    assert 800 < work < 1000  # checkpoints at 200, 400, 600 and 800 of its work: back to 800
    assert e.shrinks == 1 and e.grows == 1 and e.preemptions == 0
    assert e.lost_work == pytest.approx((work - 800) * 4) and e.shrink_lost_work == e.lost_work
    # From 800 on at 3 workers after a 30 s pause.
    assert e.end == pytest.approx(1000 + 30 + 200 * rate(4) / rate(3), rel=1e-12)
    assert e.rescale_pause == 60
    # The shrink freed devices: the cycle runs again at 1000. r ends at 1010: a cycle runs, since e may grow again;
    # the core sees it shrunk and at its checkpoint.
    assert script.calls[:5] == [0, 300, 1000, 1000, 1010]
    shrunk = next(r for r in script.snapshots[4].running if r.id == 1)
    assert len(shrunk.placement) == 3 and {a.index for a in shrunk.placement} == {0, 1, 2}
    assert shrunk.resized_at == 1000 and shrunk.checkpointed_at == 1000
    assert [s.devices for s in result.segments if s.job_id == "e"] == [2, 4, 3]


def test_a_job_that_checkpoints_when_told_to_shrink_loses_nothing():
    trace = _trace("e,0,1000,4,1,gpu,p,,,", "r,1000,10,1,1,gpu,q,high,,")
    plan = {0: [("admit-workers", 1, [NODE, NODE])], 300: [("grow", 1, 2, [NODE, NODE])],
            1000: [("shrink", 1, [(3, NODE)]), ("admit", 2, NODE, 1)]}
    result, _ = _run(trace, plan, devices=4, checkpoint_interval=200, checkpoint_on_shrink=True)
    e = result.jobs[0]
    assert e.shrinks == 1 and e.lost_work == 0
    assert e.end == pytest.approx(1000 + 30 + (1000 - _work_at_1000()) * rate(4) / rate(3), rel=1e-12)


def test_a_preempted_elastic_job_loses_the_same_work_and_queues_again_elastic():
    result, script = _grown_then(("preempt", 1))
    e = result.jobs[0]
    assert e.preemptions == 1 and e.shrinks == 0
    assert e.lost_work == pytest.approx((_work_at_1000() - 800) * 4)
    assert script.calls[:5] == [0, 300, 1000, 1000, 1010]
    (pending,) = script.snapshots[4].pending  # at 1010, when r ended
    (group,) = pending.groups
    assert (pending.id, group.replicas, group.max_replicas) == (1, 2, 4)
    # It resumes from 800 of its 1000 s at 2 workers, within its runtime at the minimum.
    assert pending.max_runtime == pytest.approx(200 * rate(4) / rate(2))


def test_without_checkpoints_a_shrink_loses_the_whole_attempt():
    trace = _trace("e,0,1000,4,1,gpu,p,,,", "r,500,10,1,1,gpu,q,high,,")
    plan = {0: [("admit-workers", 1, [NODE, NODE])], 300: [("grow", 1, 2, [NODE, NODE])],
            500: [("shrink", 1, [(3, NODE)]), ("admit", 2, NODE, 1)]}
    result, _ = _run(trace, plan, devices=4)
    e = result.jobs[0]
    done = 300 * rate(2) / rate(4) + 170  # seconds of its duration by 500: all of it lost
    assert e.lost_work == pytest.approx(done * 4)
    assert e.end == pytest.approx(500 + 30 + 1000 * rate(4) / rate(3), rel=1e-12)


def test_the_same_jobs_are_chosen_every_run_and_a_larger_share_keeps_them():
    ids = [f"job-{i}" for i in range(4000)]
    half = {i for i in ids if is_elastic(i, 0.5)}
    assert half == {i for i in ids if is_elastic(i, 0.5)}
    assert 0.45 < len(half) / len(ids) < 0.55
    assert {i for i in ids if is_elastic(i, 0.2)} < half
    assert not any(is_elastic(i, 0.0) for i in ids) and all(is_elastic(i, 1.0) for i in ids)


@needs_core
def test_a_replay_with_elastic_jobs_marks_the_same_jobs_and_decides_the_same_twice():
    names = [f"proj-{i:02d}" for i in range(3)]
    quotas = QuotaSet(tuple(Quota(p, "gpu", 16, borrow_limit=32) for p in names), tuple(Project(p, "org")
                                                                                        for p in names))
    trace = synthetic_trace(300, devices=48, projects=3, load=1.2, median_duration=600, seed=5)
    options = EngineOptions(elastic_fraction=0.5, checkpoint_interval=300)
    first = run(trace, uniform_cluster(6, 8, "gpu"), quotas, "production", options=options)
    second = run(trace, uniform_cluster(6, 8, "gpu"), quotas, "production", options=options)
    assert first.jobs == second.jobs and first.segments == second.segments
    chosen = {j.job_id for j in first.jobs if j.elastic}
    assert chosen and chosen == {j.job_id for j in trace.jobs if is_elastic(j.job_id, 0.5) and j.total_devices > 1}
    assert sum(j.grows + j.shrinks for j in first.jobs) > 0  # the core resized some
    assert all(j.state == "done" for j in first.jobs)
    # Segments follow device counts: they add up to the device time the engine integrated.
    used = sum(s.devices * (s.end - s.start) for s in first.segments)
    assert used == pytest.approx(sum(a.device_seconds for a in first.accounts.values()))


@needs_core
def test_a_share_of_zero_and_a_share_that_can_choose_no_resizable_job_replay_rigid_exactly():
    """1-device jobs have nothing to resize at max = size: choosing half of them changes nothing at all."""
    quotas = QuotaSet((Quota("a", "gpu", 4, borrow_limit=4), Quota("b", "gpu", 4, borrow_limit=4)),
                      (Project("a", "org"), Project("b", "org")))
    trace = _trace(*(f"j{i},{i * 20},{300 + 37 * i},1,1,gpu,{'ab'[i % 2]},{('', 'high')[i % 3 == 0]},,"
                     for i in range(60)))
    rigid = run(trace, uniform_cluster(1, 8, "gpu"), quotas, "production")
    for options in (EngineOptions(elastic_fraction=0.0), EngineOptions(elastic_fraction=0.5)):
        again = run(trace, uniform_cluster(1, 8, "gpu"), quotas, "production", options=options)
        assert again.jobs == rigid.jobs and again.segments == rigid.segments and again.cycles == rigid.cycles
    assert not any(j.elastic for j in rigid.jobs)


def test_engine_options_refuse_a_share_outside_0_to_1():
    for bad in (-0.1, 1.5, math.nan):
        with pytest.raises(ValueError, match="elastic_fraction"):
            EngineOptions(elastic_fraction=bad)
    with pytest.raises(ValueError, match="elastic_max_factor"):
        EngineOptions(elastic_max_factor=0.5)
    with pytest.raises(ValueError, match="scaling_efficiency"):
        EngineOptions(scaling_efficiency=0.0)


def _files(tmp_path):
    trace = tmp_path / "t.csv"
    trace.write_text(HEADER + "a,0,600,8,1,gpu,p,,,\nb,10,600,4,1,gpu,q,,,\nc,20,60,8,1,gpu,p,high,,\n")
    cluster = tmp_path / "c.csv"
    cluster.write_text("flavor,devices,count\ngpu,8,2\n")
    quotas = tmp_path / "q.csv"
    quotas.write_text("project,flavor,guaranteed,borrow_limit\np,gpu,8,8\nq,gpu,8,8\n")
    return ["--trace", str(trace), "--cluster", str(cluster), "--quotas", str(quotas), "--no-progress"]


@pytest.mark.parametrize("flag, value", [("--elastic", "1.5"), ("--elastic", "-0.2"), ("--elastic", "half"),
                                         ("--elastic-max-factor", "0.5"), ("--scaling-efficiency", "0"),
                                         ("--rescale-pause", "-1")])
def test_the_cli_refuses_a_bad_elastic_flag_naming_it(tmp_path, capsys, flag, value):
    with pytest.raises(SystemExit) as exc:
        main([*_files(tmp_path), flag, value])
    assert exc.value.code == 2
    assert f"argument {flag}: must be" in capsys.readouterr().err


@needs_core
def test_the_cli_replays_elastic_and_shows_the_elastic_columns(tmp_path, capsys):
    assert main([*_files(tmp_path), "--elastic", "1"]) == 0
    out = capsys.readouterr().out
    assert "shrinks" in out and "grows" in out
    assert main(_files(tmp_path)) == 0
    assert "shrinks" not in capsys.readouterr().out  # a rigid replay's table as before


def test_manage_py_replay_refuses_an_elastic_share_outside_0_to_1(tmp_path):
    with pytest.raises(CommandError) as exc:
        call_command("replay", *_files(tmp_path), "--elastic", "2", stdout=io.StringIO(), stderr=io.StringIO())
    assert str(exc.value) == "Error: argument --elastic: must be a share from 0 to 1, got '2'"


def test_while_an_elastic_job_runs_the_snapshot_carries_the_last_hours_arrival_rates():
    # As the loop reads them for growth (jobs.snapshot.recent_arrival_rates): the submissions of the last hour.
    trace = _trace("e,0,100000,4,1,gpu,p,,,", "a,10,10,1,1,gpu,q,,,", "b,20,10,1,1,gpu,q,,,", "c,4000,10,1,1,gpu,q,,,")
    plan = {0: [("admit-workers", 1, [NODE, NODE])], 10: [("admit", 2, NODE, 1)], 20: [("admit", 3, NODE, 1)],
            4000: [("admit", 4, NODE, 1)]}
    _, script = _run(trace, plan, devices=8)
    by_time = {s.now: s for s in script.snapshots}
    assert by_time[0].arrival_rates == ()  # nothing runs yet, elastic or not: nothing to grow
    rates = {(r.project, r.per_hour) for r in by_time[20].arrival_rates}
    assert rates == {("p", 1.0), ("q", 2.0)}  # e itself, and a and b
    rates = {(r.project, r.per_hour) for r in by_time[4000].arrival_rates}
    assert rates == {("q", 1.0)}  # an hour later only c is recent
