"""MLflow's endpoints under hand-written requests: what its client never sends but anyone may (a filter of thousands
of clauses, thousands of sort terms, lone surrogates, page tokens past 64 bits), the paths its UI calls
(`ajax-api`, `get-history-bulk-interval`), paging a long history, and that every refusal, 500s included, is MLflow's
`{"error_code", "message"}`."""

from __future__ import annotations

import base64
import json
import math
from unittest import mock

import pytest
from django.db import connection
from django.db.models.sql.query import Query
from django.test.utils import CaptureQueriesContext
from rest_framework.test import APIClient

from tenancy.models import Membership, Project, Role
from tests.conftest import client_for
from tracking import points, services
from tracking.mlflow import search
from tracking.mlflow import selectors as mlflow_selectors
from tracking.models import Experiment, Rollup, Run
from tracking.points import latest, read_blocks, stored_points

pytestmark = pytest.mark.django_db


def url(endpoint: str, project: str = "vision", prefix: str = "api") -> str:
    return f"/mlflow/{project}/{prefix}/2.0/mlflow/{endpoint}"


def post(client, endpoint: str, body, **kwargs):
    data = body if isinstance(body, str) else json.dumps(body)
    return client.post(url(endpoint, **kwargs), data, content_type="application/json")


def refused(response, status: int = 400, code: str = "INVALID_PARAMETER_VALUE") -> str:
    assert response.status_code == status, response.content
    assert response["Content-Type"].startswith("application/json"), response["Content-Type"]
    body = response.json()
    assert set(body) == {"error_code", "message"} and body["error_code"] == code, body
    return body["message"]


def names(response) -> list[str]:
    assert response.status_code == 200, response.content
    return [run["info"]["run_name"] for run in response.json().get("runs", [])]


def token(payload: dict) -> str:
    return base64.b64encode(json.dumps(payload).encode()).decode()


# ------------------------------------------------------------------------------------------------ runs/search

@pytest.fixture
def wide_runs(tenant):
    """Two runs with 500 params and 500 metrics each; only "match" has them all at 1."""
    experiment = services.experiment_get_or_create(project=tenant.project, name="wide")
    for name, value in (("match", 1.0), ("other", 0.0)):
        created = services.run_create(project=tenant.project, experiment=experiment, name=name,
                                      params={f"p{i}": str(int(value)) for i in range(500)})
        services.run_log_batch(run_id=created.pk, metrics=[{"key": f"m{i}", "value": value, "step": 0}
                                                           for i in range(500)])
    return experiment


def wide_filter(clauses: int) -> str:
    half = clauses // 2
    return " AND ".join([*(f"params.p{i} = '1'" for i in range(half)),
                         *(f"metrics.m{i} >= 1" for i in range(clauses - half))])


def test_a_filter_of_the_most_clauses_is_built_once_and_read_in_one_query(member_client, wide_runs):
    """The cost of a filter grew with the square of its clauses (1,000: 5.3 s): each clause rebuilt the query.
    Now however many clauses, the query is cloned as often and read in as many statements as for one."""

    def cost(clauses: int) -> tuple[int, int, list[str]]:
        with mock.patch.object(Query, "clone", autospec=True, side_effect=Query.clone) as clones, \
                CaptureQueriesContext(connection) as queries:
            found = names(post(member_client, "runs/search", {"experiment_ids": [str(wide_runs.pk)],
                                                              "filter": wide_filter(clauses)}))
        return clones.call_count, len(queries), found

    cost(1)  # the caller's token, project and role are read once, then remembered
    one, most = cost(1), cost(search.MAX_FILTER_CLAUSES)
    assert most[2] == ["match"] and one[2] == ["match"]
    assert most[:2] == one[:2]


def test_the_most_clauses_of_the_heaviest_kind_are_served(member_client, wide_runs):
    """A `!=` clause is two conditions: SQLite parses at most 1,000 deep."""
    text = " AND ".join(f"params.p{i} != '0'" for i in range(search.MAX_FILTER_CLAUSES))
    assert names(post(member_client, "runs/search", {"filter": text})) == ["match"]


@pytest.mark.parametrize("clauses", [search.MAX_FILTER_CLAUSES + 1, 1_000, 3_000])
def test_a_filter_over_the_limit_is_refused_before_any_query_of_runs(member_client, wide_runs, clauses):
    text = wide_filter(clauses)
    with CaptureQueriesContext(connection) as queries:
        message = refused(post(member_client, "runs/search", {"filter": text}))
    assert f"at most {search.MAX_FILTER_CLAUSES}" in message
    assert not any("tracking_run" in query["sql"] for query in queries)


