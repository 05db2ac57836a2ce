"""Elastic jobs in the scheduler core (jobs/scheduling/elastic.py): admitted at their minimum, grown into capacity
nobody waiting can use, shrunk before they are evicted. Table-driven scenarios; the property tests of
test_properties.py run elastic jobs through both modes too."""

from __future__ import annotations

from dataclasses import replace

import pytest

from jobs.scheduling import (
    ArrivalRate,
    Assignment,
    Elastic,
    EndedUse,
    PendingJob,
    Policy,
    Project,
    Quota,
    ReplicaGroup,
    RunningJob,
    forecast,
    run_cycle,
)

from .builders import A100, admitted, check_invariants, job, nodes, running, snapshot, victims, waits

NOW = 10_000.0


def cycle(snap, policy=None):
    policy = policy or Policy()
    result = run_cycle(snap, policy)
    check_invariants(snap, result, policy)
    assert run_cycle(snap, policy, accelerate=False) == result, "the plain mode decides the same"
    return result


def elastic_job(id: int, project: str = "vision", low: int = 2, high: int = 4, priority: int = 500,
                **kw) -> PendingJob:
    return PendingJob(id, project, priority, float(id), (ReplicaGroup("worker", low, 8, A100, max_replicas=high),),
                      **kw)


def elastic_running(id: int, project: str, on: list[str], low: int = 2, high: int = 4, priority: int = 500,
                    **kw) -> RunningJob:
    """Replicas 0, 1, ... on these nodes (8 devices each), running since long ago."""
    placement = tuple(Assignment("worker", k, node, 8) for k, node in enumerate(on))
    return RunningJob(id, project, priority, 0.0, placement, A100, elastic=(Elastic("worker", low, high),), **kw)


def shrinks(result) -> dict[int, list[int]]:
    """Elastic job -> the replica indexes it gives back."""
    return {s.job_id: sorted(a.index for a in s.removed) for s in result.shrinks}


def grows(result) -> dict[int, list[int]]:
    return {g.job_id: sorted(a.index for a in g.placement) for g in result.grows}


def test_admitted_at_its_minimum_when_its_maximum_does_not_fit():
    snap = snapshot(nodes(3), [elastic_job(1, low=2, high=4)], quotas=[Quota("vision", A100, 64)], now=NOW)
    result = cycle(snap)
    assert admitted(result) == [1]
    assert sorted(a.index for a in result.admits[0].placement) == [0, 1]
    assert result.grows == ()  # it grows from the next cycle on, past its cooldown from its start


def test_waits_when_not_even_its_minimum_fits():
    busy = running(10, "vision", {"n1": 8})
    snap = snapshot(nodes(2), [elastic_job(1, low=2, high=4)], [busy], quotas=[Quota("vision", A100, 64)], now=NOW)
    result = cycle(snap)
    assert admitted(result) == []
    assert waits(result)[1].code == "capacity"
    assert "needs 16" in waits(result)[1].reason  # its minimum, 2 x 8


def test_grows_into_idle_capacity_up_to_its_maximum():
    e = elastic_running(10, "vision", ["n0", "n1"], low=2, high=4)
    snap = snapshot(nodes(6), [], [e], quotas=[Quota("vision", A100, 64)], now=NOW)
    result = cycle(snap)
    assert grows(result) == {10: [2, 3]}
    assert {a.node for a in result.grows[0].placement}.isdisjoint({"n0", "n1"})


