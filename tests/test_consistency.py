"""`manage.py check_consistency`: each inconsistency is made by hand with raw SQL (as a crash, a restore or a hand
edit would leave it), then reported, repaired with --fix through the state machine, and audited; what only a person
can resolve is reported and keeps the exit code at 1."""

from __future__ import annotations

import json
from io import StringIO

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from django.db import connection

from costs.metering.segments import epoch
from costs.models import UsageSegment
from jobs import consistency as jobs_checks
from jobs import lifecycle
from jobs.lifecycle import AttemptEnd, transition
from jobs.models import Attempt, Job, JobEvent
from jobs.states import State
from tenancy.models import AuditEntry
from tests.costs.conftest import at
from tests.jobs.conftest import admit, inventory, run, submit  # noqa: F401  (inventory: fixture)

pytestmark = pytest.mark.django_db


def sql(statement: str, *params) -> None:
    with connection.cursor() as cursor:
        cursor.execute(statement, params)


def check(*args: str) -> tuple[int, str]:
    out = StringIO()
    try:
        call_command("check_consistency", *args, stdout=out)
    except CommandError as error:
        return error.returncode, out.getvalue()
    return 0, out.getvalue()


def check_json(*args: str) -> tuple[int, dict]:
    code, out = check("--json", *args)
    return code, json.loads(out)


def found(document: dict) -> list[str]:
    return sorted(p["check"] for p in document["problems"])


def repaired(document: dict) -> list[str]:
    return sorted(r["check"] for r in document["repaired"])


@pytest.fixture
def running(tenant, inventory):  # noqa: F811
    """A job running on r1-n1 since 00:00 (its attempt and open segment), and one that finished."""
    job = run(submit(tenant, inventory["h100"]), inventory["cluster"], ["r1-n1"], now=at(0))
    done = run(submit(tenant, inventory["h100"], name="done"), inventory["cluster"], ["r1-n2"], now=at(0))
    transition(done, State.SUCCEEDED, reason="done", actor="backend", now=at(1))
    return job


def test_a_consistent_platform_passes(running):
    assert check() == (0, "consistent\n")
    assert check_json("--fix") == (0, {"consistent": True, "repaired": [], "problems": []})


def test_a_running_job_whose_attempt_ended_is_requeued_and_its_segment_closed_at_the_attempts_end(running):
    ended = at(2)
    sql("UPDATE jobs_attempt SET ended_at = %s, outcome = 'failed' WHERE id = %s", ended, running.current_attempt_id)

    code, report = check_json()
    assert code == 1
    assert found(report) == ["costs.segment_open_after_attempt", "jobs.holding_without_attempt"]
    assert all(p["fixable"] for p in report["problems"])
    assert Job.objects.get(pk=running.pk).state == State.RUNNING  # a report changes nothing

    code, report = check_json("--fix")
    assert (code, report["problems"]) == (0, [])
    assert repaired(report) == ["costs.segment_open_after_attempt", "jobs.holding_without_attempt"]
    job = Job.objects.get(pk=running.pk)
    assert job.state == State.RETRYING and job.retry_at is not None
    segment = UsageSegment.objects.get(attempt_id=running.current_attempt_id)
    assert (segment.end_ts, segment.outcome) == (epoch(ended), "failed")  # not "now", when the repair ran
    assert "requeued by check_consistency" in job.events.filter(kind="transition").last().reason
    audited = AuditEntry.objects.filter(action="consistency.jobs.holding_without_attempt").get()
    assert (audited.actor_name, audited.project_id, audited.target_id) == ("check_consistency",
                                                                           running.project_id, str(running.pk))
    assert audited.changes["repair"] == "requeued through retrying"


def test_a_lost_current_attempt_pointer_is_pointed_back_and_the_job_keeps_running(running):
    attempt = running.current_attempt_id
    sql("UPDATE jobs_job SET current_attempt_id = NULL WHERE id = %s", running.pk)

    code, report = check_json("--fix")
    assert code == 0
    assert repaired(report) == ["jobs.holding_without_attempt"]
    job = Job.objects.get(pk=running.pk)
    assert (job.state, job.current_attempt_id) == (State.RUNNING, attempt)
    assert Attempt.objects.get(pk=attempt).ended_at is None


