"""MLflow's own client against Tidal's MLflow endpoints (a live server): experiments, runs, params, metrics with NaN
and infinities, tags, search, a job continuing its run with its run token, tenancy and bad input; then the error
shape of a few hand-written requests."""

from __future__ import annotations

import gc
import math
import threading

import mlflow
import pytest
import requests
from mlflow import MlflowClient
from mlflow.entities import Metric, Param, RunTag
from mlflow.exceptions import MlflowException
from mlflow.tracking import fluent
from mlflow.utils import request_utils
from rest_framework.test import APIClient

from tenancy.services import token_create
from tests.conftest import client_for
from tests.tracking.conftest import next_attempt
from tracking import services
from tracking.models import Run, RunStatus
from tracking.points import stored_points
from tracking.tokens import run_token

live = pytest.mark.django_db(transaction=True)


def user_token(user) -> str:
    return token_create(user=user, name="mlflow")[1]


@pytest.fixture
def use_mlflow(live_server, monkeypatch):
    """Point MLflow's client at the live server as a job would: `use_mlflow(token, project="vision")`."""
    for name, value in {"MLFLOW_HTTP_REQUEST_MAX_RETRIES": "0", "MLFLOW_HTTP_REQUEST_TIMEOUT": "10",
                        "MLFLOW_DISABLE_TELEMETRY": "true", "DO_NOT_TRACK": "true"}.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setattr(fluent, "_active_experiment_id", None)
    # The client keeps connections open, each holding a live server thread that closes SQLite's shared in-memory
    # connection when its client lets go: at the end of the session that is after the server stopped sharing it, an
    # error in that thread. So each test closes its connections (pooled ones by closing the client's sessions, those
    # of dropped responses by collecting them) and waits for the server threads it started to end.
    sessions = {}
    cached = request_utils._cached_get_request_session

    def recorded(*args, **kwargs):
        session = cached(*args, **kwargs)
        sessions[id(session)] = session
        return session

    monkeypatch.setattr(request_utils, "_cached_get_request_session", recorded)

    def use(token: str, project: str = "vision") -> MlflowClient:
        monkeypatch.setenv("MLFLOW_TRACKING_URI", f"{live_server.url}/mlflow/{project}")
        monkeypatch.setenv("MLFLOW_TRACKING_TOKEN", token)
        return MlflowClient()

    before = set(threading.enumerate())  # server threads of earlier tests (a stream still open) are not ours
    yield use
    fluent._active_run_stack.get().clear()  # a failed test must not leave its run active for the next
    # Nor its tracking URI: Hugging Face's MLflowCallback calls mlflow.set_tracking_uri(), a process-wide setting
    # that outranks MLFLOW_TRACKING_URI, so the next test's client would talk to this test's project.
    mlflow.set_tracking_uri(None)
    for session in sessions.values():
        session.close()
    gc.collect()
    for thread in set(threading.enumerate()) - before:
        if thread.name.endswith("(process_request_thread)"):
            thread.join(timeout=5)


def refused(code: str, call, *args, **kwargs) -> MlflowException:
    with pytest.raises(MlflowException) as raised:
        call(*args, **kwargs)
    assert raised.value.error_code == code, raised.value
    return raised.value


def values(metrics) -> list[tuple[int, float]]:
    """(step, value) with NaN as a string, so lists compare equal."""
    return [(m.step, "nan" if math.isnan(m.value) else m.value) for m in metrics]


