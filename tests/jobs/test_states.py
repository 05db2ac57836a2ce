"""The state machine (`jobs.lifecycle`): legal paths, illegal ones raise, cancel works from every non-final state,
attempts open, start and end with the transitions, and listeners run inside the transaction or after commit."""

import pytest
from django.db import transaction
from django.utils import timezone

from core.errors import InvalidTransition
from jobs import lifecycle
from jobs.lifecycle import Admission, AttemptEnd, transition, transition_many
from jobs.models import Attempt, Job, Outcome
from jobs.services import job_cancel
from jobs.states import FINAL, TRANSITIONS, State
from tests.jobs.conftest import admit, submit

PATH_TO = {
    State.QUEUED: [],
    State.ADMITTED: [State.ADMITTED],
    State.DISPATCHING: [State.ADMITTED, State.DISPATCHING],
    State.RUNNING: [State.ADMITTED, State.DISPATCHING, State.RUNNING],
    State.PREEMPTED: [State.ADMITTED, State.DISPATCHING, State.RUNNING, State.PREEMPTED],
    State.RETRYING: [State.ADMITTED, State.DISPATCHING, State.RUNNING, State.RETRYING],
}


def walk(job, states, cluster):
    for state in states:
        if state == State.ADMITTED:
            job = admit(job, cluster, ["a-n1"])
        else:
            transition(job, state, reason="test", actor="system")
    return job


@pytest.mark.parametrize("state", list(PATH_TO))
def test_cancel_from_every_non_final_state(tenant, inventory, state):
    job = walk(submit(tenant, inventory["a100"], devices=1), PATH_TO[state], inventory["cluster"])
    held = state in (State.ADMITTED, State.DISPATCHING, State.RUNNING)
    job_cancel(actor=tenant.users["member"], job=job)
    job.refresh_from_db()
    assert job.state == State.CANCELLED and job.finished_at is not None
    assert [e.to_state for e in job.events.all()][-1] == State.CANCELLED
    if held:  # cancelling a job that holds capacity ends its attempt as cancelled
        assert job.current_attempt.outcome == Outcome.CANCELLED and job.current_attempt.ended_at is not None


@pytest.mark.parametrize("source", list(State))
def test_illegal_transitions_raise(tenant, inventory, source):
    job = submit(tenant, inventory["a100"], devices=1)
    job.state = source
    for target in set(State) - TRANSITIONS[source]:
        with pytest.raises(InvalidTransition):
            transition(job, target, reason="x", actor="system")


def test_admission_needs_a_placement(tenant, inventory):
    job = submit(tenant, inventory["a100"], devices=1)
    with pytest.raises(InvalidTransition):
        transition(job, State.ADMITTED, reason="no placement", actor="scheduler")
    job.refresh_from_db()
    assert job.state == State.QUEUED and not job.attempts.exists()


def test_final_states_have_no_way_out():
    assert all(TRANSITIONS[state] == frozenset() for state in FINAL)


def test_a_stale_writer_loses(tenant, inventory):
    """Two writers read the job as queued; the second conditional UPDATE must fail instead of overwriting."""
    job = submit(tenant, inventory["a100"], devices=1)
    stale = Job.objects.get(pk=job.pk)
    transition(job, State.CANCELLED, reason="first", actor="system")
    with pytest.raises(InvalidTransition):
        transition(stale, State.DISPATCHING, reason="second", actor="backend")
    job.refresh_from_db()
    assert job.state == State.CANCELLED and job.events.count() == 2


def test_bulk_admission_skips_jobs_no_longer_queued(tenant, inventory):
    kept, cancelled = (submit(tenant, inventory["a100"], devices=1, name=n) for n in ("kept", "gone"))
    transition(cancelled, State.CANCELLED, reason="user", actor="system")
    placement = [{"role": "worker", "index": 0, "node": "a-n1", "devices": 1}]
    admitted = transition_many([Admission(kept.pk, inventory["cluster"].pk, placement),
                                Admission(cancelled.pk, inventory["cluster"].pk, placement)], now=timezone.now())
    assert admitted == [kept.pk]
    assert Attempt.objects.filter(job=cancelled).count() == 0
    kept.refresh_from_db()
    assert kept.state == State.ADMITTED and kept.current_attempt.placement == placement