def test_an_open_attempt_of_a_finished_job_closes_when_the_job_finished(running):
    finished = at(3)
    sql("UPDATE jobs_job SET state = 'succeeded', finished_at = %s WHERE id = %s", finished, running.pk)

    code, out = check()
    assert code == 1 and "jobs.open_attempt_of_idle_job" in out and "--fix repairs it" in out

    code, out = check("--fix")
    assert code == 0 and out.startswith("repaired jobs.open_attempt_of_idle_job")
    attempt = Attempt.objects.get(pk=running.current_attempt_id)
    assert (attempt.ended_at, attempt.outcome) == (finished, "succeeded")
    segment = UsageSegment.objects.get(attempt=attempt)
    assert (segment.end_ts, segment.outcome) == (epoch(finished), "succeeded")  # through the lifecycle listener
    note = JobEvent.objects.filter(job=running, kind="note").get()
    assert note.actor_name == "check_consistency" and "left open while the job was succeeded" in note.reason


def test_a_second_open_attempt_closes_when_the_job_left_it(tenant, inventory):  # noqa: F811
    cluster = inventory["cluster"]
    job = run(submit(tenant, inventory["h100"], retry_limit=2), cluster, ["r1-n1"], now=at(0))
    transition(job, State.RETRYING, reason="oom", actor="backend", now=at(1), end=AttemptEnd(cause="cuda_oom"),
               retry_at=at(1))
    transition(job, State.QUEUED, reason="retry", actor="system", now=at(1.5))
    job = run(job, cluster, ["r1-n2"], now=at(2))
    first = job.attempts.get(number=1)
    sql("UPDATE jobs_attempt SET ended_at = NULL, outcome = '' WHERE id = %s", first.pk)

    code, report = check_json()
    assert found(report) == ["jobs.extra_open_attempts"]
    assert check("--fix")[0] == 0
    first.refresh_from_db()
    left = job.events.get(attempt=1, to_state=State.RETRYING).created_at
    assert first.ended_at == left and first.outcome == "cancelled"  # the job is running: nothing to follow
    assert Job.objects.get(pk=job.pk).current_attempt.number == 2
    assert Attempt.objects.get(job=job, number=2).ended_at is None


def test_a_job_pointing_at_another_jobs_attempt_points_at_its_own_again(running, tenant, inventory):  # noqa: F811
    other = run(submit(tenant, inventory["h100"], name="other"), inventory["cluster"], ["r2-n1"], now=at(0))
    own = running.current_attempt_id
    sql("UPDATE jobs_job SET current_attempt_id = %s WHERE id = %s", other.current_attempt_id, running.pk)

    code, report = check_json()
    assert found(report) == ["jobs.foreign_current_attempt"]  # not also "two open attempts" or "no attempt"
    code, report = check_json("--fix")
    assert code == 0 and repaired(report) == ["jobs.foreign_current_attempt"]
    assert Job.objects.get(pk=running.pk).current_attempt_id == own
    assert Job.objects.get(pk=other.pk).current_attempt_id == other.current_attempt_id


def test_attempts_without_a_segment_get_one_from_their_admission_to_their_end(running):
    done = Job.objects.get(name="done")
    sql("DELETE FROM costs_usagesegment")

    code, report = check_json()
    assert found(report) == ["costs.attempt_without_segment"] * 2
    assert check("--fix")[0] == 0
    closed = UsageSegment.objects.get(job=done)
    assert (closed.start_ts, closed.end_ts, closed.outcome, closed.devices) == (epoch(at(0)), epoch(at(1)),
                                                                                 "succeeded", 8)
    open_ = UsageSegment.objects.get(job=running)
    assert (open_.start_ts, open_.end_ts, open_.attempt_id) == (epoch(at(0)), None, running.current_attempt_id)


def test_a_segment_closed_under_an_open_attempt_opens_again_unless_rolled(running, tenant, inventory):  # noqa: F811
    rolled = run(submit(tenant, inventory["h100"], name="rolled"), inventory["cluster"], ["r2-n1"], now=at(0))
    sql("UPDATE costs_usagesegment SET end_ts = %s, outcome = 'failed' WHERE attempt_id IN (%s, %s)",
        epoch(at(1)), running.current_attempt_id, rolled.current_attempt_id)
    sql("UPDATE costs_usagesegment SET rolled = %s WHERE attempt_id = %s", True, rolled.current_attempt_id)

    code, report = check_json("--fix")
    assert code == 1  # the rolled one needs a person
    assert repaired(report) == ["costs.segment_closed_while_attempt_open"]
    assert [(p["check"], p["fixable"]) for p in report["problems"]] == [
        ("costs.segment_closed_while_attempt_open", False)]
    assert "already rolled" in report["problems"][0]["problem"]
    assert UsageSegment.objects.get(attempt_id=running.current_attempt_id).end_ts is None
    assert UsageSegment.objects.get(attempt_id=rolled.current_attempt_id).end_ts == epoch(at(1))