@live
def test_a_training_script_logs_params_metrics_and_tags(tenant, use_mlflow):
    client = use_mlflow(user_token(tenant.users["member"]))
    mlflow.set_experiment("llama sft")
    logged = [1.0, 0.5, math.nan, math.inf, -math.inf, 0.25]
    with mlflow.start_run(run_name="lr-1e-4") as active:
        mlflow.log_param("lr", 1e-4)
        mlflow.log_params({"batch_size": 32, "optimizer": "adam"})
        for step, value in enumerate(logged[:3]):
            mlflow.log_metric("loss", value, step=step)
        mlflow.log_metrics({"loss": logged[3], "acc": 0.9}, step=3)
        client.log_batch(active.info.run_id, metrics=[Metric("loss", v, 1_700_000_000_000 + s, s)
                                                      for s, v in enumerate(logged) if s >= 4])
        mlflow.set_tag("git", "abc123")
    run_id = active.info.run_id

    history = client.get_metric_history(run_id, "loss")
    assert values(history) == values([Metric("loss", v, 0, s) for s, v in enumerate(logged)])
    assert history[5].timestamp == 1_700_000_000_005
    fetched = client.get_run(run_id)
    assert fetched.info.status == "FINISHED" and fetched.info.end_time and fetched.info.run_name == "lr-1e-4"
    assert fetched.data.params == {"lr": "0.0001", "batch_size": "32", "optimizer": "adam"}
    assert fetched.data.tags["git"] == "abc123" and fetched.data.metrics["acc"] == 0.9
    assert client.get_experiment_by_name("llama sft").experiment_id == fetched.info.experiment_id
    assert client.get_experiment_by_name("no such experiment") is None
    refused("RESOURCE_ALREADY_EXISTS", client.create_experiment, "llama sft")

    run = Run.objects.get(pk=int(run_id))
    assert (run.project, run.experiment.name, run.status) == (tenant.project, "llama sft", RunStatus.FINISHED)
    assert run.user == tenant.users["member"]
    assert sum(p.key == "loss" for p in stored_points(run.pk)) == len(logged)


@live
def test_search_runs_filters_on_a_param_and_orders_by_a_metric(tenant, use_mlflow):
    client = use_mlflow(user_token(tenant.users["member"]))
    experiment_id = client.create_experiment("sweep")
    for name, optimizer, loss in [("a", "adam", 0.3), ("b", "sgd", 0.1), ("c", "adam", 0.2), ("d", "adam", 0.9)]:
        run = client.create_run(experiment_id, run_name=name)
        client.log_batch(run.info.run_id, metrics=[Metric("loss", loss, 0, 0)], params=[Param("opt", optimizer)])
    client.set_terminated(run.info.run_id)  # "d"

    def names(*args, **kwargs) -> list[str]:
        return [r.info.run_name for r in client.search_runs([experiment_id], *args, **kwargs)]

    assert names("params.opt = 'adam'", order_by=["metrics.loss ASC"]) == ["c", "a", "d"]
    assert names("params.opt = 'adam' and metrics.loss < 0.5", order_by=["metrics.loss DESC"]) == ["a", "c"]
    assert names("attributes.status = 'FINISHED'") == ["d"]
    assert names("tags.`mlflow.runName` LIKE 'b%'") == ["b"]
    first = client.search_runs([experiment_id], order_by=["metrics.loss ASC"], max_results=3)
    rest = client.search_runs([experiment_id], order_by=["metrics.loss ASC"], max_results=3,
                              page_token=first.token)
    assert [r.info.run_name for r in [*first, *rest]] == ["b", "c", "a", "d"] and rest.token is None
    refused("INVALID_PARAMETER_VALUE", client.search_runs, [experiment_id], "params.opt ~ 'adam'")


@live
def test_a_job_continues_its_run_with_the_run_token(run, job_of_run, use_mlflow, monkeypatch):
    use_mlflow(run_token(run.pk, 1))
    monkeypatch.setenv("MLFLOW_RUN_ID", str(run.pk))
    with mlflow.start_run() as active:
        assert active.info.run_id == str(run.pk) and active.info.run_name == "lr-3e-4"
        mlflow.log_metrics({"loss": 2.0, "grad_norm": math.nan}, step=10)
        mlflow.log_param("seed", 7)
    run.refresh_from_db()
    assert run.status == RunStatus.FINISHED
    assert run.params == {"lr": "0.0003", "seed": "7"}
    assert len(stored_points(run.pk)) == 2
    assert [r.info.run_id for r in mlflow.search_runs([str(run.experiment_id)], output_format="list")] == \
        [str(run.pk)]


