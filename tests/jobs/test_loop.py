"""The scheduler loop against the database and the simulated backend: decisions applied, gangs whole, quotas held,
preemption requeues, failures retry elsewhere."""

from datetime import timedelta

import pytest
from django.conf import settings
from django.test import override_settings
from django.utils import timezone
from prometheus_client import REGISTRY

from clusters.backends import observe_simulated
from clusters.models import Node
from jobs.loop import MIN_WAIT, next_wait
from jobs.models import Attempt, Job
from jobs.scheduling import PHASES, CycleResult
from jobs.states import State
from quotas.models import Quota
from tests.jobs.conftest import submit

INSTANT = {**settings.TIDAL, "SIM_START_DELAY": 0.0}


def age(job, seconds):
    """Pretend the job's current attempt started `seconds` ago."""
    past = timezone.now() - timedelta(seconds=seconds)
    Attempt.objects.filter(job_id=job.pk, ended_at__isnull=True).update(started_at=past, admitted_at=past)


def placement(job):
    return job.current_attempt.placement if job.current_attempt else []


def refreshed(job):
    job.refresh_from_db()
    return job


@override_settings(TIDAL=INSTANT)
def test_gang_runs_and_succeeds_on_the_simulated_cluster(tenant, inventory, cycle):
    job = submit(tenant, inventory["h100"], replicas=2, duration=60)
    cycle()
    job = refreshed(job)
    assert job.state == State.DISPATCHING and len(placement(job)) == 2
    assert {a["node"] for a in placement(job)} <= {"r1-n1", "r1-n2", "r2-n1", "r2-n2"}
    observe_simulated()
    assert refreshed(job).state == State.RUNNING
    age(job, 61)
    observe_simulated()
    job = refreshed(job)
    assert job.state == State.SUCCEEDED
    assert [e.to_state for e in job.events.all()] == ["queued", "admitted", "dispatching", "running", "succeeded"]


def test_each_cycle_reports_the_time_of_each_phase_to_prometheus(tenant, inventory, cycle):
    """Per-phase time, as Kueue reports its phases: every phase of the core and the forecast, once per cycle."""
    def counts() -> dict[str, float]:
        return {phase: REGISTRY.get_sample_value("tidal_scheduler_phase_seconds_count", {"phase": phase}) or 0.0
                for phase in (*PHASES, "forecast")}

    submit(tenant, inventory["a100"], devices=8, max_runtime=600)
    submit(tenant, inventory["a100"], devices=8, name="second")
    before = counts()
    result = cycle()
    assert {phase: n - before[phase] for phase, n in counts().items()} == dict.fromkeys((*PHASES, "forecast"), 1.0)
    assert set(result.seconds) == set(PHASES) and all(s >= 0 for s in result.seconds.values())


def test_waiting_job_is_explained(tenant, inventory, cycle):
    first = submit(tenant, inventory["a100"], devices=8, max_runtime=600)
    second = submit(tenant, inventory["a100"], devices=8, name="second")
    cycle()
    assert refreshed(first).state == State.DISPATCHING
    second = refreshed(second)
    assert second.state == State.QUEUED
    assert second.wait_code and "nvidia-a100-40gb" in second.wait_reason
    assert second.project_position == 1 and second.flavor_position == 1
    # Its estimated start is when the scheduler run forward starts it: once the first reaches its max runtime.
    assert second.eta == refreshed(first).current_attempt.admitted_at + timedelta(seconds=600)


def _finished(tenant, flavor, count, share):
    """`count` jobs of max runtime 1000 s whose only attempt succeeded after `share` of it."""
    now = timezone.now()
    for k in range(count):
        job = submit(tenant, flavor, devices=1, max_runtime=1000, name=f"done-{k}")
        Attempt.objects.create(job=job, number=1, admitted_at=now, started_at=now - timedelta(seconds=1000 * share),
                               ended_at=now, outcome="succeeded")
        Job.objects.filter(pk=job.pk).update(state=State.SUCCEEDED)