def test_values_of_in_lists_count_towards_the_limit(member_client, wide_runs):
    """One clause can hold 100,000 values (SQLite takes 32,766 parameters a statement, PostgreSQL 65,535)."""
    many = ", ".join(f"'{i}'" for i in range(100_000))
    refused(post(member_client, "runs/search", {"filter": f"params.p0 IN ({many})"}))
    some = ", ".join(f"'{i}'" for i in range(search.MAX_FILTER_VALUES))
    assert names(post(member_client, "runs/search", {"filter": f"params.p0 IN ({some})",
                                                     "order_by": ["attributes.run_name"]})) == ["match", "other"]


def test_two_thousand_sort_terms_are_refused_and_the_most_allowed_are_served(member_client, wide_runs):
    """PostgreSQL refused 2,000 sort terms (`target lists can have at most 1664 entries`): a 500."""
    message = refused(post(member_client, "runs/search",
                           {"order_by": [f"metrics.m{i} DESC" for i in range(2_000)]}))
    assert f"at most {search.MAX_ORDER_BY}" in message
    most = [f"metrics.m{i} DESC" for i in range(search.MAX_ORDER_BY - 1)] + ["params.p0 ASC"]
    assert names(post(member_client, "runs/search", {"experiment_ids": [str(wide_runs.pk)], "order_by": most})) == [
        "match", "other"]


def test_a_sort_key_given_twice_is_refused_as_mlflow_does(member_client, wide_runs):
    message = refused(post(member_client, "runs/search", {"order_by": ["metrics.m1 DESC", "metrics.`m1` ASC"]}))
    assert "duplicate" in message


@pytest.mark.parametrize("key", ["learning_rate", "train_loss", "like_this", "ink", "in", "origin", "INDEX"])
def test_bare_keys_holding_in_or_like_are_keys(tenant, member_client, key):
    """`params.learning_rate` read as `params.learn` IN `g_rate`: MLflow's client's search_runs failed."""
    run = services.run_create(project=tenant.project, name="a", params={key: "0.1"})
    services.run_log_batch(run_id=run.pk, metrics=[{"key": key, "value": 2.0, "step": 0}])
    services.run_create(project=tenant.project, name="b", params={key: "0.2"})
    assert names(post(member_client, "runs/search", {"filter": f"params.{key} = '0.1'"})) == ["a"]
    assert names(post(member_client, "runs/search", {"filter": f"params.{key} IN ('0.1') and metrics.{key} > 1"})
                 ) == ["a"]
    assert names(post(member_client, "runs/search", {"filter": f"params.{key} LIKE '0.%'",
                                                     "order_by": [f"params.{key} DESC"]})) == ["b", "a"]


@pytest.mark.parametrize("offset", [2**63, 2**64, 10**30])
def test_a_page_token_past_64_bits_is_refused(member_client, run, offset):
    refused(post(member_client, "runs/search", {"page_token": token({"offset": offset})}))
    response = member_client.get(url("metrics/get-history"), {"run_id": str(run.pk), "metric_key": "loss",
                                                               "page_token": token({"step": offset})})
    refused(response)


def test_the_last_page_token_answers_an_empty_page(member_client, run):
    response = post(member_client, "runs/search", {"page_token": token({"offset": 2**63 - 1})})
    assert response.status_code == 200 and response.json().get("runs", []) == []


# --------------------------------------------------------------------------------------------- lone surrogates

LONE = "lo\ud800ss"


def _surrogate_requests(run_id: str) -> list[tuple[str, dict]]:
    return [
        ("experiments/create", {"name": LONE}),
        ("runs/create", {"experiment_id": "0", "run_name": LONE}),
        ("runs/create", {"experiment_id": "0", "tags": [{"key": "mlflow.runName", "value": LONE}]}),
        ("runs/create", {"experiment_id": "0", "tags": [{"key": "t", "value": LONE}]}),
        ("runs/update", {"run_id": run_id, "run_name": LONE}),
        ("runs/log-metric", {"run_id": run_id, "key": LONE, "value": 1.0, "step": 0, "timestamp": 0}),
        ("runs/log-parameter", {"run_id": run_id, "key": LONE, "value": "1"}),
        ("runs/log-parameter", {"run_id": run_id, "key": "p", "value": LONE}),
        ("runs/set-tag", {"run_id": run_id, "key": "t", "value": LONE}),
        ("runs/log-batch", {"run_id": run_id, "params": [{"key": LONE, "value": "1"}]}),
        ("runs/log-batch", {"run_id": run_id, "tags": [{"key": "t", "value": LONE}]}),
        ("runs/search", {"filter": f"params.p = '{LONE}'"}),
        ("runs/search", {"filter": f"params.`{LONE}` = '1'"}),
        ("runs/search", {"order_by": [f"params.`{LONE}`"]}),
        ("runs/search", {"experiment_ids": [LONE]}),
        ("runs/search", {"page_token": LONE}),
    ]


