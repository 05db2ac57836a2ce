"""Elastic jobs in the API (issue 29): the job shows `running 6 of 2..8 workers` and each attempt its resizes with
why; the queue shows an elastic job's bounds and minimum need; `scale` lets those who manage the job change its
maximum while it waits or runs (cross-tenant: another project's job is 404, a viewer 403, tests/crosstenant.py via
test_api_crosstenant.TestJobs)."""

import pytest
from django.conf import settings
from django.test import override_settings
from django.utils import timezone

from clusters.backends import observe_simulated
from jobs import lifecycle
from jobs.models import Attempt, AttemptResize, Job
from jobs.services import job_submit
from jobs.states import State
from tests.jobs.conftest import spec, submit

INSTANT = {**settings.TIDAL, "SIM_START_DELAY": 0.0}


@pytest.fixture(autouse=True)
def _inventory(inventory):
    with override_settings(TIDAL=INSTANT):
        yield inventory


def elastic(tenant, flavor, low=1, high=4, user="member", project=None, **extra):
    body = spec(flavor, replicas=high, resize_cooldown=3600, **extra)
    body["groups"][0]["min_replicas"] = low
    return job_submit(actor=tenant.users[user], project=project or tenant.project, spec=body).job


def running(job, cycle):
    cycle()
    observe_simulated()
    job.refresh_from_db()
    assert job.state == State.RUNNING
    return job


def grow(job, indexes, node="r2-n2"):
    attempt = Attempt.objects.get(pk=job.current_attempt_id)
    return lifecycle.resize(job.pk, attempt_id=attempt.pk, version=attempt.resize_count, kind="grow",
                            replicas=[{"role": "worker", "index": i, "node": node, "devices": 8} for i in indexes],
                            reason=lifecycle.GROWN_REASON, now=timezone.now())


def test_the_job_shows_its_workers_and_its_resizes_with_why(tenant, inventory, clients, cycle):
    job = elastic(tenant, inventory["h100"], 1, 4)
    queued = clients["member"].get(f"/api/v1/jobs/{job.pk}/").json()
    assert queued["elastic"] == {"running": None, "min": 1, "max": 4, "min_devices": 8,
                                 "summary": "needs 1..4 workers"}
    job = running(job, cycle)
    grow(job, (1, 2))
    body = clients["viewer"].get(f"/api/v1/jobs/{job.pk}/").json()
    assert body["elastic"]["summary"] == "running 3 of 1..4 workers" and body["elastic"]["running"] == 3
    resize, = body["attempts"][0]["resizes"]
    assert (resize["kind"], resize["old_replicas"], resize["new_replicas"]) == ("grow", 1, 3)
    assert resize["reason"] == "grew into idle capacity" and resize["new_devices"] == 24
    assert any(e["kind"] == "resize" and "from 1 to 3 workers" in e["reason"] for e in body["events"])


def test_a_rigid_job_has_no_elastic_block(tenant, inventory, clients):
    job = submit(tenant, inventory["h100"], replicas=2)
    assert clients["member"].get(f"/api/v1/jobs/{job.pk}/").json()["elastic"] is None


def test_the_queue_shows_an_elastic_jobs_minimum_need(tenant, inventory, clients):
    elastic(tenant, inventory["h100"], 2, 3, devices=8)
    Job.objects.update(state=State.QUEUED)
    row, = clients["member"].get("/api/v1/queue/").json()["results"]
    assert row["total_devices"] == 16 and row["elastic"]["min"] == 2 and row["elastic"]["max"] == 3


def test_scale_raises_and_lowers_the_maximum_of_a_waiting_job(tenant, inventory, clients):
    job = elastic(tenant, inventory["h100"], 1, 4)
    response = clients["member"].post(f"/api/v1/jobs/{job.pk}/scale/", {"max": 2}, format="json")
    assert response.status_code == 200, response.content
    assert response.json()["elastic"]["max"] == 2 and job.groups.get().replicas == 2
    assert job.events.filter(kind="note", reason__contains="max worker replicas 4 -> 2 by member").exists()