@pytest.mark.parametrize("count,share,expected", [(19, 0.5, 1.0), (20, 0.5, 0.5), (30, 0.25, 0.25)])
def test_runtime_share_is_learned_from_finished_jobs(tenant, inventory, count, share, expected):
    from jobs.selectors import runtime_shares

    _finished(tenant, inventory["a100"], count, share)
    assert runtime_shares() == pytest.approx((expected, expected, expected))


def test_estimated_starts_expect_jobs_to_end_as_finished_ones_did(tenant, inventory, cycle):
    _finished(tenant, inventory["a100"], 20, 0.5)
    first = submit(tenant, inventory["a100"], devices=8, max_runtime=600)
    second = submit(tenant, inventory["a100"], devices=8, name="second")
    cycle()
    assert refreshed(second).eta == refreshed(first).current_attempt.admitted_at + timedelta(seconds=300)


def test_estimated_starts_follow_a_new_runtime_share_while_the_queue_stays_the_same(tenant, inventory, cycle):
    first = submit(tenant, inventory["a100"], devices=8, max_runtime=600)
    second = submit(tenant, inventory["a100"], devices=8, name="second")
    cycle()
    cycle()  # the first runs: from here on every cycle finds the same jobs
    admitted = refreshed(first).current_attempt.admitted_at
    assert refreshed(second).eta == admitted + timedelta(seconds=600)
    _finished(tenant, inventory["a100"], 20, 0.5)  # finished jobs: no waiting or running job changes
    cycle()
    assert refreshed(second).eta == admitted + timedelta(seconds=300)


@override_settings(TIDAL={**settings.TIDAL, "ETA_STEPS": 2})
def test_every_waiting_job_gets_an_estimate_or_says_why_not(tenant, inventory, cycle, clients):
    """Defect (issue 25): a job the forecast did not reach within its budget showed no estimate and no reason. Two
    a100 nodes: a job without a max runtime holds one, a chain of 10-minute jobs takes the other in turn, and the
    forecast may simulate two cycles. The next in the chain gets a start with its range, the jobs after it "no
    earlier than" where the forecast got."""
    Quota.objects.filter(project=tenant.project, flavor=inventory["a100"]).update(guaranteed=16)
    submit(tenant, inventory["a100"], devices=8, name="forever")
    chain = [submit(tenant, inventory["a100"], devices=8, max_runtime=600, name=f"chain-{k}") for k in range(4)]
    cycle()
    admitted = refreshed(chain[0]).current_attempt.admitted_at
    waiting = {job.name: job for job in Job.objects.filter(state=State.QUEUED)}
    assert set(waiting) == {"chain-1", "chain-2", "chain-3"}
    nxt = waiting["chain-1"]
    assert (nxt.eta, nxt.eta_note) == (admitted + timedelta(seconds=600), "")
    assert nxt.eta_low <= nxt.eta and (nxt.eta_high is None or nxt.eta <= nxt.eta_high)
    for name in ("chain-2", "chain-3"):  # the forecast's last cycle admitted chain-1; its steps may be coarse
        assert waiting[name].eta_note == "no earlier than" and admitted < waiting[name].eta <= nxt.eta
    queue = {row["name"]: row["waiting"] for row in clients["member"].get("/api/v1/queue/").json()["results"]}
    assert queue["chain-2"]["eta_note"] == "no earlier than" and queue["chain-2"]["eta_high"] is None
    assert queue["chain-1"]["eta_low"] is not None and queue["chain-1"]["eta_note"] == ""


def test_a_job_waiting_for_one_that_declares_no_max_runtime_says_so(tenant, inventory, cycle, clients):
    Quota.objects.filter(project=tenant.project, flavor=inventory["a100"]).update(guaranteed=16)
    submit(tenant, inventory["a100"], devices=8, name="forever")
    both = submit(tenant, inventory["a100"], replicas=2, devices=8, max_runtime=600, name="both")
    cycle()
    assert (refreshed(both).eta, refreshed(both).eta_note) == (None, "no runtime known")
    waiting = clients["member"].get(f"/api/v1/jobs/{both.pk}/").json()["waiting"]
    assert (waiting["eta"], waiting["eta_note"]) == (None, "no runtime known")


