"""Tidal pools in the scheduler core (jobs/scheduling/pools.py): pool nodes lend only to work that can be taken back
at once, no more than the pool lends, and take it back in order (grown replicas, then preemptible jobs, the least
work lost first). Table-driven scenarios; a property test runs pools through both modes."""

from __future__ import annotations

from dataclasses import replace

from jobs.scheduling import Assignment, Elastic, Policy, Pool, Quota, RunningJob, run_cycle

from .builders import A100, H100, admitted, check_invariants, job, nodes, running, snapshot, victims, waits

NOW = 10_000.0
QUOTAS = [Quota("vision", A100, 16, borrow_limit=64), Quota("nlp", A100, 16, borrow_limit=64)]


def pooled(count: int, start: int = 0, pool: str = "chat"):
    """`count` nodes of 8 devices lent by a pool, named p0, p1, ..."""
    return tuple(replace(n, pool=pool) for n in nodes(count, prefix="p", start=start))


def cycle(snap, policy=None):
    policy = policy or Policy()
    result = run_cycle(snap, policy)
    check_invariants(snap, result, policy)
    assert run_cycle(snap, policy, accelerate=False) == result, "the plain mode decides the same"
    return result


def with_pools(snap, *pools):
    return replace(snap, pools=tuple(pools))


def test_a_job_that_is_not_preemptible_never_runs_on_a_pool():
    snap = with_pools(snapshot(pooled(2), [job(1, "vision")], quotas=QUOTAS, now=NOW), Pool("chat", 16))
    result = cycle(snap)
    assert admitted(result) == []
    assert waits(result)[1].code == "capacity"
    assert waits(result)[1].reason == (
        "waiting for capacity: 0 nvidia-a100-40gb free on the nodes it may use (2 avoided; the nodes of pool chat "
        "lend only to preemptible work): needs 1 x 8 nvidia-a100-40gb on whole nodes of one cluster")


def test_a_job_of_a_flavor_no_pool_has_is_not_told_of_pools():
    # Two H100 nodes with 4 devices free each; the pool's nodes are A100s. An 8-device H100 job waits on
    # fragmentation: avoiding the pool changes nothing for it, and its reason said it did.
    h100 = nodes(2, flavor=H100, free=4, prefix="h")
    quotas = [*QUOTAS, Quota("vision", H100, 16)]
    snap = with_pools(snapshot(h100 + pooled(2), [job(1, "vision", flavor=H100)], quotas=quotas, now=NOW),
                      Pool("chat", 16))
    result = cycle(snap)
    assert waits(result)[1].reason == ("waiting for capacity: 8 nvidia-h100-80gb free but fragmented: needs "
                                       "1 x 8 nvidia-h100-80gb on whole nodes of one cluster, room for 0")


def test_a_job_avoiding_a_lost_node_avoids_the_pool_too_and_a_preemptible_one_only_its_node():
    # n0 lost an earlier attempt of each job; n1 is free; the pool lends p0. The firm job 1 avoids n0 and the
    # pool: it takes n1. The preemptible job 2 avoids n0 only: it goes on the pool (lent capacity first).
    lost = frozenset({"n0"})
    pending = [job(1, "vision", avoid_nodes=lost), job(2, "nlp", preemptible=True, avoid_nodes=lost)]
    snap = with_pools(snapshot(nodes(2) + pooled(1), pending, quotas=QUOTAS, now=NOW), Pool("chat", 8))
    result = cycle(snap)
    assert {a.job_id: {x.node for x in a.placement} for a in result.admits} == {1: {"n1"}, 2: {"p0"}}
    # With n1 gone too, the firm job has nowhere: the pool's node and its lost node are both avoided.
    snap = with_pools(snapshot(nodes(1) + pooled(1), pending[:1], quotas=QUOTAS, now=NOW), Pool("chat", 8))
    result = cycle(snap)
    assert admitted(result) == []
    assert "(2 avoided; the nodes of pool chat lend only to preemptible work)" in waits(result)[1].reason


