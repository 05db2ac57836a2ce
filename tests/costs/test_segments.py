"""Usage segments are written by the transitions themselves: one per attempt that ran, opened when its gang starts,
closed exactly once when the attempt ends (its grace included), in one statement each; reports price them across
preemption, retry and a price change in the middle of a segment, and cost open ones up to now."""

from __future__ import annotations

from datetime import date, timedelta
from decimal import Decimal

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from costs.metering import segments
from costs.metering.rollup import roll_segments
from costs.models import UsageDay, UsageSegment
from costs.reports.usage import ReportQuery, Window, usage_report
from jobs import lifecycle
from jobs.lifecycle import AttemptEnd, transition
from jobs.states import State
from tenancy.models import Project
from tests.costs.conftest import at, price
from tests.jobs.conftest import admit, run, submit

pytestmark = pytest.mark.django_db
DAY_ONE = Window(date(2026, 1, 1), date(2026, 1, 2))


def run_to(job, when):
    for state in (State.DISPATCHING, State.RUNNING):
        job = transition(job, state, reason="test", actor="backend", now=when)
    return job


def preempt_and_requeue(job, when):
    job = transition(job, State.PREEMPTED, reason="preempted", actor="scheduler", now=when,
                     end=AttemptEnd(reason="preempted"))
    return transition(job, State.QUEUED, reason="requeued", actor="scheduler", now=when)


def report(tenant, group_by=("job",), window=DAY_ONE, step=None, now=None):
    return usage_report(Project.objects.filter(pk=tenant.project.pk).values("id"),
                        ReportQuery(window, group_by, step), now or at(24))


def test_each_attempt_is_a_segment_closed_once_and_a_price_change_splits_the_cost(tenant, prices):
    cluster, h100 = prices["cluster"], prices["h100"]
    job = admit(submit(tenant, h100), cluster, ["r1-n1"], now=at(0))
    job = preempt_and_requeue(run_to(job, at(0)), at(2))
    job = admit(job, cluster, ["r1-n2"], now=at(3))
    job = transition(run_to(job, at(3)), State.RETRYING, reason="oom", actor="backend", now=at(3.5),
                     end=AttemptEnd(reason="oom", cause="oom"), retry_at=at(3.5))
    price(h100, "4.00", at(4))  # from 04:00 on, in the middle of the third attempt
    job = transition(job, State.QUEUED, reason="retry", actor="system", now=at(3.6))
    job = admit(job, cluster, ["r2-n1"], now=at(3.75))
    transition(run_to(job, at(3.75)), State.SUCCEEDED, reason="done", actor="backend", now=at(5.75))

    rows = list(UsageSegment.objects.filter(job=job).order_by("attempt_number")
                .values_list("attempt_number", "devices", "start_ts", "end_ts", "outcome"))
    hour = 3600
    start = int(at(0).timestamp())
    assert rows == [(1, 8, start, start + 2 * hour, "preempted"),
                    (2, 8, start + 3 * hour, start + int(3.5 * hour), "failed"),
                    (3, 8, start + int(3.75 * hour), start + int(5.75 * hour), "succeeded")]
    # 8 x 2 h x 2.00 + 8 x 0.5 h x 2.00 + 8 x (0.25 h x 2.00 + 1.75 h x 4.00)
    expected = 32 + 8 + 8 * (0.5 + 7.0)
    before = report(tenant)
    assert before.rows[0].cost == expected
    assert before.rows[0].device_hours == pytest.approx(8 * 4.5)
    assert roll_segments() == 3
    after = report(tenant)
    assert [(r.keys, r.cost, r.device_seconds) for r in after.rows] == [
        (r.keys, r.cost, r.device_seconds) for r in before.rows]
    assert UsageDay.objects.filter(segment__job=job).count() == 3


def test_a_segment_is_closed_exactly_once(tenant, prices):
    job = run(submit(tenant, prices["h100"]), prices["cluster"], ["r1-n1"], now=at(0))
    job = transition(job, State.CANCELLED, reason="cancel", actor="member", now=at(1))
    segment = UsageSegment.objects.get(job=job)
    # A late writer closing the same attempt again (a racing end) changes nothing.
    segments.follow_attempts([lifecycle.Change(job.pk, job.project_id, State.RUNNING, State.FAILED, at(9), "x",
                                               segment.attempt_id, 1, "failed")])
    segment.refresh_from_db()
    assert (segment.end_ts, segment.outcome) == (int(at(1).timestamp()), "cancelled")


def test_an_open_segment_is_costed_up_to_now_and_a_segment_across_midnight_is_split_per_day(tenant, prices):
    job = run(submit(tenant, prices["h100"], devices=4), prices["cluster"], ["r1-n1"], now=at(22))
    week = Window(date(2026, 1, 1), date(2026, 1, 8))
    open_report = report(tenant, window=week, step="day", now=at(26))  # 2 h on day one, 2 h on day two
    assert [(r.period, r.device_hours, r.cost) for r in open_report.rows] == [
        (date(2026, 1, 1), pytest.approx(8.0), pytest.approx(16.0)),
        (date(2026, 1, 2), pytest.approx(8.0), pytest.approx(16.0))]
    transition(job, State.SUCCEEDED, reason="done", actor="backend", now=at(27))
    roll_segments()
    closed = report(tenant, window=week, step="day", now=at(100))
    assert [(r.period, r.device_hours) for r in closed.rows] == [
        (date(2026, 1, 1), pytest.approx(8.0)), (date(2026, 1, 2), pytest.approx(12.0))]
    assert UsageDay.objects.count() == 2