def test_jobs_of_one_priority_share_the_room_to_grow_and_a_higher_priority_grows_first():
    # Two free nodes, two jobs at their minimum that may each grow by two. The older job used to take both;
    # they take turns: a replica each.
    older = elastic_running(10, "vision", ["n0", "n1"], low=2, high=4)
    newer = elastic_running(11, "vision", ["n2", "n3"], low=2, high=4)
    snap = snapshot(nodes(6), [], [older, newer], quotas=[Quota("vision", A100, 64)], now=NOW)
    assert grows(cycle(snap)) == {10: [2], 11: [2]}
    # A job of a higher priority still grows first, as far as it may, before the others take turns.
    urgent = replace(newer, priority=900)
    snap = snapshot(nodes(6), [], [older, urgent], quotas=[Quota("vision", A100, 64)], now=NOW)
    assert grows(cycle(snap)) == {11: [2, 3]}
    # Three jobs of one priority, three free nodes: one each, in turn, the oldest first.
    third = elastic_running(12, "vision", ["n4", "n5"], low=2, high=4)
    snap = snapshot(nodes(9), [], [older, newer, third], quotas=[Quota("vision", A100, 128)], now=NOW)
    assert grows(cycle(snap)) == {10: [2], 11: [2], 12: [2]}


def test_the_job_with_the_least_time_left_grows_first_when_the_room_runs_out_within_a_round():
    # One free node, two jobs of one priority at their minimum. The older one declared 10 h, the younger 1 h (both
    # started at 0): the younger is closer to its end, and a replica shortens the mean completion time most there.
    older = elastic_running(10, "vision", ["n0", "n1"], low=2, high=4, max_runtime=36_000.0)
    younger = replace(elastic_running(11, "vision", ["n2", "n3"], low=2, high=4, max_runtime=3_600.0),
                      started_at=1.0)
    snap = snapshot(nodes(5), [], [older, younger], quotas=[Quota("vision", A100, 64)], now=NOW - 8_000.0)
    assert grows(cycle(snap)) == {11: [2]}
    # One that declared no runtime comes after those that did; between two without one, the older first.
    undeclared = replace(younger, max_runtime=None)
    snap = snapshot(nodes(5), [], [older, undeclared], quotas=[Quota("vision", A100, 64)], now=NOW - 8_000.0)
    assert grows(cycle(snap)) == {10: [2]}


def test_does_not_grow_while_a_job_waits_for_capacity_of_its_flavor():
    e = elastic_running(10, "vision", ["n0", "n1"], low=2, high=4)
    rigid = job(1, "vision", replicas=2)  # 2 x 8: one node is free
    snap = snapshot(nodes(3), [rigid], [e], quotas=[Quota("vision", A100, 64)], now=NOW)
    result = cycle(snap)
    assert admitted(result) == [] and waits(result)[1].code == "capacity"
    assert result.grows == ()


def test_reclaim_shrinks_before_it_evicts():
    # vision's elastic job borrows nlp's guarantee with its two grown replicas; nlp takes one node back.
    e = elastic_running(10, "vision", ["n0", "n1", "n2", "n3"], low=2, high=4)
    quotas = [Quota("vision", A100, 16, borrow_limit=16), Quota("nlp", A100, 16)]
    snap = snapshot(nodes(4), [job(1, "nlp")], [e], quotas=quotas, now=NOW)
    result = cycle(snap)
    assert admitted(result) == [1]
    assert victims(result) == []  # nobody evicted
    assert shrinks(result) == {10: [3]}  # its highest replica, the one the job needs
    assert "gave back 1 grown replica to job 1 of project nlp" in result.shrinks[0].reason


def test_evicts_whole_only_when_shrinking_to_its_minimum_is_not_enough():
    e = elastic_running(10, "vision", ["n0", "n1", "n2", "n3"], low=2, high=4)
    quotas = [Quota("vision", A100, 0, borrow_limit=32), Quota("nlp", A100, 32)]
    snap = snapshot(nodes(4), [job(1, "nlp", replicas=3)], [e], quotas=quotas, now=NOW)
    result = cycle(snap)
    assert admitted(result) == [1]
    assert victims(result) == [10] and result.shrinks == ()  # preempted whole: its grown replicas go with it


def test_a_job_of_its_own_project_at_its_priority_takes_grown_replicas_first():
    e = elastic_running(10, "vision", ["n0", "n1", "n2"], low=2, high=4, priority=500)
    low = running(11, "vision", {"n3": 8}, priority=100)
    snap = snapshot(nodes(4), [job(1, "vision", priority=500)], [e, low], quotas=[Quota("vision", A100, 64)],
                    now=NOW)
    result = cycle(snap)
    assert admitted(result) == [1]
    assert shrinks(result) == {10: [2]} and victims(result) == []  # not the lower-priority rigid job


