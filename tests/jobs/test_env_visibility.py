"""A job's env may hold secrets: its values are shown only to the submitter, the project's admins and owners, and
platform staff (others read the names with hidden values), in the API and on the pages; and resubmitting, which
copies them, is refused to anyone else (403 naming env) - docs/security.md, "Who sees what"."""

from __future__ import annotations

import pytest
from django.urls import reverse

from jobs.models import Job
from jobs.selectors import HIDDEN_VALUE
from tenancy.models import Membership, Role
from tests.conftest import client_for, make_user
from tests.jobs.conftest import api_body
from tests.ui.conftest import login

SECRETS = {"HF_TOKEN": "hf_s3cret", "WANDB_API_KEY": "wandb-s3cret"}
MASKED = dict.fromkeys(SECRETS, HIDDEN_VALUE)


@pytest.fixture
def second_member(tenant):
    user = make_user("member2")
    Membership.objects.create(project=tenant.project, user=user, role=Role.MEMBER)
    return user


@pytest.fixture
def job_id(tenant, inventory, clients) -> int:
    created = clients["member"].post("/api/v1/jobs/", api_body(env=SECRETS), format="json")
    assert created.status_code == 201 and created.json()["env"] == SECRETS  # the submitter's own answer
    return created.json()["id"]


def test_the_api_shows_env_values_to_the_submitter_admins_and_staff_only(tenant, clients, second_member, job_id,
                                                                          staff_client):
    def env_for(client):
        return client.get(f"/api/v1/jobs/{job_id}/").json()["env"]

    assert env_for(clients["member"]) == SECRETS
    assert env_for(clients["admin"]) == SECRETS and env_for(clients["owner"]) == SECRETS
    assert env_for(staff_client) == SECRETS
    assert env_for(clients["viewer"]) == MASKED
    assert env_for(client_for(second_member)) == MASKED
    assert clients["admin"].post(f"/api/v1/jobs/{job_id}/cancel/").json()["env"] == SECRETS


def test_resubmitting_another_users_job_with_env_is_refused_naming_env(tenant, clients, second_member, job_id):
    response = client_for(second_member).post(f"/api/v1/jobs/{job_id}/resubmit/")
    assert response.status_code == 403
    assert response.json()["error"]["fields"] == {"env": [response.json()["error"]["message"]]}
    assert Job.objects.count() == 1


def test_the_submitter_and_admins_resubmit_with_the_env_as_themselves(tenant, clients, job_id):
    again = clients["admin"].post(f"/api/v1/jobs/{job_id}/resubmit/")
    assert again.status_code == 201 and again.json()["env"] == SECRETS
    assert again.json()["submitter"] == "admin"
    assert clients["member"].post(f"/api/v1/jobs/{job_id}/resubmit/").status_code == 201


def test_a_job_without_env_is_resubmitted_by_any_member_as_their_own(tenant, inventory, clients, second_member):
    job = clients["member"].post("/api/v1/jobs/", api_body(), format="json").json()["id"]
    again = client_for(second_member).post(f"/api/v1/jobs/{job}/resubmit/")
    assert again.status_code == 201 and again.json()["submitter"] == "member2"
    assert clients["viewer"].post(f"/api/v1/jobs/{job}/resubmit/").status_code == 403


def test_pages_show_env_values_only_to_those_who_may_read_them(tenant, second_member, job_id):
    page = reverse("job_detail", args=[job_id])
    editor = reverse("job_new") + f"?from={job_id}"
    for user in ("member", "admin"):
        body = login(tenant.users[user]).get(page).content.decode()
        assert "HF_TOKEN=hf_s3cret" in body and "HF_TOKEN: hf_s3cret" in body  # the facts and the spec's YAML
    for client in (login(tenant.users["viewer"]), login(second_member)):
        body = client.get(page).content.decode()
        assert "s3cret" not in body and f"HF_TOKEN={HIDDEN_VALUE}" in body
    form = login(second_member).get(editor).content.decode()
    assert "s3cret" not in form and "HF_TOKEN" in form


def test_the_resubmit_button_and_page_follow_the_rule(tenant, second_member, job_id):
    other = login(second_member)
    assert 'id="resubmit-job"' not in other.get(reverse("job_detail", args=[job_id])).content.decode()
    assert other.post(reverse("job_resubmit", args=[job_id])).status_code == 403
    admin = login(tenant.users["admin"])
    assert 'id="resubmit-job"' in admin.get(reverse("job_detail", args=[job_id])).content.decode()
    assert admin.post(reverse("job_resubmit", args=[job_id])).status_code == 302
