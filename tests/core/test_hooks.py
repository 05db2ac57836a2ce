"""core.hooks: the one way apps connect to what apps below them call (the job state machine, the dispatch port...),
each in its AppConfig.ready(); the system check fails while the dispatch port has no backend."""

from __future__ import annotations

import io

import pytest
from django.core.checks import Error, run_checks
from django.core.management import call_command

from core.hooks import Hook, declared
from jobs import lifecycle, ports


@pytest.fixture
def hook_names():
    """Hooks a test declares are forgotten after it, so another test may declare the same name."""
    from core import hooks

    before = dict(hooks._declared)
    yield
    hooks._declared.clear()
    hooks._declared.update(before)


def test_receivers_are_called_in_the_order_they_connected_and_once(hook_names) -> None:
    hook: Hook = Hook("test.calls")
    calls: list[str] = []
    first = hook.connect(lambda who: calls.append(f"first {who}") or 1)
    hook.connect(lambda who: calls.append(f"second {who}") or 2)
    hook.connect(first)  # again: nothing changes
    assert hook.send("x") == [1, 2] and calls == ["first x", "second x"]
    hook.disconnect(first)
    assert len(hook.receivers) == 1


def test_a_single_hook_keeps_the_last_receiver_and_names_itself_when_empty(hook_names) -> None:
    hook: Hook[str] = Hook("test.single", single=True)
    with pytest.raises(LookupError, match="test.single"):
        hook.one()
    hook.connect("a")
    hook.connect("b")
    assert hook.one() == "b" and hook.receivers == ("b",)


def test_a_hook_is_declared_once_and_replaced_receivers_come_back(hook_names) -> None:
    hook: Hook[str] = Hook("test.replaced")
    hook.connect("kept")
    with pytest.raises(ValueError, match="declared twice"):
        Hook("test.replaced")
    with hook.replaced(["instead"]):
        assert list(hook) == ["instead"]
    assert list(hook) == ["kept"]


def test_the_apps_follow_the_state_machine_and_fill_the_dispatch_port_in_ready() -> None:
    from costs.metering.segments import follow_attempts
    from reliability.services import follow_attempts as diagnose_ended
    from tracking.listeners import follow_jobs

    # runs first, then their segments, then the diagnoses of the attempts that ended
    assert lifecycle.on_change.receivers == (follow_jobs, follow_attempts, diagnose_ended)
    assert ports.clusters.one().queue_dispatch.__module__ == "clusters.tasks"
    assert ports.clusters in declared()


def test_the_system_check_fails_while_the_dispatch_port_has_no_backend() -> None:
    assert [m for m in run_checks() if m.id == "core.E001"] == []
    with ports.clusters.replaced([]):
        errors = [m for m in run_checks() if m.id == "core.E001"]
    assert len(errors) == 1 and isinstance(errors[0], Error) and "jobs.ports.clusters" in errors[0].msg


def test_manage_py_hooks_lists_who_follows_the_state_machine() -> None:
    out = io.StringIO()
    call_command("hooks", stdout=out)
    listed = out.getvalue()
    assert ("jobs.lifecycle.on_change\n  tracking.listeners.follow_jobs\n  costs.metering.segments.follow_attempts\n"
            in listed)
    assert "jobs.ports.clusters (single, required)\n  Clusters(backend_for=backend_for_attempt" in listed
