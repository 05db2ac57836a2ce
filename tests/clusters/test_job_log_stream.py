"""GET /api/v1/jobs/<id>/logs/?follow=true: a text/plain stream, scoped like the tail, from the simulated backend
(status lines until the replica ends) and from a Kubernetes pod log followed over real HTTP (kmock); paused after
TIDAL_LOG_FOLLOW_MAX_SECONDS with a cursor that resumes it exactly; a cap on the streams of each caller and of each
process."""

from __future__ import annotations

import re

import pytest

from clusters.backends import simulated
from jobs.lifecycle import transition
from jobs.logs import job_log_stream
from jobs.models import Attempt, Job
from jobs.selectors import job_detail_for_user
from jobs.states import State
from tests.clusters.test_kubernetes_backend import NS, pods_of
from tests.jobs.conftest import submit


@pytest.fixture(autouse=True)
def _fast_simulated_follow(monkeypatch) -> None:
    monkeypatch.setattr(simulated, "FOLLOW_INTERVAL", 0.01)


def follow(client, job: Job, query: str = ""):
    return client.get(f"/api/v1/jobs/{job.pk}/logs/?follow=true{query}")


def lines(chunks) -> list[str]:
    return [line for chunk in chunks for line in chunk.decode().splitlines()]


def test_simulated_replica_streams_until_its_job_ends(tenant, inventory, clients, cycle) -> None:
    job = submit(tenant, inventory["h100"], replicas=2)
    cycle()
    response = follow(clients["viewer"], job, "&replica=worker-1")
    assert response.status_code == 200 and response.streaming
    assert response["Content-Type"] == "text/plain; charset=utf-8" and response["X-Accel-Buffering"] == "no"
    stream = iter(response.streaming_content)
    first = lines([next(stream), next(stream), next(stream)])
    assert first[0].startswith("[simulated] cluster sim is simulated")
    assert first[1:] == [f"[simulated] job {job.pk} attempt 1 replica worker-1 is dispatching."] * 2
    transition(Job.objects.get(pk=job.pk), State.SUCCEEDED, reason="done", actor="backend")  # its attempt ends
    rest = lines(stream)
    assert rest[-1] == f"[simulated] job {job.pk} attempt 1 replica worker-1 ended: the job is succeeded."


RESUME = re.compile(r"^# tidal: log stream paused after 0 s; resume with cursor=(\S+)$")


def test_the_stream_pauses_after_the_max_duration_with_a_cursor_that_resumes_it(tenant, inventory, clients, cycle,
                                                                               settings) -> None:
    settings.TIDAL = {**settings.TIDAL, "LOG_FOLLOW_MAX_SECONDS": 0.05}
    job = submit(tenant, inventory["h100"])
    cycle()
    out = lines(follow(clients["member"], job).streaming_content)  # ends although the job still runs
    cursor = RESUME.match(out[-1]).group(1)
    assert out[0].startswith("[simulated] cluster") and Job.objects.get(pk=job.pk).state == State.DISPATCHING
    again = lines(follow(clients["member"], job, f"&cursor={cursor}").streaming_content)
    assert again[0] == f"[simulated] job {job.pk} attempt 1 replica worker-0 is dispatching."  # not the first again
    assert RESUME.match(again[-1]).group(1) != cursor


def test_a_cursor_is_checked(tenant, inventory, clients, cycle) -> None:
    job = submit(tenant, inventory["h100"])
    cycle()
    for query, field in (("&cursor=nope", "cursor"), ("&cursor=1:abc", "cursor"), ("&cursor=0:1", "cursor")):
        bad = follow(clients["member"], job, query)
        assert bad.status_code == 400 and list(bad.json()["error"]["fields"]) == [field], query
    tail = clients["member"].get(f"/api/v1/jobs/{job.pk}/logs/?cursor=1:1")
    assert tail.status_code == 400 and "follow=true" in tail.json()["error"]["fields"]["cursor"][0]
    assert follow(clients["member"], job, "&cursor=9:1").status_code == 404  # no attempt 9


