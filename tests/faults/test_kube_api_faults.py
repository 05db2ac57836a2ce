"""The Kubernetes API misbehaving under the backend (kmock over real HTTP, its gate scripting the outage): 429s,
500s, timeouts, the API down, a watch stream cut, and a worker killed between its claim and the objects' creation.
Nothing fails a job that the cluster did not fail, nothing is created twice, and everything catches up once the
API answers again."""

from __future__ import annotations

import threading
import time
from datetime import timedelta

import pytest
from celery.exceptions import Retry
from django.conf import settings
from django.utils import timezone

from chaos import invariants
from clusters import tasks
from clusters.backends.kubernetes import clients, loops
from clusters.backends.kubernetes.backend import KubernetesBackend
from clusters.backends.kubernetes.watch import PodWatch
from clusters.kube.client import KubeClient
from clusters.kube.errors import TransientError
from clusters.kube.ratelimit import Backoff
from clusters.models import Node
from jobs import services as job_services
from jobs.lifecycle import transition
from jobs.models import Job, JobEvent
from jobs.states import State
from tests.clusters.kube.apiserver import Outage
from tests.clusters.test_kubernetes_backend import pods_of, running, seed_nodes, set_status, terminated
from tests.jobs.conftest import submit

pytestmark = pytest.mark.faults
DOWN = "http://127.0.0.1:9"  # the discard port: connection refused


@pytest.fixture
def api(kube, monkeypatch, sleeps):
    """The backend's client: kmock (or `api["url"] = DOWN`), a 0.3 s timeout, two retries recorded, not slept."""
    state = {"url": kube.url}
    built: dict[str, KubeClient] = {}

    def client_for(cluster):
        if state["url"] not in built:
            built[state["url"]] = KubeClient.from_url(
                state["url"], qps=1000.0, burst=1000, request_timeout=0.3, sleep=sleeps.append,
                backoff=Backoff(base=0.1, cap=1.0, max_retries=2, rand=lambda: 0.5))
        return built[state["url"]]

    monkeypatch.setattr(clients, "client_for", client_for)
    yield state
    for client in built.values():
        client.close()


@pytest.fixture
def dispatched(tenant, kube_inventory, kube, cycle, api):
    """Submit a job (2 replicas of 8 devices: the project's whole quota) and run a scheduler cycle (the dispatch runs
    after commit)."""
    seed_nodes(kube)

    def make(replicas: int = 2) -> Job:
        job = submit(tenant, kube_inventory["h100"], replicas=replicas)
        cycle()
        return Job.objects.get(pk=job.pk)

    return make


def kubelet(kube, job: Job, status: dict) -> None:
    for pod in pods_of(kube, job).values():
        set_status(kube, pod, status)


def state(job: Job) -> str:
    return Job.objects.get(pk=job.pk).state


def later(time_machine) -> None:
    """Past TIDAL_REDISPATCH_AFTER: the resync dispatches what is missing again."""
    time_machine.move_to(timezone.now() + timedelta(seconds=settings.TIDAL["REDISPATCH_AFTER"] + 1))


def finish(kube, job: Job, resync) -> None:
    kubelet(kube, job, running())
    resync()
    kubelet(kube, job, terminated(0, "Completed", phase="Succeeded"))
    resync()


def test_500s_delay_a_dispatch_and_the_resync_creates_it_once(dispatched, kube, resync, time_machine):
    kube.gate.outage = Outage(status=500)
    job = dispatched()
    assert state(job) == State.DISPATCHING and pods_of(kube, job) == {}  # claimed, nothing created
    assert "the Kubernetes API is unavailable" in job.events.filter(kind="note").last().reason
    kube.gate.outage = None
    resync()
    assert pods_of(kube, job) == {}  # too early to call the dispatch lost: its task may still be retrying
    later(time_machine)
    resync()
    assert len(pods_of(kube, job)) == 2
    finish(kube, job, resync)
    assert invariants.settled({job.pk: State.SUCCEEDED}) == []


def test_429s_and_500s_on_every_other_request_slow_the_work_down_and_lose_nothing(dispatched, kube, resync,
                                                                                 sleeps):
    kube.gate.outage = Outage(status=429, every=2)
    job = dispatched()
    assert len(pods_of(kube, job)) == 2
    assert 1.0 in sleeps  # the Retry-After of the 429s was honoured
    kube.gate.outage = Outage(status=500, every=2)
    finish(kube, job, resync)
    assert kube.gate.faulted >= 4
    assert invariants.settled({job.pk: State.SUCCEEDED}) == []


def test_timeouts_leave_jobs_as_they_are_and_a_create_that_timed_out_is_adopted(dispatched, kube, resync,
                                                                               time_machine):
    job = dispatched(replicas=1)
    kubelet(kube, job, running())
    resync()
    kube.gate.outage = outage = Outage(delay=0.6)  # twice the client's timeout: every call times out, is retried
    with pytest.raises(TransientError):
        resync()
    assert state(job) == State.RUNNING
    late = dispatched(replicas=1)  # its creates time out on the client, and are served by the API server afterwards
    assert state(late) == State.DISPATCHING
    kube.gate.outage = None
    time.sleep(outage.delay)  # the requests still held are served
    later(time_machine)
    resync()  # the redispatch meets what the timed-out creates left: 409, adopted
    assert len(pods_of(kube, late)) == 1
    assert "adopted" in late.events.filter(kind="note").last().reason
    finish(kube, job, resync)
    finish(kube, late, resync)
    assert invariants.settled({job.pk: State.SUCCEEDED, late.pk: State.SUCCEEDED}) == []


