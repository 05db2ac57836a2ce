"""Elastic jobs in the scheduler loop (issue 29): the snapshot carries their bounds, admission at the minimum, grows
and shrinks applied through the state machine as events of the current attempt, at most once each."""

from datetime import timedelta

import pytest
from django.conf import settings
from django.test import override_settings
from django.utils import timezone

from clusters.backends import observe_simulated
from jobs import lifecycle
from jobs.loop import _apply_resizes
from jobs.models import Attempt, AttemptResize, Job
from jobs.scheduling import CycleResult, Grow, Shrink
from jobs.scheduling.model import Assignment
from jobs.services import job_submit
from jobs.snapshot import build_snapshot
from jobs.states import State
from tests.jobs.conftest import spec, submit

INSTANT = {**settings.TIDAL, "SIM_START_DELAY": 0.0}
pytestmark = pytest.mark.usefixtures("_instant")


@pytest.fixture
def _instant():
    with override_settings(TIDAL=INSTANT):
        yield


def elastic(tenant, flavor, low=1, high=4, *, cooldown=0, **extra):
    body = spec(flavor, replicas=high, resize_cooldown=cooldown, **extra)
    body["groups"][0]["min_replicas"] = low
    return job_submit(actor=tenant.users["member"], project=tenant.project, spec=body).job


def running(job, cycle):
    """Admit, dispatch and see it running on the simulated cluster."""
    cycle()
    observe_simulated()
    job.refresh_from_db()
    assert job.state == State.RUNNING, job.state
    return job


def workers(job):
    return len(Attempt.objects.get(pk=job.current_attempt_id).placement)


def test_the_snapshot_carries_min_for_pending_and_the_bounds_of_running_jobs(tenant, inventory, cycle):
    job = elastic(tenant, inventory["h100"], 2, 4, cooldown=120)
    pending, = build_snapshot(timezone.now().timestamp()).snapshot.pending
    assert [(g.replicas, g.max_replicas) for g in pending.groups] == [(2, 4)]
    job = running(job, cycle)
    read = build_snapshot(timezone.now().timestamp())
    run, = read.snapshot.running
    assert run.elastic and (run.elastic[0].min_replicas, run.elastic[0].max_replicas) == (2, 4)
    assert run.resize_cooldown == 120.0 and run.resized_at is None and len(run.placement) == 2
    assert read.versions[job.pk] == (job.current_attempt_id, 0)


def test_a_rigid_job_has_no_elastic_groups_in_the_snapshot(tenant, inventory, cycle):
    job = running(submit(tenant, inventory["h100"], replicas=2), cycle)
    run, = build_snapshot(timezone.now().timestamp()).snapshot.running
    assert run.id == job.pk and run.elastic == ()


def test_admitted_at_its_minimum_then_grows_into_idle_capacity(tenant, inventory, cycle):
    job = elastic(tenant, inventory["h100"], 1, 4)
    cycle()
    job.refresh_from_db()
    assert workers(job) == 1  # admission needs only the minimum
    assert cycle().grows  # the core would grow it, but a gang still starting is not grown
    assert workers(job) == 1 and not AttemptResize.objects.exists()
    observe_simulated()
    result = cycle()
    job.refresh_from_db()
    assert result.grows and job.state == State.RUNNING
    attempt = Attempt.objects.get(pk=job.current_attempt_id)
    assert 1 < len(attempt.placement) <= 4 and attempt.number == 1 and job.attempts.count() == 1
    assert sorted(r["index"] for r in attempt.placement) == list(range(len(attempt.placement)))
    resize, = attempt.resizes.all()
    assert (resize.kind, resize.old_replicas, resize.new_replicas) == ("grow", 1, len(attempt.placement))
    assert resize.new_devices == 8 * len(attempt.placement) and resize.reason == "grew into idle capacity"
    event = job.events.get(kind="resize")
    assert event.reason == f"grew from 1 to {len(attempt.placement)} workers: grew into idle capacity"
    assert event.details["new_replicas"] == len(attempt.placement) and event.attempt == 1
    assert attempt.resize_count == 1 and attempt.resized_at is not None