def test_an_attempt_lives_from_admission_to_its_end_and_the_next_one_is_counted(tenant, inventory):
    job = submit(tenant, inventory["a100"], devices=8)
    job = admit(job, inventory["cluster"], ["a-n1"])
    first = job.current_attempt
    assert (first.number, first.cluster, first.placement[0]["node"]) == (1, inventory["cluster"], "a-n1")
    assert first.admitted_at is not None and first.started_at is None and first.ended_at is None
    transition(job, State.DISPATCHING, reason="test", actor="backend")
    transition(job, State.RUNNING, reason="test", actor="backend")
    first.refresh_from_db()
    assert first.started_at is not None
    transition(job, State.PREEMPTED, reason="for job 9", actor="scheduler")
    transition(job, State.QUEUED, reason="requeued", actor="scheduler")
    first.refresh_from_db()
    job.refresh_from_db()
    assert first.outcome == Outcome.PREEMPTED and first.reason == "for job 9" and first.ended_at is not None
    # Queued again: no current attempt (no times to show) and the next one is number 2.
    assert job.current_attempt is None and job.attempt == 2
    job = admit(job, inventory["cluster"], ["a-n2"])
    assert job.current_attempt.number == 2 and job.current_attempt.placement[0]["node"] == "a-n2"
    assert list(job.attempts.values_list("number", "outcome")) == [(1, Outcome.PREEMPTED), (2, "")]
    assert [e.attempt for e in job.events.all()] == [1, 1, 1, 1, 1, 2, 2]


def test_a_failed_attempt_keeps_its_cause_details_and_logs(tenant, inventory):
    job = admit(submit(tenant, inventory["a100"], devices=8), inventory["cluster"], ["a-n1"])
    transition(job, State.DISPATCHING, reason="test", actor="backend")
    transition(job, State.FAILED, reason="OOM", actor="backend",
               end=AttemptEnd(cause="host_oom", exit_code=137, details={"node": "a-n1", "rack": "r3"},
                              logs={"worker-0": ["Killed"]}))
    attempt = Attempt.objects.get(job=job)
    assert (attempt.outcome, attempt.cause, attempt.exit_code) == (Outcome.FAILED, "host_oom", 137)
    assert attempt.details["rack"] == "r3" and attempt.logs == {"worker-0": ["Killed"]}


def test_listeners_run_in_the_transaction_and_after_commit(tenant, inventory, django_capture_on_commit_callbacks):
    inside, after = [], []
    with (lifecycle.on_change.replaced([lambda changes: inside.extend(changes)]),
          lifecycle.after_commit.replaced([lambda changes: after.extend(changes)]),
          django_capture_on_commit_callbacks(execute=True)):
        job = admit(submit(tenant, inventory["a100"], devices=8), inventory["cluster"], ["a-n1"])
        assert [c.target for c in inside] == [State.QUEUED, State.ADMITTED] and after == []
    # After commit: the submission, the admission, and the simulated cluster's dispatch claim it caused.
    assert [c.target for c in after] == [State.QUEUED, State.ADMITTED, State.DISPATCHING]
    admission = after[1]
    assert admission.attempt_id == job.current_attempt_id and admission.attempt == 1 and admission.outcome == ""
    assert admission.source == State.QUEUED and admission.actor == "scheduler"


def test_a_rolled_back_transition_tells_no_after_commit_listener(tenant, inventory):
    after = []
    job = submit(tenant, inventory["a100"], devices=1)
    with (lifecycle.after_commit.replaced([lambda changes: after.extend(changes)]), pytest.raises(RuntimeError),
          transaction.atomic()):
        transition(job, State.CANCELLED, reason="x", actor="system")
        raise RuntimeError("a fault in the middle")
    assert Job.objects.get(pk=job.pk).state == State.QUEUED and after == []


def test_side_effects_wait_for_commit(tenant, inventory, django_capture_on_commit_callbacks, monkeypatch):
    """Dispatch of an admitted attempt, stop of an ended one and the scheduler's wake-up happen after commit."""
    calls = []
    monkeypatch.setattr(lifecycle.ports, "dispatch", lambda attempt_id: calls.append(("dispatch", attempt_id)))
    monkeypatch.setattr(lifecycle.ports, "stop", lambda attempt_id, reason: calls.append(("stop", attempt_id, reason)))
    monkeypatch.setattr(lifecycle.wakeup, "wake_scheduler", lambda: calls.append(("wake",)))
    job = submit(tenant, inventory["a100"], devices=8)
    with django_capture_on_commit_callbacks(execute=True):
        job = admit(job, inventory["cluster"], ["a-n1"])
        transition(job, State.CANCELLED, reason="user", actor="system")
        assert calls == []
    attempt = job.current_attempt_id
    assert calls == [("dispatch", attempt), ("stop", attempt, Outcome.CANCELLED), ("wake",)]