def test_the_api_down_fails_no_job_and_marks_no_node_gone(dispatched, kube, resync, api):
    job = dispatched()
    kubelet(kube, job, running())
    resync()
    api["url"] = DOWN
    results = loops.kube_resync_all()
    assert isinstance(results["gpu"], TransientError)  # reported, and the other clusters' resyncs go on
    assert isinstance(loops.kube_sync_nodes_all()["gpu"], TransientError)
    assert state(job) == State.RUNNING
    assert set(Node.objects.values_list("ready", flat=True)) == {True}  # unreachable is not gone
    api["url"] = kube.url
    finish(kube, job, resync)
    assert invariants.settled({job.pk: State.SUCCEEDED}) == []


def test_a_worker_killed_between_its_claim_and_the_creates_is_redispatched_once(dispatched, kube, resync,
                                                                               monkeypatch, time_machine):
    class Killed(BaseException):
        pass

    def die(self, attempt):
        raise Killed()

    monkeypatch.setattr(KubernetesBackend, "create", die)
    with pytest.raises(Killed):
        dispatched()
    job = Job.objects.get()
    assert job.state == State.DISPATCHING and pods_of(kube, job) == {}  # the claim had committed
    monkeypatch.undo()
    later(time_machine)
    resync()
    assert len(pods_of(kube, job)) == 2
    finish(kube, job, resync)
    assert invariants.settled({job.pk: State.SUCCEEDED}) == []


def test_a_watch_stream_cut_mid_event_resumes_and_misses_nothing(dispatched, kube, kube_inventory):
    job = dispatched()
    pods = [set_status(kube, pod, running()) for pod in pods_of(kube, job).values()]
    half = b'{"type": "MODIFIED", "object": {"metadata": {"name": "'  # the connection dies inside an event
    kube.handler[kube.handler.action.WATCH][:1] << ({"type": "MODIFIED", "object": pods[0]}, half)
    watch = PodWatch(KubernetesBackend(kube_inventory["cluster"]), timeout_seconds=1)
    watch.run(threading.Event(), rounds=1, pause=0)
    assert state(job) == State.RUNNING
    kubelet(kube, job, terminated(0, "Completed", phase="Succeeded"))  # while no stream is open
    handle = watch.handle

    def handle_until_done(event):  # kmock's stream stays open until its timeout: close it once caught up
        outcome = handle(event)
        if state(job) == State.SUCCEEDED:
            watch.watcher.close()
        return outcome

    watch.handle = handle_until_done
    watch.run(threading.Event(), rounds=1, pause=0)  # the next round, from where the last one got to
    assert state(job) == State.SUCCEEDED
    assert JobEvent.objects.filter(job=job, to_state=State.RUNNING).count() == 1
    assert invariants.settled({job.pk: State.SUCCEEDED}) == []


def test_a_stop_failing_in_an_outage_holds_its_nodes_until_the_resync_deletes_its_pods(
        dispatched, kube, resync, api, tenant, kube_inventory, cycle, django_capture_on_commit_callbacks):
    """The API server is down when a job is cancelled: its pods run on, so their devices stay taken and nothing is
    placed there; once the API answers, the resync deletes them, and node sync frees the nodes when they are gone."""
    job = dispatched()  # both nodes
    kubelet(kube, job, running())
    resync()
    api["url"] = DOWN
    with django_capture_on_commit_callbacks(execute=True):
        job_services.job_cancel(actor=tenant.users["member"], job=job)  # its stop fails
    assert state(job) == State.CANCELLED and len(pods_of(kube, job, attempt=1)) == 2
    waiting = submit(tenant, kube_inventory["h100"], replicas=1)
    cycle()
    assert state(waiting) == State.QUEUED  # the cancelled pods still hold both nodes
    api["url"] = kube.url
    resync()  # the API is back: the pods of the ended attempt are deleted
    assert pods_of(kube, job, attempt=1) == {}
    assert job.events.filter(kind="note").last().reason.startswith("stopped attempt 1 (still running after it ended")
    assert loops.kube_sync_nodes_all()["gpu"].updated == ["gpu-1", "gpu-2"]  # gone: the nodes are free again
    cycle()
    assert state(waiting) == State.DISPATCHING
    kubelet(kube, waiting, running())
    finish(kube, waiting, resync)
    assert invariants.settled({job.pk: State.CANCELLED, waiting.pk: State.SUCCEEDED}) == []


def test_a_stop_the_api_refuses_is_retried_with_a_growing_backoff(dispatched, kube, api, monkeypatch):
    """On a Celery worker a stop that meets an unavailable API is retried, 5 s later then twice as long each time up
    to 5 min; once the API answers, the next try deletes the pods and is not retried."""
    job = dispatched(replicas=1)
    attempt_id = job.current_attempt_id
    transition(job, State.CANCELLED, reason="cancelled", actor="member")  # ended; its stop not run yet
    delays: list[float] = []

    def retry(*, exc, countdown):  # Celery's scheduling of the retry, recorded
        delays.append(countdown)
        return Retry(exc=exc, when=countdown)

    monkeypatch.setattr(tasks.stop_attempt_task, "retry", retry)

    def run_as_worker(retries: int) -> None:
        tasks.stop_attempt_task.push_request(retries=retries, is_eager=False)
        try:
            tasks.stop_attempt_task.run(attempt_id, "cancelled")
        finally:
            tasks.stop_attempt_task.pop_request()

    api["url"] = DOWN
    for retries in range(8):
        with pytest.raises(Retry):
            run_as_worker(retries)
    assert delays == [5, 10, 20, 40, 80, 160, 300, 300]
    run_as_worker(8)  # the last try gives up (the resync deletes what is left once the API answers)
    assert len(delays) == 8 and len(pods_of(kube, job, attempt=1)) == 1
    api["url"] = kube.url
    run_as_worker(3)
    assert pods_of(kube, job, attempt=1) == {} and len(delays) == 8
