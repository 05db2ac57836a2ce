"""Submission through the API: the rules, and bad input answered with a 400 naming the field."""

import pytest

from jobs.models import Job
from tests.jobs.conftest import api_body


@pytest.fixture(autouse=True)
def _inventory(inventory):
    return inventory


def fields_of(response):
    assert response.status_code == 400, response.content
    return response.json()["error"]["fields"]


def test_submit_queues_the_job_with_an_event(tenant, clients):
    response = clients["member"].post("/api/v1/jobs/", api_body(replicas=2), format="json")
    assert response.status_code == 201, response.content
    body = response.json()
    assert body["state"] == "queued" and body["total_devices"] == 16 and body["priority_class"] == "normal"
    assert [e["to_state"] for e in body["events"]] == ["queued"]
    assert body["submitter"] == "member"


def test_submit_from_yaml(tenant, clients):
    document = """
project: vision
name: yaml-job
image: ghcr.io/acme/train:1
command: [python, train.py]
launcher: deepspeed
groups:
  - role: worker
    replicas: 2
    devices: 8
    flavor: nvidia-h100-80gb
"""
    response = clients["member"].post("/api/v1/jobs/", document, content_type="application/yaml")
    assert response.status_code == 201, response.content
    assert response.json()["launcher"] == "deepspeed"


def test_invalid_yaml_names_the_line(tenant, clients):
    response = clients["member"].post("/api/v1/jobs/", "name: x\ngroups: [\n", content_type="application/yaml")
    assert response.status_code == 400
    assert "line" in response.json()["error"]["message"]


@pytest.mark.parametrize("change, field", [
    ({"groups": [{"replicas": 1, "devices": 8, "flavor": "nvidia-b200"}]}, "groups[0].flavor"),
    ({"groups": [{"replicas": 0, "devices": 8, "flavor": "nvidia-h100-80gb"}]}, "groups[0].replicas"),
    ({"groups": [{"replicas": 1, "devices": -1, "flavor": "nvidia-h100-80gb"}]}, "groups[0].devices"),
    ({"groups": []}, "groups"),
    ({"image": ""}, "image"),
    ({"image": "has space"}, "image"),
    ({"command": []}, "command"),
    ({"env": {"1BAD": "x"}}, "env"),
    ({"env": {"MASTER_ADDR": "evil"}}, "env"),
    ({"name": "x" * 201}, "name"),
    ({"max_runtime": "soon"}, "max_runtime"),
    ({"topology": "same-galaxy"}, "topology"),
    ({"priority_class": "urgent"}, "priority_class"),
    ({"launcher": "megatron", "launcher_options": {"tensor_parallel": 3}}, "launcher_options"),
    ({"launcher": "ray"}, "launcher_options.entrypoint"),
    ({"surprise": 1}, "surprise"),
])
def test_bad_input_names_the_field(tenant, clients, change, field):
    body = {**api_body(), **change}
    if "image" in change and change["image"] == "":
        body["image"] = ""
    assert field in fields_of(clients["member"].post("/api/v1/jobs/", body, format="json"))
    assert Job.objects.count() == 0


@pytest.mark.parametrize("change, field", [
    ({"env": {"LR\n": "x"}}, "env"),
    ({"env": {"..": "x"}}, "env"),
    ({"labels": {"team\n": "x"}}, "labels"),
    ({"labels": {"Example.com/team": "x"}}, "labels"),
    ({"labels": {"team": "not valid!"}}, "labels"),
    ({"labels": {"team": "-x"}}, "labels"),
    ({"image": "ghcr.io/Acme/train:1"}, "image"),
    ({"image": "ghcr.io/acme/train:"}, "image"),
    ({"image": "ghcr.io/acme/train:1@sha256:short"}, "image"),
])
def test_names_kubernetes_would_refuse_are_refused_at_submission(tenant, clients, change, field):
    """Checked with Kubernetes' own rules, whole: a trailing newline used to pass (`$` matches before it) and the
    job failed only at dispatch."""
    assert field in fields_of(clients["member"].post("/api/v1/jobs/", {**api_body(), **change}, format="json"))
    assert Job.objects.count() == 0