@override_settings(TIDAL={**settings.TIDAL, "ETA_STEPS": 0})
def test_estimated_starts_can_be_turned_off(tenant, inventory, cycle):
    submit(tenant, inventory["a100"], devices=8, max_runtime=600)
    second = submit(tenant, inventory["a100"], devices=8, name="second")
    cycle()
    assert refreshed(second).state == State.QUEUED and refreshed(second).eta is None


def test_no_partial_gang_and_no_overallocation(tenant, inventory, cycle):
    big = submit(tenant, inventory["h100"], replicas=3, name="big")  # 24 of vision's 16+8
    small = [submit(tenant, inventory["h100"], devices=4, name=f"s{i}") for i in range(6)]
    for _ in range(3):
        cycle()
    used = {}
    for job in Job.objects.filter(state__in=[State.ADMITTED, State.DISPATCHING, State.RUNNING]):
        for a in placement(job):
            used[a["node"]] = used.get(a["node"], 0) + a["devices"]
    assert all(devices <= 8 for devices in used.values()), used
    vision = sum(j.total_devices for j in Job.objects.filter(project=tenant.project,
                                                             state__in=[State.DISPATCHING, State.ADMITTED]))
    assert vision <= 16 + 8
    big = refreshed(big)
    assert placement(big) == [] or len(placement(big)) == 3
    assert len(small) == 6


def test_owner_reclaims_its_guarantee_by_preemption(tenant, inventory, cycle):
    """Vision borrows speech's idle guarantee; when speech needs it back, vision's borrowed job is requeued."""
    borrower = submit(tenant, inventory["h100"], replicas=3, name="borrower")  # 24 = 16 guaranteed + 8 borrowed
    cycle()
    assert refreshed(borrower).state == State.DISPATCHING
    age(borrower, 3600)
    owner_jobs = [submit(tenant, inventory["h100"], project=inventory["speech"], user="owner", name=f"o{i}")
                  for i in range(2)]
    cycle()
    borrower = refreshed(borrower)
    assert borrower.state == State.QUEUED and borrower.attempt == 2
    assert [e.to_state for e in borrower.events.all()][-2:] == ["preempted", "queued"]
    assert all(refreshed(job).state == State.DISPATCHING for job in owner_jobs)


@override_settings(TIDAL={**INSTANT, "POLICY": {**settings.TIDAL["POLICY"], "reclaim_grace": 60.0}})
def test_an_owner_waits_for_its_reclaim_grace_and_the_loop_wakes_when_it_ends(tenant, inventory, cycle):
    borrower = submit(tenant, inventory["h100"], replicas=3, name="borrower")
    cycle()
    owner = submit(tenant, inventory["h100"], project=inventory["speech"], user="owner", replicas=2, name="owner")
    result = cycle()
    owner = refreshed(owner)
    assert refreshed(borrower).state == State.DISPATCHING
    assert owner.state == State.QUEUED and owner.wait_code == "reclaim"
    assert "take back its guaranteed capacity from project vision in 1m unless capacity frees first" in \
        owner.wait_reason
    assert result.wake_at == owner.queued_at.timestamp() + 60.0
    assert next_wait(result, 300.0, result.wake_at - 42.0) == 42.0  # the loop wakes when the grace ends
    Job.objects.filter(pk=owner.pk).update(queued_at=owner.queued_at - timedelta(seconds=60))
    cycle()
    assert refreshed(borrower).state == State.QUEUED and refreshed(owner).state == State.DISPATCHING


@pytest.mark.parametrize("wake_at,expected", [(None, 5.0), (102.0, 2.0), (200.0, 5.0), (99.0, MIN_WAIT)])
def test_the_loop_waits_its_interval_or_until_a_grace_ends(wake_at, expected):
    assert next_wait(CycleResult(wake_at=wake_at), 5.0, 100.0) == expected