@pytest.mark.parametrize("index", range(len(_surrogate_requests("1"))))
def test_a_lone_surrogate_anywhere_is_a_400_and_writes_nothing(tenant, run, member_client, index):
    """JSON may escape half a UTF-16 pair (`"\\ud800"`), which is no text: PostgreSQL and SQLite could not store
    nor compare it (a 500)."""
    endpoint, body = _surrogate_requests(str(run.pk))[index]
    runs, experiments = Run.objects.count(), Experiment.objects.count()
    message = refused(post(member_client, endpoint, body))
    assert "surrogate" in message
    run.refresh_from_db()
    assert (Run.objects.count(), Experiment.objects.count()) == (runs, experiments)
    assert not stored_points(run.pk) and run.params == {"lr": "0.0003"} and run.tags == {}
    assert run.name == "lr-3e-4"


@pytest.mark.parametrize("body", [
    {"metrics": [{"key": LONE, "value": 1.0, "step": 0}]},
    {"params": {LONE: "1"}},
    {"params": {"p": LONE}},
    {"tags": [{"key": "t", "value": LONE}]},
])
def test_a_lone_surrogate_in_a_tidal_batch_is_a_400_naming_the_field(run, member_client, body):
    response = member_client.post(f"/api/v1/runs/{run.pk}/log-batch/", json.dumps(body),
                                  content_type="application/json")
    assert response.status_code == 400, response.content
    assert "surrogate" in json.dumps(response.json()["error"]["fields"])
    assert not stored_points(run.pk)


def test_a_lone_surrogate_in_the_query_string_is_no_500(run, member_client):
    """A query string is decoded leniently (a half pair becomes U+FFFD): names nothing, found nothing."""
    refused(member_client.get(url("experiments/get-by-name") + "?experiment_name=%ED%A0%80"), 404,
            "RESOURCE_DOES_NOT_EXIST")
    response = member_client.get(url("metrics/get-history") + f"?run_id={run.pk}&metric_key=%ED%A0%80")
    assert response.status_code == 200 and response.json().get("metrics", []) == []


# ------------------------------------------------------------------------------------------- errors are MLflow's

def test_a_server_error_is_mlflows_json_not_a_page(run, member_client):
    member_client.raise_request_exception = False
    with mock.patch("tracking.mlflow.translate.run", side_effect=RuntimeError("a bug")):
        message = refused(member_client.get(url("runs/get"), {"run_id": str(run.pk)}), 500, "INTERNAL_ERROR")
    assert "a bug" not in message


@pytest.mark.parametrize("path", [
    "/mlflow/vision/ajax-api/2.0/mlflow/no-such-endpoint",
    "/mlflow/vision/ajax-api/3.0/mlflow/server-info",
    "/mlflow/vision/api/2.0/preview/mlflow/runs/get",
    "/mlflow/vision/api/3.0/mlflow/traces/search",
    "/mlflow/vision/api/",
])
def test_every_unknown_mlflow_path_is_mlflows_json_404(member_client, path):
    refused(member_client.get(path), 404, "ENDPOINT_NOT_FOUND")
    refused(member_client.post(path, "{}", content_type="application/json"), 404, "ENDPOINT_NOT_FOUND")


