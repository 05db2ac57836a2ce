"""Tidal pools in trace replay (issue 30, replay/pools.py): the pool's clock (demand, headroom, schedule windows,
forecast), give-backs through the production core with the victims' grace, what the meter counts, and the flags of
the command line."""

import io

import pytest
from django.core.management import CommandError, call_command

from jobs.scheduling.model import Policy, Project, Quota
from replay.cli import main
from replay.cluster import QuotaSet, uniform_cluster
from replay.engine import EngineOptions, run_replay
from replay.paths import trace_path, traces_dir
from replay.pools import (
    DAY,
    GENAI_FILE,
    GENAI_START,
    HOUR,
    PoolClock,
    PoolError,
    PoolSpec,
    alibaba_curve,
    csv_curve,
    pool_summary,
)
from replay.trace import trace_from_text
from tests.replay.core import needs_core

HEADER = "job_id,submit_s,duration_s,devices_per_replica,replicas,flavor,project,priority,user,max_runtime_s\n"
# Serving needs 1 of the pool's 8 devices until 01:00 and 6 from then on, every day.
RISE = ((0.0, 1 / 8), (HOUR, 6 / 8))
QUOTAS = QuotaSet((Quota("a", "gpu", 8, borrow_limit=8),), (Project("a", "org"),))


def spec(**kw) -> PoolSpec:
    values = {"curve": RISE, "nodes": 1, "node_devices": 8, "lending": "demand", "headroom_percent": 0.0,
              "headroom_floor": 0, "day_spread": 0.0, "grace": 30.0}
    return PoolSpec(**(values | kw))


def test_demand_lends_what_serving_and_its_headroom_leave():
    clock = PoolClock(spec(headroom_percent=50.0, headroom_floor=1))
    assert clock.demand(0.0) == 1 and clock.demand(HOUR - 1) == 1 and clock.demand(HOUR) == 6
    assert clock.lendable(0.0) == 8 - 1 - 1  # the floor: 50% of 1 rounds up to 1
    assert clock.lendable(HOUR) == 0  # 6 + 3 of headroom is more than the pool: nothing, never below 0
    assert clock.demand(DAY + HOUR) == 6  # every day alike (no spread)
    assert PoolClock(spec(lending="none")).lendable(0.0) == 0


def test_a_schedule_lends_above_its_floor_inside_windows_that_wrap_midnight_whatever_serving_needs():
    clock = PoolClock(spec(lending="schedule", schedule_floor=2, windows=((22 * HOUR, 8 * HOUR),)))
    assert clock.lendable(23 * HOUR) == 6 and clock.lendable(2 * HOUR) == 6  # serving needs 6 then
    assert clock.lendable(8 * HOUR) == 0 and clock.lendable(12 * HOUR) == 0
    assert clock.back_at(23 * HOUR) == DAY + 8 * HOUR
    assert clock.back_at(12 * HOUR) is None


def test_the_forecast_stops_lending_before_a_rise_it_saw_yesterday_and_not_on_the_first_day():
    clock = PoolClock(spec(lending="forecast", lead=120.0))
    before = HOUR - 60  # a minute before the rise
    assert clock.lendable(before) == 7  # the first day: no history, it follows demand
    assert clock.lendable(DAY + before) == 2  # the second: yesterday rose within the next 120 s
    assert clock.lendable(DAY + HOUR - 180) == 7  # earlier than its lead: it still lends
    changes = PoolClock(spec(lending="forecast", lead=120.0)).changes()
    first = [next(changes) for _ in range(5)]
    assert first == [0.0, HOUR - 120.0, HOUR, DAY - 120.0, DAY]  # each point, and each one lead earlier


def test_each_day_is_scaled_by_its_own_factor_within_the_spread():
    clock = PoolClock(PoolSpec(((0.0, 0.5),), nodes=10, node_devices=8, day_spread=0.2))
    days = {clock.demand(d * DAY) for d in range(10)}
    assert len(days) > 1 and all(32 <= d <= 48 for d in days)