def test_preemptible_work_gets_what_the_pool_lends_and_no_more():
    pending = [job(k, "vision", preemptible=True) for k in (1, 2, 3)]
    snap = with_pools(snapshot(pooled(3), pending, quotas=QUOTAS, now=NOW), Pool("chat", 16))
    result = cycle(snap)
    assert admitted(result) == [1, 2]  # 16 of the pool's 24 devices are lent
    assert waits(result)[3].code == "capacity"


def test_a_pool_that_lends_nothing_takes_everything_back_in_order():
    # Demand rose: the pool lends 8 now. Training holds 24 on it: a grown replica of an elastic job, an hour-old
    # preemptible job and a minute-old one. The grown replica goes first, then the job that loses least.
    elastic = RunningJob(10, "vision", 500, 0.0, (Assignment("worker", 0, "n0", 8), Assignment("worker", 1, "p0", 8)),
                         A100, elastic=(Elastic("worker", 1, 2),))
    old = running(11, "nlp", {"p1": 8}, preemptible=True, started_at=NOW - 3600)
    young = running(12, "nlp", {"p2": 8}, preemptible=True, started_at=NOW - 60)
    snap = with_pools(snapshot(nodes(1) + pooled(3), [], [elastic, old, young], quotas=QUOTAS, now=NOW),
                      Pool("chat", 8))
    result = cycle(snap)
    assert [(s.job_id, [a.node for a in s.removed]) for s in result.shrinks] == [(10, ["p0"])]
    assert victims(result) == [12]  # the young one: it loses a minute, the other an hour
    assert all(p.for_job_id is None and "pool chat took back" in p.reason for p in result.preemptions)
    assert "to pool chat" in result.shrinks[0].reason


def placed_on(result) -> dict[int, list[str]]:
    return {a.job_id: sorted(x.node for x in a.placement) for a in result.admits}


def test_preemptible_work_goes_on_lent_capacity_first_and_elsewhere_when_it_does_not_fit_there():
    # n0 and the pool's p0 have 8 devices free each. Best fit alone would put the first preemptible job on n0 (a
    # tie, lowest index first): the pool would idle while the job holds room that work which cannot be taken
    # back would then preempt it for. It goes to the pool; the second, which the pool has no room left for, to n0.
    pending = [job(1, "vision", preemptible=True, priority=900), job(2, "vision", preemptible=True)]
    snap = with_pools(snapshot(nodes(1) + pooled(1), pending, quotas=QUOTAS, now=NOW), Pool("chat", 8))
    assert placed_on(cycle(snap)) == {1: ["p0"], 2: ["n0"]}


def test_a_preemptible_gang_goes_whole_on_lent_capacity_when_it_fits_there():
    pending = [job(1, "vision", replicas=2, devices=8, preemptible=True)]
    snap = with_pools(snapshot(nodes(4) + pooled(2), pending, quotas=QUOTAS, now=NOW), Pool("chat", 16))
    assert placed_on(cycle(snap)) == {1: ["p0", "p1"]}


def test_a_grown_replica_goes_on_lent_capacity_of_its_cluster_first():
    elastic = RunningJob(10, "vision", 500, 0.0, (Assignment("worker", 0, "n0", 8),), A100,
                         elastic=(Elastic("worker", 1, 2),))
    snap = with_pools(snapshot(nodes(3) + pooled(1), [], [elastic], quotas=QUOTAS, now=NOW), Pool("chat", 8))
    assert [[a.node for a in g.placement] for g in cycle(snap).grows] == [["p0"]]


def test_nothing_goes_back_while_training_holds_no_more_than_the_pool_lends():
    held = running(11, "nlp", {"p0": 8}, preemptible=True)
    snap = with_pools(snapshot(pooled(2), [], [held], quotas=QUOTAS, now=NOW), Pool("chat", 8))
    result = cycle(snap)
    assert result.preemptions == () and result.shrinks == ()


