"""A dispatch task that dies midway, is delivered twice, or is lost with its worker: every attempt is claimed for
dispatch exactly once and runs."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.conf import settings
from django.utils import timezone

from chaos import invariants
from clusters import tasks
from clusters.backends import observe_simulated, simulated
from jobs.models import Job, JobEvent
from jobs.states import State
from tests.jobs.conftest import admit, submit

pytestmark = pytest.mark.faults


def claims(job: Job) -> int:
    return JobEvent.objects.filter(job=job, to_state=State.DISPATCHING).count()


@pytest.fixture
def admitted(tenant, inventory):
    """A job admitted by the scheduler whose dispatch task has not run yet (it sits in the broker)."""
    job = submit(tenant, inventory["h100"], replicas=2, duration=60)
    return admit(job, inventory["cluster"], ["r1-n1", "r1-n2"])


def test_a_dispatch_dying_midway_is_retried_and_claims_once(admitted, monkeypatch):
    real_claim = simulated.job_claim_for_dispatch

    def claim_then_die(attempt, **kwargs):
        real_claim(attempt, **kwargs)
        raise ConnectionError("worker lost its database mid-dispatch")

    monkeypatch.setattr(simulated, "job_claim_for_dispatch", claim_then_die)
    with pytest.raises(ConnectionError):
        tasks.dispatch_attempt_task(admitted.current_attempt_id)
    assert Job.objects.get(pk=admitted.pk).state == State.ADMITTED  # the claim rolled back with the task
    monkeypatch.undo()
    tasks.dispatch_attempt_task(admitted.current_attempt_id)  # acks_late: the broker delivers it again
    assert claims(admitted) == 1
    assert invariants.settled({admitted.pk: State.DISPATCHING}) == []


def test_a_dispatch_delivered_twice_claims_once(admitted):
    tasks.dispatch_attempt_task(admitted.current_attempt_id)
    tasks.dispatch_attempt_task(admitted.current_attempt_id)  # redelivered after its worker died before the ack
    assert claims(admitted) == 1
    assert invariants.settled({admitted.pk: State.DISPATCHING}) == []


def test_a_lost_dispatch_is_redone_by_the_simulated_clusters_observation(admitted, time_machine,
                                                                         django_capture_on_commit_callbacks):
    """Its worker was killed while running it (Celery acks such a task: it is gone from the broker), or Redis lost
    the queue. The periodic observation dispatches an attempt still admitted after TIDAL_REDISPATCH_AFTER."""
    with django_capture_on_commit_callbacks(execute=True):
        observe_simulated()
    assert Job.objects.get(pk=admitted.pk).state == State.ADMITTED  # not yet: its task may just be slow
    time_machine.move_to(timezone.now() + timedelta(seconds=settings.TIDAL["REDISPATCH_AFTER"] + 1))
    with django_capture_on_commit_callbacks(execute=True):
        observe_simulated()
    assert Job.objects.get(pk=admitted.pk).state == State.DISPATCHING
    tasks.dispatch_attempt_task(admitted.current_attempt_id)  # the lost task comes back after all: nothing to do
    assert claims(admitted) == 1
    assert invariants.settled({admitted.pk: State.DISPATCHING}) == []
