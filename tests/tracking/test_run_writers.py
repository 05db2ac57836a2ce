"""Who writes a job's run: its submitter, its own run token and the project's admins; no other member, through any
door (the API's log-batch and PATCH, MLflow's logging endpoints and runs/update). No user moves a job run's status:
it follows the job. A run logged outside a job keeps the member rule."""

from __future__ import annotations

import pytest

from jobs.states import State
from tenancy.models import Membership, Role
from tests.conftest import client_for, make_user
from tests.jobs.conftest import inventory, run, submit  # noqa: F401  (fixtures)
from tracking import services
from tracking.models import AlertRule, Run, RunStatus
from tracking.points import stored_points
from tracking.tokens import run_token

pytestmark = pytest.mark.django_db

NAN = {"key": "train/loss", "value": "NaN", "step": 7, "timestamp": 0}


@pytest.fixture
def job_run(tenant, inventory):  # noqa: F811
    """A running job submitted by the member, with a `stop` rule on NaN in its project."""
    AlertRule.objects.create(project=tenant.project, rule="non_finite", action="stop")
    job = run(submit(tenant, inventory["h100"], user="member"), inventory["cluster"], ["r1-n1"])
    return Run.objects.get(job=job)


@pytest.fixture
def colleague(tenant):
    """Another member of the submitter's project."""
    user = make_user("colleague")
    Membership.objects.create(project=tenant.project, user=user, role=Role.MEMBER)
    return client_for(user)


def api_log(client, run_: Run):
    return client.post(f"/api/v1/runs/{run_.pk}/log-batch/", {"metrics": [NAN]}, format="json")


def mlflow_post(client, endpoint: str, body: dict):
    return client.post(f"/mlflow/vision/api/2.0/mlflow/{endpoint}", body, format="json")


# Every MLflow endpoint that writes to a run, with a body that would write.
MLFLOW_WRITES = [
    ("runs/log-batch", {"metrics": [NAN]}),
    ("runs/log-metric", NAN),
    ("runs/log-parameter", {"key": "lr", "value": "9"}),
    ("runs/set-tag", {"key": "owner", "value": "me"}),
    ("runs/update", {"run_name": "mine now"}),
]


def unchanged(job_run: Run) -> None:
    """The job still runs, its run holds nothing written by the refused request."""
    job_run.refresh_from_db()
    job_run.job.refresh_from_db()
    assert job_run.job.state == State.RUNNING and job_run.status == RunStatus.RUNNING
    assert not stored_points(job_run.pk) and job_run.params == {} and "owner" not in job_run.tags
    assert job_run.name == job_run.job.name


def test_a_colleague_cannot_stop_a_members_job_by_logging_a_nan_into_its_run(job_run, colleague):
    response = api_log(colleague, job_run)
    assert response.status_code == 403, response.content
    assert "submitter" in response.json()["error"]["message"]
    unchanged(job_run)


@pytest.mark.parametrize(("endpoint", "body"), MLFLOW_WRITES)
def test_a_colleague_writes_nothing_to_a_job_run_through_mlflow(job_run, colleague, endpoint, body):
    response = mlflow_post(colleague, endpoint, {"run_id": str(job_run.pk), **body})
    assert response.status_code == 403, response.content
    assert response.json()["error_code"] == "PERMISSION_DENIED"
    unchanged(job_run)


def test_a_colleague_cannot_rename_a_job_run_through_the_api(job_run, colleague):
    response = colleague.patch(f"/api/v1/runs/{job_run.pk}/", {"name": "mine now"}, format="json")
    assert response.status_code == 403, response.content
    unchanged(job_run)


