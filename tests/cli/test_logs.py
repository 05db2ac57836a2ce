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
