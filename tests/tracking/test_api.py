"""Experiments, runs, series and alerts through the API: cross-tenant tests, filters, sorting, downsampled series."""

from __future__ import annotations

import csv
import io
import math

import pytest
from django.urls import reverse
from django.utils import timezone

from tests.crosstenant import CrossTenantMixin
from tracking import services
from tracking.models import Alert, Experiment

pytestmark = pytest.mark.django_db


def make_run(tenant, project, **kwargs):
    user = tenant.users["outsider" if project == tenant.other_project else "member"]
    return services.run_create(project=project, user=user, **kwargs)


class TestExperiments(CrossTenantMixin):
    basename = "experiment"
    detail_writes = ("patch",)

    def make_object(self, tenant, project):
        return services.experiment_get_or_create(project=project, name="sweep")

    def create_payload(self, tenant, project):
        return {"project": project.slug, "name": "new sweep"}

    def update_payload(self, tenant, obj):
        return {"description": "changed"}

    def test_every_answer_counts_the_runs(self, tenant, clients):
        """Found by the API fuzz test: the create answered `run_count: null`, which the schema says is an integer."""
        owner = clients["owner"]
        created = owner.post("/api/v1/experiments/", {"project": "vision", "name": "new"}, format="json").json()
        assert created["run_count"] == 0
        make_run(tenant, tenant.project, name="r", experiment=services.experiment_get_or_create(
            project=tenant.project, name="new"))
        url = f"/api/v1/experiments/{created['id']}/"
        assert owner.get(url).json()["run_count"] == 1
        assert owner.patch(url, {"description": "changed"}, format="json").json()["run_count"] == 1
        rows = owner.get("/api/v1/experiments/").json()["results"]
        assert {row["name"]: row["run_count"] for row in rows} == {"Default": 0, "new": 1}


class TestRuns(CrossTenantMixin):
    basename = "run"
    detail_writes = ("patch", "delete")

    def make_object(self, tenant, project):
        return make_run(tenant, project, name="r")

    def create_payload(self, tenant, project):
        return {"project": project.slug, "experiment": "sweep", "name": "from a notebook", "params": {"lr": 0.1}}

    def update_payload(self, tenant, obj):
        return {"note": "changed"}

    detail_actions = ("log-batch", "mute", "unmute", "tags", "restore", "purge")

    def test_outsider_cannot_read_series_or_csv(self, tenant, clients):
        run = self.victim(tenant)
        for name in ("series", "csv"):
            url = reverse(f"run-{name}", kwargs={"pk": run.pk}) + "?key=loss"
            assert clients["outsider"].get(url).status_code == 404


class TestAlerts(CrossTenantMixin):
    basename = "alert"
    writable = False
    detail_writes = ()
    detail_actions = ("acknowledge", "resolve")

    def make_object(self, tenant, project):
        return Alert.objects.create(run=make_run(tenant, project), rule="non_finite", key="loss", step=3,
                                    message="loss is NaN at step 3", opened_at=timezone.now())


def test_a_run_created_from_a_notebook_names_its_experiment_and_params(tenant, clients):
    body = {"project": "vision", "experiment": "llama sweep", "name": "nb", "params": {"lr": 0.001, "opt": "adam"}}
    response = clients["member"].post(reverse("run-list"), body, format="json")
    assert response.status_code == 201, response.content
    run = response.json()
    assert run["experiment_name"] == "llama sweep" and run["params"] == {"lr": "0.001", "opt": "adam"}
    assert run["status"] == "RUNNING" and run["user_name"] == "member"


@pytest.mark.parametrize("name", ["sweep\n=cmd", "a\tb", "bell\x07", "esc\x1b[2J", "del\x7f", "n\x85l"])
def test_an_experiment_name_with_a_control_character_is_refused_through_every_door(tenant, clients, name):
    member = clients["member"]
    created = member.post("/api/v1/experiments/", {"project": "vision", "name": name}, format="json")
    assert created.status_code == 400 and "name" in created.json()["error"]["fields"], created.content
    run = member.post(reverse("run-list"), {"project": "vision", "experiment": name}, format="json")
    assert run.status_code == 400 and "experiment" in run.json()["error"]["fields"], run.content
    kept = member.post("/api/v1/experiments/", {"project": "vision", "name": "kept"}, format="json").json()
    renamed = member.patch(f"/api/v1/experiments/{kept['id']}/", {"name": name}, format="json")
    assert renamed.status_code == 400 and "name" in renamed.json()["error"]["fields"], renamed.content
    assert set(Experiment.objects.values_list("name", flat=True)) == {"kept", services.DEFAULT_EXPERIMENT}


def test_bad_params_at_creation_name_the_field(tenant, clients):
    body = {"project": "vision", "params": {"x" * 300: 1}}
    response = clients["member"].post(reverse("run-list"), body, format="json")
    assert response.status_code == 400
    assert "params.key" in response.json()["error"]["fields"]


