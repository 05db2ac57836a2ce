"""Chart panels saved per experiment (issue 31): the API with the shared cross-tenant tests and bad input."""

from __future__ import annotations

import pytest

from tests.crosstenant import CrossTenantMixin
from tracking import services
from tracking.models import ChartPanel

pytestmark = pytest.mark.django_db


def experiment_of(project, name="sweep"):
    return services.experiment_get_or_create(project=project, name=name)


class TestChartPanels(CrossTenantMixin):
    basename = "chartpanel"

    def make_object(self, tenant, project):
        return ChartPanel.objects.create(experiment=experiment_of(project), keys=["loss"])

    def create_payload(self, tenant, project):
        return {"experiment": experiment_of(project).pk, "keys": ["loss", "eval/loss"], "scale": "log"}

    def update_payload(self, tenant, obj):
        return {"smoothing": 0.6}

    def test_cannot_create_in_another_tenants_project(self, tenant, clients):
        response = clients["owner"].post(self.list_url(), self.create_payload(tenant, tenant.other_project),
                                         format="json")
        assert response.status_code == 400
        assert "experiment" in response.json()["error"]["fields"]
        assert not ChartPanel.objects.exists()


def test_a_member_saves_a_panel_and_everyone_in_the_project_reads_it(tenant, clients):
    experiment = experiment_of(tenant.project)
    created = clients["member"].post("/api/v1/chart-panels/", {
        "experiment": experiment.pk, "title": "losses", "keys": ["train/loss", "eval/loss"], "scale": "log",
        "smoothing": 0.8, "x_axis": "relative", "group_by": "param.lr"}, format="json")
    assert created.status_code == 201, created.content
    body = created.json()
    assert (body["keys"], body["scale"], body["x_axis"], body["group_by"], body["created_by"]) == (
        ["train/loss", "eval/loss"], "log", "relative", "param.lr", tenant.users["member"].username)
    listed = clients["viewer"].get(f"/api/v1/chart-panels/?experiment={experiment.pk}").json()["results"]
    assert [p["title"] for p in listed] == ["losses"]
    changed = clients["member"].patch(f"/api/v1/chart-panels/{body['id']}/", {"scale": "linear"}, format="json")
    assert changed.json()["scale"] == "linear"
    assert clients["member"].delete(f"/api/v1/chart-panels/{body['id']}/").status_code == 204
    assert not ChartPanel.objects.exists()


@pytest.mark.parametrize(("body", "field"), [
    ({"keys": []}, "keys"), ({"keys": "loss"}, "keys"), ({"keys": [f"k{i}" for i in range(11)]}, "keys"),
    ({"keys": ["bad\nkey"]}, "keys[0]"), ({"keys": ["x" * 251]}, "keys[0]"), ({"keys": ["a", "a"]}, "keys"),
    ({"keys": ["loss"], "scale": "sqrt"}, "scale"), ({"keys": ["loss"], "smoothing": 1.5}, "smoothing"),
    ({"keys": ["loss"], "x_axis": "epoch"}, "x_axis"), ({"keys": ["loss"], "group_by": "lr"}, "group_by"),
    ({"keys": ["loss"], "title": "a\x1bb"}, "title"), ({"keys": ["loss"], "title": "t" * 201}, "title"),
    ({"keys": ["loss"], "experiment": 999_999}, "experiment")])
def test_bad_panels_are_a_400_naming_the_field_and_save_nothing(tenant, clients, body, field):
    payload = {"experiment": experiment_of(tenant.project).pk, **body}
    answer = clients["member"].post("/api/v1/chart-panels/", payload, format="json")
    assert answer.status_code == 400, answer.content
    assert field in answer.json()["error"]["fields"], answer.json()
    assert not ChartPanel.objects.exists()


def test_a_panel_does_not_move_to_another_experiment(tenant, clients):
    panel = ChartPanel.objects.create(experiment=experiment_of(tenant.project), keys=["loss"])
    other = experiment_of(tenant.project, "other")
    answer = clients["member"].patch(f"/api/v1/chart-panels/{panel.pk}/", {"experiment": other.pk}, format="json")
    assert answer.status_code == 400 and "experiment" in answer.json()["error"]["fields"]