def test_the_cooldown_holds_growth(tenant, inventory, cycle):
    job = running(elastic(tenant, inventory["h100"], 1, 4, cooldown=3600), cycle)
    assert cycle().grows == () and workers(job) == 1


def test_a_reclaim_shrinks_the_grown_replicas_instead_of_evicting(tenant, inventory, cycle):
    job = running(elastic(tenant, inventory["h100"], 1, 4), cycle)
    cycle()
    grown = workers(job)
    assert grown >= 3, grown  # it took capacity speech lends
    rival = submit(tenant, inventory["h100"], project=inventory["speech"], user="owner", replicas=2)
    result = cycle()
    job.refresh_from_db()
    rival.refresh_from_db()
    assert rival.state in (State.ADMITTED, State.DISPATCHING) and not result.preemptions
    assert job.state == State.RUNNING and job.attempts.count() == 1  # the same attempt goes on
    shrink = AttemptResize.objects.get(attempt_id=job.current_attempt_id, kind="shrink")
    assert shrink.old_replicas == grown and shrink.new_replicas == workers(job) >= 1
    assert shrink.for_job == rival.pk and shrink.reason == result.shrinks[0].reason
    kept = {r["node"] for r in Attempt.objects.get(pk=job.current_attempt_id).placement}
    assert not kept & {r["node"] for r in rival.current_attempt.placement}  # no device held twice


def test_a_resize_is_applied_at_most_once(tenant, inventory, cycle):
    job = running(elastic(tenant, inventory["h100"], 1, 4, cooldown=3600), cycle)
    read = build_snapshot(timezone.now().timestamp())
    grow = Grow(job.pk, (Assignment("worker", 1, "sim/r2-n2", 8),))
    result = CycleResult(grows=(grow,))
    _apply_resizes(result, read, timezone.now(), grows=True)
    _apply_resizes(result, read, timezone.now(), grows=True)  # the same decision, on the same snapshot
    assert workers(job) == 2 and AttemptResize.objects.count() == 1
    # and a later snapshot's view of the same grow finds the replica there already
    _apply_resizes(result, build_snapshot(timezone.now().timestamp()), timezone.now(), grows=True)
    assert workers(job) == 2 and AttemptResize.objects.count() == 1


def test_a_shrink_below_the_minimum_or_of_a_replica_not_there_changes_nothing(tenant, inventory, cycle):
    job = running(elastic(tenant, inventory["h100"], 2, 4, cooldown=3600), cycle)
    attempt = Attempt.objects.get(pk=job.current_attempt_id)
    below = lifecycle.resize(job.pk, attempt_id=attempt.pk, version=0, kind="shrink",
                             replicas=[attempt.placement[1]], reason="test", now=timezone.now())
    missing = lifecycle.resize(job.pk, attempt_id=attempt.pk, version=0, kind="shrink",
                               replicas=[{"role": "worker", "index": 7, "node": "x", "devices": 8}], reason="test",
                               now=timezone.now())
    three = [{"role": "worker", "index": i, "node": "r2-n2", "devices": 8} for i in (2, 3, 4)]
    above = lifecycle.resize(job.pk, attempt_id=attempt.pk, version=0, kind="grow", reason="test", now=timezone.now(),
                             replicas=three)
    assert (below, missing, above) == (None, None, None) and workers(job) == 2
    assert not AttemptResize.objects.exists()


