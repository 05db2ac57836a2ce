"""GET /api/v1/jobs/<id>/logs/ and /api/v1/jobs/failure-causes/: scoped, live pod logs, kept lines, counts."""

from __future__ import annotations

from clusters.models import Node
from jobs.lifecycle import AttemptEnd, transition
from jobs.models import Job
from jobs.states import State
from tests.clusters.test_kubernetes_backend import NS, pods_of, set_status, terminated
from tests.jobs.conftest import run, submit


def test_outsider_gets_404_for_logs(tenant, kube_inventory, clients) -> None:
    job = submit(tenant, kube_inventory["h100"])
    response = clients["outsider"].get(f"/api/v1/jobs/{job.pk}/logs/")
    assert response.status_code == 404 and response.json()["error"]["code"] == "not_found"
    assert clients["viewer"].get(f"/api/v1/jobs/{job.pk}/logs/").status_code == 200


def test_live_pod_log_tail(tenant, kube_inventory, kube, clients, cycle) -> None:
    job = submit(tenant, kube_inventory["h100"], replicas=2)
    cycle()
    pod = next(name for name, p in pods_of(kube, Job.objects.get(pk=job.pk)).items() if p["metadata"]["labels"][
        "tidal.dev/index"] == "1")
    kube.handler[f"get /api/v1/namespaces/{NS}/pods/{pod}/log"] << b"step 1\nstep 2\nstep 3\n"
    response = clients["member"].get(f"/api/v1/jobs/{job.pk}/logs/?replica=worker-1&tail=2")
    assert response.status_code == 200, response.content
    body = response.json()
    assert body["source"] == "pod" and body["lines"] == ["step 2", "step 3"] and body["replica"] == "worker-1"
    request = kube.handler[f"get /api/v1/namespaces/{NS}/pods/{pod}/log"][0]
    assert request.params["tailLines"] == "2"


def test_failed_attempt_serves_the_lines_it_kept(tenant, kube_inventory, kube, clients, cycle, resync) -> None:
    job = submit(tenant, kube_inventory["h100"], replicas=1)
    cycle()
    job = Job.objects.get(pk=job.pk)
    pod = next(iter(pods_of(kube, job).values()))
    set_status(kube, pod, terminated(1, "Error"))
    kube.handler[f"get /api/v1/namespaces/{NS}/pods/{pod['metadata']['name']}/log"] << (
        b'Traceback (most recent call last):\n  File "train.py", line 42, in step\n    loss.backward()\n'
        b"ValueError: nan loss\n")
    resync()
    job = Job.objects.get(pk=job.pk)
    # The backend saw a user error; the diagnosis (reliability) reads the "nan loss" it raised as the loss diverging.
    assert job.state == State.FAILED and job.current_attempt.cause == "loss_nan"
    assert "train.py:42 in step" in job.events.get(to_state=State.FAILED).reason
    assert pods_of(kube, job) == {}  # cleaned up: the pod is gone
    body = clients["member"].get(f"/api/v1/jobs/{job.pk}/logs/?replica=worker-0&tail=2").json()
    assert body["source"] == "kept" and body["attempt"] == 1
    assert body["lines"] == ["    loss.backward()", "ValueError: nan loss"]


def test_logs_of_an_earlier_attempt(tenant, inventory, clients) -> None:
    """A retried job's first attempt keeps its lines; the current (live) attempt answers by default."""
    job = run(submit(tenant, inventory["a100"], retry_limit=1), inventory["cluster"], ["a-n1"])
    transition(job, State.RETRYING, reason="oom", actor="backend",
               end=AttemptEnd(cause="host_oom", logs={"worker-0": ["loading", "Killed"]}))
    transition(job, State.QUEUED, reason="retry", actor="system")
    run(job, inventory["cluster"], ["a-n2"])
    first = clients["member"].get(f"/api/v1/jobs/{job.pk}/logs/?attempt=1").json()
    assert (first["attempt"], first["source"], first["lines"]) == (1, "kept", ["loading", "Killed"])
    current = clients["member"].get(f"/api/v1/jobs/{job.pk}/logs/").json()
    assert current["attempt"] == 2 and current["source"] == "simulated"
    missing = clients["member"].get(f"/api/v1/jobs/{job.pk}/logs/?attempt=7")
    assert missing.status_code == 404
    assert clients["member"].get(f"/api/v1/jobs/{job.pk}/logs/?attempt=0").status_code == 400


