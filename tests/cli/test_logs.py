"""`tidal logs` against a live server: the tail, errors, and --follow reading the server's stream."""

import re

import pytest

from clusters.backends import simulated
from jobs.loop import run_once


@pytest.mark.django_db(transaction=True)
def test_logs_of_a_running_replica_and_errors(cli, job_file):
    submitted = cli("submit", str(job_file()), "--project", "vision")
    assert submitted.code == 0, submitted.err
    job = re.search(r"\d+", submitted.out).group()
    run_once()
    shown = cli("logs", job, "--replica", "worker-1")
    assert shown.code == 0, shown.err
    assert "replica worker-1" in shown.out and "[simulated]" in shown.out
    bad = cli("logs", job, "--replica", "worker-7")
    assert bad.code == 1 and "Unknown replica" in bad.err
    assert cli("logs", job, user="outsider").err.startswith(f"tidal: Job {job} not found")


@pytest.mark.django_db(transaction=True)
def test_follow_prints_the_stream_until_the_server_ends_it(cli, job_file, settings, monkeypatch):
    settings.TIDAL = {**settings.TIDAL, "LOG_FOLLOW_MAX_SECONDS": 0.3}
    monkeypatch.setattr(simulated, "FOLLOW_INTERVAL", 0.05)
    job = re.search(r"\d+", cli("submit", str(job_file()), "--project", "vision").out).group()
    run_once()
    shown = cli("logs", job, "--replica", "worker-1", "--follow")
    assert shown.code == 0, shown.err
    printed = shown.out.splitlines()
    assert printed[0].startswith("[simulated] cluster") and len(printed) >= 3
    assert f"[simulated] job {job} attempt 1 replica worker-1 is dispatching." in printed
    assert printed[-1].startswith("# log stream stopped after")
    gone = cli("logs", job, "--follow", user="outsider")
    assert gone.code == 1 and gone.err.startswith(f"tidal: Job {job} not found")


@pytest.mark.django_db(transaction=True)
def test_attempts_show_in_job_and_an_earlier_attempts_log_stays_readable(cli, job_file):
    """A job whose first attempt lost its node: `tidal job` lists both attempts and why the first ended, and
    `tidal logs --attempt 1` reads what the first attempt kept."""
    from clusters.models import Node
    from clusters.services import observe_simulated
    from jobs.models import Attempt, Job

    job = cli("submit", str(job_file(replicas=1)), "--project", "vision", "--quiet").out.strip()
    Job.objects.filter(pk=job).update(retry_limit=1, retry_backoff=0)
    run_once()
    first = Attempt.objects.get(job_id=job)
    Node.objects.filter(name=first.placement[0]["node"]).update(ready=False)
    observe_simulated()  # the attempt is lost with its node
    Attempt.objects.filter(pk=first.pk).update(logs={"worker-0": ["epoch 3", "NCCL timeout"]})
    run_once()  # the retry is due at once: attempt 2 runs elsewhere
    detail = cli("job", job)
    assert detail.code == 0, detail.err
    rows = detail.out.split("Attempts", 1)[1].splitlines()[2:4]
    assert rows[0].split()[0] == "1" and "lost" in rows[0] and "node_lost" in rows[0]
    assert rows[1].split()[0] == "2" and "(current)" in rows[1]
    earlier = cli("logs", job, "--attempt", "1")
    assert earlier.code == 0, earlier.err
    assert earlier.out.splitlines()[-2:] == ["epoch 3", "NCCL timeout"]
    assert cli("logs", job, "--attempt", "9").code == 1
