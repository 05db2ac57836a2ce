"""The database unreachable mid-request: every API endpoint answers 503 with Retry-After (the API's one error shape),
so the SDK's spool and any client retry later, instead of a 500 that reads as a bug and is not retried."""

from __future__ import annotations

from unittest import mock

import pytest
from django.db import InterfaceError, OperationalError, connection
from django.urls import reverse

from tracking.points import stored_points

pytestmark = pytest.mark.django_db

OUTAGES = [OperationalError("connection to server at \"127.0.0.1\", port 5432 failed: Connection refused"),
           InterfaceError("connection already closed")]


def down(error: Exception):
    """Every statement from now on fails as it does while PostgreSQL restarts."""
    return mock.patch.object(connection, "cursor", side_effect=error)


@pytest.mark.parametrize("error", OUTAGES, ids=["operational", "interface"])
def test_ingestion_answers_503_with_retry_after(run, run_client, error):
    body = {"metrics": [{"key": "loss", "value": 1.0, "step": 0}]}
    with down(error):
        response = run_client.post(reverse("run-log-batch", kwargs={"pk": run.pk}), body, format="json")
    assert response.status_code == 503, response.content
    assert int(response["Retry-After"]) > 0
    assert response.json()["error"]["code"] == "database_unavailable"
    assert "connection" not in response.json()["error"]["message"]  # the driver's words stay in the log
    assert not stored_points(run.pk)
    retried = run_client.post(reverse("run-log-batch", kwargs={"pk": run.pk}), body, format="json")
    assert retried.status_code == 200 and len(stored_points(run.pk)) == 1


@pytest.mark.parametrize("url", ["/api/v1/jobs/", "/api/v1/projects/", "/api/v1/costs/?month=2026-01"])
def test_any_endpoint_answers_503_with_retry_after(clients, url):
    with down(OUTAGES[0]):
        response = clients["member"].get(url)
    assert response.status_code == 503 and response["Retry-After"], response.content


def test_mlflows_paths_answer_mlflows_503_with_retry_after(run, member_client):
    """MLflow's client retries a 503 (TEMPORARILY_UNAVAILABLE), not a 500, and reads only MLflow's error shape."""
    body = {"run_id": str(run.pk), "metrics": [{"key": "loss", "value": 1.0, "step": 0, "timestamp": 1}]}
    with down(OUTAGES[0]):
        response = member_client.post("/mlflow/vision/api/2.0/mlflow/runs/log-batch", body, format="json")
    assert response.status_code == 503 and int(response["Retry-After"]) > 0, response.content
    assert response.json() == {"error_code": "TEMPORARILY_UNAVAILABLE",
                               "message": "The database is unavailable; try again shortly."}
    assert not stored_points(run.pk)