def test_shrink_decisions_apply_only_to_jobs_still_holding(tenant, inventory, cycle):
    job = running(elastic(tenant, inventory["h100"], 1, 4), cycle)
    cycle()
    read = build_snapshot(timezone.now().timestamp())
    placement = Attempt.objects.get(pk=job.current_attempt_id).placement
    top = max(placement, key=lambda r: r["index"])
    lifecycle.transition(Job.objects.get(pk=job.pk), State.CANCELLED, reason="test", actor="system")
    shrink = Shrink(job.pk, (Assignment("worker", top["index"], f"sim/{top['node']}", 8),), 0, "test")
    _apply_resizes(CycleResult(shrinks=(shrink,)), read, timezone.now() + timedelta(seconds=1), grows=False)
    assert not AttemptResize.objects.filter(kind="shrink").exists()


# --------------------------------------------------------------------------------------- the simulated cluster

def test_the_simulated_progress_model():
    from clusters.backends.simulated import RESCALE_PAUSE, seconds_of_work, speed

    start = timezone.now()
    grow = AttemptResize(at=start + timedelta(seconds=100), old_replicas=1, new_replicas=4)
    assert speed(1, 0.9) == 1 and speed(4, 0.9) == pytest.approx(4 * 0.9 ** 3)
    assert seconds_of_work(start, start + timedelta(seconds=100), 1, [grow], 0.9) == pytest.approx(100)
    within_pause = start + timedelta(seconds=100 + RESCALE_PAUSE / 2)
    assert seconds_of_work(start, within_pause, 1, [grow], 0.9) == pytest.approx(100)
    later = start + timedelta(seconds=100 + RESCALE_PAUSE + 50)
    assert seconds_of_work(start, later, 1, [grow], 0.9) == pytest.approx(100 + 50 * 4 * 0.9 ** 3)
    shrink = AttemptResize(at=later, old_replicas=4, new_replicas=2)
    end = later + timedelta(seconds=RESCALE_PAUSE + 10)
    assert seconds_of_work(start, end, 1, [grow, shrink], 0.9) == pytest.approx(100 + 50 * 2.916 + 10 * 1.8)


def test_on_the_simulated_cluster_a_grown_job_finishes_sooner(tenant, inventory, cycle,
                                                               django_capture_on_commit_callbacks):
    job = running(elastic(tenant, inventory["h100"], 1, 4, cooldown=3600, duration=600,
                          scaling_efficiency=1.0), cycle)
    past = timezone.now() - timedelta(seconds=400)
    Attempt.objects.filter(pk=job.current_attempt_id).update(started_at=past, admitted_at=past)
    with django_capture_on_commit_callbacks(execute=True):
        lifecycle.resize(job.pk, attempt_id=job.current_attempt_id, version=0, kind="grow", now=past + timedelta(
            seconds=100), reason="test", replicas=[{"role": "worker", "index": i, "node": "r2-n2", "devices": 8}
                                                    for i in (1, 2, 3)])
    assert job.events.filter(kind="note", reason__contains="started worker-1, worker-2, worker-3").exists()
    observe_simulated()  # 100 s at 1 worker, a pause, 270 s at 4: 1180 s of work at its first size, of 600
    job.refresh_from_db()
    assert job.state == State.SUCCEEDED


def test_on_the_simulated_cluster_an_unresized_job_runs_its_duration(tenant, inventory, cycle):
    job = running(elastic(tenant, inventory["h100"], 1, 4, cooldown=3600, duration=600), cycle)
    past = timezone.now() - timedelta(seconds=400)
    Attempt.objects.filter(pk=job.current_attempt_id).update(started_at=past, admitted_at=past)
    observe_simulated()
    job.refresh_from_db()
    assert job.state == State.RUNNING


# --------------------------------------------------------------------------------------------- lost nodes

def _grown_on(job, node, indexes):
    lifecycle.resize(job.pk, attempt_id=job.current_attempt_id, version=0, kind="grow", now=timezone.now(),
                     reason="test", replicas=[{"role": "worker", "index": i, "node": node, "devices": 8}
                                              for i in indexes])