def test_a_segment_counting_other_devices_than_its_placement_is_corrected(running):
    sql("UPDATE costs_usagesegment SET devices = 3 WHERE attempt_id = %s", running.current_attempt_id)

    code, out = check()
    assert code == 1 and "counts 3 devices, its attempt placed 8" in out
    assert check("--fix")[0] == 0
    assert UsageSegment.objects.get(attempt_id=running.current_attempt_id).devices == 8


def test_an_open_segment_whose_attempt_is_gone_is_closed(running):
    sql("UPDATE costs_usagesegment SET attempt_id = NULL, job_id = NULL WHERE attempt_id = %s",
        running.current_attempt_id)

    code, report = check_json("--fix")
    assert code == 0
    assert repaired(report) == ["costs.attempt_without_segment", "costs.open_segment_without_attempt"]
    orphan = UsageSegment.objects.get(attempt__isnull=True, job__isnull=True)
    assert orphan.end_ts is not None
    assert UsageSegment.objects.get(attempt_id=running.current_attempt_id).end_ts is None


def test_an_attempt_on_a_deleted_node_is_lost_and_retried_away_from_it(tenant, inventory):  # noqa: F811
    job = run(submit(tenant, inventory["h100"], retry_limit=1, replicas=2), inventory["cluster"],
              ["r1-n1", "r1-n2"], now=at(0))
    sql("DELETE FROM clusters_node WHERE name = 'r1-n2'")

    code, out = check()
    assert code == 1 and "nodes r1-n2 of cluster sim no longer exist" in out
    code, report = check_json("--fix")
    assert code == 0 and repaired(report) == ["clusters.attempt_on_missing_nodes"]
    job = Job.objects.get(pk=job.pk)
    attempt = job.current_attempt
    assert (job.state, job.avoid_nodes) == (State.RETRYING, ["sim/r1-n2"])
    assert (attempt.outcome, attempt.cause) == ("lost", "node_lost")
    assert UsageSegment.objects.get(attempt=attempt).end_ts is not None


def test_an_attempt_on_a_deleted_cluster_fails_its_job_past_the_retry_limit(running, settings):
    """A lost node is the platform's failure: its retry does not use the job's retry limit (0 here) but the
    platform's (TIDAL_INFRA_RETRY_LIMIT), which is 0 here too."""
    settings.TIDAL = {**settings.TIDAL, "INFRA_RETRY_LIMIT": 0}
    sql("UPDATE jobs_attempt SET cluster_id = NULL WHERE id = %s", running.current_attempt_id)

    code, out = check("--fix")
    assert code == 0 and "its cluster no longer exists" in out
    job = Job.objects.get(pk=running.pk)
    assert job.state == State.FAILED
    assert "infrastructure retry limit 0 reached" in job.events.filter(kind="transition").last().reason


def test_quota_over_its_limit_is_reported_never_repaired(running, tenant):
    sql("UPDATE quotas_quota SET guaranteed = 0, borrow_limit = 4 WHERE project_id = %s", tenant.project.pk)

    code, report = check_json("--fix")
    assert code == 1 and report["repaired"] == []
    assert report["problems"] == [{"check": "quotas.over_limit", "fixable": False, "problem":
                                   "project vision holds 8 nvidia-h100-80gb devices, over its guarantee 0 + "
                                   "borrow limit 4"}]
    assert Job.objects.get(pk=running.pk).state == State.RUNNING


def test_a_repair_of_a_row_that_moved_since_the_check_leaves_it_alone(running):
    sql("UPDATE jobs_job SET state = 'cancelled', finished_at = %s WHERE id = %s", at(3), running.pk)
    [problem] = jobs_checks.open_attempt_of_idle_job()
    attempt = Attempt.objects.select_related("job").get(pk=running.current_attempt_id)
    lifecycle.close_orphan_attempt(attempt, ended_at=at(2), reason="closed first", actor="someone")

    assert problem.fix() == "already closed"
    assert Attempt.objects.get(pk=attempt.pk).ended_at == at(2)


def test_repointing_refuses_another_jobs_attempt(running, tenant, inventory):  # noqa: F811
    other = run(submit(tenant, inventory["h100"], name="other"), inventory["cluster"], ["r2-n1"], now=at(0))
    with pytest.raises(ValueError, match="belongs to job"):
        lifecycle.repoint_current_attempt(running, other.current_attempt, reason="x", actor="x")
    assert Job.objects.get(pk=running.pk).current_attempt_id == running.current_attempt_id
