"""Read-only API tokens: created through the API or the Settings page, listed as such, audited; they read
everything their user may read and answer every write 403, whatever the user's role and whatever the endpoint
(DRF viewsets, the tracking ingestion, MLflow's endpoints), without writing anything."""

from __future__ import annotations

import pytest
from django.urls import reverse
from rest_framework.test import APIClient

from tenancy.models import ApiToken, AuditEntry, Project
from tenancy.services import token_create, token_revoke
from tests.conftest import client_for
from tests.ui.conftest import login
from tracking import services as tracking_services
from tracking.points import stored_points

READ_ONLY = "This token is read-only."


def bearer(secret: str) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {secret}")
    return client


@pytest.fixture
def owner_read_only(tenant) -> APIClient:
    """The project owner's read-only token: the role allows every write, so any refusal comes from the token."""
    return bearer(token_create(user=tenant.users["owner"], name="dashboard", read_only=True)[1])


def test_the_api_creates_lists_and_audits_a_read_only_token(tenant, clients):
    response = clients["member"].post("/api/v1/tokens/", {"name": "notebook", "read_only": True}, format="json")
    assert response.status_code == 201, response.content
    assert response.json()["read_only"] is True
    token = ApiToken.objects.get(pk=response.json()["id"])
    assert token.read_only
    listed = {row["name"]: row["read_only"] for row in clients["member"].get("/api/v1/tokens/").json()["results"]}
    assert listed == {"notebook": True, "test": False}
    entry = AuditEntry.objects.get(action="token.create", target_id=str(token.pk))
    assert entry.changes == {"name": "notebook", "read_only": True}
    assert bearer(response.json()["token"]).get("/api/v1/me/").json()["read_only"] is True
    assert clients["member"].get("/api/v1/me/").json()["read_only"] is False


def test_read_only_is_a_boolean(tenant, clients):
    response = clients["member"].post("/api/v1/tokens/", {"name": "x", "read_only": "maybe"}, format="json")
    assert response.status_code == 400 and "read_only" in response.json()["error"]["fields"]


@pytest.mark.parametrize("method", ["get", "head", "options"])
def test_it_reads_what_its_user_reads(tenant, owner_read_only, method):
    response = getattr(owner_read_only, method)("/api/v1/projects/vision/")
    assert response.status_code == 200


def test_every_kind_of_write_is_refused_and_nothing_changes(tenant, owner_read_only):
    own = ApiToken.objects.get(name="dashboard")
    run = tracking_services.run_create(project=tenant.project, name="r", user=tenant.users["owner"])
    writes = [
        ("patch", "/api/v1/projects/vision/", {"name": "Renamed"}),
        ("put", "/api/v1/projects/vision/", {"name": "Renamed", "slug": "vision"}),
        ("post", "/api/v1/tokens/", {"name": "escalate"}),  # minting a full token would undo the restriction
        ("delete", f"/api/v1/tokens/{own.pk}/", None),
        ("post", "/api/v1/jobs/", {}),  # refused before the body is even read: 403, not a 400
        ("post", f"/api/v1/runs/{run.pk}/log-batch/", {"metrics": [{"key": "loss", "value": 1.0, "step": 0}]}),
    ]
    tokens_before, audit_before = ApiToken.objects.count(), AuditEntry.objects.count()
    for method, url, body in writes:
        response = getattr(owner_read_only, method)(url, body, format="json")
        assert response.status_code == 403, (method, url, response.content)
        assert response.json()["error"] == {"code": "read_only_token", "message": READ_ONLY, "fields": {}}
    assert Project.objects.get(slug="vision").name == "Vision"
    assert ApiToken.objects.count() == tokens_before and ApiToken.objects.get(pk=own.pk).revoked_at is None
    assert AuditEntry.objects.count() == audit_before and not stored_points(run.pk)
    # The same user's full token may do the same write: the refusal is the token's, not the role's.
    assert client_for(tenant.users["owner"]).patch("/api/v1/projects/vision/", {"name": "Renamed"},
                                                   format="json").status_code == 200


def test_every_write_operation_of_the_schema_refuses_it(tenant, owner_read_only):
    """Walks the OpenAPI schema, so an endpoint added later is held to it too: every write answers 403, on an object
    that exists (the owner's own project and token) or not."""
    import re

    from drf_spectacular.generators import SchemaGenerator

    own = ApiToken.objects.get(name="dashboard")
    paths = SchemaGenerator().get_schema(public=True)["paths"]
    writes = [(method, path) for path, operations in paths.items() for method in operations
              if method in ("post", "put", "patch", "delete")]
    for method, path in writes:
        url = re.sub(r"\{[^}]+\}", "vision" if "{slug}" in path else str(own.pk), path)
        response = getattr(owner_read_only, method)(url, {}, format="json")
        assert response.status_code == 403, (method, path, response.content)
        assert response.json()["error"]["code"] == "read_only_token"
    assert len(writes) > 50 and ApiToken.objects.get(pk=own.pk).revoked_at is None


def test_mlflow_writes_are_refused_in_mlflows_error_shape(tenant, owner_read_only):
    experiment = tracking_services.experiment_get_or_create(project=tenant.project, name="sweep")
    response = owner_read_only.post("/mlflow/vision/api/2.0/mlflow/runs/create",
                                    {"experiment_id": str(experiment.pk)}, format="json")
    assert response.status_code == 403
    assert response.json() == {"error_code": "PERMISSION_DENIED", "message": READ_ONLY}
    response = owner_read_only.get("/mlflow/vision/api/2.0/mlflow/experiments/get",
                                   {"experiment_id": str(experiment.pk)})
    assert response.status_code == 200 and response.json()["experiment"]["name"] == "sweep"


def test_a_revoked_read_only_token_is_401_not_403(tenant):
    token, secret = token_create(user=tenant.users["owner"], name="old", read_only=True)
    token_revoke(actor=tenant.users["owner"], token=token)
    assert bearer(secret).post("/api/v1/tokens/", {"name": "x"}, format="json").status_code == 401


class TestSettingsPage:
    def test_the_form_creates_a_read_only_token_and_the_table_says_so(self, tenant):
        member = login(tenant.users["member"])
        url = reverse("token_create", args=[tenant.project.slug])
        body = member.post(url, {"name": "dashboard", "read_only": "on"}, HTTP_HX_REQUEST="true").content.decode()
        assert ApiToken.objects.get(name="dashboard").read_only
        member.post(url, {"name": "laptop"}, HTTP_HX_REQUEST="true")
        assert not ApiToken.objects.get(name="laptop").read_only
        body = member.get(reverse("project_settings", args=[tenant.project.slug])).content.decode()
        assert 'name="read_only"' in body
        rows = {name: body.split(f"<td>{name}</td>", 1)[1].split("</tr>", 1)[0] for name in ("dashboard", "laptop")}
        assert "read-only" in rows["dashboard"] and "read and write" in rows["laptop"]