def test_bad_settings_and_curves_are_refused_naming_what(tmp_path):
    with pytest.raises(PoolError, match="lending"):
        spec(lending="sometimes")
    with pytest.raises(PoolError, match="grace"):
        spec(grace=-1.0)
    bad = tmp_path / "curve.csv"
    bad.write_text("t_s,demand\n0,2\n600,99\n")
    with pytest.raises(PoolError, match=r"curve.csv:3: .*demand"):
        csv_curve(bad, 16)
    bad.write_text("t_s,devices\n0,2\n")
    with pytest.raises(PoolError, match="missing column"):
        csv_curve(bad, 16)


@pytest.mark.skipif(not (traces_dir() / GENAI_FILE).exists(), reason="shared traces not present")
def test_the_genai_day_is_read_in_place_stretched_to_24_hours_from_eight_in_the_morning():
    curve = alibaba_curve(trace_path(GENAI_FILE))
    assert len(curve) == 274
    assert curve[0][0] == 0.0 or min(t for t, _ in curve) >= 0.0
    assert max(t for t, _ in curve) < DAY
    shares = dict(curve)
    assert shares[GENAI_START] == pytest.approx(12 / 114)  # its first bin: 12 of 114 pods needed
    assert max(s for _, s in curve) <= 0.3  # never above 29% of its pods (the traces' README)


def _trace(*rows):
    return trace_from_text(HEADER + "\n".join(rows) + "\n")


@needs_core
def test_serving_takes_its_devices_back_from_preemptible_work_after_its_grace_and_nothing_else_runs_there():
    """One 8-device node of training and a pool node of 8 that lends 7 until 01:00, then 2. A preemptible
    7-device job and two normal 8-device ones arrive at once: the normal ones never run on the pool (the second
    waits for the first), the preemptible one runs there until the rise, when it is given back and holds its
    devices 30 s more; serving goes without 5 devices (6 demanded, 1 free) for those 30 s."""
    trace = _trace("p,0,7200,7,1,gpu,a,preemptible,,", "n,0,3000,8,1,gpu,a,normal,,", "m,0,3000,8,1,gpu,a,normal,,",
                   "last,5000,60,1,1,gpu,a,normal,,")  # the meter counts until the last arrival
    result = run_replay(trace, uniform_cluster(1, 8, "gpu"), QUOTAS, Policy(), options=EngineOptions(pool=spec()))
    jobs = {j.job_id: j for j in result.jobs}
    assert jobs["n"].first_start == 0.0 and jobs["m"].first_start == 3000.0  # m waited: the pool is not for it
    assert jobs["p"].first_start == 0.0 and jobs["p"].preemptions >= 1
    meter = result.pool
    assert meter is not None and meter.given_back_jobs == 1
    assert meter.give_backs == [30.0]  # from the rise to the devices free: the grace
    assert meter.unmet_s == pytest.approx(30.0 * 5)
    on_pool = [s for s in result.segments if s.cluster == "serving"]
    assert [(s.job_id, s.start, s.end, s.outcome) for s in on_pool] == [("p", 0.0, HOUR, "preempted")]


@needs_core
def test_without_lending_the_pool_idles_and_its_meter_counts_no_training():
    trace = _trace("p,0,600,8,1,gpu,a,preemptible,,", "q,0,600,8,1,gpu,a,preemptible,,")
    result = run_replay(trace, uniform_cluster(1, 8, "gpu"), QUOTAS, Policy(),
                        options=EngineOptions(pool=spec(lending="none")))
    assert sorted(j.first_start for j in result.jobs) == [0.0, 600.0]
    summary = pool_summary(spec(lending="none"), result.pool)
    assert summary["training_gpu_h"] == 0.0 and summary["lendable_used_percent"] is None


@needs_core
def test_the_chosen_share_of_jobs_is_replayed_preemptible_and_the_same_jobs_every_run():
    rows = [f"j{i},0,60,1,1,gpu,a,normal,," for i in range(200)]
    trace = _trace(*rows)
    options = EngineOptions(preemptible_fraction=0.3)
    first = run_replay(trace, uniform_cluster(40, 8, "gpu"), QUOTAS, Policy(), options=options)
    again = run_replay(trace, uniform_cluster(40, 8, "gpu"), QUOTAS, Policy(), options=options)
    chosen = {j.job_id for j in first.jobs if j.priority == "preemptible"}
    assert 30 < len(chosen) < 90 and chosen == {j.job_id for j in again.jobs if j.priority == "preemptible"}