def test_resuming_after_the_attempt_ended_says_so_without_repeating_its_kept_lines(tenant, inventory, clients,
                                                                                    cycle) -> None:
    job = submit(tenant, inventory["h100"])
    cycle()
    attempt = Job.objects.get(pk=job.pk).current_attempt
    transition(Job.objects.get(pk=job.pk), State.SUCCEEDED, reason="done", actor="backend")
    Attempt.objects.filter(pk=attempt.pk).update(logs={"worker-0": ["epoch 9", "done"]})
    out = lines(follow(clients["member"], job, "&cursor=1:3").streaming_content)
    assert out == [f"# last lines kept when attempt 1 ended (succeeded); its pods are gone: tidal logs {job.pk} "
                   "--replica worker-0 --attempt 1"]


def test_a_caller_follows_at_most_its_share_of_streams(tenant, inventory, clients, cycle, settings) -> None:
    """TIDAL_LOG_STREAMS_PER_USER streams at once per caller: one more is a 429 in the API's error shape with
    Retry-After, and a stream that ends frees its place. Other callers keep theirs."""
    settings.TIDAL = {**settings.TIDAL, "LOG_STREAMS_PER_USER": 2, "LOG_STREAMS_PER_PROCESS": 10}
    job = submit(tenant, inventory["h100"])
    cycle()
    member = tenant.users["member"]
    first = job_log_stream(job_detail_for_user(member).get(pk=job.pk), user=member)  # what the view sends, unread
    second = follow(clients["member"], job)
    refused = follow(clients["member"], job)
    assert (second.status_code, refused.status_code) == (200, 429)
    assert refused.json()["error"]["code"] == "too_many_streams" and refused.json()["error"]["fields"] == {}
    assert "TIDAL_LOG_STREAMS_PER_USER" in refused.json()["error"]["message"]
    assert 1 <= int(refused["Retry-After"]) <= settings.TIDAL["LOG_FOLLOW_MAX_SECONDS"]
    assert follow(clients["viewer"], job).status_code == 200  # another caller
    first.close()  # its client went away before the first line: the server closes the response
    assert follow(clients["member"], job).status_code == 200
    assert follow(clients["member"], job).status_code == 429


def test_a_process_streams_at_most_its_share_and_keeps_threads_for_requests(tenant, inventory, clients, cycle,
                                                                            settings) -> None:
    settings.TIDAL = {**settings.TIDAL, "LOG_STREAMS_PER_USER": 10, "LOG_STREAMS_PER_PROCESS": 2,
                      "LOG_FOLLOW_MAX_SECONDS": 0.2}
    job = submit(tenant, inventory["h100"])
    cycle()
    held = [follow(clients["member"], job), follow(clients["viewer"], job)]
    refused = follow(clients["admin"], job)
    assert refused.status_code == 429 and refused.json()["error"]["code"] == "streams_busy"
    assert 1 <= int(refused["Retry-After"]) <= 5
    assert clients["admin"].get(f"/api/v1/jobs/{job.pk}/").status_code == 200  # requests are still answered
    lines(held[0].streaming_content)  # read to its end (the bound): its place is free again
    assert follow(clients["admin"], job).status_code == 200


def test_scoped_like_the_tail_and_validated_before_streaming(tenant, inventory, clients, cycle) -> None:
    job = submit(tenant, inventory["h100"])
    cycle()
    outsider = follow(clients["outsider"], job)
    assert outsider.status_code == 404 and outsider.json()["error"]["code"] == "not_found"
    missing = clients["member"].get("/api/v1/jobs/999999/logs/?follow=true")
    assert missing.status_code == 404 and missing.json() == outsider.json() | {
        "error": {**outsider.json()["error"], "message": missing.json()["error"]["message"]}}
    bad = follow(clients["member"], job, "&replica=ps-3")
    assert bad.status_code == 400 and "replica" in bad.json()["error"]["fields"]


