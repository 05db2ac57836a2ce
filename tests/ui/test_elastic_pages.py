"""Elastic jobs in the UI (issue 29): the submit form takes `replicas: {min, max}` and names a bad bound; the job page
shows `running N of min..max workers` and the resize history with why; the queue marks the minimum need; the spec as
YAML keeps the bounds."""

from __future__ import annotations

from django.urls import reverse
from django.utils import timezone

from jobs import lifecycle
from jobs.models import Job
from jobs.states import State
from tests.jobs.conftest import run

ELASTIC_YAML = """name: elastic-ui
image: ghcr.io/acme/trainer:1
command: [torchrun, train.py]
groups:
  - role: worker
    replicas: {min: 1, max: %s}
    devices: 4
    flavor: nvidia-h100-80gb
"""


def elastic(submit, tenant, infra, low=1, high=3):
    return submit(tenant.users["member"], tenant.project, groups=[
        {"role": "worker", "replicas": high, "min_replicas": low, "devices": 4, "flavor": infra["flavor"]}])


def test_the_submit_form_takes_min_and_max_and_names_a_bad_bound(tenant, infra, ui):
    refused = ui["member"].post(reverse("job_new"), {"spec": ELASTIC_YAML % "0"})
    assert refused.status_code == 200 and "groups[0].replicas" in refused.content.decode()
    assert not Job.objects.exists()
    accepted = ui["member"].post(reverse("job_new"), {"spec": ELASTIC_YAML % "2"})
    assert accepted.status_code == 302, accepted.content.decode()[:3000]
    assert Job.objects.get().groups.get().min_replicas == 1


def test_the_job_page_shows_its_workers_and_resizes(tenant, infra, ui, submit):
    job = elastic(submit, tenant, infra)
    page = ui["member"].get(reverse("job_detail", args=[job.pk])).content.decode()
    assert "needs 1..3 workers" in page and "1..3" in page and "(its minimum need)" in page
    assert "replicas: {min: 1, max: 3}" in page  # the spec as YAML, to edit and submit again
    job = run(job, infra["cluster"], ["node-1"])
    job = Job.objects.get(pk=job.pk)
    assert job.state == State.RUNNING
    lifecycle.resize(job.pk, attempt_id=job.current_attempt_id, version=0, kind="grow", now=timezone.now(),
                     reason=lifecycle.GROWN_REASON,
                     replicas=[{"role": "worker", "index": 1, "node": "node-2", "devices": 4}])
    page = ui["viewer"].get(reverse("job_detail", args=[job.pk])).content.decode()
    assert "running 2 of 1..3 workers" in page and 'id="resizes"' in page
    assert "1 → 2" in page and "4 → 8" in page and "grew into idle capacity" in page
    live = ui["viewer"].get(reverse("job_live", args=[job.pk])).content.decode()
    assert "running 2 of 1..3 workers" in live


def test_the_queue_marks_an_elastic_jobs_minimum_need(tenant, infra, ui, submit):
    job = elastic(submit, tenant, infra, 2, 3)
    page = ui["member"].get(reverse("queue")).content.decode()
    row = page.split(f"#{job.pk} {job.name}", 1)[1].split("</tr>", 1)[0]
    assert ">8 <small" in row and "2..3 workers" in row


def test_another_projects_elastic_job_page_is_not_found(tenant, infra, ui, submit):
    job = elastic(submit, tenant, infra)
    assert ui["outsider"].get(reverse("job_detail", args=[job.pk])).status_code == 404
    assert ui["outsider"].get(reverse("job_live", args=[job.pk])).status_code == 404


def test_the_job_page_scales_an_elastic_job(tenant, infra, ui, submit):
    job = elastic(submit, tenant, infra, 1, 3)
    page = ui["member"].get(reverse("job_detail", args=[job.pk])).content.decode()
    assert 'id="scale-job"' in page
    assert 'id="scale-job"' not in ui["viewer"].get(reverse("job_detail", args=[job.pk])).content.decode()
    done = ui["member"].post(reverse("job_scale", args=[job.pk]), {"max": "2"}, follow=True)
    assert "at most 2 workers" in done.content.decode() and job.groups.get().replicas == 2
    refused = ui["member"].post(reverse("job_scale", args=[job.pk]), {"max": "0"}, follow=True).content.decode()
    assert "max: max (0) must be at least the group&#x27;s min (1)." in refused and job.groups.get().replicas == 2
    text = ui["member"].post(reverse("job_scale", args=[job.pk]), {"max": "x"}, follow=True).content.decode()
    assert "max: a whole number of workers" in text
    assert ui["viewer"].post(reverse("job_scale", args=[job.pk]), {"max": "3"}).status_code == 403
    assert ui["outsider"].post(reverse("job_scale", args=[job.pk]), {"max": "3"}).status_code == 404
    assert job.groups.get().replicas == 2
