"""The state machine: legal paths, illegal ones raise, cancel works from every non-final state."""

import pytest

from core.errors import InvalidTransition
from jobs.services import job_cancel, transition
from jobs.states import FINAL, TRANSITIONS, State
from tests.jobs.conftest import submit

PATH_TO = {
    State.QUEUED: [],
    State.ADMITTED: [State.ADMITTED],
    State.DISPATCHING: [State.ADMITTED, State.DISPATCHING],
    State.RUNNING: [State.ADMITTED, State.DISPATCHING, State.RUNNING],
    State.PREEMPTED: [State.ADMITTED, State.DISPATCHING, State.RUNNING, State.PREEMPTED],
    State.RETRYING: [State.ADMITTED, State.DISPATCHING, State.RUNNING, State.RETRYING],
}


def walk(job, states):
    for state in states:
        transition(job, state, reason="test", actor="system")
    return job


@pytest.mark.parametrize("state", list(PATH_TO))
def test_cancel_from_every_non_final_state(tenant, inventory, state):
    job = walk(submit(tenant, inventory["a100"], devices=1), PATH_TO[state])
    job_cancel(actor=tenant.users["member"], job=job)
    job.refresh_from_db()
    assert job.state == State.CANCELLED and job.finished_at is not None
    assert [e.to_state for e in job.events.all()][-1] == State.CANCELLED


@pytest.mark.parametrize("source", list(State))
def test_illegal_transitions_raise(tenant, inventory, source):
    job = submit(tenant, inventory["a100"], devices=1)
    job.state = source
    for target in set(State) - TRANSITIONS[source]:
        with pytest.raises(InvalidTransition):
            transition(job, target, reason="x", actor="system")


def test_final_states_have_no_way_out():
    assert all(TRANSITIONS[state] == frozenset() for state in FINAL)


def test_a_stale_writer_loses(tenant, inventory):
    """Two writers read the job as queued; the second conditional UPDATE must fail instead of overwriting."""
    job = submit(tenant, inventory["a100"], devices=1)
    stale = type(job).objects.get(pk=job.pk)
    transition(job, State.CANCELLED, reason="first", actor="system")
    with pytest.raises(InvalidTransition):
        transition(stale, State.ADMITTED, reason="second", actor="scheduler")
    job.refresh_from_db()
    assert job.state == State.CANCELLED and job.events.count() == 2