def test_a_lower_priority_job_does_not_take_grown_replicas():
    e = elastic_running(10, "vision", ["n0", "n1", "n2"], low=2, high=4, priority=500)
    snap = snapshot(nodes(3), [job(1, "vision", priority=100)], [e], quotas=[Quota("vision", A100, 64)], now=NOW)
    result = cycle(snap)
    assert admitted(result) == [] and result.shrinks == ()


@pytest.mark.parametrize(("resized_ago", "grown"), [(100.0, False), (400.0, True)])
def test_resizes_at_most_once_per_cooldown(resized_ago, grown):
    e = elastic_running(10, "vision", ["n0", "n1"], low=2, high=4, resized_at=NOW - resized_ago,
                        resize_cooldown=300.0)
    snap = snapshot(nodes(4), [], [e], quotas=[Quota("vision", A100, 64)], now=NOW)
    assert bool(cycle(snap).grows) is grown


def test_growth_stays_within_its_projects_quota():
    e = elastic_running(10, "vision", ["n0", "n1"], low=2, high=4)
    snap = snapshot(nodes(4), [], [e], quotas=[Quota("vision", A100, 24)], now=NOW)
    assert grows(cycle(snap)) == {10: [2]}  # 24 devices: one more replica, not two


def test_growth_takes_no_running_job_slot():
    e = elastic_running(10, "vision", ["n0", "n1"], low=2, high=4)
    snap = snapshot(nodes(4), [], [e], quotas=[Quota("vision", A100, 64)], projects=[Project("vision", "org", 1)],
                    now=NOW)
    assert grows(cycle(snap)) == {10: [2, 3]}


def test_grown_replicas_never_use_capacity_a_reservation_holds():
    # A 3-node gang reserves its earliest start (the rigid job on n2 ends in 100 s); the free n3 is held for it.
    e = elastic_running(10, "vision", ["n0", "n1"], low=2, high=4)
    ending = running(11, "vision", {"n2": 8}, max_runtime=NOW + 100.0)
    gang = job(1, "vision", replicas=2, submitted_at=NOW - Policy().reserve_after - 1)
    snap = snapshot(nodes(4), [gang], [e, ending], quotas=[Quota("vision", A100, 64)], now=NOW)
    result = cycle(snap)
    assert [r.job_id for r in result.reservations] == [1]
    assert result.grows == ()


def test_the_forecast_carries_shrinks_and_growth_out():
    e = elastic_running(10, "vision", ["n0", "n1", "n2", "n3"], low=2, high=4)
    quotas = [Quota("vision", A100, 16, borrow_limit=16), Quota("nlp", A100, 16)]
    later = replace(job(1, "nlp", max_runtime=600.0))
    snap = snapshot(nodes(4), [later], [e], quotas=quotas, now=NOW)
    starts = forecast(snap, Policy(), 20)
    assert starts == forecast(snap, Policy(), 20, accelerate=False)
    assert starts[1] == NOW  # it starts at once: the elastic job shrinks for it


def test_does_not_grow_while_a_job_waits_out_its_reclaim_grace():
    # nlp's 2 x 8 fits the free n1 and n2 once vision's preemptible job leaves n2; it waits out its grace
    # meanwhile, and the elastic job does not take the free node from it (found by the property test).
    e = elastic_running(10, "vision", ["n0"], low=1, high=2)
    borrower = running(11, "vision", {"n2": 8}, preemptible=True)
    quotas = [Quota("vision", A100, 8, borrow_limit=16), Quota("nlp", A100, 16)]
    late = job(1, "nlp", replicas=2, submitted_at=NOW - 10)
    snap = snapshot(nodes(3), [late], [e, borrower], quotas=quotas, now=NOW)
    result = cycle(snap, Policy(reclaim_grace=60.0))
    assert waits(result)[1].code == "reclaim"
    assert result.grows == ()