def test_an_elastic_job_grows_into_a_pool_only_as_far_as_it_lends():
    elastic = RunningJob(10, "vision", 500, 0.0, (Assignment("worker", 0, "n0", 8),), A100,
                         elastic=(Elastic("worker", 1, 4),))
    snap = with_pools(snapshot(nodes(1) + pooled(3), [], [elastic], quotas=QUOTAS, now=NOW), Pool("chat", 16))
    result = cycle(snap)
    assert [sorted(a.node for a in g.placement) for g in result.grows] == [["p0", "p1"]]


def test_borrowing_a_pool_stays_within_the_projects_borrow_limit():
    pending = [job(k, "vision", preemptible=True) for k in (1, 2, 3)]
    quotas = [Quota("vision", A100, 0, borrow_limit=8)]
    snap = with_pools(snapshot(pooled(3), pending, quotas=quotas, now=NOW), Pool("chat", 24))
    result = cycle(snap)
    assert admitted(result) == [1]


def test_what_work_nobody_may_take_back_frees_goes_back_to_an_over_lent_pool():
    # The pool lends nothing now, but jobs that are not preemptible (from before it lent less) hold 3 of its 4
    # devices. A higher-priority job of vision preempts one of them (on the pool's node and on n1): what it frees on
    # the pool's node goes back to the pool, so the elastic job grows on n1's rest only (found by the property test).
    rigid = RunningJob(20, "vision", 0, 0.0, (Assignment("worker", 0, "n1", 6), Assignment("worker", 1, "p0", 2)), A100)
    other = running(21, "nlp", {"p0": 1})
    elastic = RunningJob(22, "nlp", 1000, 0.0, (Assignment("worker", 0, "p0", 1),), A100,
                         elastic=(Elastic("worker", 1, 3),))
    pool_node = replace(nodes(1, devices=4, prefix="p")[0], pool="chat")
    snap = with_pools(snapshot(nodes(1, start=1) + (pool_node,), [job(1, "vision", devices=4, priority=500)],
                               [rigid, other, elastic], quotas=QUOTAS, now=NOW), Pool("chat", 0))
    result = cycle(snap)
    assert admitted(result) == [1] and victims(result) == [20]
    assert [a.node for g in result.grows for a in g.placement] == ["n1", "n1"]


def test_a_closed_node_gives_back_all_training_there_whatever_the_pool_still_lends():
    # Serving missed its latency SLO on p0: the grown replica and the preemptible job there go, with why; the job on
    # p1 stays (the pool still lends 16), and nothing new goes to p0.
    elastic = RunningJob(10, "vision", 500, 0.0, (Assignment("worker", 0, "n0", 8), Assignment("worker", 1, "p0", 4)),
                         A100, elastic=(Elastic("worker", 1, 2),))
    there = running(11, "nlp", {"p0": 4}, preemptible=True)
    elsewhere = running(12, "nlp", {"p1": 4}, preemptible=True)
    pending = [job(20, "vision", preemptible=True, devices=4)]
    why = "moved off p0: serving p99 180 ms over its SLO 100 ms"
    snap = with_pools(snapshot(nodes(1) + pooled(2), pending, [elastic, there, elsewhere], quotas=QUOTAS, now=NOW),
                      Pool("chat", 16, closed=(("p0", why),)))
    result = cycle(snap)
    assert victims(result) == [11]
    assert result.preemptions[0].reason == f"pool chat took back the capacity it lent ({why})"
    assert [(s.job_id, [a.node for a in s.removed]) for s in result.shrinks] == [(10, ["p0"])]
    assert why in result.shrinks[0].reason
    assert [a.node for a in result.admits[0].placement] == ["p1"]


def test_without_closed_nodes_the_same_training_stays():
    there = running(11, "nlp", {"p0": 4}, preemptible=True)
    snap = with_pools(snapshot(pooled(2), [], [there], quotas=QUOTAS, now=NOW), Pool("chat", 16))
    assert cycle(snap).preemptions == ()
