"""Elastic jobs in the UI (issue 29): the submit form takes `replicas: {min, max}` and names a bad bound; the job page
shows `running N of min..max workers`, the resize history with why and the workers over time; the run page's charts
mark each resize; the queue marks the minimum need; the spec as
YAML keeps the bounds."""

from __future__ import annotations

import json
from datetime import timedelta

from django.urls import reverse
from django.utils import timezone

from jobs import lifecycle
from jobs.models import Job
from jobs.states import State
from jobs.workers_chart import workers_over_time
from tests.jobs.conftest import admit, run
from tracking.models import Run

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


def resized(submit, tenant, infra, start):
    """An elastic job (1..3 workers) admitted at `start` on one worker, grown to 3 at +10 min, shrunk to 2 at
    +20 min; its run is tracked in the experiment "sweep"."""
    job = submit(tenant.users["member"], tenant.project, experiment="sweep", groups=[
        {"role": "worker", "replicas": 3, "min_replicas": 1, "devices": 4, "flavor": infra["flavor"]}])
    job = Job.objects.get(pk=run(job, infra["cluster"], ["node-1"], now=start).pk)
    lifecycle.resize(job.pk, attempt_id=job.current_attempt_id, version=0, kind="grow",
                     now=start + timedelta(minutes=10), reason=lifecycle.GROWN_REASON,
                     replicas=[{"role": "worker", "index": i, "node": "node-2", "devices": 4} for i in (1, 2)])
    lifecycle.resize(job.pk, attempt_id=job.current_attempt_id, version=1, kind="shrink",
                     now=start + timedelta(minutes=20), reason="project speech reclaims its guarantee",
                     replicas=[{"role": "worker", "index": 2}])
    return job


def test_the_job_page_draws_its_workers_over_time(tenant, infra, ui, submit):
    start = timezone.now() - timedelta(minutes=40)
    job = resized(submit, tenant, infra, start)
    steps = workers_over_time(Job.objects.get(pk=job.pk).attempts.all(), start + timedelta(minutes=40))
    assert [(int((at - start).total_seconds() // 60), n) for at, n in steps] == [(0, 1), (10, 3), (20, 2), (40, 2)]
    page = ui["viewer"].get(reverse("job_live", args=[job.pk])).content.decode()
    figure = page.split('id="workers-chart"', 1)[1].split("</figure>", 1)[0]
    # 0 -> 1 worker at the admission, 3 at a quarter of the 40 minutes, 2 at half, held to now (y: 60 is none).
    assert 'd="M0,60.0 H0.0 V40.7 H150.0 V2.0 H300.0 V21.3 H600.0 V21.3 H600.0"' in figure, figure
    assert ">3</span>" in figure  # the y axis goes to the job's maximum
    rigid = submit(tenant.users["member"], tenant.project)
    assert 'id="workers-chart"' not in ui["viewer"].get(reverse("job_live", args=[rigid.pk])).content.decode()


def test_an_ended_attempt_drops_to_no_workers_and_the_next_one_starts_again(tenant, infra, submit):
    start = timezone.now() - timedelta(minutes=9)
    job = elastic(submit, tenant, infra)
    job = run(job, infra["cluster"], ["node-1", "node-2"], devices=4, now=start)
    lifecycle.transition(job, State.PREEMPTED, reason="test", actor="scheduler", now=start + timedelta(minutes=5))
    lifecycle.transition(Job.objects.get(pk=job.pk), State.QUEUED, reason="test", actor="scheduler",
                         now=start + timedelta(minutes=5))
    admit(Job.objects.get(pk=job.pk), infra["cluster"], ["node-1"], now=start + timedelta(minutes=7))
    steps = workers_over_time(Job.objects.get(pk=job.pk).attempts.all(), start + timedelta(minutes=9))
    assert [(int((at - start).total_seconds() // 60), n) for at, n in steps] == [(0, 2), (5, 0), (7, 1), (9, 1)]


def test_the_run_page_marks_each_resize_on_its_charts_and_says_why(tenant, infra, ui, submit):
    job = resized(submit, tenant, infra, timezone.now() - timedelta(minutes=40))
    tracked = Run.objects.get(job=job)
    page = ui["viewer"].get(reverse("run_detail", args=[tracked.pk])).content.decode()
    config = json.loads(page.split('id="chart-config" type="application/json">', 1)[1].split("</script>", 1)[0])
    marks = [(m["kind"], m.get("label")) for m in config["markers"] if m["kind"] in ("grew", "shrank")]
    assert marks == [("grew", "grew 1→3"), ("shrank", "shrank 3→2")]
    table = page.split('id="run-resizes"', 1)[1].split("</table>", 1)[0]
    assert "Grow 1 → 3" in table and "Shrink 3 → 2" in table and "project speech reclaims its guarantee" in table
