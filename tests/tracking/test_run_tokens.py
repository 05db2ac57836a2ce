"""A run token (tdr_..., tracking/tokens.py) is a job attempt's credential for its job's run: it logs to that run,
and through MLflow's endpoints reads and ends it (test_mlflow.py), and reports its attempt's checkpoint; nothing
else. Not another run of the same project, nor of another tenant; not the run's own pages of the user API; no job,
no list, no other endpoint of the API. It is its attempt's, not the run's: each attempt gets its own, its points
are that attempt's, and it is refused once the attempt ended (a pod of an ended attempt writes nothing more)."""

from __future__ import annotations

import re

import pytest
from drf_spectacular.generators import SchemaGenerator

from jobs import ports
from jobs.lifecycle import AttemptEnd, transition
from jobs.services import job_cancel
from jobs.states import State
from tests.conftest import client_for
from tests.jobs.conftest import admit
from tests.tracking.conftest import next_attempt, token_client
from tracking import services
from tracking.points import stored_points
from tracking.tokens import RunTokenClaim, claim_of, run_token

LOG_BATCH = "/api/v1/runs/{id}/log-batch/"
CHECKPOINT = "/api/v1/jobs/{id}/checkpoint/"  # its own job's only: tests/jobs/test_checkpoints.py
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
        if path in (LOG_BATCH, CHECKPOINT):
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


# ------------------------------------------------------------------------------------- a token is its attempt's

MLFLOW_LOG_METRIC = "/mlflow/vision/api/2.0/mlflow/runs/log-metric"


def mlflow_log(client, run, step: int):
    return client.post(MLFLOW_LOG_METRIC, {"run_id": str(run.pk), "key": "loss", "value": 1.0, "step": step,
                                           "timestamp": 0}, format="json")


def test_each_attempt_is_given_a_token_of_its_own(run, job_of_run):
    first = ports.env_for(job_of_run.current_attempt).secret["TIDAL_RUN_TOKEN"]
    next_attempt(job_of_run)
    env = ports.env_for(job_of_run.current_attempt)
    second = env.secret["TIDAL_RUN_TOKEN"]
    assert claim_of(first) == RunTokenClaim(run.pk, 1) and claim_of(second) == RunTokenClaim(run.pk, 2)
    assert env.secret["MLFLOW_TRACKING_TOKEN"] == second and env.plain["TIDAL_ATTEMPT"] == "2"


def test_a_token_of_an_ended_attempt_is_refused_at_every_door(run, job_of_run, run_client):
    """A pod of attempt 1 still writing after it ended (a partitioned node, a victim in its grace): refused from the
    moment the attempt ends, before the next one starts and after, with a message that says why."""
    assert log_batch(run_client, run).status_code == 200
    transition(job_of_run, State.PREEMPTED, reason="preempted", actor="scheduler", end=AttemptEnd(reason="preempted"))
    for answer in (log_batch(run_client, run), mlflow_log(run_client, run, 1)):
        assert answer.status_code == 401, answer.content
    refused = log_batch(run_client, run).json()["error"]
    assert refused["code"] == "attempt_ended"
    assert refused["message"] == (f"This run token is attempt 1's of job {job_of_run.pk}, which has ended: only the "
                                  "token of the job's current attempt is taken.")
    assert mlflow_log(run_client, run, 1).json() == {"error_code": "UNAUTHENTICATED", "message": refused["message"]}
    job_of_run.refresh_from_db()
    transition(job_of_run, State.QUEUED, reason="requeued", actor="scheduler")
    admit(job_of_run, job_of_run.attempts.get().cluster, ["r1-n1"])
    assert log_batch(run_client, run).status_code == 401
    assert log_batch(token_client(run_token(run.pk, 2)), run).status_code == 200
    assert {p.attempt for p in stored_points(run.pk)} == {1, 2}
    assert len(stored_points(run.pk)) == 2