def test_the_ajax_api_paths_are_served_as_the_api_paths(tenant, run, member_client):
    """MLflow's UI and some clients call `ajax-api/2.0/mlflow/...`."""
    through_api = member_client.get(url("runs/get"), {"run_id": str(run.pk)})
    through_ajax = member_client.get(url("runs/get", prefix="ajax-api"), {"run_id": str(run.pk)})
    assert through_ajax.status_code == 200 and through_ajax.json() == through_api.json()
    response = post(member_client, "runs/log-parameter", {"run_id": str(run.pk), "key": "seed", "value": "1"},
                    prefix="ajax-api")
    assert response.status_code == 200
    refused(APIClient().get(url("runs/get", prefix="ajax-api"), {"run_id": str(run.pk)}), 401, "UNAUTHENTICATED")
    refused(client_for(tenant.users["viewer"]).post(
        url("runs/set-tag", prefix="ajax-api"), json.dumps({"run_id": str(run.pk), "key": "k", "value": "v"}),
        content_type="application/json"), 403, "PERMISSION_DENIED")


def test_a_runs_latest_metrics_keep_which_non_finite_value_they_were(run, member_client):
    """The summary names a non-finite last value (nonfinite): an infinity is not reported as NaN."""
    services.run_log_batch(run_id=run.pk, metrics=[
        {"key": key, "value": value, "step": 1, "timestamp": 1000}
        for key, value in (("up", "Infinity"), ("down", "-Infinity"), ("lost", "NaN"), ("fine", 0.5))])
    response = member_client.get(url("runs/get"), {"run_id": str(run.pk)})
    assert response.status_code == 200, response.content
    latest_values = {m["key"]: m["value"] for m in response.json()["run"]["data"]["metrics"]}
    assert latest_values == {"up": "Infinity", "down": "-Infinity", "lost": "NaN", "fine": 0.5}


# ---------------------------------------------------------------------------------------- the default experiment

@pytest.mark.parametrize("how", ["get", "get-by-name", "search"])
def test_experiment_0_exists_in_every_project_before_any_run(tenant, how):
    project = Project.objects.create(organization=tenant.organization, name="Fresh", slug="fresh")
    Membership.objects.create(project=project, user=tenant.users["viewer"], role=Role.VIEWER)
    client = client_for(tenant.users["viewer"])
    if how == "get":
        response = client.get(url("experiments/get", "fresh"), {"experiment_id": "0"})
    elif how == "get-by-name":
        response = client.get(url("experiments/get-by-name", "fresh"), {"experiment_name": "Default"})
    else:
        response = post(client, "runs/search", {"experiment_ids": ["0"]}, project="fresh")
    assert response.status_code == 200, response.content
    assert Experiment.objects.filter(project=project, name="Default").count() == 1


# ------------------------------------------------------------------------------------------ metrics/get-history

def log_blocks(run_id: int, blocks: int, size: int, attempt: int = 1, start: int = 0, key: str = "loss") -> None:
    """Log as the process of job attempt `attempt` would (its run token's)."""
    for b in range(blocks):
        first = start + b * size
        services.run_log_batch(run_id=run_id, token_attempt=attempt, metrics=[
            {"key": key, "value": float(first + i) + attempt / 10, "step": first + i, "timestamp": first + i}
            for i in range(size)])


def history(client, run_id: int, **query) -> dict:
    response = client.get(url("metrics/get-history"), {"run_id": str(run_id), "metric_key": "loss", **query})
    assert response.status_code == 200, response.content
    return response.json()


def test_a_page_of_history_reads_only_the_blocks_of_the_page(run, member_client, monkeypatch):
    """Every page read the whole series (a page cost ten times an unpaged read); a 500,000-point series answered
    42.6 MB at once."""
    log_blocks(run.pk, blocks=100, size=100)  # 10,000 points
    read = []

    def counted(*args, **kwargs):
        found = points.page_blocks(*args, **kwargs)
        read.extend(found)
        return found

    monkeypatch.setattr(mlflow_selectors, "page_blocks", counted)
    first = history(member_client, run.pk, max_results=250)
    assert [m["step"] for m in first["metrics"]] == list(range(250)) and len(read) <= 3
    read.clear()
    middle = history(member_client, run.pk, max_results=250, page_token=first["next_page_token"])
    assert [m["step"] for m in middle["metrics"]] == list(range(250, 500)) and len(read) <= 4


def test_an_unpaged_history_is_answered_in_pages_as_mlflows_client_reads_it(run, member_client):
    log_blocks(run.pk, blocks=3, size=10_000)
    first = history(member_client, run.pk)
    assert len(first["metrics"]) == 25_000 and first["next_page_token"]
    rest = history(member_client, run.pk, page_token=first["next_page_token"], max_results=10**9)
    assert len(rest["metrics"]) == 5_000 and "next_page_token" not in rest


