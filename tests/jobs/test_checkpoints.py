"""A job's own process reports its checkpoints with its attempt's run token (only its own job, only while its
attempt is the current one), and the next attempt is given the latest checkpoint any attempt before it reported
(TIDAL_RESUME_FROM, TIDAL_RESUME_STEP), which is what it resumes from."""

from __future__ import annotations

import pytest
from rest_framework.test import APIClient

from jobs import ports
from jobs.models import Attempt
from tests.jobs.conftest import run, submit
from tests.tracking.conftest import next_attempt
from tracking.models import Run
from tracking.tokens import run_token

pytestmark = pytest.mark.django_db


def url(job) -> str:
    return f"/api/v1/jobs/{job.pk}/checkpoint/"


def attempt_client(job, attempt: int) -> APIClient:
    """What the job's attempt's process holds: the run token in TIDAL_RUN_TOKEN."""
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {run_token(Run.objects.get(job=job).pk, attempt)}")
    return client


@pytest.fixture
def job(tenant, inventory):
    return run(submit(tenant, inventory["a100"], devices=8), inventory["cluster"], ["a-n1"])


def test_the_attempts_run_token_reports_its_checkpoint(job):
    response = attempt_client(job, 1).post(url(job), {"checkpoint": "s3://ckpt/train/1200", "step": 1200},
                                           format="json")
    assert response.status_code == 200, response.content
    body = response.json()
    assert (body["number"], body["checkpoint"], body["checkpoint_step"]) == (1, "s3://ckpt/train/1200", 1200)
    recorded = Attempt.objects.get(job=job, number=1)
    assert (recorded.checkpoint, recorded.checkpoint_step) == ("s3://ckpt/train/1200", 1200)


def test_a_run_token_reports_for_its_own_job_only(tenant, inventory, job):
    other = run(submit(tenant, inventory["a100"], devices=8), inventory["cluster"], ["a-n2"])
    response = attempt_client(job, 1).post(url(other), {"checkpoint": "s3://ckpt/other"}, format="json")
    assert response.status_code == 403
    assert response.json()["error"]["message"] == "A run token reports the checkpoint of its own job only."
    assert Attempt.objects.get(job=other).checkpoint == ""


def test_a_token_of_an_ended_attempt_reports_nothing(job):
    """A pod of attempt 1 left running (a partitioned node) must not move the checkpoint attempt 2 resumes from."""
    old = attempt_client(job, 1)
    next_attempt(job)
    response = old.post(url(job), {"checkpoint": "s3://ckpt/stale"}, format="json")
    assert response.status_code == 401 and response.json()["error"]["code"] == "attempt_ended"
    assert not Attempt.objects.filter(checkpoint="s3://ckpt/stale").exists()
    assert attempt_client(job, 2).post(url(job), {"checkpoint": "s3://ckpt/2"}, format="json").status_code == 200


def test_a_forged_run_token_is_refused_as_a_failed_token(job):
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {run_token(Run.objects.get(job=job).pk, 1)[:-4]}0000")
    assert client.post(url(job), {"checkpoint": "s3://x"}, format="json").status_code == 401


def test_the_step_is_optional_and_checked(job, clients):
    member = clients["member"]
    assert member.post(url(job), {"checkpoint": "step 100"}, format="json").json()["checkpoint_step"] is None
    refused = member.post(url(job), {"checkpoint": "x", "step": -1}, format="json")
    assert refused.status_code == 400 and "step" in refused.json()["error"]["fields"]


def resume_env(job) -> dict[str, str]:
    job.refresh_from_db()
    return {name: value for name, value in ports.env_for(job.current_attempt).plain.items()
            if name.startswith("TIDAL_RESUME")}


def test_the_next_attempt_is_given_the_latest_reported_checkpoint(job):
    assert resume_env(job) == {"TIDAL_RESUME_FROM": "", "TIDAL_RESUME_STEP": ""}  # a first attempt starts fresh
    attempt_client(job, 1).post(url(job), {"checkpoint": "s3://ckpt/500", "step": 500}, format="json")
    attempt_client(job, 1).post(url(job), {"checkpoint": "s3://ckpt/1000", "step": 1000}, format="json")
    next_attempt(job)
    assert resume_env(job) == {"TIDAL_RESUME_FROM": "s3://ckpt/1000", "TIDAL_RESUME_STEP": "1000"}
    # attempt 2 fails before saving anything: attempt 3 still resumes from attempt 1's
    next_attempt(job)
    assert resume_env(job) == {"TIDAL_RESUME_FROM": "s3://ckpt/1000", "TIDAL_RESUME_STEP": "1000"}
    attempt_client(job, 3).post(url(job), {"checkpoint": "s3://ckpt/1500"}, format="json")
    next_attempt(job)
    assert resume_env(job) == {"TIDAL_RESUME_FROM": "s3://ckpt/1500", "TIDAL_RESUME_STEP": ""}


def test_a_kubernetes_pod_of_the_next_attempt_gets_it_in_its_env(job):
    from clusters.backends.kubernetes import mapping
    from clusters.kube.render import render

    attempt_client(job, 1).post(url(job), {"checkpoint": "s3://ckpt/1000", "step": 1000}, format="json")
    next_attempt(job)
    job.refresh_from_db()
    render_job, placement, settings = mapping.render_inputs(job.current_attempt, job.current_attempt.cluster, {})
    pod = next(m for m in render(render_job, placement, settings) if m["kind"] == "Pod")
    env = {e["name"]: e.get("value") for e in pod["spec"]["containers"][0]["env"]}
    assert env["TIDAL_RESUME_FROM"] == "s3://ckpt/1000" and env["TIDAL_RESUME_STEP"] == "1000"
    assert env["TIDAL_ATTEMPT"] == "2"