@pytest.mark.parametrize("change, field", [
    ({"labels": {"tidal.dev/job-id": "7"}}, "labels"),
    ({"labels": {"kubernetes.io/hostname": "gpu-1"}}, "labels"),
    ({"labels": {"node.kubernetes.io/instance-type": "x"}}, "labels"),
    ({"labels": {"k8s.io/x": "y"}}, "labels"),
    ({"labels": {"Tidal.dev/x": "y"}}, "labels"),
    ({"checkpoint_path": "s3://ckpt/vision/../secret"}, "checkpoint_path"),
    ({"checkpoint_path": "../other"}, "checkpoint_path"),
    ({"checkpoint_path": "/ckpt/a\\..\\b"}, "checkpoint_path"),
    ({"checkpoint_path": "/ckpt/a\nb"}, "checkpoint_path"),
    ({"env": {"KUBERNETES_SERVICE_HOST": "10.0.0.1"}}, "env"),
    ({"env": {"KUBERNETES_PORT_443_TCP_ADDR": "10.0.0.1"}}, "env"),
    ({"env": {"MLFLOW_TRACKING_URI": "http://evil.example"}}, "env"),
    ({"env": {"MLFLOW_RUN_ID": "1"}}, "env"),
    ({"env": {"TIDAL_RESUME_FROM": "s3://other/ckpt"}}, "env"),
    ({"groups": [{"replicas": "5", "devices": 8, "flavor": "nvidia-h100-80gb"}]}, "groups[0].replicas"),
    ({"groups": [{"replicas": 1, "devices": "8", "flavor": "nvidia-h100-80gb"}]}, "groups[0].devices"),
    ({"groups": [{"replicas": True, "devices": 8, "flavor": "nvidia-h100-80gb"}]}, "groups[0].replicas"),
    ({"max_runtime": "3600"}, "max_runtime"),
    ({"experiment": "sweep\x1b[31m"}, "experiment"),
    ({"experiment": "a\nb"}, "experiment"),
])
def test_what_belongs_to_the_platform_or_is_not_its_type_is_refused(tenant, clients, change, field):
    """Reserved label prefixes, a checkpoint path climbing out with '..', variables Kubernetes or Tidal set for the
    pod, a number given as text, control characters in names: each a 400 naming the field, nothing written."""
    assert field in fields_of(clients["member"].post("/api/v1/jobs/", {**api_body(), **change}, format="json"))
    assert Job.objects.count() == 0


def test_whole_numbers_as_floats_and_the_recommended_app_labels_are_accepted(tenant, clients):
    body = api_body(labels={"app.kubernetes.io/name": "bert", "example.com/tidal.dev": "x"},
                    checkpoint_path="s3://ckpt/vision/run..1/", experiment="=HYPERLINK(x)", max_runtime=3600.0)
    response = clients["member"].post("/api/v1/jobs/", body, format="json")
    assert response.status_code == 201, response.content
    assert response.json()["max_runtime"] == 3600


def test_names_kubernetes_accepts_are_accepted(tenant, clients):
    body = api_body(env={"my.env-name": "1", "_X": ""}, labels={"app.kubernetes.io/name": "bert", "tier": ""},
                    image="registry.example.com:5000/team/train@sha256:" + "ab" * 32)
    response = clients["member"].post("/api/v1/jobs/", body, format="json")
    assert response.status_code == 201, response.content
    assert response.json()["labels"] == {"app.kubernetes.io/name": "bert", "tier": ""}


def test_missing_required_fields(tenant, clients):
    fields = fields_of(clients["member"].post("/api/v1/jobs/", {"project": "vision"}, format="json"))
    assert {"name", "image", "command", "groups"} <= set(fields)


@pytest.mark.parametrize("groups, reason", [
    ([{"replicas": 1, "devices": 16, "flavor": "nvidia-h100-80gb"}], "largest"),
    ([{"replicas": 4, "devices": 8, "flavor": "nvidia-a100-40gb"}], "nvidia-a100-40gb"),
])
def test_a_job_that_can_never_run_is_rejected(tenant, clients, groups, reason):
    response = clients["member"].post("/api/v1/jobs/", {**api_body(), "groups": groups}, format="json")
    error = response.json()["error"]
    assert response.status_code == 400 and error["code"] == "never_fits"
    assert reason in error["message"] and "groups" in error["fields"]