@needs_core
@pytest.mark.django_db
def test_the_command_adds_a_pool_and_prints_its_figures(tmp_path):
    trace = tmp_path / "t.csv"
    trace.write_text(HEADER + "p,0,7200,7,1,gpu,a,preemptible,,\nn,0,600,8,1,gpu,a,normal,,\n"
                     "last,5000,60,1,1,gpu,a,normal,,\n")
    cluster = tmp_path / "c.csv"
    cluster.write_text("flavor,devices,count\ngpu,8,1\n")
    quotas = tmp_path / "q.csv"
    quotas.write_text("project,flavor,guaranteed,borrow_limit\na,gpu,8,8\n")
    curve = tmp_path / "curve.csv"
    curve.write_text("t_s,demand\n0,0\n3600,12\n")  # two nodes: 12 lent (4 kept unlent), then none
    out = io.StringIO()
    files = ["--trace", str(trace), "--cluster", str(cluster), "--quotas", str(quotas)]
    call_command("replay", *files, "--pool", str(curve), "--pool-nodes", "2", "--pool-lending", "demand",
                 "--pool-headroom", "0", "--no-progress", stdout=out, stderr=io.StringIO())
    text = out.getvalue()
    assert "pool of 16 devices lending by demand" in text and "1 give-backs, p50 30 s" in text
    assert main([*files, "--pool", str(tmp_path / "missing.csv"), "--no-progress"]) == 2
    curve.write_text("t_s,demand\n0,1\n3600,60\n")  # more than the pool has
    with pytest.raises(CommandError, match="curve.csv:3"):
        call_command("replay", *files, "--pool", str(curve), "--pool-nodes", "1", "--no-progress",
                     stdout=io.StringIO(), stderr=io.StringIO())


def test_the_meter_splits_what_it_lent_and_training_left_idle_by_what_waited():
    from replay.pools import PoolMeter

    meter = PoolMeter(devices=8, capacity=16, until=1000.0)
    meter.advance(0.0, 10.0, demand=2, lendable=6, used=4, training=4, draining=0, waiting=(1, 3))  # 2 idle
    meter.advance(10.0, 20.0, demand=2, lendable=6, used=0, training=0, draining=0, waiting=(0, 2))  # 6 idle
    meter.advance(20.0, 30.0, demand=2, lendable=6, used=6, training=6, draining=0, waiting=(0, 0))  # none idle
    meter.advance(30.0, 40.0, demand=8, lendable=0, used=4, training=4, draining=0)  # giving back: none idle
    meter.advance(40.0, 50.0, demand=2, lendable=6, used=2, training=2, draining=0)  # 4 idle, nothing to grow
    meter.advance(50.0, 60.0, demand=2, lendable=6, used=3, training=3, draining=0, growable=True)  # 3 idle
    assert (meter.idle_borrower_waiting_s, meter.idle_rigid_waiting_s, meter.idle_nothing_waiting_s,
            meter.idle_growable_s) == (20.0, 60.0, 70.0, 30.0)
    summary = pool_summary(spec(), meter)
    assert summary["idle_rigid_waiting_gpu_h"] == 60.0 / HOUR
    assert summary["idle_growable_gpu_h"] == 30.0 / HOUR


@needs_core
def test_the_meter_counts_lent_capacity_left_idle_while_an_elastic_job_could_have_grown():
    """A 1-device elastic job (1..2 workers) whose project may not borrow runs alone: in its cooldown it may not
    grow (300 s), after it its quota keeps it from growing, so what the pool lends then (7 devices until 01:00) is
    idle while it could have grown; once it ends nothing could."""
    trace = _trace("e,0,3000,1,1,gpu,a,normal,,", "last,3500,60,1,1,gpu,a,normal,,")
    quotas = QuotaSet((Quota("a", "gpu", 1, borrow_limit=0),), (Project("a", "org"),))
    options = EngineOptions(pool=spec(), elastic_fraction=1.0, elastic_max_factor=2.0)
    result = run_replay(trace, uniform_cluster(1, 8, "gpu"), quotas, Policy(), options=options)
    assert [j.job_id for j in result.jobs if j.elastic] == ["e", "last"]
    meter = result.pool
    assert meter is not None and meter.training_s == 0.0
    assert meter.idle_nothing_waiting_s == pytest.approx(7 * 3500.0)
    assert meter.idle_growable_s == pytest.approx(7 * (3000.0 - 300.0))
