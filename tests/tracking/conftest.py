"""Runs around the shared tenant fixtures."""

from __future__ import annotations

import pytest

from tests.conftest import client_for
from tests.jobs.conftest import admit, inventory, submit  # noqa: F401  (fixtures)
from tracking import services
from tracking.models import Run
from tracking.tokens import run_token


@pytest.fixture(autouse=True)
def _artifacts_in_a_temporary_folder(settings, tmp_path_factory):
    """Artifacts land in a folder of the test's own, never in the checkout's var/artifacts."""
    root = tmp_path_factory.mktemp("artifacts")
    settings.TIDAL = {**settings.TIDAL, "ARTIFACT_URL": root.as_uri()}
    return root


@pytest.fixture
def run(tenant):
    experiment = services.experiment_get_or_create(project=tenant.project, name="sweep")
    return services.run_create(project=tenant.project, experiment=experiment, name="lr-3e-4",
                               user=tenant.users["member"], params={"lr": "0.0003"})


@pytest.fixture
def other_run(tenant):
    """A run of the outsider's project (another organization)."""
    return services.run_create(project=tenant.other_project, name="secret-run", user=tenant.users["outsider"])


@pytest.fixture
def job_of_run(tenant, inventory, run):  # noqa: F811
    """Makes `run` the run of a job admitted once, as if the job had created it: its attempt 1 is open."""
    job = submit(tenant, inventory["h100"])
    Run.objects.filter(pk=run.pk).update(job=job)
    admit(job, inventory["cluster"], ["r1-n1"])
    run.refresh_from_db()
    return job


def next_attempt(job) -> int:
    """End the job's attempt (preempted, requeued) and admit its next one on the same node, as the scheduler does;
    returns the new attempt's number."""
    from jobs.lifecycle import AttemptEnd, transition
    from jobs.states import State

    attempt = job.current_attempt
    transition(job, State.PREEMPTED, reason="preempted", actor="scheduler", end=AttemptEnd(reason="preempted"))
    job.refresh_from_db()
    transition(job, State.QUEUED, reason="requeued", actor="scheduler")
    job.refresh_from_db()
    admit(job, attempt.cluster, [row["node"] for row in attempt.placement])
    return job.current_attempt.number


def token_client(token: str):
    from rest_framework.test import APIClient

    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {token}")
    return client


@pytest.fixture
def run_client(run, job_of_run):
    """An API client holding the token the job's attempt 1 was given for `run`, as its process does."""
    return token_client(run_token(run.pk, 1))


@pytest.fixture
def member_client(tenant):
    return client_for(tenant.users["member"])
