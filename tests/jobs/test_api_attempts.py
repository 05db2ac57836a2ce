"""The API shows a job's current attempt (its times and cluster; none while it waits for a new attempt) and every
attempt with why it ended; a running attempt records the checkpoints the job reports."""

from jobs.lifecycle import transition
from jobs.states import State
from tests.jobs.conftest import run, submit


def test_a_requeued_job_shows_no_current_times_and_lists_its_attempts(tenant, inventory, clients):
    job = run(submit(tenant, inventory["a100"], devices=8), inventory["cluster"], ["a-n1"])
    running = clients["member"].get(f"/api/v1/jobs/{job.pk}/").json()
    assert running["cluster"] == "sim" and running["admitted_at"] and running["started_at"]
    assert running["placement"] == [{"role": "worker", "index": 0, "node": "a-n1", "devices": 8}]
    transition(job, State.PREEMPTED, reason="preempted for job 9", actor="scheduler")
    transition(job, State.QUEUED, reason="requeued", actor="scheduler")
    body = clients["member"].get(f"/api/v1/jobs/{job.pk}/").json()
    assert (body["state"], body["attempt"]) == ("queued", 2)
    assert [body[key] for key in ("cluster", "admitted_at", "started_at", "ended_at", "placement")] == [None] * 5
    [first] = body["attempts"]
    assert (first["number"], first["outcome"], first["reason"]) == (1, "preempted", "preempted for job 9")
    assert first["cluster"] == "sim" and first["placement"][0]["node"] == "a-n1" and first["ended_at"]
    assert [e["attempt"] for e in body["events"]][-2:] == [1, 2]
    listed = next(row for row in clients["member"].get("/api/v1/jobs/").json()["results"] if row["id"] == job.pk)
    assert listed["admitted_at"] is None and listed["cluster"] is None


def test_the_running_attempt_records_the_reported_checkpoint(tenant, inventory, clients):
    job = submit(tenant, inventory["a100"], devices=1)
    url = f"/api/v1/jobs/{job.pk}/checkpoint/"
    queued = clients["member"].post(url, {"checkpoint": "step 100"}, format="json")
    assert queued.status_code == 409 and queued.json()["error"]["code"] == "invalid_transition"
    run(job, inventory["cluster"], ["a-n1"])
    response = clients["member"].post(url, {"checkpoint": "step 1200 s3://ckpt/run/1200"}, format="json")
    assert response.status_code == 200, response.content
    assert response.json()["checkpoint"] == "step 1200 s3://ckpt/run/1200" and response.json()["checkpoint_at"]
    assert clients["member"].post(url, {}, format="json").status_code == 400  # nothing to record
    assert clients["member"].post(url, {"checkpoint": "x", "path": "y"}, format="json").status_code == 400
    assert clients["viewer"].post(url, {"checkpoint": "step 1"}, format="json").status_code == 403
    detail = clients["viewer"].get(f"/api/v1/jobs/{job.pk}/").json()
    assert detail["attempts"][0]["checkpoint"] == "step 1200 s3://ckpt/run/1200"


def test_an_open_attempts_outcome_is_empty_and_the_schema_allows_it(tenant, inventory, clients):
    """Found by the API fuzz test: the schema listed only the five outcomes of an ended attempt."""
    from drf_spectacular.generators import SchemaGenerator

    job = run(submit(tenant, inventory["a100"], devices=8), inventory["cluster"], ["a-n1"])
    [attempt] = clients["member"].get(f"/api/v1/jobs/{job.pk}/").json()["attempts"]
    assert attempt["outcome"] == ""
    components = SchemaGenerator().get_schema(public=True)["components"]["schemas"]
    choices = components["Attempt"]["properties"]["outcome"]["oneOf"]
    allowed = {value for choice in choices for value in components[choice["$ref"].rsplit("/", 1)[1]]["enum"]}
    assert allowed == {"", "succeeded", "failed", "preempted", "cancelled", "lost"}


def test_the_job_list_reads_no_history_and_its_queries_do_not_grow_with_the_jobs(
        tenant, inventory, clients, django_assert_max_num_queries):
    """A list row shows the current attempt only: each job's groups, attempts and events are not read (they were
    prefetched for every listed job), and a state filter adds no DISTINCT (PostgreSQL sorted every column)."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    for _ in range(3):
        run(submit(tenant, inventory["a100"], devices=1), inventory["cluster"], ["a-n1"])
    with CaptureQueriesContext(connection) as few:
        assert len(clients["member"].get("/api/v1/jobs/?state=running").json()["results"]) == 3
    for _ in range(6):
        run(submit(tenant, inventory["a100"], devices=1), inventory["cluster"], ["a-n2"])
    with django_assert_max_num_queries(len(few.captured_queries)) as many:
        assert len(clients["member"].get("/api/v1/jobs/?state=running").json()["results"]) == 9
    sql = " ".join(query["sql"] for query in many.captured_queries)
    assert "jobs_jobevent" not in sql and "jobs_replicagroup" not in sql and "DISTINCT" not in sql