def test_simulated_cluster_answers_synthetic_lines(tenant, inventory, clients, cycle) -> None:
    job = submit(tenant, inventory["h100"])
    cycle()
    body = clients["member"].get(f"/api/v1/jobs/{job.pk}/logs/").json()
    assert body["source"] == "simulated" and "simulated" in body["lines"][0]


def test_unknown_replica_and_bad_tail_are_400(tenant, kube_inventory, clients) -> None:
    job = submit(tenant, kube_inventory["h100"])
    response = clients["member"].get(f"/api/v1/jobs/{job.pk}/logs/?replica=ps-3")
    assert response.status_code == 400 and "replica" in response.json()["error"]["fields"]
    for query, field in (("tail=x", "tail"), ("tail=0", "tail"), ("tail=5001", "tail"), ("follow=maybe", "follow")):
        response = clients["member"].get(f"/api/v1/jobs/{job.pk}/logs/?{query}")
        assert response.status_code == 400 and field in response.json()["error"]["fields"], query
    body = clients["member"].get(f"/api/v1/jobs/{job.pk}/logs/").json()  # queued: nothing yet
    assert body["source"] == "none" and body["lines"] == []


def test_failure_causes_counted_per_project_and_rack(tenant, inventory, clients) -> None:
    """Counted from the failed and lost attempts: a job retried twice counts twice; preemptions do not count."""
    a100 = inventory["a100"]
    jobs = [run(submit(tenant, a100, devices=1, retry_limit=5, name=f"j{i}"), inventory["cluster"], ["a-n1"])
            for i in range(3)]
    for job, cause, rack in ((jobs[0], "nccl", "r1"), (jobs[1], "nccl", "r1"), (jobs[2], "cuda_oom", "")):
        transition(job, State.RETRYING, reason="x", actor="backend",
                   end=AttemptEnd(cause=cause, details={"rack": rack} if rack else {}))
    transition(jobs[2], State.QUEUED, reason="retry", actor="system")
    run(jobs[2], inventory["cluster"], ["a-n2"])
    transition(jobs[2], State.PREEMPTED, reason="for another", actor="scheduler")
    body = clients["viewer"].get("/api/v1/jobs/failure-causes/?project=vision").json()
    assert body == {"project": "vision", "total": 3,
                    "by_cause": [{"cause": "nccl", "count": 2}, {"cause": "cuda_oom", "count": 1}],
                    "by_rack": [{"rack": "r1", "cause": "nccl", "count": 2}]}
    refused = clients["outsider"].get("/api/v1/jobs/failure-causes/?project=vision")  # like a missing project
    assert refused.status_code == 400
    assert refused.json()["error"]["fields"] == {"project": ["No project named 'vision'."]}
    assert clients["outsider"].get("/api/v1/jobs/failure-causes/").json()["total"] == 0


def test_node_loss_is_counted_on_its_rack(tenant, kube_inventory, kube, clients, cycle, resync) -> None:
    job = submit(tenant, kube_inventory["h100"], replicas=1, retry_limit=1)
    cycle()
    job = Job.objects.get(pk=job.pk)
    set_status(kube, next(iter(pods_of(kube, job).values())), {"phase": "Running"})
    node = job.current_attempt.placement[0]["node"]
    Node.objects.filter(name=node).update(ready=False)
    resync()
    rack = Node.objects.get(name=node).rack
    body = clients["member"].get("/api/v1/jobs/failure-causes/?project=vision").json()
    assert body["by_rack"] == [{"rack": rack, "cause": "node_lost", "count": 1}]
