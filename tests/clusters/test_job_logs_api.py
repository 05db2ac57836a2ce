"""GET /api/v1/jobs/<id>/logs/ and /api/v1/jobs/failure-causes/: scoped, live pod logs, kept lines, counts."""

from __future__ import annotations

from clusters.backends.kubernetes import KubernetesBackend
from clusters.models import Cluster, Node
from jobs.models import Job
from jobs.services import job_attempt_failed
from jobs.states import State
from tests.clusters.test_kubernetes_backend import NS, pods_of, set_status, terminated
from tests.jobs.conftest import submit


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


def test_failed_attempt_serves_the_lines_kept_in_its_event(tenant, kube_inventory, kube, clients, cycle) -> None:
    job = submit(tenant, kube_inventory["h100"], replicas=1)
    cycle()
    job = Job.objects.get(pk=job.pk)
    pod = next(iter(pods_of(kube, job).values()))
    set_status(kube, pod, terminated(1, "Error"))
    kube.handler[f"get /api/v1/namespaces/{NS}/pods/{pod['metadata']['name']}/log"] << (
        b'Traceback (most recent call last):\n  File "train.py", line 42, in step\n    loss.backward()\n'
        b"ValueError: nan loss\n")
    KubernetesBackend(kube_inventory["cluster"]).resync()
    job = Job.objects.get(pk=job.pk)
    assert job.state == State.FAILED and job.failure_cause == "user_error"
    assert "train.py:42 in step" in job.events.get(to_state=State.FAILED).reason
    assert pods_of(kube, job) == {}  # cleaned up: the pod is gone
    body = clients["member"].get(f"/api/v1/jobs/{job.pk}/logs/?replica=worker-0&tail=2").json()
    assert body["source"] == "events" and body["attempt"] == 1
    assert body["lines"] == ["    loss.backward()", "ValueError: nan loss"]


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


def test_failure_causes_counted_per_project_and_rack(tenant, kube_inventory, clients) -> None:
    h100 = kube_inventory["h100"]
    jobs = [submit(tenant, h100, retry_limit=5) for _ in range(3)]
    for job, cause, rack in ((jobs[0], "nccl", "r1"), (jobs[1], "nccl", "r1"), (jobs[2], "cuda_oom", "")):
        Job.objects.filter(pk=job.pk).update(state=State.RUNNING)
        job.refresh_from_db()
        job_attempt_failed(job, cause=cause, reason="x", retryable=True, details={"rack": rack} if rack else {})
    body = clients["viewer"].get("/api/v1/jobs/failure-causes/?project=vision").json()
    assert body == {"project": "vision", "total": 3,
                    "by_cause": [{"cause": "nccl", "count": 2}, {"cause": "cuda_oom", "count": 1}],
                    "by_rack": [{"rack": "r1", "cause": "nccl", "count": 2}]}
    refused = clients["outsider"].get("/api/v1/jobs/failure-causes/?project=vision")  # like a missing project
    assert refused.status_code == 400
    assert refused.json()["error"]["fields"] == {"project": ["No project named 'vision'."]}
    assert clients["outsider"].get("/api/v1/jobs/failure-causes/").json()["total"] == 0


def test_node_loss_is_counted_on_its_rack(tenant, kube_inventory, kube, clients, cycle) -> None:
    job = submit(tenant, kube_inventory["h100"], replicas=1, retry_limit=1)
    cycle()
    job = Job.objects.get(pk=job.pk)
    set_status(kube, next(iter(pods_of(kube, job).values())), {"phase": "Running"})
    node = job.placement[0]["node"]
    Node.objects.filter(name=node).update(ready=False)
    KubernetesBackend(Cluster.objects.get(name="gpu")).resync()
    rack = Node.objects.get(name=node).rack
    body = clients["member"].get("/api/v1/jobs/failure-causes/?project=vision").json()
    assert body["by_rack"] == [{"rack": rack, "cause": "node_lost", "count": 1}]
