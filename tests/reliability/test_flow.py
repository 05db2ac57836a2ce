"""Diagnoses follow the state machine: every attempt that ends other than succeeded gets one; its cause decides the
retry (user errors not retried, infrastructure retries not counted); hardware faults quarantine nodes, which the
scheduler then avoids and names in wait reasons until staff release them."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.conf import settings
from django.test import override_settings
from django.utils import timezone

from clusters.backends import inventory as node_inventory
from clusters.backends import observe_simulated
from clusters.models import Node
from jobs.models import Attempt, Job
from jobs.services import job_cancel
from jobs.states import State
from reliability.models import Diagnosis, NodeFault
from reliability.services import node_release
from tests.jobs.conftest import submit

INSTANT = {**settings.TIDAL, "SIM_START_DELAY": 0.0}


def fail_first_attempt(job, cycle):
    """Admit, run and fail (as its labels inject) the job's first attempt."""
    cycle()
    observe_simulated()
    past = timezone.now() - timedelta(seconds=5)
    Attempt.objects.filter(job_id=job.pk, ended_at__isnull=True).update(started_at=past, admitted_at=past)
    observe_simulated()
    return Job.objects.get(pk=job.pk)


def failing(tenant, flavor, cause, **kwargs):
    return submit(tenant, flavor, labels={"sim.tidal.dev/fail-after": "1", "sim.tidal.dev/fail-cause": cause},
                  duration=600, **kwargs)


@override_settings(TIDAL=INSTANT)
def test_a_user_error_is_diagnosed_with_its_traceback_and_not_retried(tenant, inventory, cycle):
    job = fail_first_attempt(failing(tenant, inventory["a100"], "user_error", devices=1, retry_limit=3), cycle)
    assert job.state == State.FAILED  # within its retry limit, yet not retried: the code will fail again
    diagnosis = Diagnosis.objects.get(attempt=job.current_attempt)
    assert (diagnosis.cause, diagnosis.kind, diagnosis.action) == ("user_error", "user", "fix_code")
    assert "KeyError: 'input_ids'" in diagnosis.summary
    lines = [item for item in diagnosis.evidence if item["source"] == "log"]
    assert {k: lines[0][k] for k in ("replica", "line")} == {"replica": "worker-0", "line": 7}
    event = job.events.get(kind="diagnosis")
    assert event.attempt == 1 and "KeyError" in event.reason and event.details["cause"] == "user_error"
    assert "not retried: a user error" in job.events.get(to_state=State.FAILED).reason


@override_settings(TIDAL=INSTANT)
def test_an_infrastructure_failure_retries_without_using_the_jobs_retries(tenant, inventory, cycle):
    job = fail_first_attempt(failing(tenant, inventory["a100"], "nccl_timeout", devices=1, retry_limit=0), cycle)
    assert job.state == State.RETRYING  # retry limit 0, retried all the same: the platform's failure
    assert job.events.get(to_state=State.RETRYING).details["counted"] is False
    assert "not counted against the job's retry limit" in job.events.get(to_state=State.RETRYING).reason
    from jobs.observations import failed_attempts, infrastructure_failures
    assert (failed_attempts(job), infrastructure_failures(job)) == (0, 1)
    assert Diagnosis.objects.get(attempt=job.current_attempt).cause == "nccl_timeout"


@override_settings(TIDAL={**INSTANT, "INFRA_RETRY_LIMIT": 0})
def test_the_platform_bounds_infrastructure_retries(tenant, inventory, cycle):
    job = fail_first_attempt(failing(tenant, inventory["a100"], "nccl_timeout", devices=1, retry_limit=5), cycle)
    assert job.state == State.FAILED
    assert "infrastructure retry limit 0 reached" in job.events.get(to_state=State.FAILED).reason


