"""A run token (tdr_..., tracking/tokens.py) is a job's credential for its own run: it logs to that run, and through
MLflow's endpoints reads and ends it (test_mlflow.py), and nothing else. Not another run of the same project, nor of
another tenant; not the run's own pages of the user API; no job, no list, no other endpoint of the API."""

from __future__ import annotations

import re

import pytest
from drf_spectacular.generators import SchemaGenerator

from tracking import services
from tracking.points import stored_points

LOG_BATCH = "/api/v1/runs/{id}/log-batch/"
POINT = {"metrics": [{"key": "loss", "value": 1.0, "step": 0}]}


def log_batch(client, run):
    return client.post(LOG_BATCH.format(id=run.pk), POINT, format="json")


def test_it_logs_to_its_own_run_only(tenant, run, other_run, run_client):
    neighbour = services.run_create(project=tenant.project, experiment=run.experiment, name="neighbour")
    assert log_batch(run_client, run).status_code == 200
    for victim in (neighbour, other_run):
        response = log_batch(run_client, victim)
        assert response.status_code == 403
        assert response.json()["error"]["message"] == "A run token writes only its own run."
        assert not stored_points(victim.pk)


@pytest.mark.parametrize("url", ["/api/v1/runs/{id}/", "/api/v1/runs/{id}/series/?key=loss", "/api/v1/runs/{id}/csv/",
                                 "/api/v1/runs/{id}/cost/", "/api/v1/runs/", "/api/v1/jobs/", "/api/v1/me/"])
def test_it_reads_nothing_through_the_user_api_not_even_its_own_run(run, run_client, url):
    response = run_client.get(url.format(id=run.pk))
    assert response.status_code == 401
    assert response.json()["error"]["code"] == "authentication_failed"


def test_every_other_operation_of_the_api_refuses_it(tenant, run, run_client):
    """Walks the OpenAPI schema, so an endpoint added later is covered without a new line here."""
    paths = SchemaGenerator().get_schema(public=True)["paths"]
    tried = []
    for path, operations in paths.items():
        if path == LOG_BATCH:
            continue
        url = re.sub(r"\{[^}]+\}", str(run.pk), path)  # its own run's id wherever an id or a name goes
        for method in operations:
            response = getattr(run_client, method)(url, {}, format="json")
            assert response.status_code == 401, (method, path, response.content)
            tried.append((method, path))
    assert len(tried) > 100 and ("post", "/api/v1/jobs/") in tried and ("post", "/api/v1/tokens/") in tried


def test_a_run_token_at_the_wrong_door_is_not_counted_as_a_guess(settings, run, run_client):
    """A job's genuine run token used on the user API is refused as the wrong kind of token, never counted toward
    the address's bearer-token lockout (a guessed token is: the control)."""
    from rest_framework.test import APIClient

    settings.TIDAL_LOCKOUT = {**settings.TIDAL_LOCKOUT, "TOKEN_FAILURES": 3}
    answers = [run_client.get("/api/v1/jobs/") for _ in range(10)]
    assert {a.status_code for a in answers} == {401}
    assert "only logs to its own run" in answers[-1].json()["error"]["message"]
    guesser = APIClient()
    guesser.credentials(HTTP_AUTHORIZATION="Bearer tdl_not-a-real-token")
    assert [guesser.get("/api/v1/jobs/").status_code for _ in range(4)] == [401, 401, 401, 429]
