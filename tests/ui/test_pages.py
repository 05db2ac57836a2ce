"""Page tests with Django's test client: every page renders for a member, tenants stay apart, roles are enforced,
and the YAML submit form validates like the API."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.urls import reverse
from django.utils import timezone

from jobs.models import Job
from jobs.states import State
from jobs.templates_launcher import launcher_template
from jobs.views import estimate_text, humanize_eta
from quotas.models import Quota
from tenancy.models import Membership, Project, Role
from tests.jobs.conftest import run

pytestmark = pytest.mark.django_db

VALID_YAML = """
name: ui-job
image: ghcr.io/acme/trainer:1
command: [python, train.py]
groups:
  - role: worker
    replicas: 1
    devices: 4
    flavor: nvidia-h100-80gb
"""


class TestPagesRender:
    def test_jobs_list_for_member(self, tenant, infra, ui, submit):
        job = submit(tenant.users["owner"], tenant.project, name="visible-job")
        submit(tenant.users["outsider"], tenant.other_project, name="secret-job")
        page = ui["member"].get(reverse("jobs"))
        assert page.status_code == 200
        body = page.content.decode()
        assert "visible-job" in body and reverse("job_detail", args=[job.pk]) in body
        assert "secret-job" not in body
        assert 'class="table-wrap"' in body

    def test_jobs_list_filters_and_pages(self, tenant, infra, ui, submit):
        for i in range(30):
            submit(tenant.users["member"], tenant.project, name=f"job-{i:02d}", stage="eval" if i % 2 else "sft")
        first = ui["member"].get(reverse("jobs")).content.decode()
        assert "job-29" in first and "job-00" not in first  # newest first, 25 per page
        assert "page 1 of 2" in first
        second = ui["member"].get(reverse("jobs"), {"page": 2}).content.decode()
        assert "job-00" in second
        evals = ui["member"].get(reverse("jobs"), {"stage": "eval"}).content.decode()
        assert "job-01" in evals and "job-02" not in evals
        assert "No jobs match" in ui["member"].get(reverse("jobs"), {"state": "running"}).content.decode()
        assert ui["member"].get(reverse("jobs"), {"state": "bogus"}).status_code == 200

    def test_job_detail_shows_spec_waiting_and_timeline(self, tenant, infra, ui, submit):
        job = submit(tenant.users["member"], tenant.project, name="detail-job")
        Job.objects.filter(pk=job.pk).update(wait_reason="needs 4 free devices", project_position=1,
                                             flavor_position=2, eta=timezone.now() + timedelta(minutes=25))
        page = ui["member"].get(reverse("job_detail", args=[job.pk]))
        body = page.content.decode()
        assert page.status_code == 200
        assert "detail-job" in body and "ghcr.io/acme/trainer:1" in body
        assert "needs 4 free devices" in body and "in 25 min" in body
        assert 'id="timeline"' in body and "submitted" in body
        assert f'hx-get="{reverse("job_live", args=[job.pk])}"' in body  # polled while not final
        live = ui["member"].get(reverse("job_live", args=[job.pk]))
        assert live.status_code == 200 and "<html" not in live.content.decode()

    def test_job_detail_placement(self, tenant, infra, ui, submit):
        job = run(submit(tenant.users["member"], tenant.project), infra["cluster"], ["node-1"])
        body = ui["member"].get(reverse("job_detail", args=[job.pk])).content.decode()
        assert "Placement on sim-test" in body and "node-1" in body and "worker-0" in body
        assert 'id="attempt-1"' in body and 'id="attempt-started"' in body

    def test_queue_page(self, tenant, infra, ui, submit):
        job = submit(tenant.users["member"], tenant.project, name="waiting-job")
        Job.objects.filter(pk=job.pk).update(wait_reason="quota: borrowing at its limit", project_position=1,
                                             flavor_position=3)
        body = ui["member"].get(reverse("queue")).content.decode()
        assert "waiting-job" in body and "quota: borrowing at its limit" in body
        assert "nvidia-h100-80gb" in body and "unknown" in body  # no ETA yet

    def test_queue_all_my_projects(self, tenant, infra, ui, submit):
        second = Project.objects.create(organization=tenant.organization, name="Language", slug="language")
        Membership.objects.create(project=second, user=tenant.users["member"], role=Role.MEMBER)
        Quota.objects.create(project=second, flavor=infra["flavor"], guaranteed=8)
        submit(tenant.users["member"], second, name="other-project-job")
        ui["member"].get(reverse("project_detail", args=[tenant.project.slug]))  # current: vision
        assert "other-project-job" not in ui["member"].get(reverse("queue")).content.decode()
        assert "other-project-job" in ui["member"].get(reverse("queue"), {"all": "1"}).content.decode()

    def test_cluster_page(self, tenant, infra, ui, submit):
        mine = submit(tenant.users["member"], tenant.project)
        theirs = submit(tenant.users["outsider"], tenant.other_project, name="secret-job")
        for job, node in ((mine, "node-1"), (theirs, "node-2")):
            run(job, infra["cluster"], [node])
        body = ui["member"].get(reverse("clusters")).content.decode()
        assert "sim-test" in body and "node-1" in body and "rack-1" in body
        assert body.count('class="cell free"') == 8 + 4 + 4 + 1  # + legend; cordoned node-3 is free but marked
        assert "cordoned" in body
        assert reverse("job_detail", args=[mine.pk]) in body
        assert reverse("job_detail", args=[theirs.pk]) not in body  # another tenant's job is only "other"
        assert "secret" not in body and body.count('class="cell other"') == 4 + 1  # + legend

    def test_project_page_quota_bars(self, tenant, infra, ui, submit):
        job = submit(tenant.users["member"], tenant.project, groups=[
            {"role": "worker", "replicas": 2, "devices": 6, "flavor": infra["flavor"]}])
        run(job, infra["cluster"], ["node-1", "node-2"])
        body = ui["member"].get(reverse("project_detail", args=[tenant.project.slug])).content.decode()
        assert 'id="quotas"' in body and "nvidia-h100-80gb" in body
        assert "12 used of 8 guaranteed + 8 borrowable" in body
        assert '<rect class="seg within" x="0.0%" width="50.0%"' in body  # 8 of a 16-device scale
        assert '<rect class="seg borrowed" x="50.0%" width="25.0%"' in body

    def test_submit_form_renders_templates(self, tenant, infra, ui):
        page = ui["member"].get(reverse("job_new"))
        assert page.status_code == 200 and "launcher: pytorch" in page.content.decode()
        ray = ui["member"].get(reverse("job_new"), {"launcher": "ray"}).content.decode()
        assert "launcher: ray" in ray and "entrypoint" in ray
        fragment = ui["member"].get(reverse("job_template"), {"launcher": "megatron"}).content.decode()
        assert "tensor_parallel" in fragment and "<html" not in fragment


class TestTenancyAndRoles:
    def test_other_tenants_job_is_404(self, tenant, infra, ui, submit):
        job = submit(tenant.users["outsider"], tenant.other_project)
        for name in ("job_detail", "job_live"):
            assert ui["member"].get(reverse(name, args=[job.pk])).status_code == 404
        assert ui["member"].get(reverse("job_detail", args=[999999])).status_code == 404
        assert ui["member"].post(reverse("job_cancel", args=[job.pk])).status_code == 404
        assert Job.objects.get(pk=job.pk).state == State.QUEUED

    def test_viewer_cannot_open_the_form_and_sees_no_buttons(self, tenant, infra, ui, submit):
        assert ui["viewer"].get(reverse("job_new")).status_code == 403
        assert ui["viewer"].post(reverse("job_new"), {"spec": VALID_YAML}).status_code == 403
        assert "Submit a job" not in ui["viewer"].get(reverse("jobs")).content.decode()
        job = submit(tenant.users["member"], tenant.project)
        body = ui["viewer"].get(reverse("job_detail", args=[job.pk])).content.decode()
        assert 'id="cancel-job"' not in body and 'id="resubmit-job"' not in body
        assert not Job.objects.filter(name="ui-job").exists()

    def test_buttons_for_owner_of_job_and_admins_only(self, tenant, infra, ui, submit):
        job = submit(tenant.users["member"], tenant.project)
        url = reverse("job_detail", args=[job.pk])
        assert 'id="cancel-job"' in ui["member"].get(url).content.decode()
        assert 'id="cancel-job"' in ui["admin"].get(url).content.decode()
        other_member = job_of_another_member(tenant)
        assert 'id="cancel-job"' not in other_member.get(url).content.decode()

    def test_cancel_by_owner_of_job(self, tenant, infra, ui, submit):
        job = submit(tenant.users["member"], tenant.project)
        response = ui["member"].post(reverse("job_cancel", args=[job.pk]))
        assert response.status_code == 302 and response["Location"] == reverse("job_detail", args=[job.pk])
        assert Job.objects.get(pk=job.pk).state == State.CANCELLED
        body = ui["member"].get(reverse("job_detail", args=[job.pk])).content.decode()
        assert 'id="cancel-job"' not in body and "hx-trigger" not in body  # final: no more polling
        again = ui["member"].post(reverse("job_cancel", args=[job.pk]), follow=True)
        assert "already cancelled" in again.content.decode()

    def test_cancel_refused_for_viewer_and_other_member(self, tenant, infra, ui, submit):
        job = submit(tenant.users["admin"], tenant.project)
        assert ui["viewer"].post(reverse("job_cancel", args=[job.pk])).status_code == 403
        assert ui["member"].post(reverse("job_cancel", args=[job.pk])).status_code == 403
        assert Job.objects.get(pk=job.pk).state == State.QUEUED
        assert ui["owner"].post(reverse("job_cancel", args=[job.pk])).status_code == 302
        assert Job.objects.get(pk=job.pk).state == State.CANCELLED

    def test_cancel_needs_post_and_csrf(self, tenant, infra, submit):
        from django.test import Client

        job = submit(tenant.users["member"], tenant.project)
        client = Client(enforce_csrf_checks=True)
        client.force_login(tenant.users["member"])
        assert client.get(reverse("job_cancel", args=[job.pk])).status_code == 405
        assert client.post(reverse("job_cancel", args=[job.pk])).status_code == 403
        assert Job.objects.get(pk=job.pk).state == State.QUEUED

    def test_resubmit(self, tenant, infra, ui, submit):
        job = submit(tenant.users["member"], tenant.project, name="again")
        response = ui["member"].post(reverse("job_resubmit", args=[job.pk]))
        new = Job.objects.exclude(pk=job.pk).get(name="again")
        assert response.status_code == 302 and response["Location"] == reverse("job_detail", args=[new.pk])
        assert ui["viewer"].post(reverse("job_resubmit", args=[job.pk])).status_code == 403

    def test_anonymous_is_sent_to_login(self, db, client):
        for name in ("jobs", "queue", "clusters", "job_new"):
            response = client.get(reverse(name))
            assert response.status_code == 302 and "/accounts/login/" in response["Location"]


def job_of_another_member(tenant):
    from tests.conftest import make_user
    from tests.ui.conftest import login

    other = make_user("member2")
    Membership.objects.create(project=tenant.project, user=other, role=Role.MEMBER)
    return login(other)


class TestSubmitForm:
    def post(self, client, text):
        return client.post(reverse("job_new"), {"spec": text})

    def test_valid_submit_creates_and_redirects(self, tenant, infra, ui):
        response = self.post(ui["member"], VALID_YAML)
        job = Job.objects.get(name="ui-job")
        assert response.status_code == 302 and response["Location"] == reverse("job_detail", args=[job.pk])
        assert job.project == tenant.project and job.submitter == tenant.users["member"]
        assert job.state == State.QUEUED and job.total_devices == 4

    @pytest.mark.parametrize("launcher", ["pytorch", "deepspeed", "megatron", "ray", "command"])
    def test_every_template_submits_unchanged(self, tenant, infra, ui, launcher):
        text = launcher_template(launcher, flavor="nvidia-h100-80gb", priority="normal")
        text = text.replace("devices: 8 ", "devices: 4 ").replace("devices: 8\n", "devices: 4\n")
        if launcher == "megatron":
            text = text.replace("tensor_parallel: 8", "tensor_parallel: 4")
        response = self.post(ui["member"], text)
        assert response.status_code == 302, response.content.decode()[-3000:]

    def test_field_error_is_named_and_nothing_created(self, tenant, infra, ui):
        body = self.post(ui["member"], VALID_YAML.replace("devices: 4", "devices: 65")).content.decode()
        assert "groups[0].devices" in body and "less than or equal to 64" in body
        assert not Job.objects.exists()

    def test_unknown_flavor_and_field(self, tenant, infra, ui):
        text = VALID_YAML.replace("nvidia-h100-80gb", "tpu-v9") + "colour: blue\n"
        body = self.post(ui["member"], text).content.decode()
        assert "colour" in body and "Unknown field." in body
        assert not Job.objects.exists()

    def test_bad_yaml_shows_the_line(self, tenant, infra, ui):
        text = "name: x\nimage: [unclosed\ncommand: [a]\n"
        page = self.post(ui["member"], text)
        body = page.content.decode()
        assert page.status_code == 200 and "Invalid YAML on line" in body
        assert "the job was not submitted" in body.lower()
        assert text.split("\n")[1] in body  # the editor keeps the user's text
        assert not Job.objects.exists()

    def test_the_submit_page_parses_with_an_api_bodys_limits(self, tenant, infra, ui):
        """The page's YAML is parsed as a YAML body is: nested aliases are refused, not expanded."""
        from tests.core.test_parsers import laughs

        options = "\n".join("  " + line for line in laughs().splitlines())
        page = self.post(ui["member"], VALID_YAML + "launcher_options:\n" + options + "\n")
        assert page.status_code == 200 and "aliases repeat more than" in page.content.decode()
        assert not Job.objects.exists()

    def test_not_a_mapping(self, tenant, infra, ui):
        assert "must be a mapping" in self.post(ui["member"], "- a\n- b\n").content.decode()

    def test_domain_error_never_fits(self, tenant, infra, ui):
        text = VALID_YAML.replace("replicas: 1", "replicas: 5").replace("devices: 4", "devices: 8")
        body = self.post(ui["member"], text).content.decode()
        assert "can never run" in body and "<strong>groups</strong>" in body
        assert not Job.objects.exists()

    def test_archived_project(self, tenant, infra, ui):
        ui["owner"].get(reverse("project_detail", args=[tenant.project.slug]))  # the current project
        Project.objects.filter(pk=tenant.project.pk).update(archived=True)
        body = self.post(ui["owner"], VALID_YAML).content.decode()
        assert "archived" in body and not Job.objects.exists()

    def test_another_tenants_project_is_unknown(self, tenant, infra, ui):
        body = self.post(ui["member"], VALID_YAML + "project: secret\n").content.decode()
        assert "<strong>project</strong>" in body and not Job.objects.exists()

    def test_project_where_caller_is_viewer(self, tenant, infra, ui):
        Membership.objects.create(project=tenant.other_project, user=tenant.users["member"], role=Role.VIEWER)
        ui["member"].get(reverse("project_detail", args=[tenant.project.slug]))  # stay in vision
        body = self.post(ui["member"], VALID_YAML + "project: secret\n").content.decode()
        assert "needs the member role" in body and not Job.objects.exists()

    def test_prefill_from_existing_job(self, tenant, infra, ui, submit):
        job = submit(tenant.users["member"], tenant.project, name="copy-me", env={"SEED": "1"})
        body = ui["member"].get(reverse("job_new"), {"from": job.pk}).content.decode()
        assert "name: copy-me" in body and "SEED" in body
        foreign = submit(tenant.users["outsider"], tenant.other_project)
        assert ui["member"].get(reverse("job_new"), {"from": foreign.pk}).status_code == 404


