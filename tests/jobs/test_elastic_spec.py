"""Elastic job specs (issue 29): `replicas: {min, max}` in the API, the YAML job files and the submit form, and the
rules that refuse what cannot resize, each naming its field."""

import pytest

from jobs.models import Job
from tenancy.services import project_save
from tests.jobs.conftest import api_body


@pytest.fixture(autouse=True)
def _inventory(inventory):
    return inventory


def fields_of(response):
    assert response.status_code == 400, response.content
    return response.json()["error"]["fields"]


def elastic_body(low=1, high=3, **extra):
    body = api_body(**extra)
    body["groups"][0]["replicas"] = {"min": low, "max": high}
    return body


def test_an_elastic_group_is_stored_with_its_bounds_and_needs_its_minimum(tenant, clients):
    response = clients["member"].post("/api/v1/jobs/", elastic_body(1, 3, resize_cooldown=60,
                                                                    scaling_efficiency=0.8), format="json")
    assert response.status_code == 201, response.content
    body = response.json()
    assert body["total_devices"] == 8  # the minimum: one replica of 8 devices
    assert body["groups"][0]["replicas"] == 3 and body["groups"][0]["min_replicas"] == 1
    job = Job.objects.get(pk=body["id"])
    assert (job.resize_cooldown, job.scaling_efficiency) == (60, 0.8)
    assert job.groups.get().needed == 1


def test_defaults_and_a_plain_integer_stays_rigid(tenant, clients):
    response = clients["member"].post("/api/v1/jobs/", api_body(replicas=2), format="json")
    job = Job.objects.get(pk=response.json()["id"])
    assert job.groups.get().min_replicas is None and job.total_devices == 16
    assert (job.resize_cooldown, job.scaling_efficiency) == (300, 0.9)


def test_min_equal_to_max_is_a_rigid_gang(tenant, clients):
    response = clients["member"].post("/api/v1/jobs/", elastic_body(2, 2), format="json")
    assert response.status_code == 201, response.content
    assert Job.objects.get(pk=response.json()["id"]).groups.get().min_replicas is None


def test_elastic_from_a_yaml_job_file(tenant, clients):
    document = """
project: vision
name: elastic
image: ghcr.io/acme/train:1
command: [torchrun]
groups:
  - role: worker
    replicas: {min: 1, max: 4}
    devices: 8
    flavor: nvidia-h100-80gb
"""
    response = clients["member"].post("/api/v1/jobs/", document, content_type="application/yaml")
    assert response.status_code == 201, response.content
    assert response.json()["groups"][0]["min_replicas"] == 1


@pytest.mark.parametrize("replicas, field, words", [
    ({"min": 3, "max": 2}, "groups[0].replicas", "min (3) must be at most max (2)"),
    ({"min": 0, "max": 2}, "groups[0].replicas.min", "greater than or equal to 1"),
    ({"min": 1, "max": 2000}, "groups[0].replicas.max", "less than or equal to 1024"),
    ({"min": 1}, "groups[0].replicas", '"min" and "max"'),
    ({"min": 1, "max": 2, "step": 1}, "groups[0].replicas", "step"),
    ({"min": "1", "max": 2}, "groups[0].replicas.min", "whole number"),
    ("2", "groups[0].replicas", "whole number"),
    ([1, 2], "groups[0].replicas", "min"),
])
def test_bad_bounds_name_the_field(tenant, clients, replicas, field, words):
    body = api_body()
    body["groups"][0]["replicas"] = replicas
    fields = fields_of(clients["member"].post("/api/v1/jobs/", body, format="json"))
    assert field in fields and words in " ".join(fields[field]), fields
    assert not Job.objects.exists()


@pytest.mark.parametrize("launcher, words", [("megatron", "tensor and pipeline parallel"),
                                             ("command", "plain command")])
def test_a_launcher_that_cannot_resize_refuses_min_below_max(tenant, clients, launcher, words):
    fields = fields_of(clients["member"].post("/api/v1/jobs/", elastic_body(launcher=launcher), format="json"))
    assert words in fields["groups[0].replicas"][0] and launcher in fields["groups[0].replicas"][0]


def test_a_ray_jobs_head_is_one_pod_and_only_its_workers_may_be_elastic(tenant, clients):
    body = elastic_body(launcher="ray", launcher_options={"entrypoint": "python train.py"})
    body["groups"][0]["role"] = "head"
    body["groups"].append({"role": "worker", "replicas": {"min": 1, "max": 2}, "devices": 8,
                           "flavor": "nvidia-h100-80gb"})
    assert "head" in fields_of(clients["member"].post("/api/v1/jobs/", body, format="json"))["groups[0].replicas"][0]
    body["groups"][0]["replicas"] = 1
    response = clients["member"].post("/api/v1/jobs/", body, format="json")
    assert response.status_code == 201, response.content


def test_a_launcher_that_cannot_resize_still_runs_a_rigid_gang(tenant, clients):
    response = clients["member"].post("/api/v1/jobs/", elastic_body(2, 2, launcher="command"), format="json")
    assert response.status_code == 201, response.content


def test_a_topology_rule_is_refused_for_an_elastic_job(tenant, clients):
    fields = fields_of(clients["member"].post("/api/v1/jobs/", elastic_body(topology="require-same-rack"),
                                              format="json"))
    assert "any node" in fields["topology"][0]


@pytest.mark.parametrize("value", [-0.1, 1.5, "x"])
def test_scaling_efficiency_is_a_share(tenant, clients, value):
    assert "scaling_efficiency" in fields_of(clients["member"].post(
        "/api/v1/jobs/", elastic_body(scaling_efficiency=value), format="json"))


def test_resize_cooldown_is_seconds(tenant, clients):
    assert "resize_cooldown" in fields_of(clients["member"].post(
        "/api/v1/jobs/", elastic_body(resize_cooldown=-1), format="json"))


def test_a_project_with_elasticity_off_refuses_elastic_jobs_only(tenant, clients):
    project_save(actor=tenant.users["owner"], project=tenant.project, values={"elastic_jobs": False})
    fields = fields_of(clients["member"].post("/api/v1/jobs/", elastic_body(), format="json"))
    assert "does not allow elastic jobs" in fields["groups[0].replicas"][0]
    assert clients["member"].post("/api/v1/jobs/", api_body(replicas=2), format="json").status_code == 201


def test_the_admin_console_turns_elasticity_off(tenant, client, django_user_model):
    staff = django_user_model.objects.create_superuser("root", "root@example.com", "pw-0123456789")
    client.force_login(staff)
    project = tenant.project
    page = client.get(f"/admin/tenancy/project/{project.pk}/change/")
    assert page.status_code == 200 and b"elastic_jobs" in page.content
    form = {"organization": project.organization_id, "name": project.name, "slug": project.slug,
            "description": "", "max_running_jobs": "", "memberships-TOTAL_FORMS": "0",
            "memberships-INITIAL_FORMS": "0"}
    response = client.post(f"/admin/tenancy/project/{project.pk}/change/", form)
    assert response.status_code == 302, response.content[:2000]
    project.refresh_from_db()
    assert project.elastic_jobs is False  # an unticked box


def test_resubmit_keeps_the_bounds(tenant, clients):
    created = clients["member"].post("/api/v1/jobs/", elastic_body(1, 3, resize_cooldown=90), format="json").json()
    again = clients["member"].post(f"/api/v1/jobs/{created['id']}/resubmit/")
    assert again.status_code == 201, again.content
    job = Job.objects.get(pk=again.json()["id"])
    assert job.groups.get().min_replicas == 1 and job.resize_cooldown == 90