def test_a_replica_not_running_answers_what_the_tail_would_and_ends(tenant, inventory, clients) -> None:
    job = submit(tenant, inventory["h100"])  # queued: no cycle ran
    out = lines(follow(clients["member"], job).streaming_content)
    assert out == ["# no log yet: the job has not started an attempt"]


def test_kubernetes_pod_log_is_followed_over_http(tenant, kube_inventory, kube, clients, cycle) -> None:
    job = submit(tenant, kube_inventory["h100"], replicas=1)
    cycle()
    pod = next(iter(pods_of(kube, Job.objects.get(pk=job.pk))))
    # A tuple is a streamed response: chunks sent one by one, then the server closes (the container ended). The log
    # is read with its timestamps (they keep the position to resume from), which the lines lose.
    kube.handler[f"get /api/v1/namespaces/{NS}/pods/{pod}/log"] << (
        b"2026-05-01T10:00:00.1Z step 1\n2026-05-01T10:00:00.2Z st", b"ep 2\n", b"2026-05-01T10:00:01Z done\n")
    response = follow(clients["member"], job, "&tail=50")
    assert response.status_code == 200
    assert lines(response.streaming_content) == ["step 1", "step 2", "done"]  # ended: no cursor
    request = kube.handler[f"get /api/v1/namespaces/{NS}/pods/{pod}/log"][0]
    assert (request.params["follow"], request.params["tailLines"], request.params["container"],
            request.params["timestamps"]) == ("true", "50", "main", "true")


def test_a_paused_pod_log_resumes_where_it_stopped(tenant, kube_inventory, kube, clients, cycle, settings) -> None:
    """The stream pauses at the bound after two lines of one second; the resumed follow asks the API server from
    that second on (`sinceTime`), which sends both again: they are skipped, and nothing is lost."""
    settings.TIDAL = {**settings.TIDAL, "LOG_FOLLOW_MAX_SECONDS": 0.3}
    job = submit(tenant, kube_inventory["h100"], replicas=1)
    cycle()
    pod = next(iter(pods_of(kube, Job.objects.get(pk=job.pk))))
    log = kube.handler[f"get /api/v1/namespaces/{NS}/pods/{pod}/log"]
    log[:1] << (b"2026-05-01T10:00:07Z step 7\n2026-05-01T10:00:07Z step 7 again\n", ...)  # then silent, still open
    first = lines(follow(clients["member"], job, "&tail=2").streaming_content)
    assert first[:2] == ["step 7", "step 7 again"] and len(first) == 3
    cursor = RESUME.match(first[2]).group(1)
    log << (b"2026-05-01T10:00:07Z step 7\n2026-05-01T10:00:07Z step 7 again\n2026-05-01T10:00:07Z step 7 thrice\n"
            b"2026-05-01T10:00:08Z step 8\n")  # from 10:00:07, then the container ends
    assert lines(follow(clients["member"], job, f"&cursor={cursor}").streaming_content) == ["step 7 thrice", "step 8"]
    resumed = log[1]
    assert resumed.params["sinceTime"] == "2026-05-01T10:00:07Z" and "tailLines" not in resumed.params
    for forged in ("1:abc", "1:" + "9" * 40 + ".1"):  # not a position, or a time no clock reaches
        bad = follow(clients["member"], job, f"&cursor={forged}")
        assert bad.status_code == 400 and list(bad.json()["error"]["fields"]) == ["cursor"]


def test_kubernetes_pod_gone_falls_back_to_the_tail_answer(tenant, kube_inventory, kube, clients, cycle) -> None:
    job = submit(tenant, kube_inventory["h100"], replicas=1)
    cycle()
    pod = next(iter(pods_of(kube, Job.objects.get(pk=job.pk))))
    kube.handler[f"get /api/v1/namespaces/{NS}/pods/{pod}/log"] << 404 << {
        "kind": "Status", "code": 404, "reason": "NotFound", "message": f'pods "{pod}" not found'}
    out = lines(follow(clients["member"], job).streaming_content)
    assert out[0].startswith("# pod log unavailable:") and "NotFound" in out[0]
