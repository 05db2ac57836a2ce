"""A NUL character in a project slug (or any name) in an address, a filter or a form: a 400 or a 404, never a 500.

PostgreSQL refuses to compare text holding a NUL, so these answered 500 there (SQLite compares it); run this file on
PostgreSQL too (DATABASE_URL)."""

from __future__ import annotations

import pytest
from django.test import Client

from tenancy.models import Membership
from tenancy.selectors import project_for_user

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize("address", [
    "/api/v1/projects/vi%00sion/",
    "/api/v1/organizations/ac%00me/",
    "/api/v1/clusters/si%00m/",
    "/api/v1/jobs/?project=vi%00sion",
    "/api/v1/jobs/failure-causes/?project=vi%00sion",
    "/api/v1/jobs/?submitter=a%00b",
])
def test_in_an_api_address_or_filter(tenant, clients, address):
    response = clients["owner"].get(address)
    assert response.status_code == 400 and response.json()["error"]["code"] == "nul_character", response.content


def test_in_a_page_address_and_an_mlflow_one(tenant, clients):
    page = Client()
    page.force_login(tenant.users["owner"])
    assert page.get("/projects/vi%00sion/settings/").status_code in (400, 404)
    assert page.get("/jobs/?flavor=a%00").status_code == 400
    mlflow = clients["owner"].get("/mlflow/vision/api/2.0/mlflow/experiments/get-by-name",
                                  {"experiment_name": "a\x00b"})
    assert mlflow.status_code == 400


def test_in_a_form_field(tenant, clients):
    """Form bodies (multipart, as the test client sends by default) are refused like a JSON string holding one."""
    response = clients["owner"].post("/api/v1/memberships/", {"project": "vision", "user": "view\x00er"})
    assert response.status_code == 400 and response.json()["error"]["code"] == "parse_error"
    response = clients["owner"].post("/api/v1/experiments/", {"project": "vi\x00sion", "name": "x"},
                                     format="multipart")
    assert response.status_code == 400
    assert Membership.objects.filter(project=tenant.project).count() == 4


def test_switching_to_a_project_that_cannot_exist_is_a_404(tenant):
    page = Client()
    page.force_login(tenant.users["owner"])
    assert page.post("/switch/", {"project": "vi\x00sion"}).status_code == 404


def test_a_slug_that_cannot_be_one_finds_nothing_without_asking_the_database(tenant, django_assert_num_queries):
    with django_assert_num_queries(0):
        assert project_for_user(tenant.users["owner"], "vi\x00sion") is None
        assert project_for_user(tenant.users["owner"], "Vision") is None