def test_ending_the_attempt_revokes_its_token(tenant, run, job_of_run, run_client):
    job_cancel(actor=tenant.users["member"], job=job_of_run)
    assert log_batch(run_client, run).json()["error"]["code"] == "attempt_ended"


def test_points_land_on_the_tokens_attempt(run, job_of_run):
    """Whatever the run's current attempt is when the batch is written: a token of attempt 2 writes attempt 2."""
    next_attempt(job_of_run)
    second = token_client(run_token(run.pk, 2))
    assert second.post(LOG_BATCH.format(id=run.pk), {"metrics": [{"key": "loss", "value": 1.0, "step": 3}]},
                       format="json").status_code == 200
    assert mlflow_log(second, run, 4).status_code == 200
    assert sorted((p.step, p.attempt) for p in stored_points(run.pk)) == [(3, 2), (4, 2)]


def test_a_forged_attempt_number_is_refused_and_writes_nothing(run, job_of_run, run_client):
    """A token of attempt 1 may not claim attempt 2's points (nor any later number); the field is named."""
    for forged in (2, 7, 32_767):
        response = run_client.post(LOG_BATCH.format(id=run.pk), {**POINT, "attempt": forged}, format="json")
        assert response.status_code == 400, response.content
        assert response.json()["error"]["fields"]["attempt"] == [
            f"A run token of attempt 1 logs attempt 1's points, not attempt {forged}'s."]
    assert not stored_points(run.pk)


def test_the_next_attempt_delivers_what_an_earlier_one_spooled_as_that_attempts(run, job_of_run):
    """The SDK sends a spool file of attempt 1 with attempt 2's token: the points keep attempt 1."""
    next_attempt(job_of_run)
    second = token_client(run_token(run.pk, 2))
    assert second.post(LOG_BATCH.format(id=run.pk), {**POINT, "attempt": 1}, format="json").status_code == 200
    assert [p.attempt for p in stored_points(run.pk)] == [1]


def test_a_user_logs_only_attempts_the_run_has_had(tenant, run):
    member = client_for(tenant.users["member"])
    response = member.post(LOG_BATCH.format(id=run.pk), {**POINT, "attempt": 2}, format="json")
    assert response.status_code == 400 and "attempt" in response.json()["error"]["fields"]
    assert member.post(LOG_BATCH.format(id=run.pk), {**POINT, "attempt": 1}, format="json").status_code == 200


def rates(settings, **changed: str) -> None:
    settings.REST_FRAMEWORK = {**settings.REST_FRAMEWORK, "DEFAULT_THROTTLE_RATES": {
        **settings.REST_FRAMEWORK["DEFAULT_THROTTLE_RATES"], **changed}}


def test_an_attempts_requests_share_one_allowance_at_the_tracking_rate_and_the_next_attempt_has_its_own(
        run, job_of_run, run_client, settings):
    """Its logging (log-batch, MLflow's logging endpoints) and its other MLflow calls count together, per attempt,
    at TIDAL_TRACKING_THROTTLE_RATE; a user's API allowance has nothing to do with it."""
    rates(settings, run="3/d", user="1/d")
    answers = [log_batch(run_client, run).status_code, mlflow_log(run_client, run, 1).status_code,
               run_client.get("/mlflow/vision/api/2.0/mlflow/runs/get", {"run_id": str(run.pk)}).status_code,
               log_batch(run_client, run).status_code]
    assert answers == [200, 200, 200, 429]
    next_attempt(job_of_run)
    assert log_batch(token_client(run_token(run.pk, 2)), run).status_code == 200


def test_a_users_logging_is_counted_apart_from_their_api_requests_at_the_tracking_rate(tenant, run, settings):
    rates(settings, run="2/d", user="1/d")
    member = client_for(tenant.users["member"])
    assert [log_batch(member, run).status_code for _ in range(3)] == [200, 200, 429]
    assert [member.get(f"/api/v1/runs/{run.pk}/").status_code for _ in range(2)] == [200, 429]
