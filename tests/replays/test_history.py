"""The what-if's input: finished jobs as they ran, and the jobs waiting and running now with an estimated
runtime (declared `duration`, else max runtime; a running job at least as long as it has run so far)."""

from __future__ import annotations

import csv
import io
from collections import Counter
from datetime import UTC, datetime, timedelta

import pytest
from django.utils import timezone

from replays import services
from replays.history import history_records
from tests.replays.conftest import make_active_job

NOW = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)
SINCE = NOW - timedelta(days=7)


def row(state: str, *, submitted: datetime, started: datetime | None = None, finished: datetime | None = None,
        current_start: datetime | None = None, duration: int | None = None, max_runtime: int | None = None) -> dict:
    return {"id": 1, "state": state, "submitted_at": submitted, "started_at": started, "finished_at": finished,
            "current_attempt__started_at": current_start, "duration": duration, "max_runtime": max_runtime,
            "total_devices": 8, "groups": [(1, 8)], "flavor__name": "gpu", "project__slug": "vision",
            "priority_class__name": "normal", "submitter_name": "alice"}


def runtime(r: dict, counts: Counter | None = None) -> float | None:
    records = history_records([r], Counter() if counts is None else counts, now=NOW, since=SINCE)
    if not records:
        return None
    (rec,) = records
    return (rec.end - rec.start).total_seconds()


def test_a_finished_job_runs_as_it_ran():
    r = row("succeeded", submitted=NOW - timedelta(hours=3), started=NOW - timedelta(hours=2),
            finished=NOW - timedelta(hours=1), duration=99999)
    (rec,) = history_records([r], Counter(), now=NOW, since=SINCE)
    assert rec.submit == r["submitted_at"] and (rec.start, rec.end) == (r["started_at"], r["finished_at"])


@pytest.mark.parametrize("declared, expected", [
    ({"duration": 3600, "max_runtime": 7200}, 3600),  # the simulated backend runs exactly `duration`
    ({"max_runtime": 7200}, 7200),  # else the declared limit, as the scheduler's ETAs assume
    ({"duration": 600, "max_runtime": 7200}, 1200),  # never less than it has run so far (20 min)
    ({}, 1200),  # nothing declared: what it ran so far, a lower bound
])
def test_a_running_job_runs_its_estimate_and_at_least_its_time_so_far(declared, expected):
    counts: Counter = Counter()
    r = row("running", submitted=NOW - timedelta(hours=1), started=NOW - timedelta(minutes=50),
            current_start=NOW - timedelta(minutes=20), **declared)  # an earlier attempt was preempted
    assert runtime(r, counts) == expected
    assert counts["running"] == 1 and counts["running_time_so_far"] == (0 if declared else 1)


def test_an_admitted_job_not_started_yet_runs_its_estimate():
    assert runtime(row("dispatching", submitted=NOW - timedelta(minutes=1), max_runtime=900)) == 900


@pytest.mark.parametrize("state", ["queued", "preempted", "retrying"])
def test_a_waiting_job_runs_its_estimate_from_its_submission(state):
    counts: Counter = Counter()
    r = row(state, submitted=NOW - timedelta(hours=2), duration=1800, max_runtime=3600)
    (rec,) = history_records([r], counts, now=NOW, since=SINCE)
    assert rec.submit == r["submitted_at"] and (rec.end - rec.start).total_seconds() == 1800
    assert rec.max_runtime == 3600 and counts["waiting"] == 1


def test_a_waiting_job_without_a_declared_runtime_is_left_out_and_counted():
    counts: Counter = Counter()
    assert runtime(row("queued", submitted=NOW - timedelta(hours=2)), counts) is None
    assert counts == {"waiting_no_runtime": 1}


def test_jobs_from_before_the_period_enter_it_at_its_start():
    # Waiting since 10 days: it is in the queue when the 7-day period opens.
    waiting = row("queued", submitted=NOW - timedelta(days=10), max_runtime=600)
    (rec,) = history_records([waiting], Counter(), now=NOW, since=SINCE)
    assert rec.submit == SINCE
    # Running for 8 days of its 9: only the 7 days inside the period and the day left are replayed.
    running = row("running", submitted=NOW - timedelta(days=8, hours=1), current_start=NOW - timedelta(days=8),
                  max_runtime=9 * 86400)
    (rec,) = history_records([running], Counter(), now=NOW, since=SINCE)
    assert rec.submit == SINCE and (rec.end - rec.start) == timedelta(days=8)


def test_without_now_only_what_ran_is_exported(tmp_path):
    """The plain history export (manage.py export_trace, the API's history source) is unchanged."""
    counts: Counter = Counter()
    r = row("running", submitted=NOW - timedelta(hours=1), current_start=NOW - timedelta(minutes=20),
            started=NOW - timedelta(minutes=20), duration=3600)
    (rec,) = history_records([r], counts)
    assert rec.end is None and counts == {}


def test_the_what_if_history_holds_the_jobs_of_every_project_waiting_and_running_now(
        history, tenant, inventory, tmp_path):
    """Platform-wide (staff only): another organization's jobs hold devices too."""
    now = timezone.now()
    make_active_job(tenant.other_project, inventory["a100"], submitted=now - timedelta(minutes=30),
                    started=now - timedelta(minutes=10), duration=3600, cluster=inventory["cluster"])
    make_active_job(tenant.project, inventory["h100"], submitted=now - timedelta(minutes=3), max_runtime=900)
    make_active_job(tenant.project, inventory["h100"], submitted=now - timedelta(minutes=2))  # no runtime: out
    out = io.StringIO()
    counts = services.export_history(now - timedelta(days=7), now, out, active=True)
    assert counts["finished"] == 16 and counts["running"] == 1 and counts["waiting"] == 1
    assert counts["waiting_no_runtime"] == 1 and counts["exported"] == 18
    jobs = list(csv.DictReader(io.StringIO(out.getvalue())))
    assert {j["project"] for j in jobs} == {"vision", "speech", "secret"}
    assert sorted(float(j["duration_s"]) for j in jobs if j["project"] == "secret") == [3600.0]
    plain = services.export_history(now - timedelta(days=7), now, io.StringIO())
    assert plain["exported"] == 16 and plain["not_run"] == 4  # without `active`, as before: never ran or not done
