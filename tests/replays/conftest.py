"""Replays around the shared tenant fixtures: the jobs tests' inventory, finished jobs as history, a tiny trace,
and run directories under tmp_path."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from jobs.lifecycle import Admission, transition, transition_many
from jobs.models import Job, ReplicaGroup
from jobs.states import State
from quotas.models import PriorityClass
from tests.jobs.conftest import inventory  # noqa: F401  (the fixture, reused)

H100 = "nvidia-h100-80gb"
HEADER = "job_id,submit_s,duration_s,devices_per_replica,replicas,flavor,project,priority,user,max_runtime_s\n"


def trace_text(n: int = 12, flavor: str = H100, extra: str = "") -> str:
    """`n` jobs of 4-8 devices from vision and speech, arriving together so queues build up."""
    rows = [f"j{i},{i * 30},{1800 + 300 * (i % 4)},{4 + 4 * (i % 2)},1,{flavor},{('vision', 'speech')[i % 2]},"
            f"normal,u{i % 3}," for i in range(n)]
    return HEADER + "".join(r + "\n" for r in rows) + extra


@pytest.fixture(autouse=True)
def _replay_dir(settings, tmp_path):
    settings.REPLAY_DIR = tmp_path / "replays"


@pytest.fixture
def trace_file(tmp_path):
    path = tmp_path / "trace.csv"
    path.write_text(trace_text())
    return path


def make_job(project, flavor, *, submitted, ran: float | None, waited: float = 60.0, devices: int = 8,
             replicas: int = 1, priority: str = "normal", user: str = "alice", cluster=None) -> Job:
    """A job of the history, through the state machine at past times: `ran` seconds of run time after `waited` in
    the queue on `cluster` (None: cancelled while queued, never started)."""
    job = Job.objects.create(
        project=project, submitter_name=user, name="train", image="ghcr.io/acme/train:1", command=["python"],
        priority_class=PriorityClass.objects.get(name=priority), flavor=flavor, total_devices=devices * replicas,
        submitted_at=submitted, queued_at=submitted)
    ReplicaGroup.objects.create(job=job, role="worker", replicas=replicas, devices=devices, flavor=flavor)
    if ran is None:
        return transition(job, State.CANCELLED, reason="cancelled", actor="system", now=submitted)
    started = submitted + timedelta(seconds=waited)
    placement = [{"role": "worker", "index": i, "node": f"n{i}", "devices": devices} for i in range(replicas)]
    transition_many([Admission(job.pk, cluster.pk, placement)], now=started)
    job.refresh_from_db()
    for state in (State.DISPATCHING, State.RUNNING):
        transition(job, state, reason="history", actor="backend", now=started)
    return transition(job, State.SUCCEEDED, reason="history", actor="backend", now=started + timedelta(seconds=ran))


def make_active_job(project, flavor, *, submitted, started=None, duration: int | None = None,
                    max_runtime: int | None = None, devices: int = 8, replicas: int = 1, priority: str = "normal",
                    cluster=None) -> Job:
    """A job that has not finished: running since `started` on `cluster`, or (started None) waiting in the
    queue. `duration` is the simulated backend's runtime, `max_runtime` the declared limit."""
    job = Job.objects.create(
        project=project, submitter_name="alice", name="train", image="ghcr.io/acme/train:1", command=["python"],
        priority_class=PriorityClass.objects.get(name=priority), flavor=flavor, total_devices=devices * replicas,
        submitted_at=submitted, queued_at=submitted, duration=duration, max_runtime=max_runtime)
    ReplicaGroup.objects.create(job=job, role="worker", replicas=replicas, devices=devices, flavor=flavor)
    if started is None:
        return job
    placement = [{"role": "worker", "index": i, "node": f"n{i}", "devices": devices} for i in range(replicas)]
    transition_many([Admission(job.pk, cluster.pk, placement)], now=started)
    job.refresh_from_db()
    for state in (State.DISPATCHING, State.RUNNING):
        job = transition(job, state, reason="now", actor="backend", now=started)
    return job


@pytest.fixture
def history(tenant, inventory):  # noqa: F811
    """Two days of finished jobs on H100: vision and speech each submit bursts of 8-device jobs; one job of
    vision was cancelled while queued (never ran)."""
    h100, speech = inventory["h100"], inventory["speech"]
    start = timezone.now() - timedelta(days=2)
    jobs = []
    for i in range(16):
        submitted = start + timedelta(minutes=10 * (i // 4))
        project = tenant.project if i % 2 else speech
        jobs.append(make_job(project, h100, submitted=submitted, ran=3600 + 60 * i, waited=30 * i,
                             user=("alice", "bob")[i % 2], cluster=inventory["cluster"]))
    jobs.append(make_job(tenant.project, h100, submitted=start + timedelta(hours=1), ran=None))
    return jobs