@pytest.mark.parametrize("minutes, text", [(None, "unknown"), (0, "any moment"), (25, "in 25 min"),
                                           (60, "in 1 h"), (135, "in 2 h 15 min"), (3 * 24 * 60, "in 3 days")])
def test_humanize_eta(minutes, text):
    now = timezone.now()
    eta = None if minutes is None else now + timedelta(minutes=minutes)
    assert humanize_eta(eta, now) == text


@pytest.mark.parametrize("eta, low, high, note, text", [
    (25, 10, 70, "", "in 25 min (10 min to 1 h 10 min)"),
    (25, 0, None, "", "in 25 min (now or later)"),
    (25, 25, 25, "", "in 25 min"),
    (180, 180, None, "no earlier than", "no earlier than 3 h from now"),
    (None, None, None, "beyond 24 h", "beyond 24 h"),
    (None, None, None, "no runtime known", "no runtime known"),
    (None, None, None, "", "unknown"),  # the scheduler has not looked at it yet
])
def test_estimate_text(eta, low, high, note, text):
    now = timezone.now()

    def at(minutes):
        return None if minutes is None else now + timedelta(minutes=minutes)

    job = Job(eta=at(eta), eta_low=at(low), eta_high=at(high), eta_note=note)
    assert estimate_text(job, now) == text
