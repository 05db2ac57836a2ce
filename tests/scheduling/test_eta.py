"""Estimated starts (`estimate_starts`): every waiting job gets a start with a range, a bound or a reason; the range
holds the start; coarse steps stay within a step of the exact forecast; arrivals and uneven runtimes widen it."""

from __future__ import annotations

import math
import random
from dataclasses import replace

import pytest
from hypothesis import given

from jobs.scheduling import (
    ArrivalRate,
    Estimate,
    Node,
    PendingJob,
    Policy,
    Project,
    Quota,
    ReplicaGroup,
    RuntimeShares,
    arrival_rates,
    estimate_starts,
    forecast,
    run_cycle,
    runtime_shares,
)
from jobs.scheduling.forecast import (
    BEYOND,
    BUDGET_SPENT,
    HORIZON,
    NO_EARLIER,
    NO_RUNTIME,
    NODES_UNAVAILABLE,
    RESOLUTION,
    kth_arrival,
)

from .builders import A100, job, nodes, running, snapshot
from .test_properties import FLAVORS, PROPS, scenarios

NOW = 1000.0
QUOTAS = [Quota("vision", A100, 64, 64), Quota("nlp", A100, 64, 64)]


def _rates(rnd: random.Random, projects: list[str]) -> tuple[ArrivalRate, ...]:
    """Up to three random arrival rates of the scenario's projects and flavors."""
    return tuple(ArrivalRate(rnd.choice(projects), rnd.choice([100, 500, 1000]),
                             (ReplicaGroup("worker", rnd.choice([1, 2]), rnd.choice([1, 8]), rnd.choice(FLAVORS)),),
                             rnd.choice([0.5, 4.0, 30.0]), rnd.random() < 0.2, rnd.choice([None, 600.0, 3600.0]))
                 for _ in range(rnd.randint(0, 3)))


@PROPS
@given(scenarios())
def test_every_waiting_job_gets_a_start_a_bound_or_a_reason(case):
    """Whatever the budget, the runtimes and the arrivals: every pending job has a start or a note, a start's range
    holds it, and a bound (the budget cut the forecast short) is never after the start the exact forecast finds."""
    snap, policy, seed = case
    rnd = random.Random(seed)
    snap = replace(snap, arrival_rates=_rates(rnd, [p.name for p in snap.projects]))
    low, typical, high = sorted(rnd.choice([0.2, 0.5, 1.0]) for _ in range(3))
    shares = RuntimeShares(low, typical, high)
    resolution = rnd.choice([0.0, RESOLUTION])
    first = run_cycle(snap, policy)
    estimates = estimate_starts(snap, policy, first=first, shares=shares, max_steps=rnd.randint(1, 12),
                                resolution=resolution)
    assert set(estimates) == {j.id for j in snap.pending}
    exact = forecast(snap, policy, 200, runtime_ratio=typical) if resolution == 0.0 else {}
    for job_id, e in estimates.items():
        assert e.start is not None or e.note, job_id
        if e.start is not None:
            assert e.low is not None and e.low <= e.start and (e.high is None or e.start <= e.high)
            assert snap.now - 1e-6 <= e.low
        if e.note == NO_EARLIER and job_id in exact:
            assert e.start <= exact[job_id]


@PROPS
@given(scenarios())
def test_without_arrivals_spread_or_coarse_steps_the_start_is_the_exact_forecast(case):
    snap, policy, _ = case
    estimates = estimate_starts(snap, policy, max_steps=30, resolution=0.0)
    starts = {job_id: e.start for job_id, e in estimates.items() if e.start is not None and not e.note}
    assert starts == {job_id: at for job_id, at in forecast(snap, policy, 30).items() if at <= snap.now + HORIZON}
    assert all(e.low == e.start == e.high for e in estimates.values() if not e.note and e.start is not None)


