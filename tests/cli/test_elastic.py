"""Elastic jobs from the CLI (issue 29): a job file with `replicas: {min, max}`, `tidal job` showing its workers and
resizes with why, the queue its minimum need, and `tidal scale JOB --max N`."""

from __future__ import annotations

import pytest
from django.utils import timezone

from clusters.models import Cluster
from jobs import lifecycle
from jobs.models import Job
from jobs.states import State

pytestmark = pytest.mark.django_db(transaction=True)


def submit(cli, path, user="member") -> int:
    result = cli("submit", str(path), "--project", "vision", user=user)
    assert result.code == 0, result.err
    return int(result.out.split()[2])


def test_an_elastic_job_from_submit_to_scale(cli, job_file):
    job_id = submit(cli, job_file(text="name: elastic\nimage: pytorch/pytorch:2.3.0\ncommand: [torchrun, train.py]\n"
                                       "groups:\n  - role: worker\n    replicas: {min: 1, max: 4}\n    devices: 8\n"
                                       "    flavor: nvidia-h100-80gb\nmax_runtime: 3600\n"))
    queued = cli("job", str(job_id))
    assert queued.code == 0, queued.err
    assert "needs 1..4 workers" in queued.out and "8 x nvidia-h100-80gb (its minimum need)" in queued.out
    assert " 1..4 " in queued.out  # the group's replicas

    queue = cli("queue", "--project", "vision")
    assert "8 (min)" in next(line for line in queue.out.splitlines() if f" {job_id} " in line)

    # as the scheduler and the backend would: admitted at its minimum, running, grown by two
    job = Job.objects.get(pk=job_id)
    first = [{"role": "worker", "index": 0, "node": "h100-1", "devices": 8}]
    lifecycle.transition_many([lifecycle.Admission(job_id, Cluster.objects.get(name="sim-1").pk, first)],
                              now=timezone.now())
    job.refresh_from_db()
    if job.state == State.ADMITTED:  # the simulated backend's dispatch (after commit) may have claimed it already
        job = lifecycle.transition(job, State.DISPATCHING, reason="test", actor="backend")
    job = lifecycle.transition(job, State.RUNNING, reason="test", actor="backend")
    lifecycle.resize(job_id, attempt_id=job.current_attempt_id, version=0, kind="grow", now=timezone.now(),
                     reason=lifecycle.GROWN_REASON,
                     replicas=[{"role": "worker", "index": i, "node": "h100-2", "devices": 8} for i in (1, 2)])
    shown = cli("job", str(job_id))
    assert "running 3 of 1..4 workers" in shown.out
    resizes = shown.out.split("Resizes", 1)[1]
    assert "grow" in resizes and "1 -> 3" in resizes and "grew into idle capacity" in resizes

    lowered = cli("scale", str(job_id), "--max", "2")
    assert lowered.code == 0, lowered.err
    assert lowered.out.strip() == f"Job {job_id} (elastic): running 2 of 1..2 workers"
    assert "3 -> 2" in cli("job", str(job_id)).out.split("Resizes", 1)[1]

    refused = cli("scale", str(job_id), "--max", "2", user="viewer")
    assert refused.code != 0 and refused.err
    missing = cli("scale", "999999", "--max", "2")
    assert missing.code != 0 and "Job 999999 not found" in missing.err
    bad = cli("scale", str(job_id), "--max", "0")
    assert bad.code == 2 and "not a positive number" in bad.err
    assert Job.objects.get(pk=job_id).groups.get().replicas == 2
