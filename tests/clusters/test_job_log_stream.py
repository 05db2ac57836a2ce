"""GET /api/v1/jobs/<id>/logs/?follow=true: a text/plain stream, scoped like the tail, from the simulated backend
(status lines until the replica ends) and from a Kubernetes pod log followed over real HTTP (kmock)."""

from __future__ import annotations

import pytest

from clusters.backends import simulated
from jobs.lifecycle import transition
from jobs.models import Job
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


def test_the_stream_is_bounded_by_the_max_duration(tenant, inventory, clients, cycle, settings) -> None:
    settings.TIDAL = {**settings.TIDAL, "LOG_FOLLOW_MAX_SECONDS": 0.05}
    job = submit(tenant, inventory["h100"])
    cycle()
    out = lines(follow(clients["member"], job).streaming_content)  # ends although the job still runs
    assert out[-1] == "# log stream stopped after 0 s (TIDAL_LOG_FOLLOW_MAX_SECONDS); reconnect to continue"
    assert Job.objects.get(pk=job.pk).state == State.DISPATCHING


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
    # A tuple is a streamed response: chunks sent one by one, then the server closes (the container ended).
    kube.handler[f"get /api/v1/namespaces/{NS}/pods/{pod}/log"] << (b"step 1\nst", b"ep 2\n", b"done\n")
    response = follow(clients["member"], job, "&tail=50")
    assert response.status_code == 200
    assert lines(response.streaming_content) == ["step 1", "step 2", "done"]
    request = kube.handler[f"get /api/v1/namespaces/{NS}/pods/{pod}/log"][0]
    assert (request.params["follow"], request.params["tailLines"], request.params["container"]) == (
        "true", "50", "main")


def test_kubernetes_pod_gone_falls_back_to_the_tail_answer(tenant, kube_inventory, kube, clients, cycle) -> None:
    job = submit(tenant, kube_inventory["h100"], replicas=1)
    cycle()
    pod = next(iter(pods_of(kube, Job.objects.get(pk=job.pk))))
    kube.handler[f"get /api/v1/namespaces/{NS}/pods/{pod}/log"] << 404 << {
        "kind": "Status", "code": 404, "reason": "NotFound", "message": f'pods "{pod}" not found'}
    out = lines(follow(clients["member"], job).streaming_content)
    assert out[0].startswith("# pod log unavailable:") and "NotFound" in out[0]
