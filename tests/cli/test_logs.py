"""`tidal logs` against a live server, and the tail-window arithmetic of --follow."""

import re

import pytest
from tidal_cli.commands.logs import new_lines

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


@pytest.mark.parametrize("previous, current, expected", [
    ([], ["a", "b"], ["a", "b"]),
    (["a", "b", "c"], ["b", "c", "d"], ["d"]),
    (["a", "b"], ["a", "b"], []),
    (["x"], ["a", "b"], ["a", "b"]),
])
def test_new_lines_after_the_window_slides(previous, current, expected):
    assert new_lines(previous, current) == expected