def test_coarse_steps_are_late_by_at_most_one_step_and_take_far_fewer_cycles():
    """32 single-device jobs fill the cluster and end one a minute; 30 wait for them. The exact forecast needs a
    cycle per end (and per wake-up of the lend hold); the coarse one steps a tenth of the time ahead, 30 s at least."""
    busy = [running(100 + k, "nlp", {f"n{k % 4}": 1}, started_at=NOW - 600.0, max_runtime=600.0 + 60.0 * (k + 1))
            for k in range(32)]
    waiting = [job(k + 1, devices=1, max_runtime=7200.0, submitted_at=NOW - 100.0 + k) for k in range(30)]
    snap = snapshot(nodes(4), waiting, busy, QUOTAS, now=NOW)
    exact = estimate_starts(snap, Policy(), max_steps=200, resolution=0.0)
    coarse = estimate_starts(snap, Policy(), max_steps=200)
    assert all(not e.note for e in exact.values())
    for job_id, e in coarse.items():
        start = exact[job_id].start
        assert start <= e.start <= start + RESOLUTION * max(start - NOW, 300.0) + 1e-6
        assert e.low <= start  # the range allows for the step
    steps = 25
    assert sum(e.note == NO_EARLIER for e in estimate_starts(snap, Policy(), max_steps=steps, resolution=0.0).values())
    assert not any(e.note for e in estimate_starts(snap, Policy(), max_steps=steps).values())


def test_a_job_the_budget_does_not_reach_starts_no_earlier_than_where_the_forecast_got():
    node_list = nodes(1)
    busy = [running(100, "nlp", {"n0": 8}, started_at=NOW, max_runtime=600.0)]
    chain = [job(k, max_runtime=600.0) for k in range(1, 5)]
    snap = snapshot(node_list, chain, busy, QUOTAS, now=NOW)
    estimates = estimate_starts(snap, Policy(), max_steps=2, resolution=0.0)
    assert estimates[1].start == NOW + 600 and not estimates[1].note
    for k in (2, 3, 4):  # the second simulated cycle, at +600, was the last the budget allowed
        assert estimates[k] == Estimate(NOW + 600, NOW + 600, None, NO_EARLIER)
    assert forecast(snap, Policy(), 10) == {1: NOW + 600, 2: NOW + 1200, 3: NOW + 1800, 4: NOW + 2400}


def test_a_time_budget_stops_the_forecasts():
    """The clock ticks a second per reading: one at the start, one as the forecast begins, one after each simulated
    cycle; 2 s allow the cycles at now and at +600."""
    ticks = iter(range(1000))
    node_list = nodes(1)
    busy = [running(100, "nlp", {"n0": 8}, started_at=NOW, max_runtime=600.0)]
    snap = snapshot(node_list, [job(k, max_runtime=600.0) for k in range(1, 5)], busy, QUOTAS, now=NOW)
    estimates = estimate_starts(snap, Policy(), seconds=2.0, clock=lambda: float(next(ticks)), resolution=0.0)
    assert [estimates[k].note for k in (1, 2, 3, 4)] == ["", NO_EARLIER, NO_EARLIER, NO_EARLIER]


@pytest.mark.parametrize("name,running_job,expected", [
    ("it waits for a job without a max runtime", running(100, "nlp", {"n0": 8}, started_at=NOW), NO_RUNTIME),
    ("it waits for a job that ends in 30 h", running(100, "nlp", {"n0": 8}, started_at=NOW, max_runtime=30 * 3600.0),
     BEYOND),
])
def test_a_job_without_an_estimate_says_why(name, running_job, expected):
    snap = snapshot(nodes(1), [job(1, max_runtime=600.0)], [running_job], QUOTAS, now=NOW)
    assert estimate_starts(snap, Policy(), first=run_cycle(snap, Policy()))[1].note == expected


def test_a_job_stopped_by_its_budget_or_out_of_service_nodes_says_so():
    node_list = nodes(1) + (Node("n1", A100, 8, 8, schedulable=False, unavailable="cordoned"),)
    projects = [Project("vision", "org", budget_stop="project vision has spent its budget"), Project("nlp", "org")]
    snap = snapshot(node_list, [job(1), job(2, project="nlp", replicas=2)], quotas=QUOTAS, projects=projects, now=NOW)
    estimates = estimate_starts(snap, Policy(), first=run_cycle(snap, Policy()))
    assert (estimates[1].note, estimates[2].note) == (BUDGET_SPENT, NODES_UNAVAILABLE)