@override_settings(TIDAL=INSTANT)
def test_a_counted_failure_still_uses_the_retry_limit(tenant, inventory, cycle):
    job = fail_first_attempt(failing(tenant, inventory["a100"], "cuda_oom", devices=1, retry_limit=0), cycle)
    assert job.state == State.FAILED and "retry limit 0 reached" in job.events.get(to_state=State.FAILED).reason


@override_settings(TIDAL=INSTANT)
def test_xid_79_quarantines_the_node_and_the_retry_goes_elsewhere(tenant, inventory, cycle):
    job = fail_first_attempt(failing(tenant, inventory["a100"], "xid_bus", devices=8, retry_limit=0), cycle)
    bad = job.current_attempt.placement[0]["node"]
    assert job.state == State.RETRYING and f"sim/{bad}" in job.avoid_nodes
    diagnosis = Diagnosis.objects.get(attempt=job.current_attempt)
    assert (diagnosis.cause, diagnosis.quarantined, diagnosis.nodes) == ("xid_bus", [bad], [bad])
    assert any(item["source"] == "log" and "Watchdog caught" in item["text"] for item in diagnosis.evidence)
    node = Node.objects.get(name=bad)
    assert node.quarantined_at is not None
    assert node.quarantine_reason.startswith("GPU fallen off the bus (Xid 79): Xid 79 on ")
    assert "Watchdog" not in node.quarantine_reason  # every user sees it: no line of the tenant's log
    [seen] = [n for n in node_inventory().nodes if n.name == f"sim/{bad}"]
    assert not seen.schedulable and seen.unavailable == f"quarantined ({bad})"
    # A job that does not avoid the node (a new one) is not placed there either.
    other = submit(tenant, inventory["a100"], devices=8, duration=600)
    cycle()
    assert Job.objects.get(pk=other.pk).current_attempt.placement[0]["node"] != bad


@override_settings(TIDAL=INSTANT)
def test_the_wait_reason_names_the_quarantined_node_and_release_frees_it(tenant, inventory, cycle):
    node = Node.objects.get(name="a-n1")
    Node.objects.filter(name="a-n2").update(cordoned=True)
    from reliability.services import node_quarantine
    assert node_quarantine(node, reason="Xid 79 on GPU 3", actor="test")
    job = submit(tenant, inventory["a100"], devices=8, duration=600)
    cycle()
    job = Job.objects.get(pk=job.pk)
    assert job.state == State.QUEUED and job.wait_code == "unavailable"
    assert "quarantined (a-n1)" in job.wait_reason
    assert node_release(Node.objects.get(pk=node.pk), actor=tenant.users["owner"])
    cycle()
    assert Job.objects.get(pk=job.pk).current_attempt.placement[0]["node"] == "a-n1"


@override_settings(TIDAL=INSTANT)
def test_two_counted_hardware_failures_in_the_window_quarantine_a_node(tenant, inventory, cycle):
    Node.objects.filter(name="a-n2").update(cordoned=True)  # both attempts land on a-n1
    first = fail_first_attempt(failing(tenant, inventory["a100"], "xid_nvlink", devices=8), cycle)
    assert Diagnosis.objects.get(attempt=first.current_attempt).cause == "xid_nvlink"
    assert Node.objects.get(name="a-n1").quarantined_at is None  # one NVLink error: counted, not yet
    Job.objects.filter(pk=first.pk).update(state=State.CANCELLED)  # out of the way
    second = fail_first_attempt(failing(tenant, inventory["a100"], "xid_nvlink", devices=8), cycle)
    node = Node.objects.get(name="a-n1")
    assert node.quarantined_at is not None and node.quarantine_reason.startswith("2 hardware-class failures")
    assert Diagnosis.objects.get(attempt=second.current_attempt).quarantined == ["a-n1"]
    node_release(node, actor=tenant.users["owner"])
    assert not NodeFault.objects.filter(node=node, released=False).exists()  # a fresh count after a release


