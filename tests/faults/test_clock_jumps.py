"""The wall clock jumps (an NTP step, a VM resumed, a host with a wrong clock) under the scheduler and the simulated
cluster: estimated starts are never in the past nor pushed out by the jump, a retry waits no longer than its
backoff, and no attempt or usage segment ends before it began."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.test import override_settings
from django.utils import timezone

from chaos import invariants
from clusters.backends import observe_simulated
from jobs.models import Attempt, Job
from jobs.services import job_cancel
from jobs.states import State
from tests.jobs.conftest import submit
from tests.jobs.test_loop import INSTANT

pytestmark = [pytest.mark.faults, pytest.mark.filterwarnings("ignore::RuntimeWarning")]
JUMP = timedelta(hours=6)
MAX_RUNTIME = 600
BACKOFF = 86400


@pytest.fixture
def world(tenant, inventory, cycle, django_capture_on_commit_callbacks):
    """On the a100 nodes (the project may hold one of the two): `running` runs, `waiting` waits behind it with an
    estimated start, `retrying` failed once and waits out its backoff of a day (longer than the jumps)."""
    a100 = inventory["a100"]
    running = submit(tenant, a100, devices=8, max_runtime=MAX_RUNTIME, duration=300, name="running")
    retrying = submit(tenant, inventory["h100"], devices=8, retry_limit=2, retry_backoff=BACKOFF, name="retrying",
                      labels={"sim.tidal.dev/fail-after": "0",  # a retried cause (user errors are not)
                              "sim.tidal.dev/fail-cause": "host_oom"})
    cycle()
    waiting = submit(tenant, a100, devices=8, name="waiting")
    with override_settings(TIDAL=INSTANT), django_capture_on_commit_callbacks(execute=True):
        observe_simulated()  # running starts; retrying fails its first attempt
    cycle()
    jobs = {job.name: Job.objects.get(pk=job.pk) for job in (running, waiting, retrying)}
    assert [jobs[name].state for name in ("running", "waiting", "retrying")] == [State.RUNNING, State.QUEUED,
                                                                                   State.RETRYING]
    assert jobs["waiting"].eta is not None
    return jobs


def eta(job: Job):
    return Job.objects.get(pk=job.pk).eta


def test_a_jump_forward_moves_estimates_with_the_clock(world, cycle, time_machine):
    time_machine.move_to(timezone.now() + JUMP)
    cycle()
    now = timezone.now()
    assert now - timedelta(seconds=5) <= eta(world["waiting"]) <= now + timedelta(seconds=MAX_RUNTIME)
    assert Job.objects.get(pk=world["retrying"].pk).state == State.RETRYING


def test_a_jump_back_neither_pushes_estimates_out_nor_stretches_a_backoff(world, cycle, time_machine):
    time_machine.move_to(timezone.now() - JUMP)
    cycle()
    now = timezone.now()
    assert now <= eta(world["waiting"]) <= now + timedelta(seconds=MAX_RUNTIME + 5)
    retry_at = Job.objects.get(pk=world["retrying"].pk).retry_at
    assert retry_at <= now + timedelta(seconds=BACKOFF)  # due within its backoff, not 6 h later


def test_a_jump_back_ends_no_attempt_before_it_began(world, time_machine, django_capture_on_commit_callbacks):
    time_machine.move_to(timezone.now() - JUMP)
    with django_capture_on_commit_callbacks(execute=True):
        job_cancel(actor=world["running"].submitter, job=world["running"])
    attempt = Attempt.objects.get(job=world["running"])
    assert attempt.admitted_at <= attempt.started_at <= attempt.ended_at
    assert invariants.segments_match([world["running"].pk]) == []
    assert invariants.consistent() == []