def _log(run, **values):
    services.run_log_batch(run_id=run.pk, metrics=[{"key": k, "value": v, "step": 1} for k, v in values.items()])


def test_runs_filter_by_param_and_sort_by_a_metric(tenant, clients):
    runs = {}
    for lr, loss in (("0.1", 2.0), ("0.01", 0.5), ("0.1", 1.0), ("0.1", None)):
        run = make_run(tenant, tenant.project, params={"lr": lr})
        if loss is not None:
            _log(run, loss=loss)
        runs[run.pk] = (lr, loss)
    make_run(tenant, tenant.other_project, params={"lr": "0.1"})  # another tenant's: never listed
    response = clients["viewer"].get(reverse("run-list") + "?param=lr:0.1&sort=metric.loss")
    assert response.status_code == 200, response.content
    rows = response.json()["results"]
    assert [runs[r["id"]] for r in rows] == [("0.1", 1.0), ("0.1", 2.0), ("0.1", None)]  # no value sorts last
    rows = clients["viewer"].get(reverse("run-list") + "?sort=-metric.loss").json()["results"]
    assert [runs[r["id"]][1] for r in rows] == [2.0, 1.0, 0.5, None]


def test_runs_filter_by_a_metric_bound_and_keys_holding_double_underscores(tenant, clients):
    low = make_run(tenant, tenant.project, params={"a__b": "1"})
    _log(low, **{"loss": 0.5, "x__y": 3.0})
    high = make_run(tenant, tenant.project, params={"a__b": "2"})
    _log(high, loss=2.5)
    ids = [r["id"] for r in clients["viewer"].get(reverse("run-list") + "?metric=loss<2").json()["results"]]
    assert ids == [low.pk]
    ids = [r["id"] for r in clients["viewer"].get(reverse("run-list") + "?param=a__b:2").json()["results"]]
    assert ids == [high.pk]  # "a__b" is one key, not a path
    ids = [r["id"] for r in clients["viewer"].get(reverse("run-list") + "?metric=x__y>=3").json()["results"]]
    assert ids == [low.pk]


def test_a_series_gives_the_wall_time_of_its_steps_when_asked(tenant, clients):
    run = make_run(tenant, tenant.project)
    services.run_log_batch(run_id=run.pk, metrics=[{"key": "loss", "value": v, "step": s, "timestamp": 1000 + s}
                                                   for s, v in enumerate([1.0, "NaN", 0.5])])
    services.run_log_batch(run_id=run.pk, token_attempt=2, metrics=[{"key": "loss", "value": 0.7, "step": 2,
                                                                     "timestamp": 9000}])  # as attempt 2 logs
    url = reverse("run-series", kwargs={"pk": run.pk}) + "?key=loss"
    assert "times" not in clients["viewer"].get(url).json()
    body = clients["viewer"].get(url + "&times=1").json()
    assert body["times"] == [[0, 1000], [1, 1001], [2, 9000]]  # the redone step at the newest attempt's time


@pytest.mark.parametrize("query", ["?param=lr", "?sort=loss", "?sort=metric."])
def test_bad_run_filters_are_a_400_naming_them(tenant, clients, query):
    response = clients["viewer"].get(reverse("run-list") + query)
    assert response.status_code == 400
    assert set(response.json()["error"]["fields"]) & {"param", "sort"}


@pytest.mark.parametrize("query", ["?experiment=-1.26e284", "?job=53846664287801350000", "?experiment=1.5",
                                   "?job=0"])
def test_an_id_filter_takes_only_an_id(tenant, clients, query):
    """Found by the API fuzz test: a huge number reached SQLite and failed there, a 500."""
    response = clients["viewer"].get(reverse("run-list") + query)
    assert response.status_code == 400
    assert set(response.json()["error"]["fields"]) == {query[1:].split("=")[0]}


def test_an_id_filter_finds_the_runs_of_that_experiment(tenant, clients):
    mine = services.run_create(project=tenant.project, name="mine",
                               experiment=services.experiment_get_or_create(project=tenant.project, name="a"))
    services.run_create(project=tenant.project, name="other")
    rows = clients["viewer"].get(reverse("run-list") + f"?experiment={mine.experiment_id}").json()["results"]
    assert [row["name"] for row in rows] == ["mine"]