@pytest.mark.parametrize("writer", ["member", "admin", "owner"])
def test_the_submitter_and_the_admins_write_to_a_job_run(tenant, job_run, writer):
    """The submitter (the member) and the project's admins and owners log to it (and the NaN stops the job, as the
    rule says), rename it and log through MLflow."""
    client = client_for(tenant.users[writer])
    assert mlflow_post(client, "runs/log-parameter", {"run_id": str(job_run.pk), "key": "by", "value": writer}
                       ).status_code == 200
    assert client.patch(f"/api/v1/runs/{job_run.pk}/", {"name": f"{writer}'s"}, format="json").status_code == 200
    assert api_log(client, job_run).status_code == 200
    job_run.refresh_from_db()
    assert job_run.params == {"by": writer} and job_run.name == f"{writer}'s" and len(stored_points(job_run.pk)) == 1
    assert job_run.status == RunStatus.KILLED  # its own NaN, its own rule


@pytest.mark.parametrize("writer", ["member", "admin"])
@pytest.mark.parametrize("status", [RunStatus.FAILED, RunStatus.FINISHED, RunStatus.KILLED])
def test_no_user_moves_a_running_job_runs_status(tenant, job_run, writer, status):
    client = client_for(tenant.users[writer])
    response = client.patch(f"/api/v1/runs/{job_run.pk}/", {"status": status}, format="json")
    assert response.status_code == 400 and "status" in response.json()["error"]["fields"], response.content
    response = mlflow_post(client, "runs/update", {"run_id": str(job_run.pk), "status": status})
    assert response.status_code == 400 and response.json()["error_code"] == "INVALID_PARAMETER_VALUE"
    assert "follows its job" in response.json()["message"]
    unchanged(job_run)
    # Its job then still takes its points.
    assert api_log(client_for(tenant.users["member"]), job_run).status_code == 200


def test_no_user_reopens_a_finished_job_run(tenant, job_run, colleague):
    from jobs.services import job_cancel

    job_cancel(actor=tenant.users["member"], job=job_run.job)
    job_run.refresh_from_db()
    assert job_run.status == RunStatus.KILLED
    for client in (client_for(tenant.users["member"]), client_for(tenant.users["owner"])):
        response = client.patch(f"/api/v1/runs/{job_run.pk}/", {"status": "RUNNING"}, format="json")
        assert response.status_code == 400, response.content
        response = mlflow_post(client, "runs/update", {"run_id": str(job_run.pk), "status": "RUNNING"})
        assert response.status_code == 400, response.content
    assert mlflow_post(colleague, "runs/update", {"run_id": str(job_run.pk), "status": "RUNNING"}
                       ).status_code == 403
    job_run.refresh_from_db()
    assert job_run.status == RunStatus.KILLED and job_run.ended_at is not None


def test_the_jobs_own_run_token_logs_and_ends_its_run(job_run):
    """The job itself (its process, through its run token) still writes and may end its run (`mlflow.end_run()`)."""
    from rest_framework.test import APIClient

    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {run_token(job_run.pk, job_run.job.current_attempt.number)}")
    assert mlflow_post(client, "runs/log-parameter", {"run_id": str(job_run.pk), "key": "seed", "value": "1"}
                       ).status_code == 200
    assert mlflow_post(client, "runs/update", {"run_id": str(job_run.pk), "status": "FINISHED"}).status_code == 200
    job_run.refresh_from_db()
    assert job_run.status == RunStatus.FINISHED and job_run.params == {"seed": "1"}


def test_a_run_outside_a_job_keeps_the_member_rule(tenant, colleague):
    """Logged from a notebook: any member writes to it and ends it, as before."""
    notebook = services.run_create(project=tenant.project, name="notebook", user=tenant.users["member"])
    assert api_log(colleague, notebook).status_code == 200
    assert mlflow_post(colleague, "runs/set-tag", {"run_id": str(notebook.pk), "key": "k", "value": "v"}
                       ).status_code == 200
    response = colleague.patch(f"/api/v1/runs/{notebook.pk}/", {"status": "FAILED"}, format="json")
    assert response.status_code == 200, response.content
    notebook.refresh_from_db()
    assert notebook.status == RunStatus.FAILED and notebook.tags["k"] == "v"
    viewer = client_for(tenant.users["viewer"])
    fresh = services.run_create(project=tenant.project, name="another", user=tenant.users["member"])
    assert api_log(viewer, fresh).status_code == 403