def test_preemptible_jobs_pay_their_class_factor_and_cpu_jobs_pay_core_hours(tenant, prices):
    cluster = prices["cluster"]
    cheap = run(submit(tenant, prices["h100"], devices=8, priority="preemptible"), cluster, ["r1-n1"], now=at(0))
    transition(cheap, State.CANCELLED, reason="stop", actor="member", now=at(1))
    cpu_job = run(submit(tenant, prices["a100"], devices=0), cluster, ["a-n1"], now=at(0))
    transition(cpu_job, State.CANCELLED, reason="stop", actor="member", now=at(2))
    costs = {r.labels["job"]: r.cost for r in report(tenant).rows}
    assert costs[f"#{cheap.pk} train"] == Decimal("4.8")  # 8 x 1 h x 2.00 x 0.3, exactly
    assert costs[f"#{cpu_job.pk} train"] == Decimal("0.4")  # 4 cores (the group default) x 2 h


def test_a_cluster_price_overrides_the_flavor_price_on_that_cluster_only(tenant, prices):
    from clusters.models import Cluster

    price(prices["h100"], "3.00", at(0), cluster=prices["cluster"])
    Cluster.objects.create(name="elsewhere")
    job = run(submit(tenant, prices["h100"]), prices["cluster"], ["r1-n1"], now=at(1))
    transition(job, State.CANCELLED, reason="stop", actor="member", now=at(2))
    assert report(tenant).total.cost == 24
    assert Decimal("3.00") == prices["h100"].prices.get(cluster=prices["cluster"]).per_device_hour


@pytest.mark.parametrize(("step", "extra"), [("admit", 0), ("start", 1), ("finish", 1)])
def test_a_segment_costs_its_transition_at_most_one_statement(tenant, prices, step, extra):
    """Starting or finishing a job costs one extra statement for its segment, admitting none, whatever else
    listens."""
    job = submit(tenant, prices["h100"])
    if step != "admit":
        job = admit(job, prices["cluster"], ["r1-n1"])
        job = transition(job, State.DISPATCHING, reason="test", actor="backend")
    if step == "finish":
        job = transition(job, State.RUNNING, reason="test", actor="backend")

    def statements(with_segments: bool) -> int:
        nonlocal job
        listeners = [r for r in lifecycle.on_change if with_segments or r != segments.follow_attempts]
        with lifecycle.on_change.replaced(listeners):
            with CaptureQueriesContext(connection) as queries:
                from django.db import transaction

                with transaction.atomic():
                    sid = transaction.savepoint()
                    if step == "admit":
                        admit(job, prices["cluster"], ["r1-n1"])
                    elif step == "start":
                        transition(job, State.RUNNING, reason="test", actor="backend")
                    else:
                        transition(job, State.CANCELLED, reason="stop", actor="member", now=timezone.now())
                    transaction.savepoint_rollback(sid)
                job.refresh_from_db()
            return len([q for q in queries.captured_queries if "SAVEPOINT" not in q["sql"]])

    assert statements(True) - statements(False) == extra


# ---- what is billed: from the gang's start to the pods' end

def kubernetes_cluster(prices, grace=120):
    """A Kubernetes cluster (never reached: nothing runs after commit here) with one h100 node."""
    from clusters.models import Cluster, Node

    cluster = Cluster.objects.create(name="kube", backend=Cluster.Backend.KUBERNETES,
                                     termination_grace_seconds=grace, created_at=at(-24))
    Node.objects.create(cluster=cluster, name="k-n1", flavor=prices["h100"], devices=8)
    return cluster


def segment_of(job):
    return UsageSegment.objects.filter(job=job).values_list("start_ts", "end_ts", "outcome").get()


@pytest.mark.parametrize(("end_as", "outcome"), [
    ((State.RETRYING, AttemptEnd(reason="replica worker-1 Pending past 600s", cause="pending_timeout")), "failed"),
    ((State.RETRYING, AttemptEnd(reason="unschedulable", cause="unschedulable")), "failed"),
    ((State.FAILED, AttemptEnd(reason="image never pulled", cause="image_pull")), "failed"),
    ((State.PREEMPTED, AttemptEnd(reason="preempted")), "preempted"),
    ((State.CANCELLED, AttemptEnd()), "cancelled"),
])
@pytest.mark.parametrize("dispatched", [False, True])
def test_a_gang_that_never_started_is_not_billed(tenant, prices, end_as, outcome, dispatched):
    job = admit(submit(tenant, prices["h100"], replicas=2), kubernetes_cluster(prices), ["k-n1", "k-n1"], now=at(0))
    if dispatched:  # its pods created, some maybe running, never all of them
        job = transition(job, State.DISPATCHING, reason="created", actor="backend", now=at(0.1))
    target, how = end_as
    job = transition(job, target, reason=how.reason or "stop", actor="backend", now=at(10), end=how,
                     **({"retry_at": at(10)} if target == State.RETRYING else {}))
    assert job.attempts.get().outcome == outcome
    assert not UsageSegment.objects.filter(job=job).exists()
    assert report(tenant).rows == [] and report(tenant, now=at(11)).total.cost == 0


