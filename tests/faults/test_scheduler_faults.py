"""The scheduler dies in the middle of a cycle: nothing it decided is kept or dispatched, and the next leader (the
same process's next cycle, or the other scheduler on PostgreSQL) decides each job once."""

from __future__ import annotations

import threading

import pytest
from django.db import connection, connections

from chaos import invariants
from jobs import loop
from jobs.models import Attempt, Job, JobEvent
from jobs.states import State
from tests.jobs.conftest import submit

pytestmark = pytest.mark.faults


class Killed(BaseException):
    """What dies with the process: not an Exception, so nothing on the way out handles it."""


def test_a_cycle_dying_after_its_decisions_keeps_none_of_them(tenant, inventory, cycle, monkeypatch,
                                                              django_capture_on_commit_callbacks):
    jobs = [submit(tenant, inventory["h100"], name=f"j{i}", duration=60) for i in range(3)]
    queued_behind = submit(tenant, inventory["h100"], name="waits")  # beyond the project's 16 + 8 borrowed
    decided = []

    def die(*args):  # the last step of the cycle: admissions, preemptions and waits were all written
        decided.append(Job.objects.filter(state=State.ADMITTED).count())
        raise Killed()

    monkeypatch.setattr(loop, "_decay_usage", die)
    with pytest.raises(Killed), django_capture_on_commit_callbacks(execute=True) as callbacks:
        loop.run_once()
    assert decided == [3]  # it had admitted all three inside its transaction
    assert callbacks == []  # ...and queued no dispatch: that happens after commit only
    assert set(Job.objects.values_list("state", flat=True)) == {State.QUEUED}
    assert not Attempt.objects.exists()
    assert not JobEvent.objects.filter(to_state=State.ADMITTED).exists()
    assert Job.objects.get(pk=queued_behind.pk).wait_reason == ""  # the waits it explained went too

    monkeypatch.undo()
    cycle()
    expected = {job.pk: State.DISPATCHING for job in jobs} | {queued_behind.pk: State.QUEUED}
    assert invariants.settled(expected) == []
    assert Job.objects.get(pk=queued_behind.pk).wait_reason


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_the_other_scheduler_takes_over_when_the_leader_dies_mid_cycle(tenant, inventory, monkeypatch):
    """Two schedulers on PostgreSQL: while the leader is inside its cycle (holding the advisory lock, its
    admissions written), the other steps back; the leader's connection dies (what kill -9 does to its session),
    PostgreSQL rolls its transaction back and frees the lock, and the other decides every job, once."""
    if connection.vendor != "postgresql":
        pytest.skip("the leader lock is PostgreSQL's advisory lock; SQLite serializes writers instead")
    jobs = [submit(tenant, inventory["h100"], name=f"j{i}", duration=60) for i in range(3)]
    inside, release = threading.Event(), threading.Event()
    leader: dict[str, object] = {}

    def hang(*args):
        leader["pid"] = connection.connection.info.backend_pid
        inside.set()
        release.wait(10)

    def lead():
        original = loop._decay_usage
        loop._decay_usage = hang  # this thread only reaches it: the follower returns at the lock
        try:
            loop.run_once()
        except Exception as error:  # its connection was terminated under it
            leader["error"] = error
        finally:
            loop._decay_usage = original
            connections.close_all()

    thread = threading.Thread(target=lead)
    thread.start()
    assert inside.wait(10)
    monkeypatch.setattr(loop, "_process_lock", threading.Lock())  # the other scheduler is another process
    follower = threading.Thread(target=lambda: (leader.setdefault("follower", loop.run_once()),
                                                connections.close_all()))
    follower.start()
    follower.join(10)
    assert leader["follower"] is None  # the leader holds the lock: the other does not decide
    with connections["default"].cursor() as cursor:
        cursor.execute("SELECT pg_terminate_backend(%s)", [leader["pid"]])
    release.set()
    thread.join(10)
    assert "error" in leader
    assert not Attempt.objects.exists()  # the dead leader's admissions were rolled back

    result = loop.run_once()  # the survivor's next cycle
    assert result is not None and len(result.admits) == 3
    assert invariants.settled({job.pk: State.DISPATCHING for job in jobs}) == []  # dispatched after commit
