"""Runs around the shared tenant fixtures."""

from __future__ import annotations

import pytest

from tests.conftest import client_for
from tracking import services
from tracking.tokens import run_token


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
def run_client(run):
    """An API client holding the run's own token, as a job's process does."""
    from rest_framework.test import APIClient

    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {run_token(run.pk)}")
    return client


@pytest.fixture
def member_client(tenant):
    return client_for(tenant.users["member"])