@pytest.mark.parametrize(("target", "how"), [(State.PREEMPTED, AttemptEnd(reason="preempted")),
                                             (State.CANCELLED, AttemptEnd()),
                                             (State.FAILED, AttemptEnd(reason="oom", cause="cuda_oom"))])
def test_an_attempt_asked_to_stop_is_billed_its_grace_and_rolled_once_it_passed(tenant, prices, target, how):
    """A victim, a cancelled job and a failed gang's pods may run for the cluster's grace period after the attempt
    ended: they hold their devices until then, and are billed until then."""
    job = run(submit(tenant, prices["h100"]), kubernetes_cluster(prices, grace=120), ["k-n1"], now=at(1))
    transition(job, target, reason=how.reason or "stop", actor="member", now=at(2), end=how)
    start, end = int(at(1).timestamp()), int(at(2).timestamp()) + 120
    assert segment_of(job)[:2] == (start, end)
    assert report(tenant, now=at(3)).total.device_seconds == 8 * (3600 + 120)
    assert report(tenant, now=at(2) + timedelta(seconds=60)).total.device_seconds == 8 * (3600 + 60)  # up to now
    assert roll_segments(now=at(2) + timedelta(seconds=60)) == 0  # its end is still ahead
    assert roll_segments(now=at(3)) == 1
    assert report(tenant, now=at(3)).total.device_seconds == 8 * (3600 + 120)


def test_a_succeeded_attempt_and_a_simulated_cluster_have_no_grace(tenant, prices):
    done = run(submit(tenant, prices["h100"]), kubernetes_cluster(prices), ["k-n1"], now=at(1))
    transition(done, State.SUCCEEDED, reason="done", actor="backend", now=at(2))
    assert segment_of(done) == (int(at(1).timestamp()), int(at(2).timestamp()), "succeeded")
    victim = run(submit(tenant, prices["h100"]), prices["cluster"], ["r1-n1"], now=at(1))
    transition(victim, State.PREEMPTED, reason="preempted", actor="scheduler", now=at(2))
    assert segment_of(victim) == (int(at(1).timestamp()), int(at(2).timestamp()), "preempted")


def test_billing_starts_when_every_replica_runs_not_at_admission(tenant, prices):
    job = admit(submit(tenant, prices["h100"]), prices["cluster"], ["r1-n1"], now=at(0))
    job = transition(job, State.DISPATCHING, reason="created", actor="backend", now=at(0.1))
    assert report(tenant, now=at(1)).rows == []  # pulling its image, not all replicas running
    job = transition(job, State.RUNNING, reason="all replicas running", actor="backend", now=at(0.5))
    assert segment_of(job) == (int(at(0.5).timestamp()), None, "")
    assert report(tenant, now=at(1)).total.device_seconds == 8 * 1800


def test_an_attempt_seen_only_once_it_succeeded_is_billed_from_its_admission(tenant, prices):
    job = admit(submit(tenant, prices["h100"]), prices["cluster"], ["r1-n1"], now=at(0))
    job = transition(job, State.DISPATCHING, reason="created", actor="backend", now=at(0.1))
    transition(job, State.SUCCEEDED, reason="completed", actor="backend", now=at(2))
    assert segment_of(job) == (int(at(0).timestamp()), int(at(2).timestamp()), "succeeded")


def test_a_segment_opened_at_admission_before_this_rule_is_kept_and_one_of_an_attempt_that_never_ran_is_repaired(
        tenant, prices):
    """Segments written by the previous version (opened at admission): a start does not write a second one, and
    check_consistency deletes one whose attempt never ran (unless rolled)."""
    from costs.consistency import segment_of_attempt_that_never_ran

    started = admit(submit(tenant, prices["h100"]), prices["cluster"], ["r1-n1"], now=at(0))
    never = admit(submit(tenant, prices["h100"]), prices["cluster"], ["r1-n2"], now=at(0))
    for job in (started, never):
        segments._open([job.current_attempt_id], int(at(0).timestamp()))
    run_to(started, at(1))
    assert UsageSegment.objects.filter(job=started).count() == 1
    transition(never, State.CANCELLED, reason="stop", actor="member", now=at(2))
    problems = list(segment_of_attempt_that_never_ran())
    assert [p.target.job_id for p in problems] == [never.pk]
    assert problems[0].fix() == "deleted" and not UsageSegment.objects.filter(job=never).exists()
    assert list(segment_of_attempt_that_never_ran()) == []