def test_paging_a_resumed_history_gives_each_step_once_with_the_newest_attempts_value(run, member_client):
    """Attempt 1 logged steps 0-199, attempt 2 resumed from step 100 and logged 100-299 in blocks of its own: every
    page size ends pages at every offset across both attempts' blocks and where they overlap (one step a page
    included), against the series as read whole."""
    log_blocks(run.pk, blocks=10, size=20, attempt=1)
    log_blocks(run.pk, blocks=20, size=10, attempt=2, start=100)
    series = list(run.series.values_list("id", flat=True))
    steps, timestamps, values = latest(read_blocks(series))
    expected = list(zip(steps.tolist(), values.tolist(), strict=True))
    assert len(expected) == 300
    for size in (1, 7, 50, 99, 101, 200, 300):
        found, page_token = [], None
        while True:
            page = history(member_client, run.pk, max_results=size,
                           **({"page_token": page_token} if page_token else {}))
            assert len(page.get("metrics", [])) <= size
            found += [(m["step"], m["value"]) for m in page.get("metrics", [])]
            page_token = page.get("next_page_token")
            if not page_token:
                break
        assert found == expected, size
    assert expected[99:102] == [(99, 99.1), (100, 100.2), (101, 101.2)]


@pytest.mark.parametrize("query", [{"max_results": "0"}, {"max_results": "-1"}, {"max_results": "x"},
                                   {"page_token": "bm9wZQ=="}, {"page_token": token({"offset": 3})}])
def test_bad_paging_of_history_is_refused(run, member_client, query):
    response = member_client.get(url("metrics/get-history"), {"run_id": str(run.pk), "metric_key": "loss", **query})
    refused(response)


# ----------------------------------------------------------------------------------- get-history-bulk-interval

def bulk(client, run_ids: list, **query):
    return client.get(url("metrics/get-history-bulk-interval", prefix="ajax-api"),
                      {"run_ids": [str(r) for r in run_ids], "metric_key": "loss", **query})


def test_the_uis_bulk_interval_read_samples_each_run_keeping_extremes(tenant, run, member_client):
    other = services.run_create(project=tenant.project, experiment=run.experiment, name="b")
    for target, spike in ((run, 1234), (other, 4321)):
        values = [1.0] * 5000
        values[spike] = 50.0
        values[100] = math.nan
        for start in (0, 2500):
            services.run_log_batch(run_id=target.pk, metrics=[
                {"key": "loss", "value": "NaN" if math.isnan(v) else v, "step": start + i, "timestamp": 7 + start + i}
                for i, v in enumerate(values[start:start + 2500])])
    response = bulk(member_client, [run.pk, other.pk], max_results=100)
    assert response.status_code == 200, response.content
    metrics = response.json()["metrics"]
    for target, spike in ((run, 1234), (other, 4321)):
        mine = [m for m in metrics if m["run_id"] == str(target.pk)]
        assert 2 <= len(mine) <= 100 + 2
        assert {"key": "loss", "value": 50.0, "step": spike, "timestamp": 7 + spike, "run_id": str(target.pk)} in mine
        assert {"key": "loss", "value": "NaN", "step": 100, "timestamp": 107, "run_id": str(target.pk)} in mine
        assert [m["step"] for m in mine] == sorted(m["step"] for m in mine)
    window = bulk(member_client, [run.pk], max_results=2500, start_step=1000, end_step=1099).json()["metrics"]
    assert [m["step"] for m in window] == list(range(1000, 1100))
    last = bulk(member_client, [run.pk], max_results=1).json()["metrics"]
    assert [(m["step"], m["value"]) for m in last] == [(4999, 1.0)]


@pytest.mark.parametrize(("query", "status", "code"), [
    ({"max_results": 2501}, 400, "INVALID_PARAMETER_VALUE"),
    ({"max_results": 0}, 400, "INVALID_PARAMETER_VALUE"),
    ({"start_step": 5}, 400, "INVALID_PARAMETER_VALUE"),
    ({"start_step": 9, "end_step": 5}, 400, "INVALID_PARAMETER_VALUE"),
    ({"metric_key": ""}, 400, "INVALID_PARAMETER_VALUE"),
])
def test_bad_bulk_interval_reads_are_refused(run, member_client, query, status, code):
    refused(bulk(member_client, [run.pk], **query), status, code)