def test_later_arrivals_of_higher_priority_move_the_late_end():
    """vision's job waits for the node, free at +2000; nlp submits a high-priority job of 10 minutes an hour. Nothing
    arriving, it starts at +2000. The late end has nlp's jobs arrive as early as one case in ten sees them (its first
    at +354, its second at +1908, its third only at +3970): both go first, and it starts at +3200. What really
    happens when nlp submits one job at +1950 lies in between."""
    busy = [running(100, "nlp", {"n0": 8}, priority=1000, started_at=NOW - 600.0, max_runtime=2600.0)]
    snap = snapshot(nodes(1), [job(1, max_runtime=3600.0)], busy, QUOTAS, now=NOW)
    nlp = ArrivalRate("nlp", 1000, (ReplicaGroup("worker", 1, 8, A100),), 1.0, max_runtime=600.0)
    assert [round(kth_arrival(k, 1.0)) for k in (1, 2, 3)] == [354, 1908, 3970]
    e = estimate_starts(replace(snap, arrival_rates=(nlp,)), Policy(), resolution=0.0)[1]
    assert (e.start, e.low, e.high, e.note) == (NOW + 2000, NOW + 2000, NOW + 3200, "")
    later = job(2, "nlp", priority=1000, max_runtime=600.0, submitted_at=NOW + 1950)
    actual = forecast(replace(snap, now=NOW + 1950, pending=(*snap.pending, later)), Policy(), 10)[1]
    assert actual == NOW + 2600 and e.low <= actual <= e.high


def test_uneven_runtimes_widen_the_range_both_ways():
    """Finished jobs used between half of their max runtime and all of it: the running job, 400 s into its 1000,
    ends at +100 for the early end, +300 as the median expects, +600 for the late end."""
    snap = snapshot(nodes(1), [job(1, max_runtime=600.0)], [running(100, "nlp", {"n0": 8}, started_at=NOW - 400.0,
                                                                     max_runtime=1000.0)], QUOTAS, now=NOW)
    e = estimate_starts(snap, Policy(), shares=RuntimeShares(0.5, 0.7, 1.0), resolution=0.0)[1]
    assert (e.low, e.start, e.high) == (NOW + 100, NOW + 300, NOW + 600)


def test_runtime_shares_are_the_p10_median_and_p90_of_what_finished_jobs_used():
    assert runtime_shares([0.5] * 19) == (1.0, 1.0, 1.0)  # too few: plan with max runtimes
    used = [k / 100 for k in range(1, 101)]  # 0.01 .. 1.0
    assert runtime_shares(used) == (0.11, 0.51, 0.91)
    assert runtime_shares([0.0, 3.0] * 10) == (0.01, 1.0, 1.0)  # within 0.01 and 1


def test_arrival_rates_per_project_priority_and_shape():
    one, eight = (ReplicaGroup("worker", 1, 1, A100),), (ReplicaGroup("worker", 1, 8, A100),)
    submitted = [PendingJob(1, "vision", 500, 10.0, one, max_runtime=600.0),
                 PendingJob(2, "vision", 500, 20.0, one, max_runtime=1200.0),
                 PendingJob(3, "vision", 500, 30.0, one),
                 PendingJob(4, "vision", 1000, 40.0, one),
                 PendingJob(5, "nlp", 500, 50.0, eight),
                 PendingJob(6, "nlp", 500, 60.0, eight, max_runtime=60.0)]
    assert set(arrival_rates(submitted, 1800.0)) == {
        ArrivalRate("vision", 500, one, 6.0, max_runtime=1200.0),  # 3 in half an hour; two of three declare one
        ArrivalRate("vision", 1000, one, 2.0),
        ArrivalRate("nlp", 500, eight, 4.0, max_runtime=60.0),  # one of two declares: half is enough
    }


@pytest.mark.parametrize("k", [1, 2, 3, 5, 10, 30, 100])
def test_the_late_end_has_as_many_arrivals_as_one_case_in_ten(k):
    """By the moment of its k-th arrival, a Poisson process of the rate has brought k or more in 10% of cases."""
    mean = kth_arrival(k, 4.0) * 4.0 / 3600.0
    below = sum(math.exp(-mean) * mean**i / math.factorial(i) for i in range(k))
    assert 0.09 <= 1 - below <= 0.11
