"""Run management (issue 31): rename, tags, notes, soft delete and restore, search by name, grouping; through the
API, the run page and MLflow's own client. Tenancy: another organization's run is a 404, a viewer a 403."""

from __future__ import annotations

import mlflow
import pytest
from mlflow.entities import ViewType
from rest_framework.test import APIClient

from tests.tracking.test_mlflow import live, refused, use_mlflow, user_token  # noqa: F401  (fixture)
from tracking import services
from tracking.models import Run

pytestmark = pytest.mark.django_db


def make_run(tenant, name="r", **kwargs):
    return services.run_create(project=tenant.project, user=tenant.users["member"], name=name, **kwargs)


def url(run, action=""):
    return f"/api/v1/runs/{run.pk}/" + (f"{action}/" if action else "")


def listed(client, query="") -> list[str]:
    response = client.get(f"/api/v1/runs/?project=vision&{query}")
    assert response.status_code == 200, response.content
    return [row["name"] for row in response.json()["results"]]


def test_rename_and_note_through_the_api(tenant, clients):
    run = make_run(tenant)
    member = clients["member"]
    answer = member.patch(url(run), {"name": "  lr sweep 3 ", "note": "**better** than 2"}, format="json")
    assert answer.status_code == 200, answer.content
    run.refresh_from_db()
    assert (run.name, run.note) == ("lr sweep 3", "**better** than 2")


@pytest.mark.parametrize(("body", "field"), [
    ({"name": "bad\nname"}, "name"), ({"name": "tab\tname"}, "name"), ({"name": "x" * 251}, "name"),
    ({"note": "n" * 20_001}, "note"), ({"name": ""}, "name")])
def test_bad_names_and_notes_are_a_400_naming_the_field_and_change_nothing(tenant, clients, body, field):
    run = make_run(tenant, name="kept")
    answer = clients["member"].patch(url(run), body, format="json")
    assert answer.status_code == 400, answer.content
    assert field in answer.json()["error"]["fields"]
    run.refresh_from_db()
    assert (run.name, run.note) == ("kept", "")


def test_tags_are_set_removed_and_filtered_by(tenant, clients):
    run, other = make_run(tenant, "a", tags={"team": "nlp", "old": "1"}), make_run(tenant, "b", tags={"team": "cv"})
    member = clients["member"]
    answer = member.post(url(run, "tags"), {"set": {"stage": "final", "team": "vision"}, "remove": ["old"]},
                         format="json")
    assert answer.status_code == 200, answer.content
    assert answer.json()["tags"] == {"stage": "final", "team": "vision"}
    assert listed(member, "tag=team:vision") == ["a"]
    assert listed(member, "tag=team:cv") == ["b"]
    assert other.pk not in [r.pk for r in Run.objects.filter(tags__stage="final")]


@pytest.mark.parametrize(("body", "field"), [
    ({"set": {"bad\u0007key": "v"}}, "tags.key"), ({"set": {"k": "v" * 8001}}, "tags.k"),
    ({"remove": "team"}, "remove"), ({"set": {"k" * 251: "v"}}, "tags.key"),
    ({"set": {"team": "x"}, "remove": ["team"]}, "remove"), ({"other": 1}, "other")])
def test_bad_tags_are_a_400_naming_the_field_and_write_nothing(tenant, clients, body, field):
    run = make_run(tenant, tags={"team": "nlp"})
    answer = clients["member"].post(url(run, "tags"), body, format="json")
    assert answer.status_code == 400, answer.content
    assert field in answer.json()["error"]["fields"], answer.json()
    run.refresh_from_db()
    assert run.tags == {"team": "nlp"}


def test_a_finished_run_takes_tags_and_a_new_name(tenant, clients):
    run = make_run(tenant)
    services.run_update(run=run, status="FINISHED")
    assert clients["member"].post(url(run, "tags"), {"set": {"verdict": "good"}}, format="json").status_code == 200
    assert clients["member"].patch(url(run), {"name": "kept"}, format="json").status_code == 200


def test_deleted_runs_are_hidden_shown_when_asked_take_no_data_and_come_back(tenant, clients):
    run, kept = make_run(tenant, "gone"), make_run(tenant, "kept")
    member = clients["member"]
    assert member.delete(url(run)).status_code == 204
    assert listed(member) == ["kept"]
    assert listed(member, "lifecycle=deleted") == ["gone"]
    assert sorted(listed(member, "lifecycle=all")) == ["gone", "kept"]
    assert member.get(url(run)).json()["deleted_at"] is not None  # still readable by its id, as MLflow's get_run
    refused_batch = member.post(url(run, "log-batch"), {"metrics": [{"key": "loss", "value": 1, "step": 0}]},
                                format="json")
    assert refused_batch.status_code == 409
    assert member.post(url(run, "tags"), {"set": {"a": "b"}}, format="json").status_code == 409
    run.refresh_from_db()
    assert run.summary == {} and run.tags == {}
    assert member.post(url(run, "restore")).status_code == 200
    assert sorted(listed(member)) == ["gone", "kept"]
    assert kept.pk