@live
def test_a_run_token_cannot_create_runs_nor_touch_another_run(tenant, run, job_of_run, use_mlflow):
    neighbour = services.run_create(project=tenant.project, experiment=run.experiment, name="neighbour")
    client = use_mlflow(run_token(run.pk, 1))
    refused("PERMISSION_DENIED", client.create_run, str(run.experiment_id))
    refused("PERMISSION_DENIED", client.create_experiment, "mine")
    refused("PERMISSION_DENIED", client.log_metric, str(neighbour.pk), "loss", 1.0)
    refused("PERMISSION_DENIED", client.get_run, str(neighbour.pk))
    assert [r.info.run_id for r in client.search_runs([str(run.experiment_id)])] == [str(run.pk)]
    assert client.get_experiment(str(run.experiment_id)).name == "sweep"
    client = use_mlflow(run_token(run.pk, 1), project="secret")
    refused("RESOURCE_DOES_NOT_EXIST", client.get_run, str(run.pk))
    assert not stored_points(neighbour.pk)


@live
def test_an_outsider_finds_neither_the_project_nor_a_run_of_another_tenant(tenant, run, other_run, use_mlflow):
    token = user_token(tenant.users["outsider"])
    client = use_mlflow(token)  # project "vision", where the outsider is no member
    refused("RESOURCE_DOES_NOT_EXIST", client.get_run, str(run.pk))
    refused("RESOURCE_DOES_NOT_EXIST", client.create_experiment, "intrusion")
    refused("RESOURCE_DOES_NOT_EXIST", client.log_metric, str(run.pk), "loss", 1.0)
    client = use_mlflow(token, project="secret")  # their own project, a run id of another tenant
    refused("RESOURCE_DOES_NOT_EXIST", client.get_run, str(run.pk))
    refused("RESOURCE_DOES_NOT_EXIST", client.get_metric_history, str(run.pk), "loss")
    assert client.get_run(str(other_run.pk)).info.run_name == "secret-run"
    client = use_mlflow(user_token(tenant.users["owner"]))  # the other way round
    refused("RESOURCE_DOES_NOT_EXIST", client.set_tag, str(other_run.pk), "k", "v")
    assert not stored_points(run.pk) and "k" not in Run.objects.get(pk=other_run.pk).tags


@live
def test_a_viewer_reads_but_cannot_log(tenant, run, use_mlflow):
    client = use_mlflow(user_token(tenant.users["viewer"]))
    assert client.get_run(str(run.pk)).data.params == {"lr": "0.0003"}
    refused("PERMISSION_DENIED", client.log_metric, str(run.pk), "loss", 1.0)
    refused("PERMISSION_DENIED", client.set_terminated, str(run.pk))
    refused("PERMISSION_DENIED", client.create_run, str(run.experiment_id))
    run.refresh_from_db()
    assert run.status == RunStatus.RUNNING and not stored_points(run.pk)


@live
def test_bad_input_is_refused_as_a_whole_and_nothing_is_written(tenant, run, use_mlflow, live_server):
    token = user_token(tenant.users["member"])
    client = use_mlflow(token)
    good = [Metric("loss", 0.5, 0, 0)]
    for bad in (Metric("x" * 251, 1.0, 0, 0), Metric("loss", 1.0, 0, -1)):
        error = refused("INVALID_PARAMETER_VALUE", client.log_batch, str(run.pk), metrics=[*good, bad],
                        params=[Param("new", "1")], tags=[RunTag("t", "v")])
        assert "metrics[1]" in error.message
    # The client cannot send a non-numeric value (its protobuf refuses it), another client can.
    response = requests.post(f"{live_server.url}/mlflow/vision/api/2.0/mlflow/runs/log-batch", timeout=10,
                             headers={"Authorization": f"Bearer {token}"},
                             json={"run_id": str(run.pk), "metrics": [{"key": "loss", "value": "high", "step": 1,
                                                                       "timestamp": 0}]})
    assert response.status_code == 400
    assert response.json()["error_code"] == "INVALID_PARAMETER_VALUE" and "metrics[0].value" in response.json()[
        "message"]
    run.refresh_from_db()
    assert not stored_points(run.pk)
    assert run.params == {"lr": "0.0003"} and "t" not in run.tags


# Hand-written requests: the error shape on the paths the client does not take.

def mlflow_url(endpoint: str, project: str = "vision") -> str:
    return f"/mlflow/{project}/api/2.0/mlflow/{endpoint}"