def test_a_series_is_downsampled_on_the_server_keeping_the_spike_and_the_nan(tenant, clients):
    run = make_run(tenant, tenant.project)
    values = [1.0] * 5000
    values[1234] = 50.0  # a one-step spike
    values[4321] = math.nan
    for start in range(0, 5000, 2500):
        services.run_log_batch(run_id=run.pk, metrics=[
            {"key": "loss", "value": "NaN" if math.isnan(v) else v, "step": start + i}
            for i, v in enumerate(values[start:start + 2500])])
    url = reverse("run-series", kwargs={"pk": run.pk})
    body = clients["viewer"].get(url + "?key=loss&max_points=100").json()
    assert body["total"] == 5000 and len(body["points"]) <= 100
    assert [1234, 50.0] in body["points"] and body["markers"] == [[4321, "NaN"]]
    zoomed = clients["viewer"].get(url + "?key=loss&max_points=1000&min_step=1200&max_step=1299").json()
    assert zoomed["total"] == 100 and len(zoomed["points"]) == 100  # full resolution when it fits
    assert body["attempts"] == [{"attempt": 1, "step": 0, "timestamp": body["attempts"][0]["timestamp"]}]


@pytest.mark.parametrize(("query", "field"), [("", "key"), ("?key=loss&max_points=1", "max_points"),
                                              ("?key=loss&min_step=x", "min_step")])
def test_bad_series_queries_are_a_400(tenant, clients, query, field):
    run = make_run(tenant, tenant.project)
    response = clients["viewer"].get(reverse("run-series", kwargs={"pk": run.pk}) + query)
    assert response.status_code == 400 and field in response.json()["error"]["fields"]


def test_csv_export_has_every_point_at_full_resolution(tenant, clients):
    run = make_run(tenant, tenant.project)
    services.run_log_batch(run_id=run.pk, metrics=[{"key": "loss", "value": v, "step": i}
                                                   for i, v in enumerate([3.0, "Infinity", 1.5])])
    response = clients["viewer"].get(reverse("run-csv", kwargs={"pk": run.pk}))
    assert response.status_code == 200
    text = b"".join(response.streaming_content).decode()
    assert text.splitlines() == ["key,step,value", "loss,0,3.0", "loss,1,Infinity", "loss,2,1.5"]


def test_the_csv_writes_no_cell_a_spreadsheet_would_run_and_keeps_negative_numbers(tenant, clients):
    run = make_run(tenant, tenant.project)
    services.run_log_batch(run_id=run.pk, metrics=[
        {"key": '=HYPERLINK("http://evil.example","x")', "value": -1.5, "step": 0},
        {"key": "@SUM(1)", "value": "-Infinity", "step": 0}, {"key": "-delta", "value": -2, "step": 1}])
    response = clients["viewer"].get(reverse("run-csv", kwargs={"pk": run.pk}))
    rows = list(csv.reader(io.StringIO(b"".join(response.streaming_content).decode())))
    assert sorted(rows[1:]) == sorted([["'=HYPERLINK(\"http://evil.example\",\"x\")", "0", "-1.5"],
                                       ["'@SUM(1)", "0", "-Infinity"], ["'-delta", "1", "-2.0"]])


def test_a_viewer_cannot_end_a_run_and_a_member_can(tenant, clients):
    run = make_run(tenant, tenant.project)
    url = reverse("run-detail", kwargs={"pk": run.pk})
    assert clients["viewer"].patch(url, {"status": "FINISHED"}, format="json").status_code == 403
    response = clients["member"].patch(url, {"status": "FINISHED"}, format="json")
    assert response.status_code == 200 and response.json()["ended_at"] is not None
    assert clients["member"].patch(url, {"status": "DONE"}, format="json").status_code == 400


def test_a_non_finite_last_value_is_spelled_out_and_flagged_not_null(tenant, clients):
    """JSON has no NaN: the summary spells a non-finite last value as the series API and log-batch do ("NaN",
    "Infinity", "-Infinity") and flags it, so it reads neither as a number nor as "never logged"."""
    run = make_run(tenant, tenant.project, name="diverged")
    services.run_log_batch(run_id=run.pk, metrics=[
        {"key": "loss", "value": 2.0, "step": 0}, {"key": "loss", "value": "NaN", "step": 1},
        {"key": "norm", "value": "-Infinity", "step": 0}, {"key": "acc", "value": 0.5, "step": 0}])
    summary = clients["viewer"].get(reverse("run-detail", args=[run.pk])).json()["summary"]
    assert summary["loss"] == {"last": "NaN", "last_finite": False, "step": 1, "min": 2.0, "max": 2.0}
    assert summary["norm"] == {"last": "-Infinity", "last_finite": False, "step": 0, "min": None, "max": None}
    assert summary["acc"] == {"last": 0.5, "last_finite": True, "step": 0, "min": 0.5, "max": 0.5}
    services.run_log_batch(run_id=run.pk, metrics=[{"key": "loss", "value": 1.5, "step": 2}])  # finite again
    listed = clients["viewer"].get(reverse("run-list"), {"project": tenant.project.slug}).json()["results"]
    assert listed[0]["summary"]["loss"] == {"last": 1.5, "last_finite": True, "step": 2, "min": 1.5, "max": 2.0}
