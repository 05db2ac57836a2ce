"""Hang detection from the run's own progress: no new step for max(2 x the recent step time, 60 s) while the job
runs is a hang, recorded, and (opted in) restarted from the checkpoint as an infrastructure failure."""

from __future__ import annotations

from datetime import timedelta

from django.utils import timezone

from jobs.models import Job
from jobs.states import State
from reliability.hangs import RESTART_LABEL, check_hangs
from reliability.models import Diagnosis, Progress, ProjectPolicy
from tests.jobs.conftest import run, submit
from tracking.models import Run

T0 = timezone.now().replace(microsecond=0) - timedelta(hours=1)


def running_job(tenant, inventory, **kwargs):
    job = run(submit(tenant, inventory["a100"], devices=1, **kwargs), inventory["cluster"], ["a-n1"], now=T0)
    assert Run.objects.filter(job=job).exists()  # tracking opened its run at the admission
    return job


def logged(job, step, at):
    """What ingestion keeps of a run: its highest step and when it was first logged."""
    Run.objects.filter(job=job).update(last_step=step, last_step_at=at)


def test_a_run_whose_steps_stop_is_a_hang_after_twice_its_step_time_or_60_s(tenant, inventory):
    job = running_job(tenant, inventory)
    logged(job, 10, T0 + timedelta(seconds=40))
    assert check_hangs(T0 + timedelta(seconds=41)) == 0
    logged(job, 20, T0 + timedelta(seconds=80))  # 4 s a step
    assert check_hangs(T0 + timedelta(seconds=81)) == 0
    assert Progress.objects.get(attempt=job.current_attempt).step_seconds == 4.0
    assert check_hangs(T0 + timedelta(seconds=80 + 59)) == 0  # bound: max(2 x 4 s, 60 s) = 60 s
    assert check_hangs(T0 + timedelta(seconds=80 + 61)) == 1
    progress = Progress.objects.get(attempt=job.current_attempt)
    assert progress.hang_detected_at is not None and "no new step for 61 s after step 20" in progress.hang_message
    job = Job.objects.get(pk=job.pk)
    assert job.state == State.RUNNING  # not opted in: reported only
    event = job.events.get(kind="hang")
    assert "Hang suspected" in event.reason and "not restarted" in event.reason
    assert check_hangs(T0 + timedelta(seconds=300)) == 0  # reported once


def test_a_slow_step_time_raises_the_bound(tenant, inventory):
    job = running_job(tenant, inventory)
    logged(job, 1, T0 + timedelta(seconds=50))
    check_hangs(T0 + timedelta(seconds=51))
    logged(job, 3, T0 + timedelta(seconds=150))  # 50 s a step: bound 100 s
    check_hangs(T0 + timedelta(seconds=151))
    assert check_hangs(T0 + timedelta(seconds=150 + 95)) == 0
    assert check_hangs(T0 + timedelta(seconds=150 + 101)) == 1


def test_progress_again_clears_the_hang(tenant, inventory):
    job = running_job(tenant, inventory)
    logged(job, 5, T0 + timedelta(seconds=10))
    assert check_hangs(T0 + timedelta(seconds=100)) == 1
    logged(job, 6, T0 + timedelta(seconds=110))
    assert check_hangs(T0 + timedelta(seconds=111)) == 0
    progress = Progress.objects.get(attempt=job.current_attempt)
    assert progress.hang_detected_at is None and progress.step_seconds is None  # not learned across the hang
    logged(job, 16, T0 + timedelta(seconds=150))
    assert check_hangs(T0 + timedelta(seconds=151)) == 0
    assert Progress.objects.get(attempt=job.current_attempt).step_seconds == 4.0
    assert check_hangs(T0 + timedelta(seconds=150 + 61)) == 1  # and a second hang is reported again


def test_slow_steps_are_not_a_hang_before_the_step_time_is_known(tenant, inventory):
    """Seen first after its first step, 120 s into the attempt: 120 s stands in for the step time (bound 240 s)."""
    job = running_job(tenant, inventory)
    logged(job, 1, T0 + timedelta(seconds=120))
    assert check_hangs(T0 + timedelta(seconds=121)) == 0
    assert check_hangs(T0 + timedelta(seconds=120 + 200)) == 0
    assert check_hangs(T0 + timedelta(seconds=120 + 241)) == 1


def test_a_run_that_never_logged_a_step_is_not_judged(tenant, inventory):
    running_job(tenant, inventory)
    assert check_hangs(T0 + timedelta(hours=5)) == 0


def test_an_opted_in_job_is_restarted_from_its_checkpoint_without_using_a_retry(tenant, inventory):
    job = running_job(tenant, inventory, retry_limit=0, labels={RESTART_LABEL: "true"})
    logged(job, 100, T0 + timedelta(seconds=30))
    check_hangs(T0 + timedelta(seconds=200))
    job = Job.objects.get(pk=job.pk)
    assert job.state == State.RETRYING and job.current_attempt.cause == "hang"
    diagnosis = Diagnosis.objects.get(attempt=job.current_attempt)
    assert diagnosis.cause == "hang" and diagnosis.action == "restart_from_checkpoint"
    assert any(item["source"] == "progress" and "no new step" in item["text"] for item in diagnosis.evidence)
    assert "restarting from the last checkpoint" in job.events.get(kind="hang").reason


def test_a_project_opts_in_for_all_its_jobs(tenant, inventory):
    ProjectPolicy.objects.create(project=tenant.project, restart_on_hang=True)
    job = running_job(tenant, inventory)
    logged(job, 100, T0 + timedelta(seconds=30))
    check_hangs(T0 + timedelta(seconds=200))
    assert Job.objects.get(pk=job.pk).state == State.RETRYING


def test_a_pass_over_runs_that_did_not_move_writes_nothing(tenant, inventory, django_assert_num_queries):
    job = running_job(tenant, inventory)
    logged(job, 10, T0 + timedelta(seconds=40))
    check_hangs(T0 + timedelta(seconds=41))
    with django_assert_num_queries(3):  # the runs, their progress, the projects opted in: no UPDATE
        assert check_hangs(T0 + timedelta(seconds=45)) == 0