def test_min_runtime_protects_a_fresh_borrower(tenant, inventory, cycle):
    borrower = submit(tenant, inventory["h100"], replicas=3, name="borrower", min_runtime=3600)
    cycle()
    submit(tenant, inventory["h100"], project=inventory["speech"], user="owner", replicas=2, name="owner")
    cycle()
    assert refreshed(borrower).state == State.DISPATCHING


@override_settings(TIDAL=INSTANT)
def test_node_loss_retries_the_gang_elsewhere(tenant, inventory, cycle):
    job = submit(tenant, inventory["a100"], devices=8, retry_limit=2, retry_backoff=0, duration=600)
    cycle()
    observe_simulated()
    job = refreshed(job)
    lost = placement(job)[0]["node"]
    Node.objects.filter(name=lost).update(ready=False)
    observe_simulated()  # the attempt is lost; its retry is due at once (backoff 0)
    job = refreshed(job)
    assert job.state == State.RETRYING and job.avoid_nodes == [f"sim/{lost}"]
    first = job.current_attempt
    assert (first.outcome, first.cause, first.details["node"]) == ("lost", "node_lost", lost)
    cycle()  # requeues the due retry and admits it, away from the lost node
    job = refreshed(job)
    assert job.state == State.DISPATCHING and job.attempt == 2 and placement(job)[0]["node"] != lost


@override_settings(TIDAL=INSTANT)
@pytest.mark.parametrize("cause, retries, final", [("host_oom", 1, State.RETRYING), ("user_error", 1, State.FAILED),
                                                   ("image_pull", 1, State.FAILED), ("host_oom", 0, State.FAILED)])
def test_injected_failures_retry_or_fail(tenant, inventory, cause, retries, final, cycle):
    """The simulated backend only reports the cause; retrying follows the one table of jobs.failures."""
    job = submit(tenant, inventory["a100"], devices=1, retry_limit=retries, retry_backoff=60, duration=600,
                 labels={"sim.tidal.dev/fail-after": "1", "sim.tidal.dev/fail-cause": cause})
    cycle()
    observe_simulated()
    age(job, 5)
    observe_simulated()
    job = refreshed(job)
    assert job.state == final and job.current_attempt.cause == cause
    assert job.current_attempt.outcome == "failed"


@override_settings(TIDAL=INSTANT)
def test_a_running_job_past_its_max_runtime_fails_without_retry(tenant, inventory, cycle):
    job = submit(tenant, inventory["a100"], devices=1, retry_limit=3, max_runtime=60, duration=600)
    cycle()
    observe_simulated()
    age(job, 61)
    observe_simulated()
    job = refreshed(job)
    assert job.state == State.FAILED and job.current_attempt.cause == "max_runtime"


@override_settings(TIDAL=INSTANT)
def test_preemptions_do_not_use_up_retries(tenant, inventory, cycle):
    """Retries count failed attempts only: a job preempted before still has its retry when its node is lost."""
    from jobs.lifecycle import transition

    job = submit(tenant, inventory["a100"], devices=8, retry_limit=1, retry_backoff=60, duration=600)
    cycle()
    transition(refreshed(job), State.PREEMPTED, reason="test", actor="scheduler")
    transition(refreshed(job), State.QUEUED, reason="test", actor="scheduler")
    cycle()
    observe_simulated()
    job = refreshed(job)
    assert job.attempt == 2 and job.state == State.RUNNING
    Node.objects.filter(name=placement(job)[0]["node"]).update(ready=False)
    observe_simulated()
    job = refreshed(job)
    assert job.state == State.RETRYING, job.events.last().reason


def test_cancelled_job_frees_its_devices(tenant, inventory, cycle):
    from jobs.services import job_cancel

    first = submit(tenant, inventory["a100"], devices=8, name="first")
    second = submit(tenant, inventory["a100"], devices=8, name="second")
    cycle()
    job_cancel(actor=tenant.users["member"], job=refreshed(first))
    cycle()
    assert refreshed(second).state == State.DISPATCHING