@pytest.mark.django_db
@pytest.mark.parametrize(("client_of", "method", "endpoint", "body", "status", "code"), [
    ("member", "get", "runs/get", {"run_id": "999999"}, 404, "RESOURCE_DOES_NOT_EXIST"),
    ("member", "get", "runs/get", {"run_id": "9" * 40}, 404, "RESOURCE_DOES_NOT_EXIST"),
    ("member", "get", "runs/get", {}, 400, "INVALID_PARAMETER_VALUE"),
    ("member", "post", "runs/log-batch", "{not json", 400, "INVALID_PARAMETER_VALUE"),
    ("member", "post", "runs/log-batch", "[1, 2]", 400, "INVALID_PARAMETER_VALUE"),
    ("member", "post", "runs/search", '{"filter": "params.a = 1 OR params.b = 2"}', 400, "INVALID_PARAMETER_VALUE"),
    ("member", "post", "runs/search", '{"page_token": "bm9wZQ=="}', 400, "INVALID_PARAMETER_VALUE"),
    ("member", "post", "runs/search", '{"filter": "attributes.start_time > inf"}', 400, "INVALID_PARAMETER_VALUE"),
    ("member", "post", "runs/create", '{"experiment_id": "0", "tags": "oops"}', 400, "INVALID_PARAMETER_VALUE"),
    ("member", "get", "runs/log-batch", {}, 405, "BAD_REQUEST"),
    ("member", "post", "runs/log-inputs", "{}", 404, "ENDPOINT_NOT_FOUND"),
    ("nobody", "get", "runs/get", {"run_id": "1"}, 401, "UNAUTHENTICATED"),
    ("forged", "get", "runs/get", {"run_id": "1"}, 401, "UNAUTHENTICATED"),
])
def test_refusals_have_mlflows_error_shape(tenant, client_of, method, endpoint, body, status, code):
    client = {"member": lambda: client_for(tenant.users["member"]), "nobody": APIClient,
              "forged": lambda: _with_header("Bearer tdr_1_forged")}[client_of]()
    if method == "get":
        response = client.get(mlflow_url(endpoint), body)
    else:
        response = client.post(mlflow_url(endpoint), body, content_type="application/json")
    assert response.status_code == status, response.content
    assert response.json()["error_code"] == code and response.json()["message"]
    assert set(response.json()) == {"error_code", "message"}


def _with_header(value: str) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=value)
    return client


@pytest.mark.django_db
def test_a_finished_run_takes_no_more_data(run, run_client):
    services.run_update(run=run, status=RunStatus.FINISHED, by_job=True)  # as the job's own `mlflow.end_run()`
    response = run_client.post(mlflow_url("runs/log-metric"), {"run_id": str(run.pk), "key": "loss", "value": 1,
                                                                "step": 0, "timestamp": 0}, format="json")
    assert response.status_code == 400 and response.json()["error_code"] == "INVALID_PARAMETER_VALUE"
    reopen = run_client.post(mlflow_url("runs/update"), {"run_id": str(run.pk), "status": "RUNNING"}, format="json")
    assert reopen.status_code == 400 and reopen.json()["error_code"] == "INVALID_PARAMETER_VALUE"
    run.refresh_from_db()
    assert run.status == RunStatus.FINISHED and not stored_points(run.pk)


@live
def test_search_runs_on_keys_holding_in_and_like(tenant, use_mlflow):
    """`params.learning_rate` and `metrics.train_loss` were read as `params.learn IN g_rate`: search_runs failed."""
    client = use_mlflow(user_token(tenant.users["member"]))
    experiment_id = client.create_experiment("lr sweep")
    for name, lr, loss in [("slow", "0.0001", 0.9), ("fast", "0.001", 0.4), ("faster", "0.01", 0.7)]:
        run = client.create_run(experiment_id, run_name=name)
        client.log_batch(run.info.run_id, metrics=[Metric("train_loss", loss, 0, 0)],
                         params=[Param("learning_rate", lr), Param("like_this", "yes")])

    def names(*args, **kwargs) -> list[str]:
        return [r.info.run_name for r in client.search_runs([experiment_id], *args, **kwargs)]

    assert names("params.learning_rate = '0.001'") == ["fast"]
    assert names("params.learning_rate IN ('0.01', '0.0001') and metrics.train_loss < 0.8") == ["faster"]
    assert names("params.like_this LIKE 'y%'", order_by=["metrics.train_loss ASC"]) == ["fast", "faster", "slow"]
    found = mlflow.search_runs([experiment_id], "metrics.train_loss > 0.5", order_by=["params.learning_rate DESC"],
                               output_format="list")
    assert [r.info.run_name for r in found] == ["faster", "slow"]