def test_bulk_interval_reads_of_no_run_too_many_or_another_tenants_are_refused(tenant, run, other_run,
                                                                                member_client):
    refused(bulk(member_client, []))
    refused(bulk(member_client, list(range(1, 102))))
    refused(bulk(member_client, [run.pk, other_run.pk]), 404, "RESOURCE_DOES_NOT_EXIST")


def test_log_batch_reads_past_mlflow_3s_metric_links_and_refuses_other_fields(member_client, run):
    """The links of a metric to a logged model or dataset are read past in the validation loop, not copied away
    point by point before it (a tenth of the endpoint's CPU); anything else is still refused, naming the field."""
    linked = {"key": "loss", "value": 0.5, "step": 1, "timestamp": 1, "model_id": "m-1", "dataset_name": "d",
              "dataset_digest": "x", "run_id": str(run.pk)}
    assert post(member_client, "runs/log-batch", {"run_id": str(run.pk), "metrics": [linked]}).status_code == 200
    run.refresh_from_db()
    assert run.summary["loss"]["last"] == 0.5
    message = refused(post(member_client, "runs/log-batch", {"run_id": str(run.pk), "metrics": [
        {"key": "loss", "value": 1.0, "step": 2, "colour": "red"}]}))
    assert "metrics[0].colour" in message
    run.refresh_from_db()
    assert run.summary["loss"]["step"] == 1


def test_log_batch_reads_the_run_once_the_row_it_locks(member_client, run):
    """The caller's right to write is checked on the run's row as the write reads it under its lock, not on a read
    of its own before (a round trip and a tenth of a 1,000-point batch's CPU)."""
    batch = {"run_id": str(run.pk), "metrics": [{"key": "loss", "value": 0.5, "step": s} for s in range(10)]}
    with CaptureQueriesContext(connection) as queries:
        assert post(member_client, "runs/log-batch", batch).status_code == 200
    reads = [q["sql"] for q in queries.captured_queries
             if q["sql"].startswith("SELECT") and q["sql"].split(" FROM ", 1)[1].startswith('"tracking_run"')]
    assert len(reads) == 1, reads


@pytest.mark.parametrize("endpoint", ["runs/log-batch", "runs/log-metric", "runs/log-parameter"])
def test_a_bad_batch_to_a_run_the_caller_may_not_write_is_refused_for_the_run(tenant, run, other_run, endpoint):
    """Checked on the locked row, the run still comes before the batch: another tenant's run is not found and a
    viewer may not write, whatever the batch holds (as when the run was read first)."""
    bad = {"runs/log-batch": {"metrics": [{"key": "loss", "value": 1.0, "step": -1}]},
           "runs/log-metric": {"key": "loss", "value": 1.0, "step": -1, "timestamp": 1},
           "runs/log-parameter": {"key": "bad\x01key", "value": "1"}}[endpoint]
    member = client_for(tenant.users["member"])
    assert "step" in refused(post(member, endpoint, {"run_id": str(run.pk), **bad})) or endpoint.endswith("parameter")
    refused(post(member, endpoint, {"run_id": str(other_run.pk), **bad}), 404, "RESOURCE_DOES_NOT_EXIST")
    refused(post(member, endpoint, {"run_id": "no-such-run", **bad}), 404, "RESOURCE_DOES_NOT_EXIST")
    viewer = client_for(tenant.users["viewer"])
    refused(post(viewer, endpoint, {"run_id": str(run.pk), **bad}), 403, "PERMISSION_DENIED")
    other_run.refresh_from_db()
    assert other_run.summary == {} and other_run.params == {}


@pytest.mark.skipif(connection.vendor != "postgresql", reason="the arrays' statement is PostgreSQL's")
def test_a_batchs_rollups_are_one_statement_of_one_array_a_column(member_client, run):
    """Spelled as rows, the upsert of a batch's rollups held some 600 parameters, which the driver split out of its
    text again for every batch; as arrays it is the same statement every time."""
    batch = {"run_id": str(run.pk), "metrics": [{"key": k, "value": 0.5, "step": s} for k in "abcde"
                                                for s in range(200)]}
    with CaptureQueriesContext(connection) as queries:
        assert post(member_client, "runs/log-batch", batch).status_code == 200
    upserts = [q["sql"] for q in queries.captured_queries if q["sql"].startswith("INSERT INTO tracking_rollup")]
    assert len(upserts) == 1 and "unnest(" in upserts[0] and "VALUES" not in upserts[0], upserts
    assert sum(row["count"] for row in Rollup.objects.filter(series__run=run, level=0).values("count")) \
        == 1_000