def test_a_lost_node_under_grown_replicas_shrinks_the_job(tenant, inventory, cycle):
    from clusters.models import Node

    job = running(elastic(tenant, inventory["h100"], 1, 4, cooldown=3600), cycle)
    base = Attempt.objects.get(pk=job.current_attempt_id).placement[0]["node"]
    lost = next(n for n in ("r1-n1", "r2-n2") if n != base)
    _grown_on(job, lost, (1, 2))
    Node.objects.filter(name=lost).update(ready=False)
    observe_simulated()
    job.refresh_from_db()
    assert job.state == State.RUNNING and job.attempts.count() == 1
    assert [r["node"] for r in Attempt.objects.get(pk=job.current_attempt_id).placement] == [base]
    shrink = AttemptResize.objects.get(kind="shrink")
    assert (shrink.old_replicas, shrink.new_replicas) == (3, 1) and f"node {lost} went away" in shrink.reason


def test_a_lost_node_under_the_minimum_loses_the_attempt(tenant, inventory, cycle):
    from clusters.models import Node

    job = running(elastic(tenant, inventory["h100"], 1, 4, cooldown=3600, retry_limit=1), cycle)
    base = Attempt.objects.get(pk=job.current_attempt_id).placement[0]["node"]
    _grown_on(job, next(n for n in ("r1-n1", "r2-n2") if n != base), (1,))
    Node.objects.filter(name=base).update(ready=False)
    observe_simulated()
    job.refresh_from_db()
    assert job.state == State.RETRYING and not AttemptResize.objects.filter(kind="shrink").exists()
    assert Attempt.objects.get(job=job, number=1).outcome == "lost"


def test_quota_usage_counts_what_a_resized_attempt_holds(tenant, inventory, cycle):
    from jobs.selectors import held_devices

    job = running(elastic(tenant, inventory["h100"], 1, 4, cooldown=3600), cycle)
    rigid = submit(tenant, inventory["a100"], replicas=1)
    cycle()
    key, other = (tenant.project.pk, inventory["h100"].pk), (tenant.project.pk, inventory["a100"].pk)
    assert held_devices([tenant.organization.pk])[key] == 8
    lifecycle.resize(job.pk, attempt_id=job.current_attempt_id, version=0, kind="grow", now=timezone.now(),
                     reason="test", replicas=[{"role": "worker", "index": i, "node": "r2-n2", "devices": 8}
                                              for i in (1, 2)])
    held = held_devices([tenant.organization.pk])
    assert held[key] == 24 and held[other] == rigid.total_devices == 8


@pytest.mark.parametrize(("speech_submitted", "grown_to"), [
    # Within its 600 s cooldown, vision's own submission (1 job of 8 devices at its minimum in the last hour) and
    # speech's (one-node jobs) are expected to ask for a sixth of their hour's devices, rounded up.
    (0, 3),  # 2 devices expected: its own guarantee, then the 8 it may borrow of speech's 16
    (9, 2),  # 14 expected: speech's 16 minus the 8 borrowed would not hold them; its own guarantee only
    (12, 1),  # 18 expected: more than speech lends, so even its own idle guarantee stays for its own arrivals
])
def test_growth_leaves_room_for_what_the_organization_submits(tenant, inventory, cycle,
                                                              django_capture_on_commit_callbacks,
                                                              speech_submitted, grown_to):
    from jobs.loop import run_once
    from jobs.services import job_cancel

    job = running(elastic(tenant, inventory["h100"], 1, 4, cooldown=600), cycle)
    for _ in range(speech_submitted):  # submitted and cancelled at once: their rate is what the loop reads
        rival = submit(tenant, inventory["h100"], project=inventory["speech"], user="owner")
        job_cancel(actor=tenant.users["owner"], job=rival)
    with django_capture_on_commit_callbacks(execute=True):
        result = run_once(now=timezone.now() + timedelta(seconds=700))  # past the cooldown
    assert bool(result.grows) == (grown_to > 1)
    assert workers(job) == grown_to