def test_a_gang_whose_replicas_need_more_big_nodes_than_its_rack_has_is_rejected(tenant, clients, inventory):
    """A master and two workers of 8 devices each, in one rack of two 8-device nodes and two of 4: each group fits
    the rack alone and its devices add up, yet three replicas of 8 need three nodes of 8. Accepted before, to wait
    forever."""
    from clusters.models import Node

    for i in (3, 4):
        Node.objects.create(cluster=inventory["cluster"], name=f"r1-n{i}", flavor=inventory["h100"], devices=4,
                            block="block-a", rack="r1", position=4 + i)
    groups = [{"role": "master", "replicas": 1, "devices": 8, "flavor": "nvidia-h100-80gb"},
              {"role": "worker", "replicas": 2, "devices": 8, "flavor": "nvidia-h100-80gb"}]
    body = {**api_body(), "groups": groups, "topology": "require-same-rack"}
    response = clients["member"].post("/api/v1/jobs/", body, format="json")
    error = response.json()["error"]
    assert response.status_code == 400 and error["code"] == "never_fits", response.content
    assert error["message"] == ("This job can never run: needs 3 x 8 nvidia-h100-80gb in one labelled rack; the "
                                "largest has room for 2 even when empty")
    # Without the rack constraint the four nodes of 8 hold it.
    response = clients["member"].post("/api/v1/jobs/", {**body, "topology": "none"}, format="json")
    assert response.status_code == 201, response.content


def test_bigger_than_guarantee_plus_borrow_is_rejected(tenant, clients):
    # vision: 16 guaranteed + 8 borrow on h100; 32 devices can never be admitted
    response = clients["member"].post("/api/v1/jobs/", api_body(replicas=4), format="json")
    assert response.status_code == 400 and response.json()["error"]["code"] == "never_fits"


def test_viewer_cannot_submit_and_archived_project_refuses(tenant, clients):
    assert clients["viewer"].post("/api/v1/jobs/", api_body(), format="json").status_code == 403
    tenant.project.archived = True
    tenant.project.save()
    response = clients["member"].post("/api/v1/jobs/", api_body(), format="json")
    assert response.status_code == 400 and "project" in response.json()["error"]["fields"]


def test_deleting_a_project_with_jobs_is_refused(tenant, clients):
    clients["member"].post("/api/v1/jobs/", api_body(), format="json")
    response = clients["owner"].delete("/api/v1/projects/vision/")
    assert response.status_code == 409
    assert "archive" in response.json()["error"]["message"]
    assert Job.objects.filter(project=tenant.project).count() == 1


def test_removing_a_member_keeps_their_jobs(tenant, clients):
    from tenancy.models import Membership

    job_id = clients["member"].post("/api/v1/jobs/", api_body(), format="json").json()["id"]
    membership = Membership.objects.get(project=tenant.project, user=tenant.users["member"])
    assert clients["owner"].delete(f"/api/v1/memberships/{membership.pk}/").status_code == 204
    body = clients["owner"].get(f"/api/v1/jobs/{job_id}/").json()
    assert body["submitter"] == "member"
    assert clients["member"].get(f"/api/v1/jobs/{job_id}/").status_code == 404


def test_members_cancel_only_their_own_jobs(tenant, clients):
    job_id = clients["owner"].post("/api/v1/jobs/", api_body(), format="json").json()["id"]
    assert clients["member"].post(f"/api/v1/jobs/{job_id}/cancel/").status_code == 403
    assert clients["admin"].post(f"/api/v1/jobs/{job_id}/cancel/").json()["state"] == "cancelled"
    again = clients["admin"].post(f"/api/v1/jobs/{job_id}/cancel/")
    assert again.status_code == 409 and again.json()["error"]["code"] == "invalid_transition"


def test_resubmit_copies_the_spec(tenant, clients):
    job_id = clients["member"].post("/api/v1/jobs/", api_body(env={"LR": "3e-4"}), format="json").json()["id"]
    response = clients["member"].post(f"/api/v1/jobs/{job_id}/resubmit/")
    assert response.status_code == 201
    assert response.json()["env"] == {"LR": "3e-4"} and response.json()["id"] != job_id