@live
def test_get_metric_history_follows_the_pages(run, job_of_run, use_mlflow, monkeypatch):
    """The client asks for pages (of 25,000 points) until no token comes back; here pages of 7."""
    from mlflow.tracking._tracking_service import client as tracking_client

    monkeypatch.setattr(tracking_client, "GET_METRIC_HISTORY_MAX_RESULTS", 7)
    services.run_log_batch(run_id=run.pk, token_attempt=1,
                           metrics=[{"key": "loss", "value": float(step), "step": step} for step in range(40)])
    assert next_attempt(job_of_run) == 2  # resumed: attempt 2 logs steps 20-49 again
    services.run_log_batch(run_id=run.pk, token_attempt=2,
                           metrics=[{"key": "loss", "value": -float(step), "step": step} for step in range(20, 50)])
    client = use_mlflow(run_token(run.pk, 2))
    history = client.get_metric_history(str(run.pk), "loss")
    assert [(m.step, m.value) for m in history] == [(s, float(s)) for s in range(20)] + [
        (s, -float(s)) for s in range(20, 50)]


@live
def test_experiment_0_is_the_projects_default_before_any_run(tenant, use_mlflow):
    client = use_mlflow(user_token(tenant.users["viewer"]))
    assert client.get_experiment("0").name == "Default"
    assert client.get_experiment_by_name("Default").experiment_id == client.get_experiment("0").experiment_id
    assert client.search_runs(["0"]) == []


@live
def test_a_users_logging_is_not_held_to_the_api_rate(tenant, use_mlflow, settings):
    """A personal token's 3,000 requests a minute stalled a synchronous `log_metric` loop (the client waited out
    the window, up to a minute): logging has its own, higher allowance. Reads keep the API's."""
    settings.REST_FRAMEWORK = {**settings.REST_FRAMEWORK, "DEFAULT_THROTTLE_RATES": {
        **settings.REST_FRAMEWORK["DEFAULT_THROTTLE_RATES"], "user": "3/min"}}
    client = use_mlflow(user_token(tenant.users["member"]))
    run = client.create_run(client.create_experiment("loop")).info.run_id
    for step in range(30):  # no retries (MLFLOW_HTTP_REQUEST_MAX_RETRIES=0): a 429 would raise here
        client.log_metric(run, "loss", 1.0 / (step + 1), step=step)
    client.log_param(run, "seed", 3)
    assert len(client.get_metric_history(run, "loss")) == 30
    # The user rate counts in fixed windows of a minute: 7 reads meet a refusal wherever a window turns.
    refused("REQUEST_LIMIT_EXCEEDED", lambda: [client.get_run(run) for _ in range(7)])


@live
def test_concurrent_batches_of_one_run_at_the_same_steps_all_land(tenant, run, use_mlflow, live_server):
    """MLflow's async logging and Hugging Face's Trainer (`epoch` in its train and eval logs) send batches of one
    run at once, with the same key at the same step: each is answered 200, and each step keeps one of the values
    sent (the latest write of a step wins, as one after another)."""
    token = user_token(tenant.users["member"])
    use_mlflow(token)
    url = f"{live_server.url}/mlflow/vision/api/2.0/mlflow/runs/log-batch"
    answers: list[int] = []

    def log(sender: int) -> None:
        with requests.Session() as session:
            for step in range(20):
                metrics = [{"key": "epoch", "value": sender, "step": step, "timestamp": 0}]
                answers.append(session.post(url, timeout=10, headers={"Authorization": f"Bearer {token}"},
                                            json={"run_id": str(run.pk), "metrics": metrics}).status_code)

    senders = [threading.Thread(target=log, args=(sender,)) for sender in range(4)]
    for sender in senders:
        sender.start()
    for sender in senders:
        sender.join()
    assert answers == [200] * 80
    points = stored_points(run.pk)
    assert sorted(point.step for point in points) == list(range(20))
    assert {point.value for point in points} <= {0.0, 1.0, 2.0, 3.0}