def test_only_staff_purge_and_only_a_deleted_run(tenant, clients, django_user_model):
    run = make_run(tenant)
    owner = clients["owner"]
    staff = django_user_model.objects.create_user("root", password="x", is_staff=True)
    root = APIClient()
    root.force_authenticate(staff)
    assert root.post(url(run, "purge")).status_code == 400  # not deleted yet
    assert owner.delete(url(run)).status_code == 204
    assert owner.post(url(run, "purge")).status_code == 403
    assert Run.objects.filter(pk=run.pk).exists()
    assert root.post(url(run, "purge")).status_code == 204
    assert not Run.objects.filter(pk=run.pk).exists()


def test_deleted_runs_are_purged_after_the_retention(tenant, settings):
    from datetime import timedelta

    from django.utils import timezone
    settings.TIDAL = {**settings.TIDAL, "TRACKING_DELETED_RETENTION_DAYS": 30}
    old, recent, active = make_run(tenant, "old"), make_run(tenant, "recent"), make_run(tenant, "active")
    Run.objects.filter(pk=old.pk).update(deleted_at=timezone.now() - timedelta(days=31))
    Run.objects.filter(pk=recent.pk).update(deleted_at=timezone.now() - timedelta(days=29))
    assert services.runs_purge_expired() == 1
    assert sorted(Run.objects.values_list("name", flat=True)) == ["active", "recent"]
    assert active.pk


def test_search_by_name_is_a_part_of_it_in_any_case(tenant, clients):
    for name in ("llama-sft-lr3", "LLAMA-dpo", "mistral"):
        make_run(tenant, name)
    assert sorted(listed(clients["viewer"], "name=llama")) == ["LLAMA-dpo", "llama-sft-lr3"]


@pytest.mark.parametrize("action", ["tags", "restore"])
def test_a_viewer_cannot_manage_and_an_outsider_finds_nothing(tenant, clients, action):
    run = make_run(tenant)
    assert clients["viewer"].post(url(run, action), {}, format="json").status_code == 403
    assert clients["outsider"].post(url(run, action), {}, format="json").status_code == 404
    assert clients["viewer"].delete(url(run)).status_code == 403
    assert clients["outsider"].delete(url(run)).status_code == 404
    run.refresh_from_db()
    assert run.deleted_at is None


def test_runs_group_by_a_param_with_metric_mean_min_and_max(tenant, clients):
    for lr, loss, team in (("0.1", 1.0, "nlp"), ("0.1", 3.0, "nlp"), ("0.01", 0.5, "nlp"), ("0.1", 9.0, "cv")):
        run = make_run(tenant, params={"lr": lr}, tags={"team": team})
        services.run_log_batch(run_id=run.pk, metrics=[{"key": "loss", "value": loss, "step": 0}])
    make_run(tenant, tags={"team": "nlp"})  # no lr: the null group
    answer = clients["viewer"].get("/api/v1/runs/groups/?project=vision&tag=team:nlp&group_by=param.lr"
                                   "&metric_key=loss")
    assert answer.status_code == 200, answer.content
    groups = {g["value"]: (g["count"], g["metrics"]["loss"]) for g in answer.json()["groups"]}
    assert groups["0.1"] == (2, {"mean": 2.0, "min": 1.0, "max": 3.0, "count": 2})
    assert groups["0.01"][1]["mean"] == 0.5
    assert groups[None][0] == 1 and groups[None][1]["count"] == 0
    assert clients["outsider"].get("/api/v1/runs/groups/?group_by=param.lr").json()["groups"] == []
    bad = clients["viewer"].get("/api/v1/runs/groups/?group_by=lr")
    assert bad.status_code == 400 and "group_by" in bad.json()["error"]["fields"]