# A job inside its project's guarantee that its organization lent away (quota kind "lent", preemption's reclaim)
# while its project's own elastic job grew into the rest of it. Shrinking the grown replica gives the job both the
# node and its guarantee back; a grown replica is not demand, so its project's lend hold must not keep the
# guarantee it gives back from the job (it did: a whole borrower was preempted, bench_elastic.py's "preemptions a
# shrink sufficed for"). Case: (elastic job's project, expected shrinks, expected whole-job victims).
@pytest.mark.parametrize(("grower", "shrunk", "evicted"), [
    ("vision", {10: [1]}, []),  # the job's own project grew: its own grown replica goes
    ("nlp", {10: [1]}, []),  # the borrower's elastic job grew: its grown replica goes, not a whole job
])
def test_a_lent_guarantee_is_taken_back_by_shrinking_before_evicting(grower, shrunk, evicted):
    quotas = [Quota("vision", A100, 24), Quota("nlp", A100, 8, borrow_limit=16), Quota("other", A100, 8)]
    projects = [Project("vision", "acme"), Project("nlp", "acme"), Project("other", "globex")]
    e = elastic_running(10, grower, ["n0", "n1"], low=1, high=2)
    borrowers = [running(11, "nlp", {"n2": 8}), running(12, "nlp", {"n3": 8})]
    if grower == "nlp":  # vision's guarantee used by a rigid job, nlp borrowing 16 with the elastic one's grown
        borrowers = [running(11, "vision", {"n2": 8}), running(12, "nlp", {"n3": 8})]
    rest = running(13, "other", {"n4": 8})
    snap = snapshot(nodes(5), [job(1, "vision")], [e, *borrowers, rest], quotas=quotas, projects=projects, now=NOW)
    result = cycle(snap)
    assert admitted(result) == [1]
    assert victims(result) == evicted
    assert shrinks(result) == shrunk


def test_does_not_grow_into_a_guarantee_the_lend_hold_keeps_from_a_waiting_borrower():
    # vision's job on n1 ended 2 s ago: the lend hold keeps vision's idle guarantee from nlp's borrower for 3 s
    # more (quota kind "cohort"). Grown into it, vision's elastic job would give it back to nlp as soon as the
    # hold lapses, well within its cooldown (found on the Philly week: grown, then shrunk 5 to 7 s later).
    e = elastic_running(10, "vision", ["n0"], low=1, high=2)
    quotas = [Quota("vision", A100, 16), Quota("nlp", A100, 8, borrow_limit=8)]
    nlp = running(11, "nlp", {"n2": 8})
    snap = replace(snapshot(nodes(3), [job(1, "nlp")], [e, nlp], quotas=quotas, now=NOW),
                   ended=(EndedUse("vision", A100, 8, 0.0, NOW - 2),))
    result = cycle(snap)
    assert waits(result)[1].code == "quota" and admitted(result) == []
    assert result.grows == ()
    later = cycle(replace(snap, now=NOW + Policy().lend_hold))  # the hold lapsed: nlp borrows, nothing shrinks
    assert admitted(later) == [1] and later.shrinks == ()


def nlp_submits(per_hour: float, preemptible: bool = False) -> tuple[ArrivalRate, ...]:
    """nlp's recent submissions: one-node jobs at this rate (what the loop and replay learn from the last hour)."""
    return (ArrivalRate("nlp", 500, (ReplicaGroup("worker", 1, 8, A100),), per_hour, preemptible),)