@override_settings(TIDAL={**INSTANT, "QUARANTINE_ENABLED": False})
def test_quarantine_can_be_switched_off(tenant, inventory, cycle):
    job = fail_first_attempt(failing(tenant, inventory["a100"], "xid_memory", devices=8), cycle)
    assert Diagnosis.objects.get(attempt=job.current_attempt).cause == "xid_memory"
    assert not Node.objects.filter(quarantined_at__isnull=False).exists()


@override_settings(TIDAL=INSTANT)
def test_a_cancelled_attempt_is_diagnosed_without_an_extra_event(tenant, inventory, cycle):
    job = submit(tenant, inventory["a100"], devices=1, duration=600)
    cycle()
    job_cancel(actor=tenant.users["member"], job=Job.objects.get(pk=job.pk))
    job = Job.objects.get(pk=job.pk)
    assert Diagnosis.objects.get(attempt=job.current_attempt).cause == "cancelled"
    assert not job.events.filter(kind="diagnosis").exists()


@override_settings(TIDAL=INSTANT)
def test_a_succeeded_attempt_has_no_diagnosis(tenant, inventory, cycle):
    job = submit(tenant, inventory["a100"], devices=1, duration=1)
    cycle()
    observe_simulated()
    Attempt.objects.filter(job_id=job.pk).update(started_at=timezone.now() - timedelta(seconds=5))
    observe_simulated()
    assert Job.objects.get(pk=job.pk).state == State.SUCCEEDED
    assert not Diagnosis.objects.exists()


@pytest.mark.parametrize("cause, expected", [("cuda_oom", "cuda_oom"), ("nccl", "nccl"), ("loss_nan", "loss_nan"),
                                             ("data_error", "data_error"), ("xid_memory", "xid_memory")])
@override_settings(TIDAL=INSTANT)
def test_each_simulated_failure_is_diagnosed_as_injected(tenant, inventory, cycle, cause, expected):
    job = fail_first_attempt(failing(tenant, inventory["a100"], cause, devices=1, retry_limit=1), cycle)
    assert Diagnosis.objects.get(attempt=job.current_attempt).cause == expected
    assert job.current_attempt.cause == expected


@override_settings(TIDAL=INSTANT)
def test_a_retry_avoids_a_node_another_jobs_failure_quarantined(tenant, inventory, cycle):
    """Job A's GPU falls off the bus on its node (quarantined); job B fails on another node with an NCCL timeout:
    B's retry avoids its own node (avoid_nodes) and the quarantined one (the inventory)."""
    a = fail_first_attempt(failing(tenant, inventory["h100"], "xid_bus", devices=8, retry_backoff=0), cycle)
    quarantined = a.current_attempt.placement[0]["node"]
    Job.objects.filter(pk=a.pk).update(state=State.CANCELLED)  # out of the way
    b = fail_first_attempt(failing(tenant, inventory["h100"], "nccl_timeout", devices=8, retry_backoff=0), cycle)
    own = b.current_attempt.placement[0]["node"]
    assert b.state == State.RETRYING and own != quarantined and b.avoid_nodes == [f"sim/{own}"]
    cycle()  # requeues the due retry and admits it
    b = Job.objects.get(pk=b.pk)
    assert b.attempt == 2 and b.state == State.DISPATCHING
    assert b.current_attempt.placement[0]["node"] not in {own, quarantined}


@override_settings(TIDAL=INSTANT)
def test_a_diagnosis_that_fails_does_not_stop_the_attempt_ending(tenant, inventory, cycle, monkeypatch):
    from reliability import rules

    def broken(*args, **kwargs):
        raise RuntimeError("a bug in a rule")

    monkeypatch.setattr(rules, "diagnose", broken)
    job = fail_first_attempt(failing(tenant, inventory["a100"], "host_oom", devices=1, retry_limit=1), cycle)
    assert job.state == State.RETRYING and job.current_attempt.cause == "host_oom"  # the backend's cause stands
    assert not Diagnosis.objects.exists()