def test_the_run_page_manages_the_run_and_renders_the_note_safely(tenant, clients, client):
    run = make_run(tenant, name="page")
    client.force_login(tenant.users["member"])
    page = f"/runs/{run.pk}/manage/"
    client.post(page, {"action": "note", "note": "**bold** <script>alert(1)</script> [x](javascript:alert(2))"})
    client.post(page, {"action": "tag", "key": "team", "value": "nlp"})
    client.post(page, {"action": "rename", "name": "renamed"})
    html = client.get(f"/runs/{run.pk}/").content.decode()
    assert "<strong>bold</strong>" in html
    assert "<script>alert(1)" not in html and "&lt;script&gt;" in html
    assert 'href="javascript:' not in html
    run.refresh_from_db()
    assert (run.name, run.tags) == ("renamed", {"team": "nlp"})
    response = client.post(page, {"action": "rename", "name": "bad\x1bname"}, follow=True)
    assert "name: A run&#x27;s name must not contain control characters." in response.content.decode()
    client.post(page, {"action": "untag", "key": "team"})
    client.post(page, {"action": "delete"})
    run.refresh_from_db()
    assert run.tags == {} and run.deleted_at is not None and run.name == "renamed"
    table = client.get(f"/experiments/{run.experiment_id}/").content.decode()
    assert f'data-run="{run.pk}"' not in table
    assert f'data-run="{run.pk}"' in client.get(f"/experiments/{run.experiment_id}/?lifecycle=deleted").content.decode()
    client.post(page, {"action": "restore"})
    run.refresh_from_db()
    assert run.deleted_at is None
    client.force_login(tenant.users["viewer"])
    assert client.post(page, {"action": "delete"}).status_code == 403
    assert "run-manage" not in client.get(f"/runs/{run.pk}/").content.decode()
    client.force_login(tenant.users["outsider"])
    assert client.post(page, {"action": "delete"}).status_code == 404
    run.refresh_from_db()
    assert run.deleted_at is None


@live
def test_mlflow_client_manages_runs(tenant, use_mlflow):  # noqa: F811
    client = use_mlflow(user_token(tenant.users["member"]))
    experiment = client.create_experiment("manage")
    first = client.create_run(experiment, run_name="alpha-1").info.run_id
    second = client.create_run(experiment, run_name="beta-2").info.run_id
    client.set_tag(first, "team", "nlp")
    client.set_tag(second, "team", "cv")
    client.set_tag(first, "mlflow.note.content", "a *note*")
    client.set_terminated(first)
    client.set_tag(first, "verdict", "good")  # a finished run takes tags, as MLflow's
    client.delete_tag(first, "verdict")
    refused("RESOURCE_DOES_NOT_EXIST", client.delete_tag, first, "verdict")
    client.update_run(second, name="beta-renamed")
    run = client.get_run(first)
    assert run.data.tags["team"] == "nlp" and "verdict" not in run.data.tags
    assert Run.objects.get(pk=first).note == "a *note*"

    def names(filter_string="", view=ViewType.ACTIVE_ONLY):
        return sorted(r.info.run_name for r in client.search_runs([experiment], filter_string, run_view_type=view))
    assert names("tags.team = 'nlp'") == ["alpha-1"]
    assert names("attributes.run_name LIKE 'beta%'") == ["beta-renamed"]
    client.delete_run(second)
    assert client.get_run(second).info.lifecycle_stage == "deleted"
    assert names() == ["alpha-1"]
    assert names(view=ViewType.DELETED_ONLY) == ["beta-renamed"]
    assert names(view=ViewType.ALL) == ["alpha-1", "beta-renamed"]
    refused("INVALID_PARAMETER_VALUE", client.log_metric, second, "loss", 1.0)
    client.restore_run(second)
    assert client.get_run(second).info.lifecycle_stage == "active"
    assert names() == ["alpha-1", "beta-renamed"]
    refused("INVALID_PARAMETER_VALUE", client.set_tag, second, "bad\nkey", "v")
    viewer = use_mlflow(user_token(tenant.users["viewer"]))
    refused("PERMISSION_DENIED", viewer.delete_run, first)
    refused("PERMISSION_DENIED", viewer.set_tag, first, "k", "v")
    outsider = use_mlflow(user_token(tenant.users["outsider"]), project="vision")
    refused("RESOURCE_DOES_NOT_EXIST", outsider.delete_run, first)
    assert mlflow.get_tracking_uri()


def test_experiment_run_counts_leave_deleted_runs_out(tenant, clients):
    experiment = services.experiment_get_or_create(project=tenant.project, name="counted")
    kept = services.run_create(project=tenant.project, experiment=experiment, name="kept")
    gone = services.run_create(project=tenant.project, experiment=experiment, name="gone")
    services.run_delete(actor=tenant.users["member"], run=gone)
    assert clients["viewer"].get(f"/api/v1/experiments/{experiment.pk}/").json()["run_count"] == 1
    assert kept.pk