def test_lowering_the_maximum_below_what_runs_shrinks_it_at_once(tenant, inventory, clients, cycle):
    job = running(elastic(tenant, inventory["h100"], 1, 4), cycle)
    grow(job, (1, 2, 3))
    response = clients["member"].post(f"/api/v1/jobs/{job.pk}/scale/", {"max": 2}, format="json")
    assert response.status_code == 200, response.content
    assert response.json()["elastic"]["summary"] == "running 2 of 1..2 workers"
    placement = Attempt.objects.get(pk=job.current_attempt_id).placement
    assert sorted(r["index"] for r in placement) == [0, 1]  # the highest ranks left
    shrink = AttemptResize.objects.get(kind="shrink")
    assert (shrink.old_replicas, shrink.new_replicas) == (4, 2) and "lowered to 2 by member" in shrink.reason
    job.refresh_from_db()
    assert job.state == State.RUNNING and job.attempts.count() == 1


@pytest.mark.parametrize("body, field", [({"max": 0}, "max"), ({"max": 2000}, "max"), ({"max": "3"}, "max"),
                                         ({}, "max"), ({"max": 1}, "max"), ({"max": 3, "role": "head"}, "role"),
                                         ({"max": 3, "extra": 1}, "extra")])
def test_bad_scale_requests_name_the_field(tenant, inventory, clients, body, field):
    job = elastic(tenant, inventory["h100"], 2, 4)
    response = clients["member"].post(f"/api/v1/jobs/{job.pk}/scale/", body, format="json")
    assert response.status_code == 400, response.content
    assert field in response.json()["error"]["fields"], response.json()
    assert job.groups.get().replicas == 4


def test_a_rigid_job_cannot_be_scaled(tenant, inventory, clients):
    job = submit(tenant, inventory["h100"], replicas=2)
    response = clients["member"].post(f"/api/v1/jobs/{job.pk}/scale/", {"max": 3}, format="json")
    assert response.status_code == 400 and "not elastic" in response.json()["error"]["fields"]["max"][0]


def test_a_finished_job_cannot_be_scaled(tenant, inventory, clients):
    job = elastic(tenant, inventory["h100"], 1, 4)
    lifecycle.transition(job, State.CANCELLED, reason="test", actor="system")
    response = clients["member"].post(f"/api/v1/jobs/{job.pk}/scale/", {"max": 3}, format="json")
    assert response.status_code == 409 and job.groups.get().replicas == 4


def test_only_those_who_manage_the_job_scale_it(tenant, inventory, clients):
    job = elastic(tenant, inventory["h100"], 1, 4, user="owner")
    assert clients["viewer"].post(f"/api/v1/jobs/{job.pk}/scale/", {"max": 2}, format="json").status_code == 403
    assert clients["member"].post(f"/api/v1/jobs/{job.pk}/scale/", {"max": 2}, format="json").status_code == 403
    assert clients["outsider"].post(f"/api/v1/jobs/{job.pk}/scale/", {"max": 2}, format="json").status_code == 404
    assert job.groups.get().replicas == 4
    assert clients["admin"].post(f"/api/v1/jobs/{job.pk}/scale/", {"max": 2}, format="json").status_code == 200


def test_another_projects_job_is_not_found_and_unchanged(tenant, inventory, clients):
    from quotas.models import Quota

    Quota.objects.create(project=tenant.other_project, flavor=inventory["h100"], guaranteed=8)
    job = elastic(tenant, inventory["h100"], 1, 2, user="outsider", project=tenant.other_project)
    for name in ("owner", "member", "viewer"):
        response = clients[name].post(f"/api/v1/jobs/{job.pk}/scale/", {"max": 1}, format="json")
        assert response.status_code == 404
        assert clients[name].get(f"/api/v1/jobs/{job.pk}/").status_code == 404
    assert job.groups.get().replicas == 2
