"""The checks run after every fault find what they are there to find: each is shown a broken row and names it."""

from __future__ import annotations

import pytest
from django.utils import timezone

from chaos import invariants
from costs.models import UsageSegment
from jobs.models import Attempt, JobEvent
from jobs.states import State
from tests.jobs.conftest import run, submit
from tracking.services import run_create, run_log_batch

pytestmark = pytest.mark.faults


@pytest.fixture
def running(tenant, inventory):
    return run(submit(tenant, inventory["h100"]), inventory["cluster"], ["r1-n1"])


def test_a_healthy_job_passes_every_check(running):
    assert invariants.settled({running.pk: State.RUNNING}) == []


def test_a_job_in_another_state_is_named(running):
    assert invariants.job_states({running.pk: State.SUCCEEDED}) == [
        f"job {running.pk} is running, expected succeeded"]


def test_a_second_claim_or_admission_is_found(running):
    JobEvent.objects.create(job=running, attempt=1, created_at=timezone.now(), kind="transition",
                            from_state=State.ADMITTED, to_state=State.DISPATCHING, reason="again", actor_name="x")
    JobEvent.objects.create(job=running, attempt=1, created_at=timezone.now(), kind="transition",
                            from_state=State.QUEUED, to_state=State.ADMITTED, reason="again", actor_name="x")
    assert invariants.ran_once([running.pk]) == [
        f"job {running.pk} attempt 1 entered admitted 2 times",
        f"job {running.pk} attempt 1 entered dispatching 2 times",
        f"job {running.pk} has 1 attempts for 2 admissions"]


def test_a_node_or_project_over_its_limit_is_found(running, tenant, inventory):
    Attempt.objects.filter(job=running).update(placement=[{"role": "worker", "index": 0, "node": "r1-n1",
                                                           "devices": 9}])
    other = run(submit(tenant, inventory["h100"], name="b", replicas=2), inventory["cluster"], ["r1-n2", "r2-n1"])
    third = run(submit(tenant, inventory["h100"], name="c"), inventory["cluster"], ["r2-n2"])
    assert other and third  # 8 + 16 + 8 = 32 h100 for vision's 16 + 8 borrowed
    problems = invariants.within_quotas()
    assert "node r1-n1 holds 9 devices of 8" in problems
    assert any(p.startswith(f"project {tenant.project.pk} holds 32 devices") for p in problems)


def test_a_lost_or_stretched_segment_is_found(running):
    UsageSegment.objects.filter(job=running).update(start_ts=0)
    assert invariants.segments_match([running.pk])[0].startswith(f"job {running.pk} attempt 1: segment [0, None)")
    UsageSegment.objects.filter(job=running).delete()
    assert invariants.segments_match([running.pk]) == [f"job {running.pk} attempt 1 has no usage segment"]
    assert invariants.consistent()[0].startswith("check_consistency: costs.attempt_without_segment")


def test_an_acknowledged_point_missing_is_found(tenant):
    logged = run_create(project=tenant.project, name="r")
    run_log_batch(run_id=logged.pk, metrics=[{"key": "loss", "value": 1.0, "step": 1}])
    assert invariants.points_kept([(logged.pk, "loss", 1, 1)]) == []
    assert invariants.points_kept([(logged.pk, "loss", 2, 1)]) == [
        f"run {logged.pk}: 1 acknowledged points missing, e.g. ('loss', 2, 1)"]