@pytest.mark.parametrize(("rates", "grown"), [
    ((), [2, 3]),  # nobody is expected: it grows into all of nlp's idle guarantee
    (nlp_submits(12.0), [2]),  # one 8-device job of nlp expected within its 300 s cooldown: that much stays free
    (nlp_submits(24.0), []),  # two expected: nlp's whole idle guarantee stays free
    (nlp_submits(24.0, preemptible=True), [2, 3]),  # preemptible arrivals take no grown replica back
    (nlp_submits(0.5), [2]),  # one in 24 cooldowns still keeps a node free (the mean, rounded up)
])
def test_does_not_grow_into_a_guarantee_its_owners_arrivals_would_take_back(rates, grown):
    # vision holds its guarantee (16) and may borrow 16 of nlp's idle 16: a grown replica borrowing it would be
    # shrunk again by the next nlp job, within the cooldown, losing a rescale pause each way. Nobody owns any
    # other device (4 nodes), so the organization has no unowned capacity to make room from either.
    e = elastic_running(10, "vision", ["n0", "n1"], low=2, high=4)
    quotas = [Quota("vision", A100, 16, borrow_limit=16), Quota("nlp", A100, 16)]
    snap = replace(snapshot(nodes(4), [], [e], quotas=quotas, now=NOW), arrival_rates=rates)
    assert grows(cycle(snap)).get(10, []) == grown


def test_grows_within_its_own_guarantee_whatever_others_submit():
    # Devices of vision's own guarantee are not lent: nlp's arrivals take nothing back from them.
    e = elastic_running(10, "vision", ["n0", "n1"], low=2, high=4)
    quotas = [Quota("vision", A100, 32), Quota("nlp", A100, 16)]
    snap = replace(snapshot(nodes(6), [], [e], quotas=quotas, now=NOW), arrival_rates=nlp_submits(24.0))
    assert grows(cycle(snap)) == {10: [2, 3]}


def test_grows_only_in_its_own_cluster():
    # Two clusters of the same flavor: the job's replicas joined one rendezvous in "east"; a replica in "west"
    # could not join it (a gang never spans clusters), however idle west is.
    e = elastic_running(10, "vision", ["n0", "n1"], low=2, high=4)
    east = nodes(2, cluster="east")
    west = nodes(2, cluster="west", prefix="w")
    snap = snapshot(east + west, [], [e], quotas=[Quota("vision", A100, 64)], now=NOW)
    assert grows(cycle(snap)) == {}
    more_east = east + nodes(1, cluster="east", start=2)
    snap = snapshot(more_east + west, [], [e], quotas=[Quota("vision", A100, 64)], now=NOW)
    grown = cycle(snap).grows
    assert [a.node for g in grown for a in g.placement] == ["n2"]


def test_a_grown_replica_frees_no_running_job_slot_a_head_has_reserved():
    """Defect (the pools property test, exploring): a head waiting for its project's one running-job slot counted
    that slot freed twice by its start when the project's elastic job would end by then, once for the job and once
    for its grown replica. Preempting the job's base alone then seemed to leave the head a slot, so a later job that
    would still run at the head's start took it: the accelerated search, which tries that one victim first,
    preempted the job for it, while the plain search, removing the grown replica first, found the slot kept."""
    projects = [Project("vision", "org", max_running_jobs=1), Project("nlp", "org")]
    quotas = [Quota("vision", A100, 16), Quota("nlp", A100, 8)]
    elastic = RunningJob(100, "vision", 100, NOW - 300.0, (Assignment("worker", 0, "n0", 2),
                                                           Assignment("worker", 1, "n0", 2)), A100,
                         max_runtime=900.0, elastic=(Elastic("worker", 1, 4),))  # ends in 600 s
    other = running(200, "nlp", {"n1": 8}, max_runtime=1000.0 + NOW)  # n1 frees in 1,000 s
    # The head can only go to n1: it waits for the slot and for n1, and reserves both from then. The later job fits
    # on the free n2 and needs only the slot.
    head = job(1, "vision", devices=8, priority=1000, max_runtime=4000.0, avoid_nodes=frozenset({"n0", "n2"}))
    later = job(2, "vision", devices=8, priority=500)  # no max runtime: it would hold the slot past the head's start
    snap = snapshot(nodes(3), [head, later], [elastic, other], quotas=quotas, projects=projects, now=NOW)
    result = cycle(snap)
    assert victims(result) == [] and admitted(result) == []
    assert {w.job_id: w.code for w in result.waits} == {1: "max_running", 2: "max_running"}
